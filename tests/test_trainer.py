"""t2t-lite-trainer: run directory, resume after SIGKILL, refusal of a different
configuration, NaN handling, distribution strategies, gradient accumulation and the
warning for emulated bfloat16."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.runs.config import RunConfig, RunConfigMismatch
from t2t_lite.training import train_step as train_step_module
from t2t_lite.training import trainer as trainer_module
from t2t_lite.training.trainer import NonFiniteLossError, Trainer, TrainerConfig

TESTS = Path(__file__).resolve().parent
PROBLEM = "translate_ende_numbers"
# Small enough that a step takes milliseconds on a 2-core CPU.
TINY = "num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2,batch_size=512,max_length=40"


def make_config(data_dir, output_dir, **overrides) -> TrainerConfig:
    values = dict(problem=PROBLEM, hparams_set="transformer_tiny", hparams_overrides=TINY,
                  data_dir=str(data_dir), output_dir=str(output_dir), train_steps=6,
                  local_eval_frequency=0, eval_steps=2, eval_decode_sentences=0,
                  log_step_count_steps=3, save_checkpoints_secs=600,
                  attention_probes=0)  # attention summaries have their own tests
    values.update(overrides)
    return TrainerConfig(**values)


def saved_steps(run: Path) -> list:
    state = tf.train.get_checkpoint_state(str(run))
    return [int(path.rsplit("-", 1)[1]) for path in state.all_model_checkpoint_paths]


def scalar_tags(event_dir: Path) -> set:
    tags = set()
    for path in event_dir.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    return tags


def test_run_directory_is_self_describing_and_scalars_are_written(numbers_data, tmp_path):
    run = tmp_path / "run"
    summary = Trainer(make_config(numbers_data, run)).run()
    assert summary["step"] == 6
    config = RunConfig.load(run)
    assert (config.problem, config.model, config.hparams_set) == (PROBLEM, "transformer",
                                                                  "transformer_tiny")
    assert config.hparams["hidden_size"] == 32 and config.hparams_overrides == TINY
    assert (run / config.vocab_file).is_file()
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-6")  # the final checkpoint
    assert {"loss", "learning_rate", "accuracy", "perplexity", "steps_per_sec",
            "tokens_per_sec"} <= scalar_tags(run / "train")
    assert {"loss", "accuracy", "perplexity"} <= scalar_tags(run / "eval")
    # The same command again resumes and stops at once; a larger --train_steps continues.
    assert Trainer(make_config(numbers_data, run)).run()["step"] == 6
    resumed = Trainer(make_config(numbers_data, run, train_steps=9)).run()
    assert (resumed["step"], resumed["steps_this_run"]) == (9, 3)


def test_checkpoints_every_n_steps_are_the_same_steps_when_resumed(numbers_data, tmp_path):
    run = tmp_path / "run"
    steps = dict(save_checkpoints_steps=4, save_checkpoints_secs=0, keep_checkpoint_max=10)
    Trainer(make_config(numbers_data, run, train_steps=6, **steps)).run()
    Trainer(make_config(numbers_data, run, train_steps=10, **steps)).run()
    # Every 4 steps (not every step, as secs=0 alone would), and the final step of each run.
    assert saved_steps(run) == [4, 6, 8, 10]


def test_a_run_directory_with_another_configuration_is_refused(numbers_data, tmp_path):
    run = tmp_path / "run"
    Trainer(make_config(numbers_data, run, train_steps=1)).run()
    with pytest.raises(RunConfigMismatch) as error:
        Trainer(make_config(numbers_data, run, train_steps=2,
                            hparams_overrides=TINY + ",label_smoothing=0.2")).run()
    message = str(error.value)
    assert "hparams.label_smoothing: run directory has 0.1, this command asks for 0.2" in message
    assert "new --output_dir" in message


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(numbers_data, tmp_path,
                                                                  monkeypatch):
    calls = tf.Variable(0)
    real_loss = train_step_module.label_smoothed_cross_entropy

    def poisoned_after_four_steps(labels, logits, smoothing):
        loss_sum, tokens = real_loss(labels, logits, smoothing)
        calls.assign_add(1)
        return tf.where(calls > 4, tf.constant(float("nan")), loss_sum), tokens

    monkeypatch.setattr(train_step_module, "label_smoothed_cross_entropy",
                        poisoned_after_four_steps)
    run = tmp_path / "run"
    with pytest.raises(NonFiniteLossError, match="training loss became nan at step 5"):
        Trainer(make_config(numbers_data, run, train_steps=10, save_checkpoints_secs=0)).run()
    latest = tf.train.latest_checkpoint(str(run))
    assert latest.endswith("ckpt-4")
    reader = tf.train.load_checkpoint(latest)
    model_names = [name for name in reader.get_variable_to_shape_map()
                   if name.startswith("model/")]
    assert model_names
    for name in model_names:
        value = reader.get_tensor(name)
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            assert np.all(np.isfinite(value)), name


VARIANTS = ("devices=1", "devices=2", "devices=2,jit", "devices=2,jit,accumulate=2")


@pytest.fixture(scope="module")
def strategy_runs() -> dict:
    """tests/strategy_run.py's results for ``VARIANTS``, keyed by variant: one process,
    one TensorFlow start, 2 logical CPUs (the one-device run uses the first)."""
    result = subprocess.run([sys.executable, str(TESTS / "strategy_run.py"), *VARIANTS],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_mirrored_on_two_logical_cpus_matches_one_device(strategy_runs):
    """The same global batches give the same loss trajectory and weights (float32
    reduction order differs between the paths: tolerance 1e-5 relative). The stop flag
    passed at step 2 comes back summed over the replicas in the statistics' all-reduce."""
    single = strategy_runs["devices=1"]
    mirrored, mirrored_xla = strategy_runs["devices=2"], strategy_runs["devices=2,jit"]
    assert (single["replicas"], mirrored["replicas"]) == (1, 2)
    assert single["stop_requests"] == [0, 1, 0, 0]
    assert mirrored["stop_requests"] == mirrored_xla["stop_requests"] == [0, 2, 0, 0]
    for other in (mirrored, mirrored_xla):
        np.testing.assert_allclose(other["losses"], single["losses"], rtol=1e-5)
        np.testing.assert_allclose(other["checksum"], single["checksum"], rtol=1e-5)
        assert other["step"] == single["step"] == 4


@pytest.mark.slow
def test_gradient_accumulation_matches_the_full_batch(strategy_runs):
    full, accumulated = strategy_runs["devices=1"], strategy_runs["devices=2,jit,accumulate=2"]
    np.testing.assert_allclose(accumulated["losses"], full["losses"], rtol=1e-5)
    np.testing.assert_allclose(accumulated["checksum"], full["checksum"], rtol=1e-5)
    assert accumulated["step"] == 4  # one optimizer update per accumulated step


def trainer_command(data_dir, output_dir, *extra) -> list:
    return [sys.executable, "-m", "t2t_lite.commands.trainer", f"--problem={PROBLEM}",
            "--hparams_set=transformer_tiny", f"--hparams={TINY}", f"--data_dir={data_dir}",
            f"--output_dir={output_dir}", "--local_eval_frequency=0", "--eval_steps=1",
            "--eval_decode_sentences=0", "--log_step_count_steps=1", "--attention_probes=0", *extra]


def final_weights(run: Path) -> dict:
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(run)))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")}


@pytest.mark.slow
def test_sigkill_then_rerun_ends_with_the_weights_of_an_uninterrupted_run(
        numbers_data, uninterrupted_trainer_run, tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    steps = ["--train_steps=30", "--save_checkpoints_secs=0"]
    reference = uninterrupted_trainer_run  # 30 steps too; when it saved does not matter

    killed = tmp_path / "killed"
    process = subprocess.Popen(trainer_command(numbers_data, killed, *steps), env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        latest = tf.train.latest_checkpoint(str(killed))
        if latest and int(latest.rsplit("-", 1)[1]) >= 10:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    interrupted_at = int(tf.train.latest_checkpoint(str(killed)).rsplit("-", 1)[1])
    assert 10 <= interrupted_at < 30, "the run must be killed mid-training"

    rerun = subprocess.run(trainer_command(numbers_data, killed, *steps), env=env,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Resuming from" in rerun.stdout and "step=30" in rerun.stdout
    expected, actual = final_weights(reference), final_weights(killed)
    assert expected.keys() == actual.keys()
    for name in expected:  # same data order, dropout masks and optimizer state
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_run_keeps_at_least_the_checkpoints_its_hparams_set_averages(numbers_data, tmp_path,
                                                                       capsys):
    # No --keep_checkpoint_max: 20, or average_checkpoints when that is more.
    for average, kept in ((5, 20), (25, 25)):
        overrides = TINY + f",average_checkpoints={average}"
        trainer = Trainer(make_config(numbers_data, tmp_path / "unused",
                                      hparams_overrides=overrides))
        assert trainer.keep_checkpoint_max == kept
    assert "warning:" not in capsys.readouterr().err
    # A --keep_checkpoint_max below average_checkpoints is kept, with a warning naming the fix.
    run = tmp_path / "keeps_3"
    Trainer(make_config(numbers_data, run, train_steps=6, keep_checkpoint_max=3,
                        save_checkpoints_steps=1, save_checkpoints_secs=0,
                        hparams_overrides=TINY + ",average_checkpoints=5")).run()
    assert saved_steps(run) == [4, 5, 6]
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "--keep_checkpoint_max=3 keeps fewer checkpoints than the 5" in warnings[0]
    assert "raise it to 5 or leave it out" in warnings[0]


def test_command_line_errors_are_clear():
    result = subprocess.run([sys.executable, "-m", "t2t_lite.commands.trainer",
                             "--problem=translate_ende_numbers"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "missing required flag(s): --hparams_set, --data_dir, --output_dir" in result.stderr
    result = subprocess.run([sys.executable, "-m", "t2t_lite.commands.trainer",
                             "--registry_help"], capture_output=True, text=True)
    assert result.returncode == 0 and "transformer_base" in result.stdout
    assert "translate_ende_numbers" in result.stdout


@pytest.mark.parametrize("native_bfloat16", [False, True])
def test_the_trainer_warns_when_bfloat16_is_emulated(numbers_data, tmp_path, monkeypatch,
                                                     capsys, native_bfloat16):
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("a GPU computes bfloat16 itself: the warning is for CPUs alone")
    monkeypatch.setattr(trainer_module, "has_native_bfloat16", lambda: native_bfloat16)
    try:
        for precision in ("", "float16", "bfloat16"):
            Trainer(make_config(numbers_data, tmp_path / (precision or "float32"),
                                mixed_precision=precision))
            warnings = [line for line in capsys.readouterr().err.splitlines()
                        if line.startswith("warning:")]
            emulated = precision == "bfloat16" and not native_bfloat16
            assert len(warnings) == int(emulated), (precision, warnings)
            if emulated:
                assert "--mixed_precision=bfloat16 is emulated" in warnings[0]
                assert "drop --mixed_precision" in warnings[0]
    finally:
        keras.mixed_precision.set_global_policy("float32")
