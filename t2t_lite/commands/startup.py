"""A quiet start: TensorFlow imported without its start-up noise, and one line naming the
devices used.

On import and on first looking for GPUs, TensorFlow's C++ runtime prints notices that a
new user reads as failures: ``cuda_platform.cc ... failed call to cuInit: INTERNAL: CUDA
error`` on every machine without a GPU, ``cudart_stub.cc ... Could not find cuda
drivers``, the oneDNN and ``cpu_feature_guard`` notices, absl's ``WARNING: All log
messages before absl::InitializeLog() is called are written to STDERR``. Some are printed
before ``TF_CPP_MIN_LOG_LEVEL`` applies, so ``start_tensorflow`` both sets that level
before the import and points file descriptor 2 at a temporary file while TensorFlow is
imported and its GPUs listed; what was written there is then printed again, less the
lines ``is_noise`` recognises. A Python traceback, a warning or anything else not in
that list still reaches stderr, as do every later C++ error and our own ``error:`` lines.

``--verbosity`` (every command but ``t2t-lite-evalb``) chooses:

| ``--verbosity`` | TF_CPP_MIN_LOG_LEVEL | start-up notices |
| --- | --- | --- |
| 0 (default) | 2: C++ errors only | hidden |
| 1 | 1: C++ warnings and errors | shown |
| 2 | 0: everything | shown |

Without ``--verbosity``, a ``TF_CPP_MIN_LOG_LEVEL`` set in the environment is obeyed as
TensorFlow obeys it, with nothing hidden.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Iterator, List, Optional, Sequence

LOG_LEVEL_VAR = "TF_CPP_MIN_LOG_LEVEL"
VERBOSITY_LEVELS = {0: "2", 1: "1", 2: "0"}   # --verbosity -> TF_CPP_MIN_LOG_LEVEL
VERBOSITY_HELP = ("TensorFlow's own logs: 0 hides its start-up notices and C++ info and "
                  "warnings (default; a TF_CPP_MIN_LOG_LEVEL set in the environment is "
                  "obeyed instead), 1 shows its warnings, 2 everything")

# C++ log lines ("I0000 00:00:1795408453.422501   15479 cudart_stub.cc:31] ...") of the
# info and warning levels, and the start-up errors of a machine without (usable) CUDA.
_GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ (\S+):\d+\] (.*)$")
_NOISY_ERRORS = ("cuda_platform.cc", "cuda_executor.cc", "cuda_diagnostics.cc",
                 "cuda_dnn.cc", "cuda_fft.cc", "cuda_blas.cc", "cudart_stub.cc")
_NOISY_LINES = ("WARNING: All log messages before absl::InitializeLog() is called",
                "To enable the following instructions:")


def is_noise(line: str) -> bool:
    """A start-up line of TensorFlow's C++ runtime that is no failure of the user's."""
    line = line.rstrip("\r\n")
    if line.startswith(_NOISY_LINES):
        return True
    match = _GLOG.match(line)
    if match is None:
        return False
    level, source, _ = match.groups()
    return level in "IW" or (level == "E" and source in _NOISY_ERRORS)


def tf_log_level(verbosity: Optional[int]) -> Optional[str]:
    """The ``TF_CPP_MIN_LOG_LEVEL`` for ``--verbosity`` (None: the environment's stands)."""
    if verbosity is None and LOG_LEVEL_VAR in os.environ:
        return None
    return VERBOSITY_LEVELS[verbosity or 0]


@contextlib.contextmanager
def filtered_stderr(enabled: bool = True) -> Iterator[None]:
    """While inside, file descriptor 2 goes to a temporary file; on leaving (also by an
    exception) it is restored and the captured lines are printed again, less noise."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", "replace")
            kept = "".join(line for line in text.splitlines(True) if not is_noise(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


def start_tensorflow(verbosity: Optional[int] = None) -> List[str]:
    """Imports TensorFlow and finds its GPUs, quietly unless ``verbosity`` (or the
    environment) asks for its logs; returns the GPU names (``["GPU:0", ...]``, empty on a
    CPU-only machine). In a process that imported TensorFlow already, only lists them."""
    level = tf_log_level(verbosity)
    quiet = level == VERBOSITY_LEVELS[0] and "tensorflow" not in sys.modules
    if level is not None and "tensorflow" not in sys.modules:
        os.environ[LOG_LEVEL_VAR] = level
    with filtered_stderr(quiet):
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
    return [device_name(gpu.name) for gpu in gpus]


def device_name(name: str) -> str:
    """``"/physical_device:GPU:0"`` or ``"/job:worker/.../device:GPU:0"`` -> ``"GPU:0"``."""
    return ":".join(name.rsplit(":", 2)[-2:]).rsplit("/", 1)[-1].replace("device:", "")


def devices_line(devices: Sequence[str]) -> str:
    """``devices: CPU:0``, ``devices: GPU:0``, ``devices: 2 GPUs (GPU:0, GPU:1)``."""
    names = [device_name(device) for device in devices] or ["CPU:0"]
    if len(names) == 1:
        return f"devices: {names[0]}"
    kind = names[0].split(":")[0]
    return f"devices: {len(names)} {kind}s ({', '.join(names)})"
