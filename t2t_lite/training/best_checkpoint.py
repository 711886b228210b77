"""The best model of a run, kept by its dev score, and early stopping with patience.

``BestCheckpoint.record(step, results)`` takes the results of one evaluation (the
``Evaluator``'s dict: ``loss``, ``accuracy``, ``log_ppl``, ``perplexity`` and the
problem's text metrics such as ``bleu``, ``parse_f1`` or ``exact_match``). When the
chosen metric improves on the best so far (higher for text metrics and accuracy, lower
for ``loss``, ``log_ppl`` and ``perplexity``; ties are no improvement), it writes the
model's weights to ``best/ckpt-<step>`` and removes the previous best; in any case it
rewrites ``best/best.json`` (``t2t_lite.runs.best``): the best step, score and scores,
and ``evaluations``, the ``[step, score]`` of every evaluation so far.

The record lives in the run directory, so a resumed run (SIGKILL or SIGTERM) keeps its
best score and its patience count. A resumed run evaluates again the steps it trains
again: an evaluation at step N drops the recorded ones at steps >= N before it is added,
so patience counts each step once. ``evaluations_without_improvement`` is the number of
recorded evaluations after the best one; ``--early_stopping_patience=N`` stops the run
once it reaches N.

Writing order, so that an interruption at any point leaves a usable record: the new
checkpoint's files, then ``best.json`` naming it, then the ``checkpoint`` state file, then
the removal of older checkpoint files (stray ones left by an interrupted write are
removed by the next write).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.runs.best import BEST_DIR, BEST_RECORD, read_best_record
from t2t_lite.user_paths import write_atomically

LOSS_METRICS = ("loss", "accuracy", "log_ppl", "perplexity")   # every evaluation has them
LOWER_IS_BETTER = ("loss", "log_ppl", "perplexity")
_PREFIX = "ckpt"


def default_metric(problem_metrics: Sequence[str], decode_sentences: int) -> str:
    """The problem's first text metric (``bleu``, ``parse_f1``, ``exact_match``) when dev
    sentences are decoded, else ``loss``."""
    return problem_metrics[0] if decode_sentences and problem_metrics else "loss"


def check_metric(metric: str, problem_name: str, problem_metrics: Sequence[str],
                 decode_sentences: int) -> str:
    """``metric`` (or the default for ``""``) when every evaluation reports it; else
    ``UserError`` naming the ones that do."""
    if not metric:
        return default_metric(problem_metrics, decode_sentences)
    available = list(LOSS_METRICS) + (list(problem_metrics) if decode_sentences else [])
    if metric not in available:
        hint = (" (text metrics need --eval_decode_sentences > 0)"
                if metric in problem_metrics else "")
        raise UserError(f"--best_checkpoint_metric={metric} is not reported by evaluations "
                        f"of {problem_name}{hint}; choose one of {', '.join(available)}")
    return metric


def higher_is_better(metric: str) -> bool:
    return metric not in LOWER_IS_BETTER


class BestCheckpoint:
    """Keeps ``write_dir`` (the chief's ``RUN/best``) holding the best evaluation's model.

    Args:
      model: the model whose weights are saved (a model-only ``tf.train.Checkpoint``).
      read_dir: the run's ``best`` directory, whose ``best.json`` a resumed run continues.
      write_dir: where to write: ``read_dir`` on the chief, a scratch directory on other
        workers (they decide the same way but must not write into the run directory).
      metric: the key of the evaluation results that decides (``check_metric``).
      patience: evaluations without improvement before ``should_stop`` (0: never).
    """

    def __init__(self, model, read_dir: str, write_dir: str, metric: str, patience: int = 0):
        self.model = model
        self.write_dir = Path(write_dir)
        self.metric = metric
        self.higher_is_better = higher_is_better(metric)
        self.patience = patience
        self.best: Optional[Dict[str, Any]] = None          # step, score, scores, checkpoint
        self.evaluations: List[Tuple[int, float]] = []
        self._load(Path(read_dir))

    def _load(self, read_dir: Path) -> None:
        record = read_best_record(read_dir)
        if record is None:
            return
        if record.get("metric") != self.metric:
            print(f"warning: {read_dir / BEST_RECORD} ranks by {record.get('metric')}, this "
                  f"run by {self.metric}: the best checkpoint is chosen again from the next "
                  f"evaluation on", file=sys.stderr, flush=True)
            return
        if not Path(str(read_dir / record["checkpoint"]) + ".index").is_file():
            print(f"warning: {read_dir / record['checkpoint']} named by "
                  f"{read_dir / BEST_RECORD} is missing: the best checkpoint is chosen "
                  f"again from the next evaluation on", file=sys.stderr, flush=True)
            return
        self.best = {key: record[key] for key in ("step", "score", "scores", "checkpoint")}
        self.evaluations = [(int(step), float(score)) for step, score in record["evaluations"]]

    @property
    def best_prefix(self) -> Optional[str]:
        return None if self.best is None else str(self.write_dir / self.best["checkpoint"])

    @property
    def evaluations_without_improvement(self) -> int:
        if self.best is None:
            return len(self.evaluations)
        return sum(step > self.best["step"] for step, _ in self.evaluations)

    def should_stop(self) -> bool:
        """True when patience is on and exhausted."""
        return bool(self.patience) and self.evaluations_without_improvement >= self.patience

    def stopped_at(self, step: int) -> bool:
        """True when the last recorded evaluation is of ``step`` and patience is
        exhausted: a run that stopped early there is asked to run again."""
        return bool(self.evaluations) and self.evaluations[-1][0] == step and self.should_stop()

    def improves(self, score: float) -> bool:
        if self.best is None:
            return True
        best = self.best["score"]
        return score > best if self.higher_is_better else score < best

    def record(self, step: int, results: Dict[str, float]) -> bool:
        """Adds the evaluation of ``step``; saves the model when it is the best. Returns
        True when it is."""
        if self.metric not in results:
            raise UserError(f"the evaluation reported no {self.metric} (it reported "
                            f"{', '.join(sorted(results))}); choose another "
                            f"--best_checkpoint_metric")
        score = float(results[self.metric])
        self.evaluations = [entry for entry in self.evaluations if entry[0] < step]
        self.evaluations.append((step, score))
        improved = self.improves(score)
        if improved:
            self.write_dir.mkdir(parents=True, exist_ok=True)
            name = f"{_PREFIX}-{step}"
            checkpoint = tf.train.Checkpoint(model=self.model)
            checkpoint.save_counter  # noqa: B018 -- created, so written: restores expect it
            checkpoint.write(str(self.write_dir / name))
            self.best = {"step": step, "score": score, "checkpoint": name,
                         "scores": {key: float(value) for key, value in results.items()}}
        self._write_record()
        if improved:
            name = self.best["checkpoint"]   # the state file TensorFlow's tools read
            write_atomically(self.write_dir / "checkpoint",
                             f'model_checkpoint_path: "{name}"\n'
                             f'all_model_checkpoint_paths: "{name}"\n')
            self._remove_others()
        return improved

    def describe(self) -> str:
        """``bleu 31.2 at step 4000 (RUN/best/ckpt-4000)``, or that there is none."""
        if self.best is None:
            return f"no best {self.metric} yet"
        return (f"{self.metric} {self.best['score']:.4g} at step {self.best['step']} "
                f"({self.best_prefix})")

    def _write_record(self) -> None:
        self.write_dir.mkdir(parents=True, exist_ok=True)
        record = {"metric": self.metric, "higher_is_better": self.higher_is_better,
                  **(self.best or {}), "evaluations": [list(e) for e in self.evaluations]}
        write_atomically(self.write_dir / BEST_RECORD,
                         json.dumps(record, indent=2, sort_keys=True) + "\n")

    def _remove_others(self) -> None:
        keep = self.best["checkpoint"]
        for path in self.write_dir.iterdir():
            name = path.name
            if not name.startswith(_PREFIX + "-") or name.split(".", 1)[0] == keep:
                continue
            if path.is_dir():   # the temporary directory of an interrupted write
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def best_dir(run_dir: str) -> str:
    """``run_dir/best``."""
    return str(Path(run_dir) / BEST_DIR)


def agreed_stop(strategy: tf.distribute.Strategy, stop: bool) -> bool:
    """True on every worker when any worker's ``stop`` is True (one all-reduce), so that
    workers whose dev scores differ in the last bits still stop after the same step."""
    def count(value):
        context = tf.distribute.get_replica_context()
        # tf.identity: a copy on the replica's device, which the all-reduce needs
        return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(value))

    total = strategy.experimental_local_results(tf.function(
        lambda: strategy.run(count, args=(tf.constant(1.0 if stop else 0.0),)),
        autograph=False)())[0]
    return float(total) > 0
