"""The commands' start: TensorFlow imported quietly (``t2t_lite.quiet_tf``), ``--verbosity``,
and the one ``devices:`` line.

| ``--verbosity`` | TF_CPP_MIN_LOG_LEVEL | start-up notices |
| --- | --- | --- |
| 0 (default) | 2: C++ errors only | hidden |
| 1 | 1: C++ warnings and errors | shown |
| 2 | 0: everything | shown |

Without ``--verbosity``, a ``TF_CPP_MIN_LOG_LEVEL`` set in the environment is obeyed as
TensorFlow obeys it, with nothing hidden.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

from t2t_lite.quiet_tf import LOG_LEVEL_VAR, QUIET_LEVEL, import_tensorflow_quietly

VERBOSITY_LEVELS = {0: QUIET_LEVEL, 1: "1", 2: "0"}   # --verbosity -> TF_CPP_MIN_LOG_LEVEL
VERBOSITY_HELP = ("TensorFlow's own logs: 0 hides its start-up notices and C++ info and "
                  "warnings (default; a TF_CPP_MIN_LOG_LEVEL set in the environment is "
                  "obeyed instead), 1 shows its warnings, 2 everything")


def tf_log_level(verbosity: Optional[int]) -> Optional[str]:
    """The ``TF_CPP_MIN_LOG_LEVEL`` for ``--verbosity`` (None: the environment's stands)."""
    if verbosity is None and LOG_LEVEL_VAR in os.environ:
        return None
    return VERBOSITY_LEVELS[verbosity or 0]


def start_tensorflow(verbosity: Optional[int] = None) -> List[str]:
    """Imports TensorFlow and finds its GPUs, quietly unless ``verbosity`` (or the
    environment) asks for its logs; returns the GPU names (``["GPU:0", ...]``, empty on a
    CPU-only machine)."""
    level = tf_log_level(verbosity)
    quiet = level == QUIET_LEVEL
    if level is not None and not quiet:
        os.environ[LOG_LEVEL_VAR] = level
    return [device_name(gpu) for gpu in import_tensorflow_quietly(quiet)]


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
