"""t2t-lite-datagen: end to end on the numbers problem, and the bad-input reports."""

import pytest
import tensorflow as tf
from num2words import num2words

from t2t_lite.commands import datagen as datagen_command
from t2t_lite.data.datagen import DROP_EMPTY, DROP_UTF8, generate_problem_data
from t2t_lite.data.problem import VocabSpec, eval_text, get_problem
from t2t_lite.data.raw import RawDataError, RawFile, fetch_raw_files
from t2t_lite.data.records import read_examples
from t2t_lite.problems.translate_multi30k import TranslateEndeMulti30k

import corpus_helpers
from corpus_helpers import read_gz, write_gz


def test_numbers_datagen_command_end_to_end_and_rerun(tmp_path, capsys):
    data_dir = tmp_path / "data"
    assert datagen_command.main(["--problem=translate_ende_numbers",
                                 f"--data_dir={data_dir}"]) == 0
    out = capsys.readouterr().out
    assert "train: 29,040 examples" in out and "dev: 1,000 examples" in out
    assert "vocabulary: 256 tokens" in out
    problem = get_problem("translate_ende_numbers")
    vocab = problem.load_vocab(data_dir)
    train = read_examples(problem.shard_files(data_dir, "train"))
    assert len(train) == 29040  # 20,000 numbers, the short ones repeated
    decode = lambda ids: [t.decode() for t in vocab.detokenize(tf.ragged.constant(ids)).numpy()]
    train_targets = set(decode([t for _, t in train]))
    sources, references = eval_text(problem, data_dir, "test")
    assert len(sources) == 1000
    assert not train_targets & set(references)  # disjoint numbers
    # The records decode to num2words' own text.
    test = read_examples(problem.shard_files(data_dir, "test"))
    pairs = set(zip(sources, references))
    assert set(zip(decode([s for s, _ in test]), decode([t for _, t in test]))) == pairs
    assert (num2words(4567, lang="en"), num2words(4567, lang="de")) == (
        "four thousand, five hundred and sixty-seven", "viertausendfünfhundertsiebenundsechzig")
    # A re-run reuses the complete output and says so.
    assert datagen_command.main(["--problem=translate_ende_numbers",
                                 f"--data_dir={data_dir}"]) == 0
    assert "train: 29,040 examples in 2 shard(s), 0 dropped (reused)" in capsys.readouterr().out
    assert not list(data_dir.glob("*.tmp")) and not list(data_dir.glob("*.unshuffled"))


@pytest.fixture
def mini_multi30k(tmp_path, multi30k_dir):
    """A miniature Multi30k tmp_dir: the real first lines of each required file."""
    return corpus_helpers.mini_multi30k(multi30k_dir, tmp_path / "raw",
                                        {"train": 400, "val": 40, "test_2016_flickr": 40})


def small_multi30k(max_length=256):
    problem = TranslateEndeMulti30k(vocab_spec=VocabSpec(size=400))
    problem.max_length = max_length
    return problem


def test_empty_invalid_utf8_and_long_lines_are_counted_with_first_line(tmp_path, mini_multi30k):
    en = read_gz(mini_multi30k / "train.en.gz", 400)
    de = read_gz(mini_multi30k / "train.de.gz", 400)
    en[2] = b""                      # line 3: empty
    de[4] = b"Ein Hund \xff\xfe."     # line 5: invalid UTF-8
    de[9] = b"   "                   # line 10: blank
    en[20] = b" ".join([b"dog"] * 200)  # line 21: far longer than max_length
    write_gz(mini_multi30k / "train.en.gz", en)
    write_gz(mini_multi30k / "train.de.gz", de)
    summary = generate_problem_data(small_multi30k(max_length=120), tmp_path / "data",
                                    mini_multi30k, download=False)
    train = summary.splits["train"]
    assert train.dropped[DROP_EMPTY].count == 2
    assert train.dropped[DROP_EMPTY].first == "train.en.gz line 3"
    assert train.dropped[DROP_UTF8].count == 1
    assert train.dropped[DROP_UTF8].first == "train.de.gz line 5"
    (long_reason, long_drop), = [(k, v) for k, v in train.dropped.items() if "max_length" in k]
    assert long_drop.first == "train.en.gz line 21" and "120 tokens" in long_reason
    dropped = sum(d.count for d in train.dropped.values())
    assert train.examples + dropped == 400
    report = summary.format()
    assert "invalid UTF-8: 1 (first: train.de.gz line 5)" in report
    assert "test_2017_flickr: skipped (its raw files are absent)" in report


def test_mismatched_line_counts_name_both_files(tmp_path, mini_multi30k):
    write_gz(mini_multi30k / "val.de.gz", read_gz(mini_multi30k / "val.de.gz", 37))
    with pytest.raises(RawDataError) as error:
        generate_problem_data(small_multi30k(), tmp_path / "data", mini_multi30k, download=False)
    message = str(error.value)
    assert "val.en.gz has 40 lines" in message and "val.de.gz has 37 lines" in message


def test_corrupt_gzip_names_the_file(tmp_path, mini_multi30k):
    data = (mini_multi30k / "test_2016_flickr.de.gz").read_bytes()
    (mini_multi30k / "test_2016_flickr.de.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(RawDataError, match=r"test_2016_flickr\.de\.gz: cannot read it .*corrupt"):
        generate_problem_data(small_multi30k(), tmp_path / "data", mini_multi30k, download=False)


def test_missing_raw_files_list_names_and_urls(tmp_path, capsys):
    with pytest.raises(RawDataError) as error:
        generate_problem_data(small_multi30k(), tmp_path / "data", tmp_path / "empty",
                              download=False)
    message = str(error.value)
    for name in ("train.en.gz", "val.de.gz", "test_2016_flickr.en.gz"):
        assert (f"{name}  <-  https://raw.githubusercontent.com/multi30k/dataset/master/"
                f"data/task1/raw/{name}") in message
    assert "test_2018_flickr" not in message  # optional files are not demanded
    # The command prints the same error and exits with status 2.
    code = datagen_command.main(["--problem=translate_ende_multi30k", "--no_download",
                                 f"--data_dir={tmp_path / 'data'}", f"--tmp_dir={tmp_path / 'e'}"])
    assert code == 2 and "missing raw files" in capsys.readouterr().err


def test_unknown_problem_lists_registered_ones(tmp_path, capsys):
    assert datagen_command.main(["--problem=nope", f"--data_dir={tmp_path}"]) == 2
    assert "translate_ende_multi30k" in capsys.readouterr().err


def test_fetch_downloads_missing_files_and_fails_fast_offline(tmp_path):
    source = tmp_path / "upstream.txt"
    source.write_text("hello\n")
    files = (RawFile("a.txt", source.as_uri()),
             RawFile("b.txt", "http://127.0.0.1:9/b.txt"),       # nothing listens: refused
             RawFile("c.txt", "http://127.0.0.1:9/c.txt", optional=True))
    with pytest.raises(RawDataError) as error:
        fetch_raw_files(files, tmp_path / "raw", timeout=2)
    assert (tmp_path / "raw" / "a.txt").read_text() == "hello\n"
    assert "b.txt  <-  http://127.0.0.1:9/b.txt" in str(error.value)
    assert "c.txt" not in str(error.value)
    assert not list((tmp_path / "raw").glob("*.download"))


def test_a_failed_fetch_removes_the_folders_it_made_and_keeps_what_it_fetched(tmp_path):
    missing = (RawFile("b.txt", (tmp_path / "nowhere.txt").as_uri()),)
    with pytest.raises(RawDataError, match="b.txt"):
        fetch_raw_files(missing, tmp_path / "typo" / "multi30k")
    assert not (tmp_path / "typo").exists()          # a mistyped --tmp_dir leaves nothing
    (tmp_path / "mine").mkdir()
    with pytest.raises(RawDataError):
        fetch_raw_files(missing, tmp_path / "mine" / "raw")
    assert (tmp_path / "mine").is_dir() and not (tmp_path / "mine" / "raw").exists()
    (tmp_path / "upstream.txt").write_text("hello\n")
    with pytest.raises(RawDataError):
        fetch_raw_files((RawFile("a.txt", (tmp_path / "upstream.txt").as_uri()),) + missing,
                        tmp_path / "new" / "raw")
    assert (tmp_path / "new" / "raw" / "a.txt").read_text() == "hello\n"


def test_datagen_reuses_only_complete_splits(tmp_path, mini_multi30k):
    data_dir = tmp_path / "data"
    problem = small_multi30k()
    generate_problem_data(problem, data_dir, mini_multi30k, download=False)
    # A lost shard makes its split incomplete: it is regenerated, the others reused.
    (data_dir / "translate_ende_multi30k-dev-00000-of-00001.tfrecord").unlink()
    summary = generate_problem_data(problem, data_dir, mini_multi30k, download=False)
    assert summary.vocab_reused and summary.splits["train"].reused
    assert not summary.splits["dev"].reused and summary.splits["dev"].examples == 40


def test_complete_output_is_reused_offline_without_its_raw_files(tmp_path, mini_multi30k,
                                                                 monkeypatch, capsys):
    """A re-run on complete data reuses it before fetching anything."""
    data_dir = tmp_path / "data"
    problem = small_multi30k()
    first = generate_problem_data(problem, data_dir, mini_multi30k, download=False)
    for path in mini_multi30k.iterdir():
        path.unlink()
    from t2t_lite.data import datagen

    def no_fetch(*args, **kwargs):
        raise AssertionError("raw files fetched for complete output")
    monkeypatch.setattr(datagen, "fetch_raw_files", no_fetch)
    for download in (False, True):
        again = generate_problem_data(problem, data_dir, mini_multi30k, download=download)
        assert again.vocab_reused and all(s.reused for s in again.splits.values())
        assert {split: s.examples for split, s in again.splits.items()} == {
            split: s.examples for split, s in first.splits.items()}


def test_default_tmp_dir_is_data_dir_raw_or_data_dir_holding_the_raw_files(tmp_path):
    from t2t_lite.data.raw import default_tmp_dir
    problem = small_multi30k()
    data_dir = tmp_path / "data"
    assert default_tmp_dir(problem, data_dir) == data_dir / "raw"
    data_dir.mkdir()
    (data_dir / "train.en.gz").write_bytes(b"")   # where the trainer used to fetch them
    assert default_tmp_dir(problem, data_dir) == data_dir
    (data_dir / "raw").mkdir()
    (data_dir / "raw" / "train.en.gz").write_bytes(b"")
    assert default_tmp_dir(problem, data_dir) == data_dir / "raw"
    # A problem that names no raw files (generated, or read from a folder): DATA_DIR/raw.
    assert default_tmp_dir(get_problem("translate_text_files"), data_dir) == data_dir / "raw"


def test_a_skipped_split_whose_raw_files_arrive_is_generated_on_rerun(tmp_path, mini_multi30k):
    data_dir = tmp_path / "data"
    problem = small_multi30k()
    first = generate_problem_data(problem, data_dir, mini_multi30k, download=False)
    assert "test_2017_flickr" in first.skipped_splits
    for lang in ("en", "de"):
        write_gz(mini_multi30k / f"test_2017_flickr.{lang}.gz",
                 read_gz(mini_multi30k / f"val.{lang}.gz", 10))
    again = generate_problem_data(problem, data_dir, mini_multi30k, download=False)
    assert again.splits["train"].reused and not again.splits["test_2017_flickr"].reused
    assert again.splits["test_2017_flickr"].examples == 10
    third = generate_problem_data(problem, data_dir, mini_multi30k, download=False)
    assert all(summary.reused for summary in third.splits.values())
    assert "test_2017_flickr" not in third.skipped_splits


@pytest.mark.slow
def test_trainer_generate_data_and_datagen_share_the_default_tmp_dir(tmp_path, capsys):
    """Without --tmp_dir both look in DATA_DIR/raw."""
    from t2t_lite.commands import trainer as trainer_command
    data_dir, raw = tmp_path / "data", tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    for split, numbers in (("train", range(1, 400)), ("dev", range(400, 430)),
                           ("test", range(430, 460))):
        (raw / f"{split}.src").write_text("".join(num2words(n) + "\n" for n in numbers))
        (raw / f"{split}.tgt").write_text("".join(num2words(n, lang="de") + "\n"
                                                  for n in numbers))
    assert trainer_command.main([
        "--generate_data", "--problem=translate_text_files", "--hparams_set=transformer_tiny",
        f"--data_dir={data_dir}", f"--output_dir={tmp_path / 'run'}", "--train_steps=1",
        "--local_eval_frequency=0", "--eval_steps=1", "--eval_decode_sentences=0",
        "--attention_probes=0"]) == 0
    assert "train: 399 examples" in capsys.readouterr().out
    # datagen, without --tmp_dir, re-reads the same raw files for a split made anew.
    (data_dir / "translate_text_files-test.json").unlink()
    assert datagen_command.main(["--problem=translate_text_files",
                                 f"--data_dir={data_dir}"]) == 0
    out = capsys.readouterr().out
    assert "test: 30 examples in 1 shard(s), 0 dropped\n" in out + "\n"
    assert "train: 399 examples in 4 shard(s), 0 dropped (reused)" in out


def test_a_second_datagen_into_the_same_directory_is_refused_and_writes_nothing(tmp_path):
    from t2t_lite.data.datagen import DATAGEN_LOCK, generate
    from t2t_lite.directory_lock import DirectoryBusy, DirectoryLock
    data = tmp_path / "data"
    with DirectoryLock(data, DATAGEN_LOCK, "t2t-lite-datagen", "--data_dir"):  # the first
        with pytest.raises(DirectoryBusy, match=rf"^{data} is in use by another datagen "
                                                r"\(t2t-lite-datagen, or t2t-lite-trainer "
                                                r"--generate_data\) \(host .*, pid \d+, "
                                                r".*; wait for it to finish or stop it, or "
                                                r"use another --data_dir$"):
            generate("translate_ende_numbers", data)
    assert [path.name for path in data.iterdir()] == [DATAGEN_LOCK]


def test_a_failed_datagen_into_a_new_directory_leaves_nothing(tmp_path):
    from t2t_lite.data.datagen import generate
    from t2t_lite.errors import UserError
    data = tmp_path / "typo" / "data"
    with pytest.raises(UserError, match="missing raw files"):
        generate("translate_ende_multi30k", data, tmp_path / "empty", download=False)
    assert not (tmp_path / "typo").exists()


def test_with_wait_a_second_datagen_waits_for_the_first_and_reuses_its_data(numbers_data,
                                                                             tmp_path):
    """The trainer's workers sharing one --data_dir: one generates, the others wait."""
    import shutil
    import threading
    from t2t_lite.data.datagen import DATAGEN_LOCK, generate
    from t2t_lite.directory_lock import DirectoryLock
    data = tmp_path / "data"
    first = DirectoryLock(data, DATAGEN_LOCK, "t2t-lite-datagen", "--data_dir").acquire()
    results = []
    waiter = threading.Thread(target=lambda: results.append(
        generate("translate_ende_numbers", data, wait=True)))
    waiter.start()
    waiter.join(timeout=1.0)
    assert waiter.is_alive() and not results     # blocked on the first one's lock
    shutil.copytree(numbers_data, data, dirs_exist_ok=True)  # what the first one wrote
    first.release()
    waiter.join(timeout=120)
    assert results and all(split.reused for split in results[0].splits.values())


def test_a_leading_byte_order_mark_is_neither_data_nor_vocabulary(tmp_path):
    """Raw files saved by a Windows editor (UTF-8 with a BOM, plain and gzipped)."""
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    raw.mkdir()
    for split, numbers in (("train", range(1, 200)), ("dev", range(200, 210)),
                           ("test", range(210, 220))):
        (raw / f"{split}.src").write_text("".join(num2words(n) + "\n" for n in numbers),
                                          encoding="utf-8-sig")
        write_gz(raw / f"{split}.tgt.gz", [num2words(n, lang="de").encode("utf-8-sig")
                                           if n == numbers[0] else
                                           num2words(n, lang="de").encode() for n in numbers])
    problem = get_problem("translate_text_files")
    generate_problem_data(problem, data_dir, raw, download=False)
    sources, targets = eval_text(problem, data_dir, "dev")
    assert (sources[0], targets[0]) == ("two hundred", "zweihundert")
    assert not any("\ufeff" in piece for piece in problem.load_vocab(data_dir).pieces())


def test_a_full_disk_is_one_error_line_and_leaves_no_partial_file(tmp_path, capsys,
                                                                  monkeypatch):
    import errno

    from t2t_lite.data import datagen as datagen_module
    real_write_split = datagen_module._write_split

    def fills_the_disk(problem, vocab, data_dir, reader, split, workers):
        if split == "dev":   # train was written whole; dev's first file meets a full disk
            with datagen_module.atomic_path(data_dir / "dev-shard") as tmp:
                tmp.write_bytes(b"\0" * 100)
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_split(problem, vocab, data_dir, reader, split, workers)

    monkeypatch.setattr(datagen_module, "_write_split", fills_the_disk)
    data_dir = tmp_path / "data"
    assert datagen_command.main(["--problem=translate_ende_numbers",
                                 f"--data_dir={data_dir}"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: no space left on device while writing --data_dir="
                           f"{data_dir}; the file being written was removed")
    assert not [path.name for path in data_dir.iterdir() if "dev" in path.name
                or ".tmp" in path.name]


def test_raw_files_changed_since_the_data_was_made_are_named_not_reused(tmp_path, capsys):
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    raw.mkdir()
    for split, numbers in (("train", range(1, 200)), ("dev", range(200, 210)),
                           ("test", range(210, 220))):
        (raw / f"{split}.src").write_text("".join(num2words(n) + "\n" for n in numbers))
        (raw / f"{split}.tgt").write_text("".join(num2words(n, lang="de") + "\n"
                                                  for n in numbers))
    flags = ["--problem=translate_text_files", f"--data_dir={data_dir}", f"--tmp_dir={raw}"]
    assert datagen_command.main(flags) == 0
    assert datagen_command.main(flags) == 0
    assert "(reused)" in capsys.readouterr().out
    with open(raw / "train.src", "a") as handle:
        handle.write("two hundred\n")
    assert datagen_command.main(flags) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: --data_dir={data_dir} holds translate_text_files data made "
                           f"from {(raw / 'train.src').resolve()}, which has changed since")
