"""The best model kept in RUN/best by its dev score, and early stopping with patience."""
import gc
import json
import os
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.commands import decoder, exporter
from t2t_lite.errors import UserError
from t2t_lite.runs.loading import load_trained_run, resolve_checkpoint
from t2t_lite.training import best_checkpoint
from t2t_lite.training.best_checkpoint import BestCheckpoint, check_metric
from t2t_lite.training.evaluation import Evaluator
from t2t_lite.training.trainer import Trainer
from test_trainer import TINY, make_config, trainer_command


def small_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model


def kernel_of(prefix: str) -> np.ndarray:
    model = small_model()
    tf.train.Checkpoint(model=model).read(prefix).expect_partial()
    return model.layers[0].kernel.numpy()


def test_the_best_score_is_kept_in_its_direction_and_survives_a_restart(tmp_path):
    model = small_model()
    best_dir = str(tmp_path / "best")
    best = BestCheckpoint(model, best_dir, best_dir, "bleu", patience=2)
    kernels = {}
    for step, bleu in ((10, 5.0), (20, 9.0), (30, 7.0)):  # up, then down
        model.layers[0].kernel.assign(np.full((3, 2), float(step), np.float32))
        kernels[step] = model.layers[0].kernel.numpy()
        best.record(step, {"bleu": bleu, "loss": 1.0 / step})
    assert best.best["step"] == 20 and best.evaluations_without_improvement == 1
    np.testing.assert_array_equal(kernel_of(best.best_prefix), kernels[20])
    assert sorted(p.name for p in (tmp_path / "best").iterdir()) == [
        "best.json", "checkpoint", "ckpt-20.data-00000-of-00001", "ckpt-20.index"]
    assert tf.train.latest_checkpoint(best_dir).endswith("ckpt-20")
    record = json.loads((tmp_path / "best" / "best.json").read_text())
    assert (record["metric"], record["higher_is_better"], record["step"], record["score"]) \
        == ("bleu", True, 20, 9.0)
    assert record["scores"]["loss"] == pytest.approx(1 / 20)
    assert record["evaluations"] == [[10, 5.0], [20, 9.0], [30, 7.0]]

    # A restart (SIGKILL or SIGTERM, then the same command) reads the record back:
    # a score below the kept 9.0 is no new best, and patience goes on counting.
    again = BestCheckpoint(model, best_dir, best_dir, "bleu", patience=2)
    assert again.best["score"] == 9.0 and not again.should_stop()
    assert not again.record(40, {"bleu": 8.5})
    assert again.should_stop() and again.stopped_at(40) and not again.stopped_at(30)

    # A run resumed from an older checkpoint evaluates step 30 again: the recorded
    # evaluations from step 30 on are replaced, so no step is counted twice.
    redo = BestCheckpoint(model, best_dir, best_dir, "bleu", patience=2)
    redo.record(30, {"bleu": 7.0})
    assert redo.evaluations == [(10, 5.0), (20, 9.0), (30, 7.0)]
    assert redo.evaluations_without_improvement == 1


def test_loss_is_better_lower_and_ties_are_no_improvement(tmp_path):
    best = BestCheckpoint(small_model(), str(tmp_path), str(tmp_path), "loss")
    assert best.record(1, {"loss": 3.0}) and best.record(2, {"loss": 2.0})
    assert not best.record(3, {"loss": 2.0}) and not best.record(4, {"loss": 2.5})
    assert best.best["step"] == 2 and not best.should_stop()  # patience 0: never stops


def test_the_metric_is_checked_before_training():
    assert check_metric("", "p", ("bleu",), 100) == "bleu"
    assert check_metric("", "p", ("bleu",), 0) == "loss"
    assert check_metric("", "p", (), 100) == "loss"
    assert check_metric("perplexity", "p", ("bleu",), 0) == "perplexity"
    with pytest.raises(UserError, match="--eval_decode_sentences > 0"):
        check_metric("bleu", "p", ("bleu",), 0)
    with pytest.raises(UserError, match="choose one of loss, accuracy, log_ppl, perplexity"):
        check_metric("f1", "p", ("bleu",), 100)


def scripted_scores(monkeypatch, scores):
    """Evaluations return ``exact_match`` from ``scores`` in turn; the model's weights at
    each evaluation are kept in the returned list."""
    seen = []
    queue = list(scores)

    def evaluate(self):
        seen.append([v.numpy().copy() for v in self.model.trainable_variables])
        return {"loss": 1.0, "accuracy": 0.5, "log_ppl": 1.0, "perplexity": 2.7,
                "exact_match": queue.pop(0)}

    monkeypatch.setattr(Evaluator, "evaluate", evaluate)
    return seen


def test_a_run_keeps_the_best_step_stops_on_patience_and_resumes(numbers_data, tmp_path,
                                                                  monkeypatch, caplog):
    run = tmp_path / "run"
    seen = scripted_scores(monkeypatch, [10.0, 30.0, 20.0, 25.0, 28.0, 40.0])
    config = dict(train_steps=20, local_eval_frequency=2, eval_decode_sentences=5,
                  early_stopping_patience=2, keep_checkpoint_max=1, save_checkpoints_secs=0)
    summary = Trainer(make_config(numbers_data, run, **config)).run()
    # Evaluations at steps 2, 4, 6, 8: the best is step 4's; two without improvement.
    assert (summary["step"], summary["stopped_early"], summary["best_step"]) == (8, True, 4)
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-8")
    assert not list(run.glob("ckpt-4.*"))           # rotated away by keep_checkpoint_max ...
    best_prefix = resolve_checkpoint(run, run / "best")
    assert best_prefix == str(run / "best" / "ckpt-4")  # ... but kept as the best
    loaded = load_trained_run(run, run / "best")    # what the decoder and exporter do
    for restored, at_step_4 in zip(loaded.model.trainable_variables, seen[1], strict=True):
        np.testing.assert_array_equal(restored.numpy(), at_step_4)
    assert loaded.checkpoint == best_prefix
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("twenty-one\nseven\n")
    assert decoder.main(["--output_dir", str(run), "--checkpoint_path", str(run / "best"),
                         "--decode_from_file", str(source), "--decode_to_file", str(target),
                         "--decode_hparams=beam_size=1,extra_length=3"]) == 0
    assert len(target.read_text().splitlines()) == 2

    # The same command again: it stopped early at step 8, nothing to do.
    caplog.clear()
    again = Trainer(make_config(numbers_data, run, **config)).run()
    assert again == {"step": 8} and len(seen) == 4
    gc.collect()    # TensorFlow warns of a restore's unread values when it is collected
    assert "data_position" not in caplog.text   # left unread, without a warning
    # More patience resumes from step 8; 28 at step 10 is below the kept best (30):
    # three evaluations without improvement stop it there.
    resumed = Trainer(make_config(numbers_data, run, **{**config,
                                                        "early_stopping_patience": 3})).run()
    assert (resumed["step"], resumed["stopped_early"], resumed["best_step"]) == (10, True, 4)
    record = json.loads((run / "best" / "best.json").read_text())
    assert record["evaluations"] == [[2, 10.0], [4, 30.0], [6, 20.0], [8, 25.0], [10, 28.0]]


def test_without_patience_the_final_evaluation_is_recorded(numbers_data, tmp_path,
                                                           monkeypatch):
    run = tmp_path / "run"
    scripted_scores(monkeypatch, [50.0, 40.0, 60.0])
    summary = Trainer(make_config(numbers_data, run, train_steps=6, local_eval_frequency=2,
                                  eval_decode_sentences=5)).run()
    assert (summary["step"], summary["stopped_early"], summary["best_step"]) == (6, False, 6)
    assert resolve_checkpoint(run, run / "best") == str(run / "best" / "ckpt-6")


def test_patience_without_evaluations_during_training_is_refused(numbers_data, tmp_path):
    with pytest.raises(UserError, match="--local_eval_frequency=N"):
        Trainer(make_config(numbers_data, tmp_path / "run", early_stopping_patience=2))


def test_best_dir_is_inside_the_run(tmp_path):
    assert best_checkpoint.best_dir(str(tmp_path)) == str(tmp_path / "best")


# Weights that do not move: every evaluation scores the same, so with patience 1 the run
# stops at its second evaluation (step 4), whatever the machine.
FROZEN = [f"--hparams={TINY},learning_rate_constant=1e-30", "--local_eval_frequency=2",
          "--early_stopping_patience=1", "--eval_decode_sentences=3"]


@pytest.mark.slow
def test_two_replicas_stop_early_with_exit_status_0_and_best_exports(numbers_data, tmp_path):
    run = tmp_path / "run"
    result = subprocess.run(trainer_command(numbers_data, run, "--train_steps=20",
                                            "--cpu_devices=2", *FROZEN),
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Early stopping at step 4: 1 evaluations without a better dev exact_match" \
        in result.stdout
    assert json.loads((run / "best" / "best.json").read_text())["step"] == 2
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-4")
    export = tmp_path / "export"
    assert exporter.main(["--output_dir", str(run), "--checkpoint_path", str(run / "best"),
                          "--export_dir", str(export)]) == 0
    info = json.loads((export / "t2t_lite_export.json").read_text())
    assert info["checkpoint"] == str(run / "best" / "ckpt-2")


@pytest.mark.slow
def test_two_workers_stop_together_and_only_the_chief_writes_best(numbers_data, tmp_path):
    from test_trainer_resume import finish_workers, start_workers
    run = tmp_path / "run"
    results = finish_workers(start_workers(numbers_data, run, tmp_path / "log", *FROZEN),
                             tmp_path / "log")
    for code, stdout, stderr in results:
        assert code == 0, stderr[-3000:]
        assert "Early stopping at step 4" in stdout
    assert "[best] step 2" in results[0][1] and "[best]" not in results[1][1]
    assert sorted(path.name for path in (run / "best").iterdir()) == [
        "best.json", "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
