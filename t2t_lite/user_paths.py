"""Paths the user names on the command line: checked up front, OS errors made user errors.

Every function takes the flag that named the path (``"--data_dir"``) so that a failure
is one ``UserError`` line naming the flag, the path and the fix, raised before any long
work starts. Only the ``OSError``s of the path the user gave are converted here; an
``OSError`` anywhere else is a bug and keeps its traceback.

* ``writable_dir(path, flag)``: creates the directory (and its parents) when missing and
  checks that a file can be created in it.
* ``existing_or_new_dir(path, flag)``: a directory that is read: not a file (nor
  under one), not created.
* ``new_output_dir(path, flag)``: the same for a directory that must be new or empty.
* ``AtomicOutput(path, flag)``: opens a temporary file beside ``path`` at once (so an
  unwritable path fails before the work) and renames it onto ``path`` on ``commit``; a
  failure before that removes the temporary file and leaves ``path`` untouched. The
  temporary file's name carries its writer's host and pid, so the temporary files of
  writers that were killed (SIGKILL gives no chance to clean up) are removed by the
  next writer of the same path.
* ``creatable_dir``, ``creatable_new_dir``, ``creatable_file`` and ``readable_file``:
  the same checks that create nothing, which the commands run before TensorFlow starts
  (a wrong path is one error line within a second, not after TensorFlow's start-up); the
  functions above still run where the path is used.

``atomic_path(path)`` is the same write-then-rename for files the library writes itself
(TFRecord shards, datagen's text files), and ``write_atomically(path, data)`` writes a
whole file held in memory through it (vocabularies, gold trees, EVALB files, datagen
statistics); their ``OSError``s stay the caller's to explain.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Tuple, Union

from t2t_lite.errors import UserError


def path_error(flag: str, path: Union[str, Path], error: OSError, fix: str = "") -> UserError:
    """A ``UserError`` for ``error`` raised while using ``flag=path``."""
    reason = error.strerror or str(error)
    where = f" ({error.filename})" if error.filename and str(error.filename) != str(path) else ""
    return UserError(f"{flag}={path}: {reason}{where}" + (f"; {fix}" if fix else ""))


def _refuse_file_in_the_way(path: Path, flag: str) -> None:
    """A directory path that is an existing file, or lies under one (``notes.txt/out``),
    is a user error."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag}={path} is an existing file, not a directory; "
                        f"give a directory path")
    _refuse_parent_file(path, flag)


def _refuse_parent_file(path: Path, flag: str) -> None:
    """A parent of ``path`` that is a regular file (``notes.txt/out``) is a user error."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{flag}={path}: {parent} is a file, not a directory; "
                                f"give a path under a directory")
            return


_WRITABLE_DIR_FIX = "give a directory you can write to"


def _check_files_can_be_created(directory: Path, flag: str, path: Path, fix: str) -> None:
    """Creates and at once removes an unnamed file in existing ``directory``; a failure
    is a ``UserError`` naming ``flag=path`` (``directory`` is ``path`` or a parent)."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".t2t_lite_write_check"):
            pass
    except OSError as error:
        where = "it" if directory == path else str(directory)
        raise UserError(f"{flag}={path}: cannot create files in {where} "
                        f"({error.strerror or error}); {fix}") from None


def _nearest_existing(path: Path) -> Path:
    """``path`` if it exists, else its nearest parent that does."""
    return next((candidate for candidate in (path, *path.parents) if candidate.exists()),
                Path("."))


def writable_dir(path: Union[str, Path], flag: str) -> Path:
    """Creates directory ``path`` if needed and checks that files can be written in it.

    Raises ``UserError`` naming ``flag`` when it is an existing file, lies under a file,
    or cannot be created or written (permission denied, read-only file system).
    """
    path = Path(path)
    _refuse_file_in_the_way(path, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise path_error(flag, path, error, _WRITABLE_DIR_FIX) from None
    _check_files_can_be_created(path, flag, path, _WRITABLE_DIR_FIX)
    return path


def creatable_dir(path: Union[str, Path], flag: str) -> Path:
    """``writable_dir``'s checks, creating nothing: ``path`` is no file nor under one, and
    files can be created in it or, while it does not exist, in its nearest existing
    parent (where ``writable_dir`` will create it)."""
    path = Path(path)
    _refuse_file_in_the_way(path, flag)
    _check_files_can_be_created(_nearest_existing(path), flag, path, _WRITABLE_DIR_FIX)
    return path


def existing_or_new_dir(path: Union[str, Path], flag: str) -> Path:
    """Checks that ``path`` is not a file (nor under one) and, when it exists, that it can
    be looked at; it is not created.

    For directories that are read (raw corpora put there by hand may be read-only), so
    writing is not checked."""
    path = Path(path)
    _refuse_file_in_the_way(path, flag)
    try:
        path.stat()
    except FileNotFoundError:
        pass  # reported by whoever needs what should be in it
    except OSError as error:
        raise path_error(flag, path, error, "give a directory path") from None
    return path


def _refuse_non_empty_dir(path: Path, flag: str) -> None:
    if path.is_dir() and any(path.iterdir()):
        raise UserError(f"{flag}={path} is not empty; choose a new directory")


def new_output_dir(path: Union[str, Path], flag: str) -> Path:
    """``writable_dir`` for a directory that must be new or empty (it is filled later)."""
    path = Path(path)
    _refuse_non_empty_dir(path, flag)
    return writable_dir(path, flag)


def creatable_new_dir(path: Union[str, Path], flag: str) -> Path:
    """``new_output_dir``'s checks, creating nothing (see ``creatable_dir``)."""
    path = Path(path)
    _refuse_non_empty_dir(path, flag)
    return creatable_dir(path, flag)


def _refuse_directory_or_parent_file(path: Path, flag: str) -> None:
    """An output file path that is a directory, or lies under a file, is a user error."""
    if path.is_dir():
        raise UserError(f"{flag}={path} is a directory; give a file path")
    _refuse_parent_file(path, flag)


def creatable_file(path: Union[str, Path], flag: str) -> Path:
    """``AtomicOutput``'s checks, creating nothing: ``path`` is no directory, no parent of
    it is a file, and a file can be created beside it (in its nearest existing parent).
    A ``path`` that exists but is no regular file (``/dev/stdout``) is written in place
    and only checked when opened."""
    path = Path(path)
    _refuse_directory_or_parent_file(path, flag)
    if path.is_file() or not path.exists():
        _check_files_can_be_created(_nearest_existing(path.parent), flag, path,
                                    "give a file path you can write to")
    return path


def readable_file(path: Union[str, Path], flag: str) -> Path:
    """Checks that file ``path`` exists and that reading it works (the first byte of a
    regular file is read; a pipe such as ``/dev/stdin`` or ``<(zcat f.gz)`` is left
    unread): a missing file raises ``FileNotFoundError``, a directory or a read that fails
    (EIO, permission denied) a ``UserError``, each naming ``flag``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{flag}={path} does not exist; give the path of an "
                                f"existing file")
    if path.is_dir():
        raise UserError(f"{flag}={path} is a directory; give a file")
    if not path.is_file():
        return path
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as error:
        raise path_error(flag, path, error, "give a file you can read") from None
    return path


class AtomicOutput:
    """A binary temporary file beside ``path``, renamed onto it by ``commit``.

    Opening it creates the parent directories and the temporary file, so an unwritable
    ``path`` raises ``UserError`` before any work is done; ``discard`` (or leaving a
    ``with`` block without ``commit``) removes the temporary file, so an existing
    ``path`` is never truncated or lost. A ``path`` that exists but is no regular file
    (``/dev/stdout``, a named pipe) is written in place. When another writer replaced or
    created ``path`` after this one was opened, ``commit`` refuses (``UserError``) and
    discards this output rather than silently replacing the other's.
    """

    def __init__(self, path: Union[str, Path], flag: str):
        self.path, self.flag = Path(path), flag
        _refuse_directory_or_parent_file(self.path, flag)
        self.direct = self.path.exists() and not self.path.is_file()
        if self.direct:  # /dev/stdout, a FIFO: written in place, nothing to rename
            try:
                self.file = open(self.path, "wb")
            except OSError as error:
                raise path_error(flag, self.path, error) from None
            self.tmp = None
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = temporary_file_beside(self.path)
        except OSError as error:
            raise path_error(flag, self.path, error, "give a file path you can write to") from None
        self.tmp: Optional[Path] = tmp
        self.file = os.fdopen(fd, "wb")
        self._found = _identity(self.path)

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as error:  # disk full, quota: the user's file system
            self.discard()
            raise path_error(self.flag, self.path, error) from None

    def commit(self) -> Path:
        """Closes the temporary file and renames it onto ``path``."""
        if self.direct:
            self.file.close()
            return self.path
        if _identity(self.path) != self._found:
            self.discard()
            raise UserError(f"{self.flag}={self.path} was written by another process while "
                            f"this one ran; this output was discarded so as not to replace "
                            f"that one (give each writer its own file)")
        try:
            self.file.close()
            _replace(self.tmp, self.path)
        except OSError as error:
            self.discard()
            raise path_error(self.flag, self.path, error) from None
        self.tmp = None
        return self.path

    def discard(self) -> None:
        """Removes the temporary file; ``path`` is left as it was."""
        self.file.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
            self.tmp = None

    def __enter__(self) -> "AtomicOutput":
        return self

    def __exit__(self, *exc) -> None:
        if self.tmp is not None:
            self.discard()


def _identity(path: Path) -> Optional[Tuple[int, int, int, int]]:
    """(device, inode, size, mtime) of ``path``, None when it does not exist."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _host() -> str:
    """This machine's name as a temporary file's name carries it (no dots): it keeps a
    shared file system's writers on other machines apart (their pids mean nothing here)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"


def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: alive, another user's
        return False
    return False


def remove_dead_writers_temporaries(path: Union[str, Path]) -> list:
    """Removes the temporary files beside ``path`` that writers on this host left when
    they were killed (SIGKILL, OOM: no chance to clean up), found by the ``<host>-<pid>``
    in their names; a live writer's file is kept, as is any other host's. Returns the
    removed paths. Errors are ignored: a file another cleaner removed first, or a
    directory that cannot be listed, are no reason to stop the work."""
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.{_host()}-") + r"(\d+)\.[^.]+\.tmp")
    removed = []
    try:
        candidates = list(path.parent.iterdir())
    except OSError:
        return removed
    for candidate in candidates:
        match = pattern.fullmatch(candidate.name)
        if match and _process_is_gone(int(match.group(1))):
            try:
                candidate.unlink()
                removed.append(candidate)
            except OSError:
                pass
    return removed


def temporary_file_beside(path: Path) -> Tuple[int, Path]:
    """Creates ``.<name>.<host>-<pid>.<random>.tmp`` beside ``path`` (mode 0600, open
    file descriptor returned), after removing those that killed writers of the same
    ``path`` left there (``remove_dead_writers_temporaries``)."""
    remove_dead_writers_temporaries(path)
    prefix = f".{path.name}.{_host()}-{os.getpid()}."
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    return fd, Path(name)


def _replace(tmp: Path, path: Path) -> None:
    """Renames ``tmp`` (a ``mkstemp`` file, mode 0600) onto ``path``, giving it the mode of
    the file it replaces, or that of a new file (0666 less the umask)."""
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    else:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: Union[str, Path]) -> Iterator[Path]:
    """``with atomic_path(path) as tmp:`` write ``tmp`` (any writer: ``open``, a
    ``TFRecordWriter``); leaving the block renames it onto ``path``, so a reader, a crash
    or a SIGKILL sees the old file or the whole new one, never a part. ``tmp`` is a unique
    empty file beside ``path`` (concurrent writers never share one); missing parent
    directories are created. An exception in the block removes ``tmp``, leaves ``path``
    as it was and propagates, as does an ``OSError`` of the rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temporary_file_beside(path)
    os.close(fd)
    try:
        yield tmp
        _replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(path: Union[str, Path], data: Union[bytes, str]) -> Path:
    """Writes ``data`` (``str`` as UTF-8) as the whole content of ``path`` through
    ``atomic_path``. Returns ``path``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)
