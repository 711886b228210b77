"""One trainer per run directory: an exclusive ``flock`` on ``OUTPUT_DIR/trainer.lock``
(``t2t_lite.directory_lock``).

Two trainers writing one run directory interleave their checkpoints and overwrite each
other's weights, so the chief takes this lock before it writes anything there and holds
it until the run ends; a second trainer is refused naming the holder.

    with RunLock("runs/base"):    # raises DirectoryBusy when another trainer holds it
        ...
"""
from __future__ import annotations

from pathlib import Path
from typing import Union

from t2t_lite.directory_lock import DirectoryLock

LOCK_FILE = "trainer.lock"


class RunLock(DirectoryLock):
    """The exclusive lock on ``directory/trainer.lock`` (created with the directory)."""

    def __init__(self, directory: Union[str, Path]):
        super().__init__(directory, LOCK_FILE, "t2t-lite-trainer", "--output_dir")
