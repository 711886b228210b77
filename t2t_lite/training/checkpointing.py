"""The trainer's checkpoints, made to survive damaged files, full disks and killed writes.

``RunCheckpoints(checkpoint, manager)`` wraps the run's ``tf.train.CheckpointManager``:

- ``restore()`` resumes from the latest checkpoint the state file lists; when its files
  are truncated, fail their checksum or lack the index, it warns naming it and falls back
  to the newest readable one (every listed checkpoint holds every variable, so a fallback
  overwrites whatever a failed attempt had already restored), and drops the damaged ones
  from the state file (their files stay). When none is readable it refuses (``NoReadableCheckpoint``) rather than silently starting again from step 0.
- ``save(step)`` writes ``ckpt-<step>``; a full disk raises ``CheckpointSaveError`` ("no
  space left on device while saving RUN/ckpt-N; the last good checkpoint is RUN/ckpt-M")
  after removing what the failed save left.

``remove_stale_temp_dirs(directory)`` deletes the ``ckpt-N_temp/`` directories in which
TensorFlow writes a checkpoint before merging it into ``ckpt-N.index`` / ``.data-*``: a
killed or failed save leaves them behind. Call it only while holding the run's lock
(``run_lock.RunLock``), so that no live save is writing into one.

``reconcile_state(directory)``, under the same lock, makes the ``checkpoint`` state file
agree with the ``ckpt-N`` files on disk: a state file that is missing or unreadable while
checkpoints are there is rebuilt from them (with a warning naming the newest), so a lost
state file never restarts a run from step 0; a ``ckpt-N`` newer than every listed one (a
save killed between writing its files and listing them) is removed.
"""
from __future__ import annotations

import collections
import errno
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import List, Optional, Union

import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.runs.loading import CHECKPOINT_DAMAGE_ERRORS, damage_reason

CHECKPOINT_PREFIX = "ckpt"   # CheckpointManager's default: RUN/ckpt-<step>
_TEMP_DIR = re.compile(re.escape(CHECKPOINT_PREFIX) + r"-\d+_temp(_[0-9a-f]+)?")
_STEP_FILE = re.compile(re.escape(CHECKPOINT_PREFIX) + r"-(\d+)\.(index|data-\d+-of-\d+)")
_DISK_FULL = "No space left on device"
STATE_FILE = "checkpoint"   # CheckpointManager's list of the run's checkpoints


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written (the disk is full); the run stops."""


class NoReadableCheckpoint(UserError):
    """Every checkpoint the run directory lists is damaged."""


class RunCheckpoints:
    """Restore-with-fallback and save-with-clear-errors over one ``CheckpointManager``.

    ``last_good`` is the newest checkpoint known readable: the restored one, then each
    one saved by this run.
    """

    def __init__(self, checkpoint: tf.train.Checkpoint, manager: tf.train.CheckpointManager,
                 writes_state: bool = True):
        self.checkpoint = checkpoint
        self.manager = manager
        self.writes_state = writes_state   # False: a reader of another worker's directory
        self.last_good: Optional[str] = None
        # ``tf.train.Checkpoint.restore``'s status for ``last_good`` once restored: values
        # it defers (the data position) until an attribute for them is attached.
        self.load_status = None

    def restore(self) -> Optional[str]:
        """Restores the newest readable checkpoint; returns its prefix, or None when the
        run has none yet. Warns (stderr) naming each damaged one skipped."""
        damaged = []
        for path in self._newest_first():
            try:
                self.load_status = self.checkpoint.restore(path)
            except CHECKPOINT_DAMAGE_ERRORS as error:
                print(f"warning: checkpoint {path} is damaged and cannot be read "
                      f"({damage_reason(error)})", file=sys.stderr, flush=True)
                damaged.append(path)
                continue
            if damaged:
                print(f"warning: resuming from {path}, the newest readable checkpoint, "
                      f"instead of the damaged {', '.join(damaged)}", file=sys.stderr,
                      flush=True)
                if self.writes_state:
                    self._delist(damaged, path)
            self.last_good = path
            return path
        if damaged:
            raise NoReadableCheckpoint(
                f"{self.manager.directory}: no readable checkpoint ({', '.join(damaged)} "
                f"are damaged); to start again from step 0, move them and the "
                f"'checkpoint' state file out of the run directory, or use a new --output_dir")
        return None

    def save(self, step: int) -> str:
        """Writes the checkpoint of ``step``; raises ``CheckpointSaveError`` on a full disk.

        The state file decides what a failed save leaves: when it does not name
        ``ckpt-<step>`` (the disk filled while TensorFlow wrote the checkpoint, or before
        the state file named it) the save's files go; when it does (the disk filled on
        the state file's second rewrite, after older checkpoints were deleted) the
        checkpoint is whole and is the last good one."""
        listed_before = list(self.manager._maybe_delete.items())
        latest_before = self.manager._latest_checkpoint
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            if not is_disk_full(error):
                raise
            target = os.path.join(self.manager.directory, f"{CHECKPOINT_PREFIX}-{step}")
            shutil.rmtree(target + "_temp", ignore_errors=True)
            if step in (listed_steps(self.manager.directory) or []):
                self.last_good = target
            else:
                # CheckpointManager lists the new checkpoint in memory before it writes
                # the state file: undo that as well.
                self.manager._maybe_delete = collections.OrderedDict(listed_before)
                self.manager._latest_checkpoint = latest_before
                remove_checkpoint_files(self.manager.directory, step)
            last = self.last_good or "none: no checkpoint was saved yet"
            raise CheckpointSaveError(
                f"no space left on device while saving {target}; the last good checkpoint "
                f"is {last}. Free space on that disk, then re-run the same command to "
                f"resume from it") from None
        self.last_good = path
        return path

    def _delist(self, damaged: List[str], latest: str) -> None:
        """Drops the damaged checkpoints from the state file, so that no reader of the
        run (``t2t-lite-avg-checkpoints --num_last_checkpoints``) takes them for part of
        the run; their files stay for inspection. ``CheckpointManager`` has no public
        API for this: its list is ``_maybe_delete``, written by ``_record_state``."""
        for path in damaged:
            self.manager._maybe_delete.pop(path, None)
        self.manager._latest_checkpoint = latest
        self.manager._record_state()

    def _newest_first(self) -> List[str]:
        listed = [self.manager.latest_checkpoint, *reversed(self.manager.checkpoints)]
        return list(dict.fromkeys(path for path in listed if path))


def is_disk_full(error: BaseException) -> bool:
    """True for TensorFlow's ``ResourceExhaustedError("...; No space left on device")``
    and for ``OSError(ENOSPC)``."""
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC
    return isinstance(error, tf.errors.ResourceExhaustedError) and _DISK_FULL in str(error)


def remove_stale_temp_dirs(directory: Union[str, Path]) -> List[Path]:
    """Removes the ``ckpt-N_temp`` directories a killed or failed save left in
    ``directory``; prints one line naming them; returns their paths."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = sorted(path for path in directory.iterdir()
                   if path.is_dir() and _TEMP_DIR.fullmatch(path.name))
    for path in stale:
        shutil.rmtree(path)
    if stale:
        print(f"Removed {len(stale)} partial checkpoint write(s) left by an interrupted "
              f"save: {', '.join(path.name for path in stale)}", flush=True)
    return stale


def steps_on_disk(directory: Union[str, Path]) -> List[int]:
    """The steps N of the ``ckpt-N`` checkpoints with files in ``directory``, ascending."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted({int(match.group(1)) for match in map(_STEP_FILE.fullmatch,
                   (path.name for path in directory.iterdir())) if match})


def remove_checkpoint_files(directory: Union[str, Path], step: int) -> None:
    """Deletes the ``.index`` and ``.data-*`` files of ``ckpt-<step>`` in ``directory``."""
    for path in Path(directory).glob(f"{CHECKPOINT_PREFIX}-{step}.*"):
        if _STEP_FILE.fullmatch(path.name):
            path.unlink(missing_ok=True)


def listed_steps(directory: Union[str, Path]) -> Optional[List[int]]:
    """The steps the state file lists, ascending; None when it is missing or unreadable."""
    if not (Path(directory) / STATE_FILE).exists():
        return None
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except Exception:  # garbage that the text-format parser does not even decode
        return None
    if state is None:
        return None
    paths = [*state.all_model_checkpoint_paths, state.model_checkpoint_path]
    steps = {int(match.group(1)) for match in
             (re.fullmatch(re.escape(CHECKPOINT_PREFIX) + r"-(\d+)", os.path.basename(path))
              for path in paths if path) if match}
    return sorted(steps)


def write_state(directory: Union[str, Path], steps: List[int]) -> None:
    """Writes the state file listing ``ckpt-<step>`` of ``steps`` (ascending; the last is
    the latest), as ``CheckpointManager`` writes it, atomically. Each is timestamped
    with its files' modification time: the manager keeps listing (and, beyond
    ``keep_checkpoint_max``, deleting) only timestamped checkpoints."""
    names = [f"{CHECKPOINT_PREFIX}-{step}" for step in steps]
    times = [max((path.stat().st_mtime for path in Path(directory).glob(name + ".*")),
                 default=time.time()) for name in names]
    text = (f'model_checkpoint_path: "{names[-1]}"\n'
            + "".join(f'all_model_checkpoint_paths: "{name}"\n' for name in names)
            + "".join(f"all_model_checkpoint_timestamps: {stamp!r}\n" for stamp in times))
    temp = Path(directory) / (STATE_FILE + ".tmp")
    temp.write_text(text)
    os.replace(temp, Path(directory) / STATE_FILE)


def reconcile_state(directory: Union[str, Path]) -> None:
    """Makes ``directory``'s state file match its ``ckpt-N`` files (see the module
    docstring); prints one warning for a rebuilt state file, one line for removed
    checkpoints. Call only while holding the run's lock."""
    directory = Path(directory)
    on_disk = steps_on_disk(directory)
    if not on_disk:
        return
    listed = listed_steps(directory)
    if not listed or not set(listed) & set(on_disk):
        state = directory / STATE_FILE
        how = "is unreadable" if state.exists() else "is missing"
        prefixes = [str(directory / f"{CHECKPOINT_PREFIX}-{step}") for step in on_disk]
        write_state(directory, on_disk)
        print(f"warning: {state}, the list of the run's checkpoints, {how}; rebuilt it from "
              f"the {len(prefixes)} checkpoint(s) on disk, the newest {prefixes[-1]}",
              file=sys.stderr, flush=True)
        return
    unlisted = [step for step in on_disk if step > listed[-1]]
    for step in unlisted:
        remove_checkpoint_files(directory, step)
    if unlisted:
        names = ", ".join(f"{CHECKPOINT_PREFIX}-{step}" for step in unlisted)
        print(f"Removed {names}: newer than every checkpoint {directory / STATE_FILE} "
              f"lists (a save killed before it was listed, or a damaged checkpoint "
              f"skipped)", flush=True)
