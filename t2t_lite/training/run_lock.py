"""One trainer per run directory: an exclusive ``flock`` on ``OUTPUT_DIR/trainer.lock``.

Two trainers writing one run directory interleave their checkpoints and overwrite each
other's weights, so the chief takes this lock before it writes anything there and holds
it until the run ends. A second trainer is refused with the holder's host, pid and start
time, which the holder writes into the file. The kernel releases a ``flock`` when its
holder's file descriptor closes, so a trainer killed with ``kill -9`` (or a crashed
machine, for a local disk) never leaves a lock behind: the file stays, the lock does not.

    with RunLock("runs/base"):        # raises RunDirectoryBusy when another trainer holds it
        ...
"""
from __future__ import annotations

import datetime
import fcntl
import os
import socket
from pathlib import Path
from typing import Optional, Union

from t2t_lite.errors import UserError

LOCK_FILE = "trainer.lock"


class RunDirectoryBusy(UserError):
    """Another trainer holds the run directory's lock."""


class RunLock:
    """The exclusive lock on ``directory/trainer.lock`` (created with the directory)."""

    def __init__(self, directory: Union[str, Path]):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self._fd: Optional[int] = None

    def acquire(self) -> "RunLock":
        """Takes the lock without waiting; raises ``RunDirectoryBusy`` naming the holder."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this RunLock")
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirectoryBusy(
                f"{self.directory} is in use by another t2t-lite-trainer "
                f"({self.holder() or 'holder unknown'}; lock file {self.path}); wait for it "
                f"to finish or stop it, or use another --output_dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (describe_this_process() + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Gives the lock back (the file stays; its content is only read while locked)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> str:
        """What the holder wrote: ``host H, pid P, started T`` (empty if unreadable)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def describe_this_process() -> str:
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"host {socket.gethostname()}, pid {os.getpid()}, started {started}"
