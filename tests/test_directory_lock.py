"""t2t_lite.directory_lock: a failed first writer leaves no directory behind, and a
process that waited on a lock whose directory was discarded locks the file that is
there now, so that two processes can never both hold a directory."""
import threading

import pytest

from t2t_lite.directory_lock import DirectoryBusy, DirectoryLock


def _lock(directory):
    return DirectoryLock(directory, "writer.lock", "t2t-lite-test", "--dir")


def test_discard_unused_removes_only_a_directory_it_made_and_left_empty(tmp_path):
    made = tmp_path / "typo" / "data"
    _lock(made).acquire().release(discard_unused=True)
    assert not (tmp_path / "typo").exists()

    existing = tmp_path / "existing"
    existing.mkdir()
    _lock(existing).acquire().release(discard_unused=True)
    assert [path.name for path in existing.iterdir()] == ["writer.lock"]

    written = tmp_path / "written"
    lock = _lock(written).acquire()
    (written / "shard").write_text("data")
    lock.release(discard_unused=True)
    assert sorted(path.name for path in written.iterdir()) == ["shard", "writer.lock"]


def test_a_waiter_on_a_discarded_lock_takes_the_current_one(tmp_path):
    directory = tmp_path / "data"
    first = _lock(directory).acquire()
    waiter = _lock(directory)
    thread = threading.Thread(target=waiter.acquire, kwargs={"wait": True})
    thread.start()
    thread.join(timeout=1.0)
    assert thread.is_alive()                       # blocked on the first one's lock
    first.release(discard_unused=True)             # the first failed: directory removed
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert (directory / "writer.lock").exists()    # the waiter locked a file that is there
    with pytest.raises(DirectoryBusy):
        _lock(directory).acquire()                 # so a third process is refused
    waiter.release()
