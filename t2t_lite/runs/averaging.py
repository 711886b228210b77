"""Checkpoint averaging, as the paper evaluates (the last 5 checkpoints for base, 20 for big).

``average_checkpoints(output_dir, checkpoints, output_path)`` restores each checkpoint into
the run's model (so TensorFlow itself maps checkpoint keys to variables, and a checkpoint
that lacks a model variable is refused), sums every float variable in float64 and writes
the element-wise mean as a checkpoint of the model alone
(``tf.train.Checkpoint(model=model).write(output_path)``), which ``t2t-lite-decoder`` and
``t2t-lite-exporter`` restore with ``--checkpoint_path=output_path``. Non-float variables
(none in the Transformer; e.g. counters) take the newest checkpoint's value. The run's
``checkpoint`` state file is not touched, so training resumes from its own checkpoints.
An existing checkpoint is never overwritten, and ``RUN/ckpt-N`` is refused as an output
path (``check_output_path``): the trainer writes and deletes those names. The write holds
``OUTPUT_PATH.lock`` (a ``DirectoryLock``), so of two averagings to one output path
started at once, one writes and the other is refused.
"""
from __future__ import annotations

import errno
import json
import re
import shutil
from pathlib import Path
from typing import List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from t2t_lite.directory_lock import DirectoryLock
from t2t_lite.errors import UserError
from t2t_lite.runs.config import RunConfig
from t2t_lite.runs.loading import (CheckpointError, build_model, resolve_checkpoint,
                                  restore_model, run_checkpoints)

PathLike = Union[str, Path]


def last_checkpoints(output_dir: PathLike, count: int) -> List[str]:
    """The newest ``count`` checkpoints of a run, oldest first (fewer if it has fewer)."""
    if count < 1:
        raise UserError(f"--num_last_checkpoints must be >= 1, got {count}")
    paths = run_checkpoints(output_dir)
    if not paths:
        raise CheckpointError(f"{output_dir} lists no checkpoints (no 'checkpoint' state "
                              f"file); train first, or pass --checkpoints")
    return paths[-count:]


def average_checkpoints(output_dir: PathLike, checkpoints: Sequence[PathLike],
                        output_path: PathLike) -> str:
    """Writes the mean of ``checkpoints`` (prefixes) of the run in ``output_dir`` to
    ``output_path`` (a prefix) and returns the written prefix."""
    if not checkpoints:
        raise ValueError("no checkpoints to average")
    check_output_path(output_dir, output_path)
    paths = [_resolve(output_dir, path) for path in checkpoints]
    run_config = RunConfig.load(str(output_dir))
    model = build_model(run_config)
    variables = model.variables
    sums: Optional[List[np.ndarray]] = None
    for path in paths:
        restore_model(model, path)
        values = [variable.numpy() for variable in variables]
        if sums is None:
            sums = [value.astype(np.float64) if _is_float(value) else value
                    for value in values]
        else:
            sums = [total + value if _is_float(value) else value
                    for total, value in zip(sums, values)]
    for variable, total in zip(variables, sums):
        if _is_float(total):
            variable.assign((total / len(paths)).astype(variable.dtype))
        else:
            variable.assign(total)
    output_path = Path(output_path)
    lock = DirectoryLock(output_path.parent, output_path.name + ".lock",
                         "t2t-lite-avg-checkpoints", "--output_path")
    try:
        lock.acquire()
        check_output_path(output_dir, output_path)   # again: another one may have written it
        checkpoint = tf.train.Checkpoint(model=model)
        checkpoint.save_counter  # noqa: B018 -- created, so written: restores expect it
        written = checkpoint.write(str(output_path))
        Path(str(output_path) + ".averaged.json").write_text(
            json.dumps({"output_dir": str(output_dir), "checkpoints": paths}, indent=2) + "\n")
    except (tf.errors.OpError, OSError) as error:
        if not _is_disk_full(error):
            raise
        _remove_partial_write(output_path)
        lock.release(discard_unused=True)
        raise AveragingWriteError(f"no space left on device while writing {output_path}; "
                                  f"nothing was left there. Free space on that disk (or "
                                  f"give another --output_path) and re-run") from None
    finally:
        lock.release()
    return written


def _resolve(output_dir: PathLike, path: PathLike) -> str:
    """``resolve_checkpoint``; its error names the ``--checkpoints`` entry."""
    try:
        return resolve_checkpoint(output_dir, path)
    except CheckpointError as error:
        raise type(error)(str(error).replace("--checkpoint_path=",
                                             "--checkpoints entry ")) from None


class AveragingWriteError(RuntimeError):
    """The averaged checkpoint could not be written (the disk is full)."""


def _is_disk_full(error: BaseException) -> bool:
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC
    return isinstance(error, tf.errors.ResourceExhaustedError) and \
        "No space left on device" in str(error)


def _remove_partial_write(output_path: Path) -> None:
    """Deletes what a failed write of ``output_path`` left: its ``_temp`` directories and
    its index, data and ``.averaged.json`` files (the lock removes the directory it made)."""
    parent = output_path.parent
    for path in parent.glob(output_path.name + "*"):
        rest = path.name[len(output_path.name):]
        if rest.startswith("_temp") and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif rest in (".index", ".averaged.json") or rest.startswith(".data-"):
            path.unlink(missing_ok=True)


def check_output_path(output_dir: PathLike, output_path: PathLike) -> None:
    """Raises ``UserError`` when ``output_path`` (a prefix) names an existing checkpoint
    or one of the run's own ``OUTPUT_DIR/ckpt-N`` prefixes (the trainer's sequence: it
    would resume from a model-only checkpoint there, or overwrite or delete it)."""
    output_path = Path(output_path)
    name, parent = output_path.name, output_path.parent
    existing = [path.name for path in (parent.iterdir() if parent.is_dir() else [])
                if path.name == name + ".index" or path.name.startswith(name + ".data-")]
    if existing:
        raise UserError(f"--output_path={output_path}: a checkpoint is already there "
                        f"({', '.join(sorted(existing))}); t2t-lite-avg-checkpoints never "
                        f"overwrites one. Choose another --output_path, or delete it first")
    in_run_dir = output_path.parent.resolve() == Path(output_dir).resolve()
    if in_run_dir and re.fullmatch(r"ckpt-\d+", output_path.name):
        raise UserError(f"--output_path={output_path} is in the run's own checkpoint "
                        f"sequence (OUTPUT_DIR/ckpt-N, written and deleted by the trainer); "
                        f"choose another name, e.g. the default OUTPUT_DIR/averaged/ckpt-avg")


def _is_float(value: np.ndarray) -> bool:
    return np.issubdtype(value.dtype, np.floating)
