"""One writer per directory: an exclusive ``flock`` on a lock file inside it.

Two processes writing one directory interleave their files (two trainers' checkpoints,
two datagens' shards), so the writer takes this lock before it writes anything there
and holds it until it is done. A second one is refused with the holder's host, pid and
start time, which the holder writes into the file. The kernel releases a ``flock`` when
its holder's file descriptor closes, so a process killed with ``kill -9`` (or a crashed
machine, for a local disk) never leaves a lock behind: the file stays, the lock does not.
A writer that fails before writing anything can discard the directory the lock made
(``release(discard_unused=True)``); whoever was waiting then locks the file that is
there now, never the removed one.

    with DirectoryLock("data", "datagen.lock", "t2t-lite-datagen", "--data_dir"):
        ...                       # raises DirectoryBusy when another process holds it

``t2t_lite.training.run_lock.RunLock`` is the trainer's (``OUTPUT_DIR/trainer.lock``).
"""
from __future__ import annotations

import datetime
import fcntl
import os
import socket
from pathlib import Path
from typing import Optional, Union

from t2t_lite.errors import UserError


class DirectoryBusy(UserError):
    """Another process holds the directory's lock."""


class DirectoryLock:
    """The exclusive lock on ``directory/lock_file`` (created with the directory), taken
    for ``command``, whose ``flag`` named the directory (both appear in the refusal)."""

    def __init__(self, directory: Union[str, Path], lock_file: str, command: str, flag: str):
        self.directory = Path(directory)
        self.path = self.directory / lock_file
        self.command, self.flag = command, flag
        self._fd: Optional[int] = None
        self._made: Optional[Path] = None   # the outermost directory acquire made

    def acquire(self, wait: bool = False) -> "DirectoryLock":
        """Takes the lock; raises ``DirectoryBusy`` naming the holder when another process
        holds it, or with ``wait`` blocks until that one releases it (or dies)."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this lock")
        while True:
            self._made = _outermost_missing(self.directory)
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                raise DirectoryBusy(
                    f"{self.directory} is in use by another {self.command} "
                    f"({self.holder() or 'holder unknown'}; lock file {self.path}); wait "
                    f"for it to finish or stop it, or use another {self.flag}") from None
            if _is_current_file(fd, self.path):
                break
            os.close(fd)   # the holder waited for removed the file (release(discard_unused))
        os.ftruncate(fd, 0)
        os.pwrite(fd, (describe_this_process() + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self, discard_unused: bool = False) -> None:
        """Gives the lock back (the file stays; its content is only read while locked).
        With ``discard_unused``, a directory that ``acquire`` made and that holds nothing
        but the lock file (the holder failed before writing) is removed with the file and
        the parents ``acquire`` made for it, so a mistyped path leaves nothing behind."""
        if self._fd is None:
            return
        if (discard_unused and self._made is not None
                and [entry.name for entry in self.directory.iterdir()] == [self.path.name]):
            self.path.unlink()
            for directory in (self.directory, *self.directory.parents):
                directory.rmdir()
                if directory == self._made:
                    break
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def holder(self) -> str:
        """What the holder wrote: ``host H, pid P, started T`` (empty if unreadable)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def __enter__(self) -> "DirectoryLock":
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def _outermost_missing(directory: Path) -> Optional[Path]:
    """The outermost of ``directory`` and its parents that does not exist (None: it does)."""
    if directory.exists():
        return None
    while not directory.parent.exists():
        directory = directory.parent
    return directory


def _is_current_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (not one unlinked since it was opened)."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def describe_this_process() -> str:
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"host {socket.gethostname()}, pid {os.getpid()}, started {started}"
