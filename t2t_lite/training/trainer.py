"""The training run: strategy, run directory, resume, checkpoints, evaluation, summaries.

``Trainer(config).run()`` trains ``config.problem`` with ``config.model`` and the hparams
until ``train_steps``. Re-running the same command in the same ``output_dir`` after any
interruption (``kill -9`` included) resumes from the last checkpoint: weights, optimizer
state (so the step and the learning rate), and the position in the seeded data stream.
Every worker restores from ``output_dir`` (``resume.py``); SIGTERM saves a checkpoint at
the next step boundary and stops (``preemption.py``). Each evaluation may keep the model
in ``output_dir/best`` and stop the run early (``best_checkpoint.py``); a new run may
start from another run's weights (``warm_start.py``); float16 training scales the loss
(``optimizer.py``, ``train_step.py``).
"""
from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import keras
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.cpu_features import has_native_bfloat16
from t2t_lite.data import datagen
from t2t_lite.data.pipeline import make_dataset
from t2t_lite.errors import UserError
from t2t_lite.runs.config import RunConfig
from t2t_lite.runs.loading import build_model
from t2t_lite.training import (best_checkpoint, checkpointing, distribution, preemption,
                               resume, warm_start)
from t2t_lite.training import stream as stream_lib
from t2t_lite.training.config import DEFAULT_KEEP_CHECKPOINT_MAX, TrainerConfig
from t2t_lite.training.evaluation import Evaluator
from t2t_lite.training.optimizer import make_optimizer, optimizer_checkpoint
from t2t_lite.training.progress import ProgressLog
from t2t_lite.training.run_lock import RunLock
from t2t_lite.training.train_step import OVERFLOWS, STOP_REQUESTS, TrainStep


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def warn_if_bfloat16_is_emulated(mixed_precision: str) -> None:
    """Warn on stderr when bfloat16 compute would run on a CPU without bfloat16 arithmetic
    (AVX512-BF16 or AMX) and no GPU is visible: TensorFlow then emulates bfloat16."""
    if mixed_precision != "bfloat16" or tf.config.list_physical_devices("GPU") \
            or has_native_bfloat16():
        return
    print("warning: this CPU has no bfloat16 arithmetic (AVX512-BF16 or AMX), so "
          "--mixed_precision=bfloat16 is emulated and may train slower than float32: time "
          "both with scripts/benchmark.py train, or drop --mixed_precision",
          file=sys.stderr, flush=True)


def checkpoints_to_keep(keep_checkpoint_max: Optional[int], average_checkpoints: int) -> int:
    """How many ``ckpt-N`` a run keeps: ``--keep_checkpoint_max`` when given (with a warning
    on stderr when it is fewer than the ``average_checkpoints`` that
    ``t2t-lite-avg-checkpoints`` averages by default), else the default or
    ``average_checkpoints``, whichever is more."""
    if keep_checkpoint_max is None:
        return max(DEFAULT_KEEP_CHECKPOINT_MAX, average_checkpoints)
    if keep_checkpoint_max < average_checkpoints:
        print(f"warning: --keep_checkpoint_max={keep_checkpoint_max} keeps fewer checkpoints "
              f"than the {average_checkpoints} this hparams set averages "
              f"(average_checkpoints), so t2t-lite-avg-checkpoints will average only "
              f"{keep_checkpoint_max}: raise it to {average_checkpoints} or leave it out",
              file=sys.stderr, flush=True)
    return keep_checkpoint_max


class Trainer:
    _run_lock: Optional[RunLock] = None   # held by the chief while it writes output_dir

    def __init__(self, config: TrainerConfig):
        self.config = config
        distribution.split_cpu(config.cpu_devices)
        keras.utils.set_random_seed(config.random_seed)
        keras.mixed_precision.set_global_policy(
            f"mixed_{config.mixed_precision}" if config.mixed_precision else "float32")
        self.strategy = distribution.make_strategy(config.worker_gpu, config.cpu_devices,
                                                   config.worker_timeout_secs)
        warn_if_bfloat16_is_emulated(config.mixed_precision)
        self.chief = distribution.is_chief(self.strategy)
        self.problem = registry.PROBLEMS.get(config.problem)()
        self.hparams = registry.hparams(config.hparams_set, config.hparams_overrides)
        self.train_steps = config.train_steps or self.hparams.train_steps
        self.keep_checkpoint_max = checkpoints_to_keep(config.keep_checkpoint_max,
                                                       self.hparams.average_checkpoints)
        self.best_metric = best_checkpoint.check_metric(
            config.best_checkpoint_metric, config.problem, self.problem.eval_metrics,
            config.eval_decode_sentences)
        if config.early_stopping_patience and not config.local_eval_frequency:
            raise UserError("--early_stopping_patience needs evaluations during training: "
                            "set --local_eval_frequency=N (N > 0)")

    # Run directory ------------------------------------------------------------------
    def _prepare_run_dir(self) -> RunConfig:
        config = self.config
        if config.generate_data and not _has_training_data(self.problem, config.data_dir):
            # wait: workers sharing a --data_dir generate once, the others reuse it
            summary = datagen.generate(config.problem, config.data_dir, config.tmp_dir or None,
                                       wait=True)
            print(summary.format(), flush=True)
        vocabulary = self.problem.load_vocab(config.data_dir)
        run_config = RunConfig(
            problem=config.problem, model=config.model, hparams_set=config.hparams_set,
            hparams_overrides=config.hparams_overrides, hparams=self.hparams.to_dict(),
            vocab_size=vocabulary.vocab_size, vocab_file=self.problem.vocab_filename,
            data_dir=str(Path(config.data_dir).resolve()), usr_dir=config.usr_dir)
        existing = RunConfig.load_if_present(config.output_dir)
        if existing is not None:
            run_config.check_same_run(existing, config.output_dir)
        self.vocabulary = vocabulary
        return self._with_warm_start(run_config, existing)

    def _with_warm_start(self, run_config: RunConfig, existing: Optional[RunConfig]
                         ) -> RunConfig:
        """``run_config`` recording the checkpoint a fine-tuned run starts from: on its
        first start, ``--warm_start_from`` resolved and its vocabulary checked
        (``self.warm_start``); once the run has a checkpoint, the one recorded then."""
        self.warm_start = None
        # Checkpoint files on disk, not the state file, say whether the run has started:
        # a lost or garbled state file is rebuilt from them later (``_write_run_dir``).
        if checkpointing.steps_on_disk(self.config.output_dir):
            if existing is not None and existing.warm_start_from:
                return dataclasses.replace(run_config,
                                           warm_start_from=existing.warm_start_from)
            return run_config
        if not self.config.warm_start_from:
            return run_config
        self.warm_start = warm_start.resolve_warm_start(self.config.warm_start_from)
        warm_start.check_same_vocabulary(self.warm_start, self.vocabulary.path,
                                         self.config.warm_start_from)
        return dataclasses.replace(run_config, warm_start_from=self.warm_start.checkpoint)

    def _write_run_dir(self, run_config: RunConfig) -> None:
        """Once the model is built (the configuration is valid), the chief locks the run
        directory against a second trainer, removes partial checkpoint writes a killed
        save left, makes the checkpoint state file match the checkpoints on disk
        (``checkpointing.reconcile_state``), and writes the vocabulary and run_config.json. Other workers write
        nothing there."""
        if not self.chief:
            return
        output_dir = self.config.output_dir
        self._run_lock = RunLock(output_dir).acquire()
        existing = RunConfig.load_if_present(output_dir)  # again, now that no one else writes
        if existing is not None:
            run_config.check_same_run(existing, output_dir)
        checkpointing.remove_stale_temp_dirs(output_dir)
        checkpointing.reconcile_state(output_dir)
        self.vocabulary.copy_to(output_dir)
        run_config.save(output_dir)

    def _write_dir(self) -> str:
        """Where this worker writes checkpoints: the run directory on the chief, a scratch
        directory on other workers (every worker must take part in saving), removed when
        ``run`` ends. Every worker restores from the run directory (``_restore``)."""
        if self.chief:
            return self.config.output_dir
        self._scratch_dir = tempfile.mkdtemp(prefix="t2t_lite_worker_")
        return self._scratch_dir

    def _restore(self, checkpoint: tf.train.Checkpoint,
                 checkpoints: checkpointing.RunCheckpoints) -> Tuple[Optional[str], Any]:
        """Restores the run's newest readable checkpoint (``--output_dir``) on every
        worker: the chief through its own manager, the others through a manager that
        only reads the run directory (they write to scratch).

        Returns its prefix (None for a new run) and the restore's status (None too)."""
        if self.chief:
            source = checkpoints
        else:
            reader = tf.train.CheckpointManager(checkpoint, self.config.output_dir,
                                                max_to_keep=None)
            source = checkpointing.RunCheckpoints(checkpoint, reader, writes_state=False)
        restored = source.restore()
        if distribution.is_multi_worker():
            step = int(checkpoint.optimizer.iterations.numpy())
            resume.check_same_step(self.strategy, step, self.config.output_dir)
        return restored, source.load_status

    @staticmethod
    def _nothing_to_do(message: str, step: int, load_status) -> Dict[str, float]:
        """Prints ``message`` and returns without training. The restore's deferred values
        (the data position, which only a training stream reads) stay unread on purpose,
        so TensorFlow is told not to warn about them."""
        if load_status is not None:
            load_status.expect_partial()
        print(message, flush=True)
        return {"step": step}

    def _train_step(self, train_step: TrainStep, iterator, step: int,
                    stop: preemption.StopOnSignal) -> Dict[str, float]:
        """One step's statistics (see ``_with_peers``); its all-reduce also sums every
        worker's SIGTERM flag (``stop_requests``)."""
        return self._with_peers(
            lambda: {k: float(v) for k, v in train_step.step(iterator, stop.received).items()},
            step)

    def _with_peers(self, collective, step: int):
        """``collective()``; when it fails because another worker is gone, raises
        ``resume.WorkerLostError`` instead."""
        try:
            return collective()
        except resume.PEER_ERRORS as error:
            if not distribution.is_multi_worker():
                raise
            raise resume.worker_lost(error, step, self.config.output_dir,
                                     self.config.worker_timeout_secs) from error

    def _stop_if_requested(self, stop: preemption.StopOnSignal, stop_requests: float,
                           checkpoints: checkpointing.RunCheckpoints, step: int) -> None:
        """At a step boundary: when this worker (one worker) or any worker (several: the
        step's all-reduced ``stop_requests``) got SIGTERM or SIGINT, saves a checkpoint (unless one
        of this step exists) and raises ``TrainingPreempted``."""
        if not stop.requested(stop_requests) or step >= self.train_steps:
            return
        if not (checkpoints.manager.latest_checkpoint or "").endswith(f"-{step}"):
            checkpoints.save(step)
        saved = os.path.join(self.config.output_dir, f"ckpt-{step}")
        who = "this worker" if stop.received else "another worker"
        everywhere = " on every worker" if distribution.is_multi_worker() else ""
        raise preemption.TrainingPreempted(
            f"{stop.signal_name} received by {who}: saved {saved} after step {step} and "
            f"stopped; re-run the same command{everywhere} to resume from it "
            f"(exit status {stop.exit_status})", stop.exit_status)

    # Training -----------------------------------------------------------------------
    def run(self) -> Dict[str, float]:
        """Trains to ``train_steps``; the summary of the run. The run directory's lock is
        released and a non-chief worker's scratch directory removed at the end, error or
        not.

        Raises:
          preemption.TrainingPreempted: SIGTERM or SIGINT; a checkpoint of the last step
            was saved.
          resume.WorkerLostError: another worker died or stopped answering.
          checkpointing.CheckpointSaveError: the disk filled up while saving.
        """
        self._scratch_dir = None
        try:
            with preemption.StopOnSignal(distribution.is_multi_worker()) as stop:
                return self._train(stop)
        finally:
            if self._run_lock is not None:
                self._run_lock.release()
                self._run_lock = None
            if self._scratch_dir:
                shutil.rmtree(self._scratch_dir, ignore_errors=True)

    def _train(self, stop: preemption.StopOnSignal) -> Dict[str, float]:
        config = self.config
        run_config = self._prepare_run_dir()
        with self.strategy.scope():
            model = build_model(run_config)
            optimizer = make_optimizer(self.hparams,
                                       loss_scaling=config.mixed_precision == "float16")
            optimizer.build(model.trainable_variables)
        self._write_run_dir(run_config)
        # Dropout's seed states are variables too: saving them makes a resumed run draw
        # the same dropout masks as an uninterrupted one.
        checkpoint = tf.train.Checkpoint(model=model, dropout_seeds=_seed_states(model),
                                         **optimizer_checkpoint(optimizer))
        write_dir = self._write_dir()
        manager = tf.train.CheckpointManager(checkpoint, write_dir,
                                             max_to_keep=self.keep_checkpoint_max,
                                             step_counter=optimizer.iterations)
        checkpoints = checkpointing.RunCheckpoints(checkpoint, manager)
        restored, load_status = self._restore(checkpoint, checkpoints)
        start_step = int(optimizer.iterations.numpy())
        if restored:
            print(f"Resuming from {restored} at step {start_step}", flush=True)
        elif self.warm_start is not None:
            warm_start.restore_weights(model, self.warm_start, config.warm_start_from)
            print(f"Warm start: model weights from {self.warm_start.checkpoint}; optimizer "
                  f"state, step and learning-rate schedule start from 0", flush=True)
        if start_step >= self.train_steps:
            return self._nothing_to_do(
                f"Step {start_step} >= --train_steps={self.train_steps}: nothing to do.",
                start_step, load_status)
        best = best_checkpoint.BestCheckpoint(
            model, best_checkpoint.best_dir(config.output_dir),
            best_checkpoint.best_dir(write_dir), self.best_metric,
            config.early_stopping_patience)
        if restored and best.stopped_at(start_step):
            return self._nothing_to_do(
                f"Stopped early at step {start_step} (--early_stopping_patience="
                f"{config.early_stopping_patience}): nothing to do; raise "
                f"--early_stopping_patience to train on. Best: {best.describe()}.",
                start_step, load_status)

        stream = self._open_stream(checkpoint, restored, start_step)
        train_step = TrainStep(model, optimizer, self.strategy, self.hparams.label_smoothing,
                               config.gradient_accumulation_steps, config.jit_compile,
                               take=stream.take)
        evaluator = Evaluator(model, self.problem, self.vocabulary, self.hparams,
                              config.data_dir, eval_steps=config.eval_steps,
                              decode_sentences=config.eval_decode_sentences,
                              beam_size=config.eval_beam_size)
        summary_root = config.output_dir if self.chief else write_dir
        train_writer = tf.summary.create_file_writer(os.path.join(summary_root, "train"))
        eval_writer = tf.summary.create_file_writer(os.path.join(summary_root, "eval"))
        attention = self._attention_monitor(model, summary_root)
        progress = ProgressLog(self.train_steps, config.log_step_count_steps,
                               learning_rate=lambda: float(optimizer.learning_rate))

        last_save = time.monotonic()
        eval_results: Dict[str, float] = {}
        stopped_early = False
        step = start_step
        stop.arm()
        while step < self.train_steps:
            stats = self._train_step(train_step, stream.iterator, step, stop)
            stop_requests = stats.pop(STOP_REQUESTS)
            step = int(optimizer.iterations.numpy())
            if stats.pop(OVERFLOWS, 0.0):
                scale = float(optimizer.dynamic_scale.numpy())
                print(f"step {step}: float16 gradients overflowed; update skipped, loss "
                      f"scale lowered to {scale:g}", flush=True)
            loss = stats["loss_sum"] / max(stats["tokens"], 1.0)
            if not math.isfinite(loss):
                raise NonFiniteLossError(
                    f"training loss became {loss} at step {step}; the last good checkpoint "
                    f"({checkpoints.last_good or 'none'}) was kept. Lower the learning rate "
                    f"(--hparams=learning_rate_constant=...) or check the data.")
            line = progress.update(step, stats)
            if line is not None:
                print(line, flush=True)
                with train_writer.as_default(step=step):
                    for name, value in progress.last_scalars.items():
                        tf.summary.scalar(name, value)
            if self._checkpoint_due(step, last_save):
                checkpoints.save(step)
                last_save = time.monotonic()
            if config.local_eval_frequency and step % config.local_eval_frequency == 0 \
                    and step < self.train_steps:
                eval_results = self._evaluate(evaluator, eval_writer, step, best)
                if attention is not None:
                    attention.after_step(step, evaluated=True)
                stopped_early = self._patience_exhausted(best, step)
                if stopped_early:
                    break
            if attention is not None and attention.every_steps:
                attention.after_step(step)
            self._stop_if_requested(stop, stop_requests, checkpoints, step)
        checkpoints.save(step)
        if not stopped_early:
            eval_results = self._evaluate(evaluator, eval_writer, step, best)
        if attention is not None:
            attention.after_step(step, final=True)
            attention.close()
        train_writer.flush()
        summary = {"step": step, **progress.summary(), **eval_results,
                   "stopped_early": stopped_early}
        if best.best is not None:
            summary.update(best_step=best.best["step"], best_score=best.best["score"])
        print("Training done: " + ", ".join(f"{k}={_fmt(v)}" for k, v in summary.items()),
              flush=True)
        return summary

    def _checkpoint_due(self, step: int, last_save: float) -> bool:
        """Whether step ``step`` (not the last) is saved: every --save_checkpoints_steps
        steps, or --save_checkpoints_secs after the last save (``time.monotonic()``)."""
        if step >= self.train_steps:
            return False   # the final checkpoint is written after the loop
        if self.config.save_checkpoints_steps:
            return step % self.config.save_checkpoints_steps == 0
        return time.monotonic() - last_save >= self.config.save_checkpoints_secs

    def _evaluate(self, evaluator: "Evaluator", writer, step: int,
                  best: best_checkpoint.BestCheckpoint) -> Dict[str, float]:
        """Evaluates, prints and writes the scores, and keeps the model when it is the
        best so far (``best``)."""
        results = evaluator.evaluate()
        print(f"[eval] step {step}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in results.items()),
              flush=True)
        if best.record(step, results) and self.chief:
            print(f"[best] step {step}: new best {best.describe()}", flush=True)
        with writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
        writer.flush()
        return {f"eval_{k}": v for k, v in results.items()}

    def _patience_exhausted(self, best: best_checkpoint.BestCheckpoint, step: int) -> bool:
        """After an evaluation: True (and says so) when ``--early_stopping_patience``
        evaluations in a row brought no better score; every worker agrees."""
        stop = best.should_stop()
        if distribution.is_multi_worker():
            stop = self._with_peers(lambda: best_checkpoint.agreed_stop(self.strategy, stop),
                                    step)
        if stop:
            print(f"Early stopping at step {step}: {best.evaluations_without_improvement} "
                  f"evaluations without a better dev {best.metric} "
                  f"(--early_stopping_patience={self.config.early_stopping_patience}); "
                  f"best: {best.describe()}", flush=True)
        return stop

    def _attention_monitor(self, model, summary_root: str):
        """The chief's attention summary writer (``summary_root/attention``), or None."""
        config = self.config
        if not self.chief or not config.attention_probes:
            return None
        from t2t_lite.monitoring.attention import AttentionConfig
        from t2t_lite.monitoring.summaries import LOG_SUBDIR, AttentionMonitor
        return AttentionMonitor(model, self.problem, self.vocabulary, config.data_dir,
                                os.path.join(summary_root, LOG_SUBDIR),
                                every_steps=config.attention_summary_steps,
                                config=AttentionConfig(num_probes=config.attention_probes),
                                max_input_length=self.hparams.max_length)

    def _open_stream(self, checkpoint: tf.train.Checkpoint, restored: Optional[str],
                     start_step: int) -> stream_lib.TrainingStream:
        """The seeded training stream at the position of step ``start_step``: restored
        from ``restored`` when it holds one, else read past the batches of the steps done
        (``stream.py``); ``checkpoint``'s saves hold the position from now on."""
        config = self.config

        def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
            return make_dataset(self.problem, config.data_dir, "train", self.hparams,
                                training=True, input_context=input_context,
                                seed=config.random_seed)

        return stream_lib.open_stream(
            self.strategy, dataset_fn, checkpoint, restored=restored,
            batches_done=start_step * config.gradient_accumulation_steps,
            multi_worker=distribution.is_multi_worker())


def _has_training_data(problem, data_dir: str) -> bool:
    """True when datagen has written the vocabulary and the train split into data_dir."""
    return (problem.vocab_path(data_dir).exists()
            and datagen.stats_path(data_dir, problem.name, "train").exists())


def _seed_states(model: keras.Model) -> list:
    """The model's random-seed state variables (in ``variables`` but not ``weights``)."""
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
