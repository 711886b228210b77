"""``t2t_lite.user_paths``: a user's path fails up front as one ``UserError`` naming the
flag, and an output file is replaced whole or not at all."""
import re

import pytest

from t2t_lite.errors import UserError
from t2t_lite.user_paths import AtomicOutput, existing_or_new_dir, new_output_dir, writable_dir


def test_atomic_output_replaces_only_on_commit(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("mine\n")
    with AtomicOutput(target, "--decode_to_file") as output:
        output.write(b"half of the work")
        # leaving without commit: a failure
    assert target.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with AtomicOutput(target, "--decode_to_file") as output:
        output.write(b"new\n")
        output.commit()
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_atomic_output_creates_parents_and_refuses_bad_paths(tmp_path):
    with AtomicOutput(tmp_path / "a" / "b" / "out.txt", "--decode_to_file") as output:
        output.commit()
    assert (tmp_path / "a" / "b" / "out.txt").read_bytes() == b""
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"^--decode_to_file=.*file/out.txt: .*file is a file, not a directory"):
        AtomicOutput(tmp_path / "file" / "out.txt", "--decode_to_file")
    with pytest.raises(UserError, match=r"is a directory; give a file path"):
        AtomicOutput(tmp_path / "a", "--decode_to_file")


def test_atomic_output_writes_a_device_in_place(tmp_path):
    with AtomicOutput("/dev/null", "--decode_to_file") as output:
        output.write(b"x")
        output.commit()
    assert not list(tmp_path.iterdir())


def test_directories(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"^--data_dir=.*file is an existing file"):
        writable_dir(tmp_path / "file", "--data_dir")
    with pytest.raises(UserError, match=r"^--tmp_dir=.*file is an existing file"):
        existing_or_new_dir(tmp_path / "file", "--tmp_dir")
    with pytest.raises(UserError, match=r"^--data_dir=.*file/sub: .*file is a file, not a directory"):
        writable_dir(tmp_path / "file" / "sub", "--data_dir")
    assert writable_dir(tmp_path / "new" / "dir", "--data_dir").is_dir()
    assert not list((tmp_path / "new" / "dir").iterdir())  # the write check left nothing
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "saved_model.pb").write_text("x")
    with pytest.raises(UserError, match=r"^--export_dir=.*full is not empty"):
        new_output_dir(tmp_path / "full", "--export_dir")


def test_the_checks_before_tensorflow_refuse_what_the_real_ones_do_and_create_nothing(tmp_path):
    from t2t_lite.user_paths import creatable_dir, creatable_file, creatable_new_dir
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "saved_model.pb").write_text("x")
    before = sorted(tmp_path.rglob("*"))
    for check in (creatable_dir, creatable_new_dir):
        with pytest.raises(UserError, match=r"^--data_dir=.*file is an existing file"):
            check(tmp_path / "file", "--data_dir")
        with pytest.raises(UserError, match=r"^--data_dir=.*file/sub: .*file is a file, not"):
            check(tmp_path / "file" / "sub", "--data_dir")
        assert check(tmp_path / "new" / "dir", "--data_dir") == tmp_path / "new" / "dir"
    with pytest.raises(UserError, match=r"^--export_dir=.*full is not empty"):
        creatable_new_dir(tmp_path / "full", "--export_dir")
    with pytest.raises(UserError, match=r"^--decode_to_file=.*file/out.txt: .*file is a file"):
        creatable_file(tmp_path / "file" / "out.txt", "--decode_to_file")
    with pytest.raises(UserError, match=r"is a directory; give a file path"):
        creatable_file(tmp_path / "full", "--decode_to_file")
    for path in (tmp_path / "a" / "b" / "out.txt", tmp_path / "file", "/dev/null"):
        creatable_file(path, "--decode_to_file")
    assert sorted(tmp_path.rglob("*")) == before       # nothing made, nothing left


def test_unwritable_places_are_refused_before_anything_is_made(unwritable_dir):
    from t2t_lite.user_paths import creatable_dir, creatable_file
    where = re.escape(str(unwritable_dir))
    with pytest.raises(UserError, match=rf"^--data_dir={where}/new/data: cannot create files "
                                        rf"in {where} \(.*\); give a directory you can write"):
        creatable_dir(unwritable_dir / "new" / "data", "--data_dir")
    with pytest.raises(UserError, match=rf"^--data_dir={where}: cannot create files in it"):
        creatable_dir(unwritable_dir, "--data_dir")
    with pytest.raises(UserError, match=rf"^--decode_to_file={where}/out.de: cannot create"):
        creatable_file(unwritable_dir / "out.de", "--decode_to_file")


def test_readable_file_reads_one_byte_of_a_regular_file_and_leaves_a_pipe_unread(tmp_path):
    import os
    from pathlib import Path
    from t2t_lite.user_paths import readable_file
    (tmp_path / "in.en").write_text("one\n")
    assert readable_file(tmp_path / "in.en", "--decode_from_file") == tmp_path / "in.en"
    with pytest.raises(FileNotFoundError, match=r"^--decode_from_file=.*nope does not exist; give the path of"):
        readable_file(tmp_path / "nope", "--decode_from_file")
    with pytest.raises(UserError, match=r"^--decode_reference=.* is a directory; give a file"):
        readable_file(tmp_path, "--decode_reference")
    if Path("/proc/self/mem").is_file():  # a regular file whose read fails (EIO)
        with pytest.raises(UserError, match=r"^--decode_from_file=/proc/self/mem: .*; give a "
                                            r"file you can read$"):
            readable_file("/proc/self/mem", "--decode_from_file")
    # A named pipe with no writer: opening it to read would block; it is not opened.
    os.mkfifo(tmp_path / "fifo")
    assert readable_file(tmp_path / "fifo", "--decode_from_file") == tmp_path / "fifo"


def test_write_atomically_replaces_whole_files_and_keeps_the_old_one_on_failure(
        tmp_path, monkeypatch):
    import os
    import stat
    from t2t_lite.user_paths import write_atomically
    path = tmp_path / "new" / "gold.txt"
    assert write_atomically(path, "tröpfchen\n") == path
    assert path.read_bytes() == "tröpfchen\n".encode("utf-8")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask   # as open() creates it
    path.chmod(0o640)
    write_atomically(path, b"\x00bytes")
    assert path.read_bytes() == b"\x00bytes" and stat.S_IMODE(path.stat().st_mode) == 0o640

    def full_disk(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, "never")
    assert path.read_bytes() == b"\x00bytes"
    assert sorted(p.name for p in path.parent.iterdir()) == ["gold.txt"]  # no temporary left


def test_atomic_path_renames_only_a_block_that_finishes(tmp_path):
    from t2t_lite.user_paths import atomic_path
    path = tmp_path / "shard-00000"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert path.read_text() == "old" and sorted(tmp_path.iterdir()) == [path]
    with atomic_path(path) as tmp:
        assert tmp.parent == path.parent and tmp != path and tmp.read_text() == ""
        with open(tmp, "w") as handle:
            handle.write("new")
        assert path.read_text() == "old"          # nothing visible before the block ends
    assert path.read_text() == "new" and sorted(tmp_path.iterdir()) == [path]


def test_a_killed_writers_temporary_file_is_removed_by_the_next_writer(tmp_path):
    """SIGKILL gives a writer no chance to remove its temporary file; the next writer of
    the same path removes it, but keeps a live writer's and another host's."""
    import os
    import signal
    import subprocess
    import sys

    from t2t_lite.user_paths import atomic_path

    target = tmp_path / "out.txt"
    target.write_text("mine\n")
    # A real writer, killed while its AtomicOutput is open.
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from t2t_lite.user_paths import AtomicOutput\n"
         f"out = AtomicOutput({str(target)!r}, '--decode_to_file')\n"
         "out.write(b'half')\n"
         "out.file.flush()\n"
         "print('open', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "open"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    left = [p.name for p in tmp_path.iterdir() if p.name != "out.txt"]
    assert len(left) == 1 and f"-{child.pid}." in left[0], left
    host = left[0].split(".")[3].rsplit("-", 1)[0]  # .out.txt.<host>-<pid>.<random>.tmp
    # A live writer (this process) and another host's writer, beside it.
    live = tmp_path / f".out.txt.{host}-{os.getpid()}.abcd1234.tmp"
    live.write_text("live")
    other_host = tmp_path / ".out.txt.elsewhere-1.abcd1234.tmp"
    other_host.write_text("other")
    unrelated = tmp_path / ".other.txt.x-1.abcd1234.tmp"
    unrelated.write_text("unrelated")

    with AtomicOutput(target, "--decode_to_file") as output:
        output.write(b"new\n")
        output.commit()
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out.txt", live.name, other_host.name, unrelated.name])
    # atomic_path (datagen's shards, vocabularies) cleans up the same way.
    shard = tmp_path / "shard"
    stale = tmp_path / f".shard.{host}-{child.pid}.zzzz9999.tmp"
    stale.write_text("stale")
    with atomic_path(shard) as tmp:
        tmp.write_text("x")
    assert shard.read_text() == "x" and not stale.exists()


def test_of_two_writers_of_one_output_the_second_to_finish_is_refused(tmp_path):
    from t2t_lite.errors import UserError
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    first = AtomicOutput(target, "--decode_to_file")
    second = AtomicOutput(target, "--decode_to_file")
    first.write(b"first\n")
    first.commit()
    second.write(b"second\n")
    with pytest.raises(UserError, match=r"^--decode_to_file=.*out.txt was written by another "
                                        r"process while this one ran; this output was "
                                        r"discarded"):
        second.commit()
    assert target.read_text() == "first\n"
    assert [path.name for path in tmp_path.iterdir()] == ["out.txt"]   # no temporary left
