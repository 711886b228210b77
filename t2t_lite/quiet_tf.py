"""TensorFlow imported without its start-up noise (the commands' quiet start).

On import and on first looking for GPUs, TensorFlow's C++ runtime prints notices that a
new user reads as failures: ``cuda_platform.cc ... failed call to cuInit: INTERNAL: CUDA
error`` on every machine without a GPU, ``cudart_stub.cc ... Could not find cuda
drivers``, the oneDNN and ``cpu_feature_guard`` notices, absl's ``WARNING: All log
messages before absl::InitializeLog() is called are written to STDERR``. Some are printed
before ``TF_CPP_MIN_LOG_LEVEL`` applies, so ``import_tensorflow_quietly`` both sets that
level (2: C++ errors only) before the import and points file descriptor 2 at a pipe
while TensorFlow is imported and its GPUs listed; what is written there is passed on to
stderr line by line, less the lines ``is_noise`` recognises. A Python traceback, a warning or
anything else not in that list still reaches stderr, as do every later C++ error and our
own ``error:`` lines.

A process that asked for quiet sets ``QUIET_VAR`` in its environment, so the processes it
spawns (datagen's encoding workers) start quietly too (``quiet_requested``).
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import Iterator, List

LOG_LEVEL_VAR = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = "2"            # C++ errors only
QUIET_VAR = "T2T_LITE_QUIET_TENSORFLOW"

# C++ log lines ("I0000 00:00:1795408453.422501   15479 cudart_stub.cc:31] ...") of the
# info and warning levels, and the start-up errors of a machine without (usable) CUDA.
_GLOG = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ (\S+):\d+\] (.*)$")
_NOISY_ERRORS = ("cuda_platform.cc", "cuda_executor.cc", "cuda_diagnostics.cc",
                 "cuda_dnn.cc", "cuda_fft.cc", "cuda_blas.cc", "cudart_stub.cc")
_NOISY_LINES = ("WARNING: All log messages before absl::InitializeLog() is called",
                "To enable the following instructions:")
_SENTENCEPIECE_INFO = re.compile(r"^\S+\.cc\(\d+\) LOG\(INFO\) ")


def is_noise(line: str) -> bool:
    """A start-up line of TensorFlow's (or SentencePiece's) C++ runtime that is no failure
    of the user's."""
    line = line.rstrip("\r\n")
    if line.startswith(_NOISY_LINES) or _SENTENCEPIECE_INFO.match(line):
        return True
    match = _GLOG.match(line)
    if match is None:
        return False
    level, source, _ = match.groups()
    return level in "IW" or (level == "E" and source in _NOISY_ERRORS)


@contextlib.contextmanager
def filtered_stderr(enabled: bool = True) -> Iterator[None]:
    """While inside, file descriptor 2 is a pipe whose lines a thread passes on to the real
    stderr as they come, less ``is_noise`` lines; on leaving (also by an exception) fd 2
    is restored. Lines are passed on at once, so what a crashing import (a C++ abort)
    printed before dying is still seen."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    forwarder = threading.Thread(target=_forward_lines, args=(read_end, saved), daemon=True)
    forwarder.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the forwarder sees its end
        forwarder.join()
        os.close(read_end)
        os.close(saved)


def _forward_lines(read_end: int, target: int) -> None:
    """Copies the lines read from ``read_end`` to ``target``, less noise, until EOF."""
    pending = b""
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        kept = b"".join(line + b"\n" for line in lines
                        if not is_noise(line.decode("utf-8", "replace")))
        if kept:
            os.write(target, kept)
    if pending and not is_noise(pending.decode("utf-8", "replace")):
        os.write(target, pending)


def import_tensorflow_quietly(quiet: bool = True) -> List[str]:
    """Imports TensorFlow and lists its GPUs (``["/physical_device:GPU:0", ...]``), with
    the start-up noise filtered when ``quiet`` (then ``TF_CPP_MIN_LOG_LEVEL`` is set to 2
    and ``QUIET_VAR`` marks the environment for child processes). In a process that
    imported TensorFlow already, only lists them."""
    quiet = quiet and "tensorflow" not in sys.modules
    if quiet:
        os.environ[LOG_LEVEL_VAR] = QUIET_LEVEL
        os.environ[QUIET_VAR] = "1"
    with filtered_stderr(quiet):
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
    return [gpu.name for gpu in gpus]


def quiet_requested() -> bool:
    """Whether this process, or the parent that spawned it, started quietly: then other
    C++ start-up notices are filtered too (SentencePiece's, on loading a model)."""
    return os.environ.get(QUIET_VAR) == "1"
