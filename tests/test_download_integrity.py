"""Downloads are checked against a recorded size and SHA-256 (or MD5): a corrupted file
is refused with a clear error and deleted, a good one is kept. Files are
"downloaded" from a temporary directory through ``file://`` URLs; no network needed."""
import hashlib
from pathlib import Path

import pytest

import tensorflow_datasets
from t2t_lite.commands import datagen as datagen_command
from t2t_lite.data.raw import RawDataError, RawFile, fetch_raw_files
from t2t_lite.problems import translate_wmt14

WMT14_FILES = [translate_wmt14.EUROPARL, translate_wmt14.COMMONCRAWL,
               translate_wmt14.NEWS_COMMENTARY_V9, translate_wmt14.UN, translate_wmt14.GIGA_FREN,
               translate_wmt14.DEV, translate_wmt14.TEST]


def _tfds_records():
    """``{url path after the host: (size, sha256)}`` from the installed TFDS's records."""
    records = {}
    folder = Path(tensorflow_datasets.__file__).parent / "url_checksums"
    for path in folder.glob("wmt1*_translate.txt"):
        for line in path.read_text().splitlines():
            url, size, sha256 = line.split("\t")[:3]
            records[url.split("://", 1)[1].split("/", 1)[1]] = (int(size), sha256)
    return records


def test_recorded_sizes_and_sha256_are_tensorflow_datasets_records():
    records = _tfds_records()
    checked = 0
    for raw in WMT14_FILES:
        if raw.sha256:
            assert records[raw.url.split("://", 1)[1].split("/", 1)[1]] == (raw.size, raw.sha256)
            checked += 1
    assert checked == 6  # every training archive and the dev set; test-full has no TFDS record


def test_wmt14_files_come_over_https_and_test_full_has_its_md5():
    assert all(raw.url.startswith("https://") for raw in WMT14_FILES)
    assert translate_wmt14.TEST.md5 == "a8cd784e006feb32ac6f3d9ec7eb389a"  # sacrebleu's


@pytest.fixture
def served(tmp_path):
    """A "server" directory holding an archive, and a RawFile recording its facts."""
    server = tmp_path / "server"
    server.mkdir()
    data = bytes(range(256)) * 4000
    (server / "corpus.tgz").write_bytes(data)
    raw = RawFile("corpus.tgz", (server / "corpus.tgz").as_uri(), size=len(data),
                  sha256=hashlib.sha256(data).hexdigest())
    return server / "corpus.tgz", raw


def test_good_download_is_accepted(tmp_path, served):
    source, raw = served
    found = fetch_raw_files([raw], tmp_path / "raw")
    assert found["corpus.tgz"].read_bytes() == source.read_bytes()


@pytest.mark.parametrize("corrupt, message", [
    (lambda data: data[:1000] + b"X" + data[1001:], "SHA-256 "),   # same size, one byte off
    (lambda data: data[: len(data) // 2], "bytes instead of 1,024,000"),  # truncated
])
def test_corrupted_download_is_refused_and_deleted(tmp_path, served, corrupt, message):
    source, raw = served
    source.write_bytes(corrupt(source.read_bytes()))
    with pytest.raises(RawDataError) as error:
        fetch_raw_files([raw], tmp_path / "raw")
    assert message in str(error.value) and "is not the expected file" in str(error.value)
    assert raw.url in str(error.value)
    assert list((tmp_path / "raw").iterdir()) == []  # nothing left to be reused


def test_md5_only_record_is_checked(tmp_path, served):
    source, raw = served
    good = RawFile(raw.name, raw.url, md5=hashlib.md5(source.read_bytes()).hexdigest())
    assert fetch_raw_files([good], tmp_path / "a")["corpus.tgz"].exists()
    bad = RawFile(raw.name, raw.url, md5="0" * 32)
    with pytest.raises(RawDataError, match="MD5 "):
        fetch_raw_files([bad], tmp_path / "b")
    assert not (tmp_path / "b" / "corpus.tgz").exists()


def test_datagen_command_refuses_a_corrupted_wmt14_archive(tmp_path, served, monkeypatch,
                                                           capsys):
    source, raw = served
    files = tuple(RawFile(f.name, raw.url, size=raw.size, sha256=raw.sha256)
                  for f in translate_wmt14.TranslateEndeWmt14().raw_files())
    monkeypatch.setattr(translate_wmt14.Wmt14Problem, "raw_files", lambda self: files)
    source.write_bytes(source.read_bytes()[:-1] + b"\0")
    status = datagen_command.main(["--problem=translate_ende_wmt14",
                                   f"--data_dir={tmp_path / 'data'}"])
    err = capsys.readouterr().err
    assert status == 2
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        err.strip().splitlines()[-1]]
    assert "is not the expected file: SHA-256" in err
    assert not list((tmp_path / "data" / "raw").iterdir())
