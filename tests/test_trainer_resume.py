"""Two workers training together; resume across replicas and workers, SIGTERM preemption
and worker loss.

What survives what (docs/training.md has the same table):
  SIGKILL, 2 replicas        test_sigkill_two_replicas_then_rerun_matches_uninterrupted,
                             test_resumed_two_replica_stream_trains_no_example_twice
  SIGKILL, 2 workers         test_two_workers_resume_after_sigkill_and_stop_together_on_sigterm
  SIGTERM, one device        test_sigterm_saves_at_a_step_boundary_and_rerun_matches
  SIGINT (Ctrl-C)            test_sigint_saves_like_sigterm_with_its_own_exit_status
  SIGTERM, one of 2 workers  test_two_workers_resume_after_sigkill_and_stop_together_on_sigterm
  worker lost (frozen)       test_a_lost_worker_ends_the_other_with_an_error_and_both_resume
  a worker never starts      test_a_worker_that_never_starts_is_named_and_ends_the_other_in_time,
                             test_a_signal_ends_a_worker_waiting_for_its_peer
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.data import records
from t2t_lite.data.problem import get_problem
from t2t_lite.runs.config import RunConfig
from test_trainer import PROBLEM, TINY, final_weights, free_port, trainer_command

TESTS = Path(__file__).resolve().parent
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
DEADLINE = 300  # seconds any one process may take before the test fails instead of hanging


def checkpoint_step(run: Path) -> int:
    latest = tf.train.latest_checkpoint(str(run))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def printed_step(log: Path) -> int:
    """The last ``step N/...`` progress line in a trainer's stdout file."""
    steps = re.findall(r"^step (\d+)/", log.read_text() if log.exists() else "", re.M)
    return int(steps[-1]) if steps else 0


def wait_until(condition, processes, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if any(process.poll() is not None for process in processes):
            pytest.fail(f"a trainer exited before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def start(command, log_prefix: Path, env=ENV) -> subprocess.Popen:
    return subprocess.Popen(command, env=env, text=True,
                            stdout=open(f"{log_prefix}.out", "w"),
                            stderr=open(f"{log_prefix}.err", "w"))


def finish(process: subprocess.Popen, log_prefix: Path) -> tuple:
    """(return code, stdout, stderr) of a started trainer."""
    process.wait(timeout=DEADLINE)
    return (process.returncode, Path(f"{log_prefix}.out").read_text(),
            Path(f"{log_prefix}.err").read_text())


def assert_same_weights(actual_run: Path, expected_run: Path) -> None:
    expected, actual = final_weights(expected_run), final_weights(actual_run)
    assert expected.keys() == actual.keys()
    for name in expected:  # same tolerance as the one-device SIGKILL test
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


# Two replicas of one worker ------------------------------------------------------------
@pytest.fixture(scope="module")
def id_tagged_data(numbers_data, tmp_path_factory) -> Path:
    """numbers data whose train examples start with two tokens that number them."""
    data = tmp_path_factory.mktemp("tagged") / "data"
    shutil.copytree(numbers_data, data)
    shards = get_problem(PROBLEM).shard_files(data, "train")
    examples = records.read_examples(shards)
    assert len(examples) < 200 * 200
    with records.ShuffledShardWriter(shards, seed=0) as writer:
        for index, (inputs, targets) in enumerate(examples):
            writer.write([2 + index // 200, 2 + index % 200] + inputs, targets)
    return data


@pytest.mark.slow
def test_resumed_two_replica_stream_trains_no_example_twice(id_tagged_data):
    """Resumed after 3 steps, each replica gets the batches of an uninterrupted run,
    whichever way the stream is opened: from the checkpoint's data position (nothing read
    past), by reading past 2 batches per step (one per replica, not 1) when the
    checkpoint holds none, and as a worker of several does."""
    result = subprocess.run([sys.executable, str(TESTS / "resume_stream_run.py"),
                             str(id_tagged_data), "--steps=6", "--resume_at=3",
                             f"--hparams={TINY}"],
                            capture_output=True, text=True, timeout=DEADLINE, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    streams = json.loads(result.stdout.strip().splitlines()[-1])
    assert streams["replicas"] == 2
    assert streams["skipped"] == [0, 3, 3]

    def example_ids(stream):
        return [" ".join(name.split()[:2]) for step in stream for replica in step
                for name in replica]
    uninterrupted = example_ids(streams["uninterrupted"])
    assert len(set(uninterrupted)) == len(uninterrupted) > 12  # ids are unique
    for way in ("from_position", "by_reading", "as_worker"):
        resumed = example_ids(streams[way])
        assert len(set(resumed)) == len(resumed), f"{way}: an example trained twice"
        assert streams[way] == streams["uninterrupted"], way


@pytest.mark.slow
def test_sigkill_two_replicas_then_rerun_matches_uninterrupted(numbers_data, tmp_path):
    steps = ["--train_steps=24", "--save_checkpoints_secs=0", "--cpu_devices=2"]
    reference = tmp_path / "uninterrupted"
    subprocess.run(trainer_command(numbers_data, reference, *steps), check=True, env=ENV,
                   capture_output=True, timeout=DEADLINE)

    killed = tmp_path / "killed"
    process = start(trainer_command(numbers_data, killed, *steps), tmp_path / "first")
    wait_until(lambda: checkpoint_step(killed) >= 8, [process], "checkpoint 8")
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert 8 <= checkpoint_step(killed) < 24, "the run must be killed mid-training"

    code, stdout, stderr = finish(start(trainer_command(numbers_data, killed, *steps),
                                        tmp_path / "rerun"), tmp_path / "rerun")
    assert code == 0, stderr[-3000:]
    assert "Resuming from" in stdout and "step=24" in stdout
    assert_same_weights(killed, reference)


def test_a_finished_run_continued_with_more_steps_matches_the_longer_run(
        numbers_data, uninterrupted_trainer_run, tmp_path):
    # docs/training.md and docs/parsing.md continue finished runs with a larger
    # --train_steps and report them as the longer command's run.
    run = tmp_path / "continued"
    for steps in ("--train_steps=15", "--train_steps=30"):
        subprocess.run(trainer_command(numbers_data, run, steps, "--save_checkpoints_secs=3600"),
                       check=True, env=ENV, capture_output=True, timeout=DEADLINE)
    assert checkpoint_step(run) == 30
    assert_same_weights(run, uninterrupted_trainer_run)


# SIGTERM ---------------------------------------------------------------------------
@pytest.mark.slow
def test_sigterm_saves_at_a_step_boundary_and_rerun_matches(numbers_data,
                                                           uninterrupted_trainer_run, tmp_path):
    # No periodic checkpoints: the one the rerun resumes from is SIGTERM's.
    steps = ["--train_steps=30", "--save_checkpoints_secs=3600"]
    reference = uninterrupted_trainer_run

    run = tmp_path / "preempted"
    process = start(trainer_command(numbers_data, run, *steps), tmp_path / "first")
    wait_until(lambda: printed_step(tmp_path / "first.out") >= 10, [process], "step 10")
    process.send_signal(signal.SIGTERM)
    code, stdout, stderr = finish(process, tmp_path / "first")
    assert code == 143, stderr[-3000:]
    saved = checkpoint_step(run)
    assert 10 <= saved < 30 and printed_step(tmp_path / "first.out") == saved
    assert sorted(p.name for p in run.glob("ckpt-*.index")) == [f"ckpt-{saved}.index"]
    message = stderr.strip().splitlines()[-1]
    assert message == (f"t2t-lite-trainer: SIGTERM received by this worker: saved "
                       f"{run / f'ckpt-{saved}'} after step {saved} and stopped; re-run the "
                       f"same command to resume from it (exit status 143)")

    code, stdout, stderr = finish(start(trainer_command(numbers_data, run, *steps),
                                        tmp_path / "rerun"), tmp_path / "rerun")
    assert code == 0, stderr[-3000:]
    assert f"at step {saved}" in stdout and "step=30" in stdout
    assert_same_weights(run, reference)


@pytest.mark.slow
def test_sigint_saves_like_sigterm_with_its_own_exit_status(numbers_data, tmp_path):
    run = tmp_path / "run"
    process = start(trainer_command(numbers_data, run, "--train_steps=100000",
                                    "--save_checkpoints_secs=3600"), tmp_path / "first")
    wait_until(lambda: printed_step(tmp_path / "first.out") >= 3, [process], "step 3")
    process.send_signal(signal.SIGINT)
    code, stdout, stderr = finish(process, tmp_path / "first")
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    saved = checkpoint_step(run)
    assert saved >= 3
    assert stderr.strip().splitlines()[-1] == (
        f"t2t-lite-trainer: SIGINT received by this worker: saved {run / f'ckpt-{saved}'} "
        f"after step {saved} and stopped; re-run the same command to resume from it "
        f"(exit status 130)")


# Two workers -----------------------------------------------------------------------
WORKER_STEPS = ["--train_steps=20", "--save_checkpoints_secs=0"]


def start_workers(data_dir, run: Path, log_prefix: Path, *extra) -> list:
    workers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(start(trainer_command(data_dir, run, *WORKER_STEPS, *extra),
                               Path(f"{log_prefix}{index}"),
                               env={**ENV, "TF_CONFIG": json.dumps(tf_config)}))
    return processes


def finish_workers(processes, log_prefix: Path) -> list:
    return [finish(process, Path(f"{log_prefix}{index}"))
            for index, process in enumerate(processes)]


@pytest.fixture(scope="module")
def two_worker_reference(numbers_data, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two_workers")
    results = finish_workers(start_workers(numbers_data, root / "run", root / "log"),
                             root / "log")
    for code, stdout, stderr in results:
        assert code == 0 and "step=20" in stdout, stderr[-3000:]
    return root / "run"


@pytest.mark.slow
def test_two_workers_train_together_and_only_the_chief_writes(two_worker_reference):
    """Both workers reached step 20 (the fixture checks their output). The run holds one
    checkpoint per step, written once: the chief's; nothing else of the other worker."""
    run = two_worker_reference
    steps = sorted(int(path.name[len("ckpt-"):-len(".index")])
                   for path in run.glob("ckpt-*.index"))
    assert steps == list(range(1, 21))
    config = RunConfig.load(run)
    assert config.problem == PROBLEM
    assert sorted(path.name for path in run.iterdir() if not path.name.startswith("ckpt-")) == \
        sorted(["best", "checkpoint", "eval", "run_config.json", "train", "trainer.lock",
                config.vocab_file])


@pytest.mark.slow
def test_two_workers_resume_after_sigkill_and_stop_together_on_sigterm(
        numbers_data, two_worker_reference, tmp_path):
    """SIGKILL both workers, restart both: the non-chief worker resumes from the chief's
    checkpoint too. Then SIGTERM one worker: both save after the same step and stop;
    restarted, they end with the uninterrupted run's weights."""
    run = tmp_path / "run"
    processes = start_workers(numbers_data, run, tmp_path / "first")
    wait_until(lambda: checkpoint_step(run) >= 6, processes, "checkpoint 6")
    for process in processes:
        process.send_signal(signal.SIGKILL)
    for process in processes:
        process.wait()
    killed_at = checkpoint_step(run)
    assert 6 <= killed_at < 20

    processes = start_workers(numbers_data, run, tmp_path / "second")
    wait_until(lambda: printed_step(tmp_path / "second1.out") >= killed_at + 3, processes,
               "3 steps after resuming")
    processes[1].send_signal(signal.SIGTERM)  # the non-chief worker only
    results = finish_workers(processes, tmp_path / "second")
    for index, (code, stdout, stderr) in enumerate(results):
        assert code == 143, stderr[-3000:]
        assert f"Resuming from {run / f'ckpt-{killed_at}'} at step {killed_at}" in stdout
        who = "this worker" if index == 1 else "another worker"
        assert f"SIGTERM received by {who}: saved" in stderr
    stopped_at = checkpoint_step(run)
    assert killed_at + 3 <= stopped_at < 20
    assert [printed_step(tmp_path / f"second{i}.out") for i in range(2)] == [stopped_at] * 2

    results = finish_workers(start_workers(numbers_data, run, tmp_path / "third"),
                             tmp_path / "third")
    for code, stdout, stderr in results:
        assert code == 0, stderr[-3000:]
        assert f"at step {stopped_at}" in stdout and "step=20" in stdout
    assert_same_weights(run, two_worker_reference)


@pytest.mark.slow
def test_a_lost_worker_ends_the_other_with_an_error_and_both_resume(numbers_data,
                                                                    two_worker_reference,
                                                                    tmp_path):
    """A frozen worker (SIGSTOP: its connections stay open, it answers nothing, as a
    machine that dropped off the network) makes the other one stop with one error line
    within --worker_timeout_secs; restarting both resumes."""
    run = tmp_path / "run"
    processes = start_workers(numbers_data, run, tmp_path / "first", "--worker_timeout_secs=20")
    wait_until(lambda: checkpoint_step(run) >= 6, processes, "checkpoint 6")
    processes[1].send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        code, stdout, stderr = finish(processes[0], tmp_path / "first0")
    finally:
        processes[1].kill()
        processes[1].wait()
    waited = time.monotonic() - frozen_at
    assert code == 1, stderr[-3000:]
    assert "Traceback" not in stderr
    error = stderr.strip().splitlines()[-1]
    assert error.startswith("error: lost contact with another worker after step ")
    assert "restart every worker with the same command" in error
    assert "--worker_timeout_secs=20" in error
    print(f"the surviving worker stopped {waited:.1f} s after the other froze")

    lost_at = checkpoint_step(run)
    results = finish_workers(start_workers(numbers_data, run, tmp_path / "second",
                                           "--worker_timeout_secs=20"), tmp_path / "second")
    for code, stdout, stderr in results:
        assert code == 0, stderr[-3000:]
        assert f"at step {lost_at}" in stdout and "step=20" in stdout
    assert_same_weights(run, two_worker_reference)


# A worker that never starts ---------------------------------------------------------
def start_alone(data_dir, run: Path, log_prefix: Path, index: int, *extra) -> tuple:
    """One worker of a two-worker cluster on 127.0.0.1 whose peer never starts; its peer's
    address."""
    workers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    return start(trainer_command(data_dir, run, *WORKER_STEPS, *extra), log_prefix,
                 env={**ENV, "TF_CONFIG": json.dumps(tf_config)}), workers[1 - index]


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1])
def test_a_worker_that_never_starts_is_named_and_ends_the_other_in_time(index, numbers_data,
                                                                       tmp_path):
    process, peer = start_alone(numbers_data, tmp_path / "run", tmp_path / "w", index,
                                "--worker_timeout_secs=4")
    started = time.monotonic()
    try:
        process.wait(timeout=120)
    finally:
        process.kill()
    waited = time.monotonic() - started
    stderr = (tmp_path / "w.err").read_text()
    assert process.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr
    assert f"waiting for worker {1 - index} ({peer}) of TF_CONFIG's cluster to start (up " \
           f"to --worker_timeout_secs=4 s)" in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"error: worker {1 - index} ({peer}) of TF_CONFIG's cluster did not start within "
        f"--worker_timeout_secs=4; start every worker (same cluster, each its own task "
        f"index), or raise --worker_timeout_secs")
    print(f"worker {index} alone ended after {waited:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_worker_waiting_for_its_peer(signum, numbers_data, tmp_path):
    process, peer = start_alone(numbers_data, tmp_path / "run", tmp_path / "w", 1)
    try:
        wait_until(lambda: "waiting for worker 0" in (tmp_path / "w.err").read_text(),
                   [process], "the waiting line")
        time.sleep(1)   # well inside TensorFlow's start of the cluster
        process.send_signal(signum)
        process.wait(timeout=30)
    finally:
        process.kill()
    stderr = (tmp_path / "w.err").read_text()
    assert process.returncode == 128 + signum, stderr[-3000:]
    assert "(with no limit: set --worker_timeout_secs to bound it)" in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"t2t-lite-trainer: {signal.Signals(signum).name} received while waiting for the "
        f"other workers to start; nothing was trained, nothing saved")


@pytest.mark.parametrize("tf_config, message", [
    ({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
      "task": {"type": "worker", "index": 2}},
     "TF_CONFIG's task worker 2 is not in its cluster, which has 2 worker address(es)"),
    ({"task": {"type": "worker", "index": 0}}, "TF_CONFIG has no \"cluster\""),
])
def test_a_tf_config_that_does_not_place_this_worker_is_refused(tf_config, message, tmp_path):
    result = subprocess.run(trainer_command(tmp_path / "data", tmp_path / "run"),
                            env={**ENV, "TF_CONFIG": json.dumps(tf_config)},
                            capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {message}")
    assert not (tmp_path / "run").exists()


# Pieces, in process ------------------------------------------------------------------
@pytest.mark.parametrize("pipelines, replicas, expected", [(1, 1, 1), (1, 2, 2), (2, 2, 1),
                                                          (2, 4, 2)])
def test_a_pipeline_skips_one_batch_per_replica_it_feeds(pipelines, replicas, expected):
    from t2t_lite.training.stream import batches_per_pipeline
    context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=0,
                                         num_replicas_in_sync=replicas)
    assert batches_per_pipeline(context) == expected


def test_sigterm_is_caught_only_while_armed_and_the_old_handler_comes_back():
    from t2t_lite.training.preemption import StopOnSignal
    caught = []
    previous = signal.signal(signal.SIGTERM, lambda *args: caught.append("old"))
    try:
        with StopOnSignal(multi_worker=False) as stop:
            os.kill(os.getpid(), signal.SIGTERM)  # not armed yet: the old handler runs
            assert caught == ["old"] and not stop.requested()
            stop.arm()
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.requested() and stop.received and caught == ["old"]
        os.kill(os.getpid(), signal.SIGTERM)
        assert caught == ["old", "old"]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_several_workers_stop_on_the_all_reduced_flag_not_their_own():
    """Every worker must stop after the same step: with several, only the step's
    all-reduced ``stop_requests`` decides, whatever this worker's own flag says."""
    from t2t_lite.training.preemption import StopOnSignal
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with StopOnSignal(multi_worker=True) as stop:
            assert not stop.requested(0.0) and stop.requested(1.0)
            stop.arm()
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.received and not stop.requested(0.0) and stop.requested(2.0)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_lost_worker_error_names_the_checkpoint_and_the_flag(tmp_path):
    from t2t_lite.training.resume import worker_lost
    error = tf.errors.UnavailableError(None, None, "Graph execution error:\n\nDetected at node "
                                       "X\nCollective ops is aborted by: Connection reset by "
                                       "peer\nThe error could be from a previous operation.")
    message = str(worker_lost(error, 7, str(tmp_path), 0))
    assert message.startswith("lost contact with another worker after step 7 (UnavailableError:"
                              " Collective ops is aborted by: Connection reset by peer). The "
                              "run's last checkpoint is none yet; restart every worker")
    assert "--worker_timeout_secs (default: TensorFlow's 10 s heartbeat timeout)" in message


def test_worker_timeout_flag_reaches_the_trainer_config(monkeypatch):
    from t2t_lite.commands import trainer as trainer_command_module
    seen = {}

    class FakeTrainer:
        def __init__(self, config):
            seen["config"] = config
            self.strategy = tf.distribute.get_strategy()  # the command prints its devices

        def run(self):
            return {}

    monkeypatch.setattr("t2t_lite.training.trainer.Trainer", FakeTrainer)
    assert trainer_command_module.main(["--problem=p", "--hparams_set=h", "--data_dir=d",
                                        "--output_dir=o", "--worker_timeout_secs=45"]) == 0
    assert seen["config"].worker_timeout_secs == 45
    with pytest.raises(SystemExit):
        trainer_command_module.build_parser().parse_args(["--worker_timeout_secs=-1"])
