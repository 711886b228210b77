"""What a run directory survives: a second trainer on it, damaged checkpoints, a full disk,
a killed checkpoint write, a model that fails to build, avg-checkpoints aimed at the run's
own checkpoints, and a hand-edited run_config.json."""
import errno
import gc
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.commands import avg_checkpoints, decoder, exporter
from t2t_lite.commands import trainer as trainer_command
from t2t_lite.directory_lock import DirectoryBusy, DirectoryLock
from t2t_lite.runs.config import RUN_CONFIG_FILE, RunConfig
from t2t_lite.training import checkpointing
from t2t_lite.training import trainer as trainer_module
from t2t_lite.training.checkpointing import CheckpointSaveError, NoReadableCheckpoint
from t2t_lite.training.run_lock import LOCK_FILE, RunLock
from t2t_lite.training.trainer import Trainer, TrainerConfig

from run_dir_helpers import copy_run_dir

PROBLEM = "translate_ende_numbers"
TINY = "num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2,batch_size=512,max_length=40"
REPO = Path(__file__).resolve().parent.parent
QUIET = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def make_config(data_dir, output_dir, **overrides) -> TrainerConfig:
    values = dict(problem=PROBLEM, hparams_set="transformer_tiny", hparams_overrides=TINY,
                  data_dir=str(data_dir), output_dir=str(output_dir), train_steps=4,
                  local_eval_frequency=0, eval_steps=1, eval_decode_sentences=0,
                  log_step_count_steps=100, save_checkpoints_secs=0, attention_probes=0)
    values.update(overrides)
    return TrainerConfig(**values)


def trainer_flags(data_dir, output_dir, *extra, hparams=TINY) -> list:
    return [f"--problem={PROBLEM}", "--hparams_set=transformer_tiny", f"--hparams={hparams}",
            f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--local_eval_frequency=0",
            "--eval_steps=1", "--eval_decode_sentences=0", "--attention_probes=0", *extra]


def python_trainer(data_dir, output_dir, *extra, **kwargs) -> list:
    return [sys.executable, "-m", "t2t_lite.commands.trainer",
            *trainer_flags(data_dir, output_dir, *extra, **kwargs)]


def error_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def step_of(prefix) -> int:
    return int(str(prefix).rsplit("-", 1)[1])


# Damage as found on disk after a crash, a bad copy or a full disk --------------------
DAMAGE = ("truncated", "checksum", "indexless")


def damage(prefix, kind: str) -> None:
    """Truncates ``prefix``'s data file to half, flips bits all over it (same size, but
    the checksums fail), or deletes its index."""
    data = Path(f"{prefix}.data-00000-of-00001")
    size = data.stat().st_size
    if kind == "truncated":
        with open(data, "r+b") as handle:
            handle.truncate(size // 2)
    elif kind == "checksum":  # one bit in every 16 bytes: every tensor's checksum fails
        content = bytearray(data.read_bytes())
        content[::16] = bytes(byte ^ 1 for byte in content[::16])
        data.write_bytes(bytes(content))
    elif kind == "indexless":
        Path(f"{prefix}.index").unlink()
    else:
        raise ValueError(kind)


# Concurrent runs ---------------------------------------------------------------------
HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from t2t_lite.training.run_lock import RunLock
    RunLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(600)
""")


def test_lock_names_a_live_holder_and_dies_with_a_killed_one(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DirectoryBusy) as error:
            RunLock(run).acquire()
        message = str(error.value)
        assert f"host {socket.gethostname()}, pid {holder.pid}, started " in message
        assert str(run) in message and "--output_dir" in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with RunLock(run):  # the kernel released the killed holder's lock
        assert f"pid {os.getpid()}" in (run / LOCK_FILE).read_text()
    RunLock(run).acquire().release()  # and ours is released on exit


@pytest.mark.slow
def test_a_second_trainer_is_refused_until_the_first_is_killed(numbers_data, tmp_path,
                                                               capsys):
    run = tmp_path / "run"
    first = subprocess.Popen(python_trainer(numbers_data, run, "--train_steps=100000",
                                            "--save_checkpoints_secs=600"),
                             env=QUIET, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 240
        while f"pid {first.pid}," not in _read(run / LOCK_FILE):
            assert first.poll() is None, first.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the first trainer never took the lock"
            time.sleep(0.1)
        second = trainer_flags(numbers_data, run, "--train_steps=3")
        assert trainer_command.main(second) == 2
        errors = error_lines(capsys.readouterr().err)
        assert len(errors) == 1
        assert f"in use by another t2t-lite-trainer (host {socket.gethostname()}, " \
               f"pid {first.pid}, started" in errors[0]
        assert first.poll() is None  # the refused trainer did not disturb the first one
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert trainer_command.main(second) == 0
    assert "step=3" in capsys.readouterr().out
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-3")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


# Damaged checkpoints: the trainer falls back ----------------------------------------
@pytest.fixture(scope="module")
def four_checkpoints(numbers_data, tmp_path_factory) -> Path:
    """A run with ckpt-1 ... ckpt-4 (one a step)."""
    run = tmp_path_factory.mktemp("four") / "run"
    Trainer(make_config(numbers_data, run)).run()
    assert [step_of(path) for path in tf.train.get_checkpoint_state(str(run))
            .all_model_checkpoint_paths] == [1, 2, 3, 4]
    return run


def test_a_finished_run_run_again_has_nothing_to_do_and_reads_no_data(
        numbers_data, four_checkpoints, tmp_path, capfd, caplog):
    run = tmp_path / "run"
    shutil.copytree(four_checkpoints, run)
    assert Trainer(make_config(numbers_data, run)).run() == {"step": 4}
    gc.collect()    # TensorFlow warns of a restore's unread values when it is collected
    out, err = capfd.readouterr()
    assert f"Resuming from {run}/ckpt-4 at step 4" in out
    assert "Step 4 >= --train_steps=4: nothing to do." in out
    assert "Reading the seeded training data" not in out
    # The saved data position is left unread without TensorFlow's warnings about it.
    for text in (err, caplog.text):
        assert "data_position" not in text and "unrestored values" not in text


@pytest.mark.slow
@pytest.mark.parametrize("kind", DAMAGE)
def test_resume_falls_back_past_a_damaged_latest_checkpoint(kind, numbers_data,
                                                            four_checkpoints, six_steps,
                                                            tmp_path, capfd):
    run = tmp_path / "run"
    shutil.copytree(four_checkpoints, run)
    damage(run / "ckpt-4", kind)
    summary = Trainer(make_config(numbers_data, run, train_steps=6)).run()
    captured = capfd.readouterr()
    assert f"warning: checkpoint {run}/ckpt-4 is damaged" in captured.err
    assert f"Resuming from {run}/ckpt-3 at step 3" in captured.out
    assert "Reading the seeded training data" not in captured.out  # ckpt-3's data position
    assert (summary["step"], summary["steps_this_run"]) == (6, 3)
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-6")
    resumed, uninterrupted = model_weights(run / "ckpt-6"), model_weights(six_steps / "ckpt-6")
    assert resumed.keys() == uninterrupted.keys()
    for name in uninterrupted:   # the tolerance of tests/test_trainer_resume.py
        np.testing.assert_allclose(resumed[name], uninterrupted[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.fixture(scope="module")
def six_steps(numbers_data, tmp_path_factory) -> Path:
    """The run of ``four_checkpoints`` trained to step 6 without interruption."""
    run = tmp_path_factory.mktemp("six") / "run"
    Trainer(make_config(numbers_data, run, train_steps=6)).run()
    return run


def model_weights(checkpoint: Path) -> dict:
    """The model's weights in ``checkpoint`` by name."""
    reader = tf.train.load_checkpoint(str(checkpoint))
    return {name: reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map()
            if name.startswith("model/") and "OPTIMIZER_SLOT" not in name}


@pytest.mark.slow
def test_a_damaged_checkpoint_the_trainer_skipped_is_not_averaged(numbers_data,
                                                                 four_checkpoints, tmp_path,
                                                                 capfd):
    run = tmp_path / "run"
    shutil.copytree(four_checkpoints, run)
    damage(run / "ckpt-4", "checksum")
    assert Trainer(make_config(numbers_data, run, train_steps=3)).run() == {"step": 3}
    listed = tf.train.get_checkpoint_state(str(run)).all_model_checkpoint_paths
    assert [step_of(path) for path in listed] == [1, 2, 3]   # ckpt-4's files stay, unlisted
    capfd.readouterr()
    assert avg_checkpoints.main(["--output_dir", str(run), "--num_last_checkpoints", "2"]) == 0
    assert f"averaged 2 checkpoint(s): {run}/ckpt-2, {run}/ckpt-3" in capfd.readouterr().out


@pytest.mark.slow
def test_resume_refuses_when_every_checkpoint_is_damaged(numbers_data, four_checkpoints,
                                                         tmp_path):
    run = tmp_path / "run"
    shutil.copytree(four_checkpoints, run)
    for step, kind in zip(range(1, 5), DAMAGE + ("truncated",)):
        damage(run / f"ckpt-{step}", kind)
    with pytest.raises(NoReadableCheckpoint, match=r"no readable checkpoint .*ckpt-4.*ckpt-1"):
        Trainer(make_config(numbers_data, run, train_steps=6)).run()
    assert not (run / "ckpt-6.index").exists()  # nothing trained from scratch over them


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["missing", "garbage"])
def test_a_lost_checkpoint_state_file_is_rebuilt_from_the_checkpoints_on_disk(
        loss, numbers_data, four_checkpoints, tmp_path, capfd):
    run = tmp_path / "run"
    shutil.copytree(four_checkpoints, run)
    state = run / checkpointing.STATE_FILE
    if loss == "missing":
        state.unlink()
    else:
        state.write_bytes(bytes(range(256)) * 4)
    summary = Trainer(make_config(numbers_data, run, train_steps=6)).run()
    captured = capfd.readouterr()
    how = "is missing" if loss == "missing" else "is unreadable"
    assert f"warning: {state}, the list of the run's checkpoints, {how}; rebuilt it from " \
           f"the 4 checkpoint(s) on disk, the newest {run}/ckpt-4" in captured.err
    assert f"Resuming from {run}/ckpt-4 at step 4" in captured.out
    assert (summary["step"], summary["steps_this_run"]) == (6, 2)
    listed = tf.train.get_checkpoint_state(str(run)).all_model_checkpoint_paths
    assert [step_of(path) for path in listed] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_a_checkpoint_written_but_never_listed_is_removed_on_the_next_start(
        numbers_data, four_checkpoints, tmp_path, capfd):
    """A kill between ckpt-4's files and the state update: the state lists ckpt-1..3."""
    run = tmp_path / "run"
    shutil.copytree(four_checkpoints, run)
    checkpointing.write_state(run, [1, 2, 3])
    summary = Trainer(make_config(numbers_data, run, train_steps=3)).run()
    captured = capfd.readouterr()
    assert f"Removed ckpt-4: newer than every checkpoint {run}/checkpoint lists (a save " \
           f"killed before it was listed" in captured.out
    assert summary["step"] == 3
    assert not list(run.glob("ckpt-4.*"))


# Damaged checkpoints: decoder, exporter, avg-checkpoints ------------------------------
def decode(run, source, *extra) -> int:
    return decoder.main(["--output_dir", str(run), "--decode_from_file", str(source),
                         "--decode_hparams", "beam_size=1,extra_length=2", *extra])


@pytest.mark.slow
@pytest.mark.parametrize("kind", DAMAGE)
def test_decoder_falls_back_and_others_name_the_damaged_checkpoint(kind, tmp_path, capsys):
    run = copy_run_dir(tmp_path / "run")  # ckpt-1 and ckpt-2 of different weights
    source = tmp_path / "in.txt"
    source.write_text("twenty-one\nseven\n", encoding="utf-8")
    assert decode(run, source, "--checkpoint_path", str(run / "ckpt-1")) == 0
    from_first = capsys.readouterr().out
    damage(run / "ckpt-2", kind)

    assert decode(run, source) == 0  # no checkpoint named: the newest readable one
    captured = capsys.readouterr()
    assert captured.out == from_first
    assert f"{run}/ckpt-2 is damaged" in captured.err
    assert f"using {run}/ckpt-1, the newest readable checkpoint" in captured.err

    assert decode(run, source, "--checkpoint_path", str(run / "ckpt-2")) == 2
    named = error_lines(capsys.readouterr().err)
    assert len(named) == 1 and f"{run}/ckpt-2" in named[0]

    assert exporter.main(["--output_dir", str(run), "--export_dir", str(tmp_path / "export"),
                          "--checkpoint_path", str(run / "ckpt-2")]) == 2
    exported = error_lines(capsys.readouterr().err)
    assert len(exported) == 1 and f"{run}/ckpt-2" in exported[0] and "damaged" in exported[0]
    assert not (tmp_path / "export").exists()

    assert avg_checkpoints.main(["--output_dir", str(run), "--num_last_checkpoints", "2",
                                 "--output_path", str(tmp_path / "avg")]) == 2
    averaged = error_lines(capsys.readouterr().err)
    assert len(averaged) == 1 and f"{run}/ckpt-2" in averaged[0]
    assert not Path(f"{tmp_path}/avg.index").exists()


@pytest.mark.slow
def test_exporter_falls_back_past_a_truncated_latest_checkpoint(tmp_path, capsys):
    run = copy_run_dir(tmp_path / "run")  # ckpt-1 and ckpt-2 of different weights
    damage(run / "ckpt-2", "truncated")
    export_dir = tmp_path / "export"

    assert exporter.main(["--output_dir", str(run), "--export_dir", str(export_dir),
                          "--decode_hparams", "beam_size=1,extra_length=2"]) == 0
    captured = capsys.readouterr()
    assert f"warning: {run}/ckpt-2 is damaged" in captured.err
    assert f"using {run}/ckpt-1, the newest readable checkpoint" in captured.err
    assert captured.out.startswith(f"exported {run}/ckpt-1 to {export_dir}")
    info = json.loads((export_dir / "t2t_lite_export.json").read_text())
    assert info["checkpoint"] == f"{run}/ckpt-1"
    # The SavedModel holds ckpt-1's weights: both store the model under the key "model/".
    exported = tf.train.load_checkpoint(str(export_dir / "variables" / "variables"))
    restored = tf.train.load_checkpoint(str(run / "ckpt-1"))
    keys = [key for key, _ in tf.train.list_variables(str(run / "ckpt-1"))
            if key.startswith("model/") and key.endswith("VARIABLE_VALUE")]
    assert keys and all(exported.has_tensor(key) for key in keys)
    for key in keys:
        assert (exported.get_tensor(key) == restored.get_tensor(key)).all(), key


# Full disk and killed writes --------------------------------------------------------
def can_mount_tmpfs() -> bool:
    probe = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
             "mount -t tmpfs -o size=1m tmpfs /mnt"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


FILL_DISK = """
set -u
mount -t tmpfs -o size=64m tmpfs "$DISK" || exit 97
timeout 300 "$@" >"$OUT/stdout" 2>"$OUT/stderr" &
trainer=$!
while ! grep -qs '"ckpt-3"' "$DISK/run/checkpoint" && kill -0 "$trainer" 2>/dev/null; do
  sleep 0.05
done
dd if=/dev/zero of="$DISK/filler" bs=1M 2>/dev/null
wait "$trainer"; echo $? >"$OUT/rc"
rm -f "$DISK/filler"
cp -a "$DISK/run" "$OUT/run"
"""


@pytest.mark.slow
@pytest.mark.skipif(not can_mount_tmpfs(), reason="cannot mount a tmpfs in a private mount "
                    "namespace (unshare --user --map-root-user --mount) here")
def test_disk_full_while_saving_is_one_clear_error_and_the_run_resumes(numbers_data,
                                                                      tmp_path):
    """A real full disk: a 64 MB tmpfs, filled up once the state file lists ckpt-3."""
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    command = python_trainer(numbers_data, disk / "run", "--train_steps=100000",
                             "--save_checkpoints_secs=0", "--log_step_count_steps=100000")
    result = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                             FILL_DISK, "fill_disk", *command],
                            env={**QUIET, "DISK": str(disk), "OUT": str(out)}, timeout=400)
    assert result.returncode == 0
    stderr = (out / "stderr").read_text()
    assert (out / "rc").read_text().strip() == "1", stderr[-3000:]
    assert "Traceback" not in stderr
    [line] = error_lines(stderr)
    copy = out / "run"
    last_good = tf.train.latest_checkpoint(str(copy))
    failed = step_of(line.split(" while saving ")[1].split(";")[0])
    assert line == (f"error: no space left on device while saving {disk}/run/ckpt-{failed}; "
                    f"the last good checkpoint is {disk}/run/ckpt-{step_of(last_good)}. Free "
                    f"space on that disk, then re-run the same command to resume from it")
    assert failed > step_of(last_good) >= 3
    assert not list(copy.glob("*_temp"))  # the failed save's partial write was removed
    assert not list(copy.glob(f"ckpt-{failed}.*"))

    resumed = Trainer(make_config(numbers_data, copy, train_steps=step_of(last_good) + 2))
    assert resumed.run()["steps_this_run"] == 2


def test_disk_full_error_as_tensorflow_raises_it(tmp_path, monkeypatch):
    """The same handling, with the exact error a full disk gave TensorFlow 2.21 (above)."""
    variable = tf.Variable(tf.ones([4]))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), str(tmp_path),
                                         max_to_keep=5)
    checkpoints = checkpointing.RunCheckpoints(manager._checkpoint, manager)
    assert checkpoints.restore() is None
    assert checkpoints.save(2).endswith("ckpt-2")
    real_write = manager._checkpoint._write

    def disk_full(prefix, options=None):
        part = Path(f"{prefix}_temp") / "part-00000-of-00001.data-00000-of-00001.tempstate1"
        part.parent.mkdir()
        part.write_bytes(b"\0" * 4096)
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{{{{function_node __wrapped__SaveV2_dtypes_1_device_/job:localhost/"
                        f"replica:0/task:0/device:CPU:0}}}} {part}; No space left on device "
                        f"[Op:SaveV2]")

    monkeypatch.setattr(manager._checkpoint, "_write", disk_full)
    with pytest.raises(CheckpointSaveError) as error:
        checkpoints.save(3)
    assert str(error.value).startswith(
        f"no space left on device while saving {tmp_path}/ckpt-3; the last good checkpoint "
        f"is {tmp_path}/ckpt-2.")
    assert not (tmp_path / "ckpt-3_temp").exists()
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")

    monkeypatch.setattr(manager._checkpoint, "_write", real_write)
    assert checkpoints.save(3).endswith("ckpt-3")  # space freed: saving works again


def test_disk_full_while_writing_the_state_file_removes_the_saved_files(tmp_path,
                                                                       monkeypatch):
    """The disk can fill after the checkpoint's files are written, while TensorFlow
    rewrites the state file: the new files go and the state file keeps the last good."""
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.ones([4]))),
                                         str(tmp_path), max_to_keep=5)
    checkpoints = checkpointing.RunCheckpoints(manager._checkpoint, manager)
    assert checkpoints.save(2).endswith("ckpt-2")
    real_record_state = manager._record_state

    def disk_full():
        assert list(tmp_path.glob("ckpt-3.*"))  # the checkpoint's own files are written
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{tmp_path}/checkpoint.tmp; No space left on device")

    monkeypatch.setattr(manager, "_record_state", disk_full)
    with pytest.raises(CheckpointSaveError, match="the last good checkpoint is .*ckpt-2"):
        checkpoints.save(3)
    assert not list(tmp_path.glob("ckpt-3*"))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")
    assert manager.checkpoints == [f"{tmp_path}/ckpt-2"]

    monkeypatch.setattr(manager, "_record_state", real_record_state)
    assert checkpoints.save(3).endswith("ckpt-3")
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [
        f"{tmp_path}/ckpt-2", f"{tmp_path}/ckpt-3"]


def test_disk_full_on_the_state_files_second_rewrite_keeps_the_whole_checkpoint(
        tmp_path, monkeypatch):
    """CheckpointManager names a new checkpoint in the state file, deletes those beyond
    max_to_keep, then rewrites the state file: a full disk there leaves a whole checkpoint
    the state file names, and the error calls it the last good one."""
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.ones([4]))),
                                         str(tmp_path), max_to_keep=1)
    checkpoints = checkpointing.RunCheckpoints(manager._checkpoint, manager)
    assert checkpoints.save(2).endswith("ckpt-2")
    real_record_state, calls = manager._record_state, []

    def full_on_the_second_call():
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_record_state()

    monkeypatch.setattr(manager, "_record_state", full_on_the_second_call)
    with pytest.raises(CheckpointSaveError, match="the last good checkpoint is .*ckpt-3"):
        checkpoints.save(3)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-3")
    assert checkpointing.steps_on_disk(tmp_path) == [3]
    monkeypatch.setattr(manager, "_record_state", real_record_state)
    restored = checkpointing.RunCheckpoints(manager._checkpoint, tf.train.CheckpointManager(
        manager._checkpoint, str(tmp_path), max_to_keep=1))
    assert restored.restore().endswith("ckpt-3")


# A checkpoint write killed mid-way: caught by SIGSTOP while its _temp directory exists,
# then SIGKILLed. A checkpoint big enough (~0.7M parameters + Adam) to take a while.
BIGGER = "num_hidden_layers=2,hidden_size=128,filter_size=512,num_heads=2,batch_size=512,max_length=40"


def kill_during_a_save(process: subprocess.Popen, run: Path, deadline_s: float = 240) -> Path:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()[-3000:]
        temps = list(run.glob("ckpt-*_temp")) if run.is_dir() else []
        if temps:
            process.send_signal(signal.SIGSTOP)
            if temps[0].exists():
                process.send_signal(signal.SIGKILL)
                process.wait()
                return temps[0]
            process.send_signal(signal.SIGCONT)
        time.sleep(0.001)
    process.kill()
    raise AssertionError("no checkpoint write was caught in progress")


@pytest.mark.slow
def test_a_killed_writes_temp_directory_is_removed_on_the_next_start(numbers_data, tmp_path,
                                                                     capfd):
    run = tmp_path / "run"
    process = subprocess.Popen(python_trainer(numbers_data, run, "--train_steps=100000",
                                              "--save_checkpoints_secs=0", hparams=BIGGER),
                               env=QUIET, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    stale = kill_during_a_save(process, run)
    assert stale.is_dir()
    latest = tf.train.latest_checkpoint(str(run))  # None when the first save was caught
    capfd.readouterr()
    config = make_config(numbers_data, run, hparams_overrides=BIGGER,
                         train_steps=(step_of(latest) if latest else 0) + 1)
    assert Trainer(config).run()["steps_this_run"] == 1
    out = capfd.readouterr().out
    assert f"Removed 1 partial checkpoint write(s) left by an interrupted save: {stale.name}" \
           in out
    assert not list(run.glob("*_temp"))


# The run directory is written only after the model is built -------------------------
def test_a_failed_model_build_leaves_no_run_directory_behind(numbers_data, tmp_path,
                                                            monkeypatch):
    run = tmp_path / "run"

    def fails(run_config):
        raise ValueError("Exception encountered when calling layer (simulated shape error)")

    monkeypatch.setattr(trainer_module, "build_model", fails)
    with pytest.raises(ValueError, match="simulated shape error"):
        Trainer(make_config(numbers_data, run, train_steps=1)).run()
    assert not run.exists() or list(run.iterdir()) == []

    monkeypatch.undo()  # the corrected command then trains
    assert Trainer(make_config(numbers_data, run, train_steps=1)).run()["step"] == 1
    assert RunConfig.load(str(run)).hparams_overrides == TINY


# avg-checkpoints never overwrites a checkpoint -----------------------------------------
def file_bytes(run: Path) -> dict:
    return {path.name: path.read_bytes() for path in sorted(run.iterdir()) if path.is_file()}


def test_avg_checkpoints_refuses_the_runs_own_checkpoints_and_existing_ones(tmp_path, capsys):
    run = copy_run_dir(tmp_path / "run")
    before = file_bytes(run)
    for output in ("ckpt-2", "ckpt-1", "ckpt-9"):  # latest, older, and a future step
        assert avg_checkpoints.main(["--output_dir", str(run),
                                     "--output_path", str(run / output)]) == 2
        [line] = error_lines(capsys.readouterr().err)
        assert f"--output_path={run / output}" in line
    assert file_bytes(run) == before and not (run / "ckpt-9.index").exists()

    assert avg_checkpoints.main(["--output_dir", str(run)]) == 0  # the default path
    written = file_bytes(run / "averaged")
    assert avg_checkpoints.main(["--output_dir", str(run), "--num_last_checkpoints", "1"]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "a checkpoint is already there (ckpt-avg.data-00000-of-00001, ckpt-avg.index)" \
           in line and "never overwrites" in line
    assert file_bytes(run / "averaged") == written


def test_two_avg_checkpoints_at_once_on_one_output_path_write_it_once(tmp_path, capsys,
                                                                     monkeypatch):
    """Both pass the early check; the write holds OUTPUT_PATH.lock and checks again, so
    the one that comes second is refused in one line and what the first wrote is kept."""
    run = copy_run_dir(tmp_path / "run")
    output = run / "averaged" / "ckpt-avg"
    other = DirectoryLock(output.parent, "ckpt-avg.lock", "t2t-lite-avg-checkpoints",
                          "--output_path").acquire()     # the other one is writing
    assert avg_checkpoints.main(["--output_dir", str(run)]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: {output.parent} is in use by another "
                           f"t2t-lite-avg-checkpoints") and "--output_path" in line
    assert sorted(path.name for path in output.parent.iterdir()) == ["ckpt-avg.lock"]

    real_acquire = DirectoryLock.acquire

    def other_finished_first(lock, wait=False):   # it wrote, then released the lock
        (output.parent / "ckpt-avg.index").write_bytes(b"the other one's")
        return real_acquire(lock, wait)

    other.release()
    monkeypatch.setattr(DirectoryLock, "acquire", other_finished_first)
    assert avg_checkpoints.main(["--output_dir", str(run)]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "a checkpoint is already there (ckpt-avg.index)" in line
    assert (output.parent / "ckpt-avg.index").read_bytes() == b"the other one's"
    assert not list(output.parent.glob("ckpt-avg.data-*"))


def test_avg_checkpoints_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, capsys,
                                                                      monkeypatch):
    run = copy_run_dir(tmp_path / "run")
    before = sorted(path.name for path in run.iterdir())

    def disk_full(self, prefix, options=None):
        part = Path(f"{prefix}_temp") / "part-00000-of-00001.data-00000-of-00001.tempstate1"
        part.parent.mkdir()
        part.write_bytes(b"\0" * 4096)
        raise tf.errors.ResourceExhaustedError(None, None, f"{part}; No space left on device "
                                                           f"[Op:SaveV2]")

    monkeypatch.setattr(tf.train.Checkpoint, "write", disk_full)
    assert avg_checkpoints.main(["--output_dir", str(run)]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert line == (f"error: no space left on device while writing {run}/averaged/ckpt-avg; "
                    f"nothing was left there. Free space on that disk (or give another "
                    f"--output_path) and re-run")
    assert sorted(path.name for path in run.iterdir()) == before   # no averaged/, no _temp


def test_avg_checkpoints_names_its_own_flag_for_a_missing_entry(tmp_path, capsys):
    run = copy_run_dir(tmp_path / "run")
    assert avg_checkpoints.main(["--output_dir", str(run),
                                 "--checkpoints", f"{run}/ckpt-1,{run}/ckpt-99"]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: --checkpoints entry {run}/ckpt-99: no checkpoint there")
    assert "--checkpoint_path" not in line


# A hand-edited run_config.json ----------------------------------------------------------
def test_run_config_with_an_unknown_key_is_one_error_line(tmp_path, capsys):
    run = copy_run_dir(tmp_path / "run")
    path = run / RUN_CONFIG_FILE
    values = json.loads(path.read_text())
    path.write_text(json.dumps({**values, "learning_rate": 0.1}))
    source = tmp_path / "in.txt"
    source.write_text("seven\n", encoding="utf-8")
    assert decode(run, source) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: {path} has unknown key 'learning_rate'; valid keys: "
                           f"problem, model,")

    del values["vocab_size"]
    path.write_text(json.dumps(values))
    assert decode(run, source) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: {path} lacks key 'vocab_size'")


def test_run_config_with_a_badly_typed_hparam_names_the_file(tmp_path, capsys):
    run = copy_run_dir(tmp_path / "run")
    path = run / RUN_CONFIG_FILE
    values = json.loads(path.read_text())
    values["hparams"]["num_heads"] = str(values["hparams"]["num_heads"])
    path.write_text(json.dumps(values))
    source = tmp_path / "in.txt"
    source.write_text("seven\n", encoding="utf-8")
    assert decode(run, source) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line == (f"error: {path}: hparam 'num_heads' must be an integer, got "
                    f"'{values['hparams']['num_heads']}'; restore the file t2t-lite-trainer "
                    f"wrote or start a new --output_dir")


def test_a_checkpoint_that_does_not_fit_the_model_is_one_error_line(tmp_path, capfd):
    run = copy_run_dir(tmp_path / "run")
    path = run / RUN_CONFIG_FILE
    values = json.loads(path.read_text())
    values["hparams"]["hidden_size"] *= 2
    path.write_text(json.dumps(values))
    source = tmp_path / "in.txt"
    source.write_text("seven\n", encoding="utf-8")
    level = tf.get_logger().level
    try:
        assert decode(run, source) == 2
    finally:
        tf.get_logger().setLevel(level)
    err = capfd.readouterr().err
    [line] = error_lines(err)
    assert line.startswith(f"error: {tf.train.latest_checkpoint(str(run))} does not fit the "
                           f"run's model: ")
    assert re.search(r"and name transformer(_\d+)?/embedding/embeddings:0", line)
    assert "Traceback" not in err and "WARNING:tensorflow" not in err
