"""WMT14 problems read miniature archives in the official layout end to end.

The archives are built here with the official archive and member names, from real lines
of the shared data: Multi30k lines stand in for the training corpora, WMT SGML files
(newstest2015 EN-RU, ``<seg id=..>``) for newstest2013/2014 -- the reading code only
cares about the layout, not the language.
"""
import gzip
import io
import tarfile
from pathlib import Path

import pytest

from t2t_lite.data.datagen import generate_problem_data
from t2t_lite.data.problem import VocabSpec, eval_text
from t2t_lite.data.raw import RawDataError, extract_members, read_parallel_sgm
from t2t_lite.data.records import read_examples
from t2t_lite.problems.translate_wmt14 import TranslateEndeWmt14, TranslateEnfrWmt14


def _lines(path: Path, start: int, count: int) -> bytes:
    with gzip.open(path, "rb") as handle:
        return b"".join(handle.readlines()[start:start + count])


def _tar(path: Path, members: dict, mode: str = "w:gz") -> None:
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def shared_multi30k_train():
    from conftest import shared_data_dir
    return shared_data_dir("multi30k") / "train.en.gz"


def _first_segments(path: Path, count: int) -> bytes:
    """The SGML file cut after its ``count``-th segment, with its closing tags."""
    lines = path.read_bytes().splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if b"</seg>" in line]
    return b"".join(lines[:ends[count - 1] + 1]) + b"</p>\n</doc>\n</srcset>\n"


@pytest.fixture(scope="module")
def wmt_raw(tmp_path_factory):
    """tmp_dir with miniature official WMT14 archives for EN-DE and EN-FR."""
    from conftest import shared_data_dir
    m30k, sgm = shared_data_dir("multi30k"), shared_data_dir("wmt_sgm_sample")
    raw = tmp_path_factory.mktemp("wmt_raw")
    en = lambda i: _lines(m30k / "train.en.gz", 100 * i, 100)
    xx = lambda i: _lines(m30k / "train.de.gz", 100 * i, 100)
    _tar(raw / "training-parallel-europarl-v7.tgz", {
        "training/europarl-v7.cs-en.en": en(9), "training/europarl-v7.cs-en.cs": xx(9),
        "training/europarl-v7.de-en.en": en(0), "training/europarl-v7.de-en.de": xx(0),
        "training/europarl-v7.fr-en.en": en(3), "training/europarl-v7.fr-en.fr": xx(3)})
    _tar(raw / "training-parallel-commoncrawl.tgz", {
        "commoncrawl.de-en.en": en(1), "commoncrawl.de-en.de": xx(1),
        "commoncrawl.fr-en.en": en(4), "commoncrawl.fr-en.fr": xx(4)})
    _tar(raw / "training-parallel-nc-v9.tgz", {
        "training/news-commentary-v9.de-en.en": en(2), "training/news-commentary-v9.de-en.de": xx(2),
        "training/news-commentary-v9.fr-en.en": en(5), "training/news-commentary-v9.fr-en.fr": xx(5)})
    _tar(raw / "training-parallel-un.tgz", {"un/undoc.2000.fr-en.en": en(6),
                                            "un/undoc.2000.fr-en.fr": xx(6)})
    _tar(raw / "training-giga-fren.tar", {"giga-fren.release2.fixed.en.gz": gzip.compress(en(7)),
                                          "giga-fren.release2.fixed.fr.gz": gzip.compress(xx(7))},
         mode="w")
    # WMT19's dev.tgz holds newstest2013 as plain text and other years as SGML.
    small_en = (sgm / "newstest-2015-100sents.en-ru.src.en").read_bytes()
    small_ru = (sgm / "newstest-2015-100sents.en-ru.ref.ru").read_bytes()
    _tar(raw / "dev.tgz", {"dev/newstest2013.en": small_en, "dev/newstest2013.de": small_ru,
                           "dev/newstest2013.fr": small_ru,
                           "dev/newstest2013.cs": b"other languages are not read\n",
                           "dev/newstest2015-enru-src.en.sgm":
                               (sgm / "newstest2015-100sents-enru-src.en.sgm").read_bytes()})
    # newstest2014 stand-in: the first 200 segments of the full newstest2015 files.
    full_src = _first_segments(sgm / "newstest2015-enru-src.en.sgm", 200)
    full_ref = _first_segments(sgm / "newstest2015-enru-ref.ru.sgm", 200)
    _tar(raw / "test-full.tgz", {"test-full/newstest2014-deen-src.en.sgm": full_src,
                                 "test-full/newstest2014-deen-ref.de.sgm": full_ref,
                                 "test-full/newstest2014-fren-src.en.sgm": full_src,
                                 "test-full/newstest2014-fren-ref.fr.sgm": full_ref})
    return raw


def test_sgm_reader_matches_the_plain_text(wmt_sgm_dir):
    pairs = list(read_parallel_sgm(wmt_sgm_dir / "newstest2015-100sents-enru-src.en.sgm",
                                   wmt_sgm_dir / "newstest2015-100sents-enru-ref.ru.sgm"))
    plain_en = (wmt_sgm_dir / "newstest-2015-100sents.en-ru.src.en").read_bytes().splitlines()
    plain_ru = (wmt_sgm_dir / "newstest-2015-100sents.en-ru.ref.ru").read_bytes().splitlines()
    assert [p.source for p in pairs] == [line.strip() for line in plain_en]
    assert [p.target for p in pairs] == [line.strip() for line in plain_ru]
    assert len(list(read_parallel_sgm(wmt_sgm_dir / "newstest2015-enru-src.en.sgm",
                                      wmt_sgm_dir / "newstest2015-enru-ref.ru.sgm"))) == 2818


def test_misaligned_sgm_segments_are_an_error(tmp_path, wmt_sgm_dir):
    ref = (wmt_sgm_dir / "newstest2015-100sents-enru-ref.ru.sgm").read_text(encoding="utf-8")
    (tmp_path / "ref.sgm").write_text(ref.replace('<seg id="3">', '<seg id="33">', 1),
                                      encoding="utf-8")
    with pytest.raises(RawDataError, match=r"segment 3 is doc .* seg 3 .* seg 33 .*not aligned"):
        list(read_parallel_sgm(wmt_sgm_dir / "newstest2015-100sents-enru-src.en.sgm",
                               tmp_path / "ref.sgm"))


def test_ende_wmt14_from_miniature_official_archives(tmp_path, wmt_raw, wmt_sgm_dir):
    problem = TranslateEndeWmt14(vocab_spec=VocabSpec(size=1000))
    summary = generate_problem_data(problem, tmp_path / "data", wmt_raw, download=False)
    assert summary.splits["train"].examples == 300  # Europarl + Common Crawl + NC v9
    assert summary.splits["dev"].examples == 100
    assert summary.splits["test"].examples == 200
    sources, references = eval_text(problem, tmp_path / "data", "dev")
    plain = (wmt_sgm_dir / "newstest-2015-100sents.en-ru.src.en").read_text(encoding="utf-8")
    assert list(sources) == [line.strip() for line in plain.splitlines()]
    vocab = problem.load_vocab(tmp_path / "data")
    train = read_examples(problem.shard_files(tmp_path / "data", "train"))
    texts = {vocab.decode(s) for s, _ in train}
    with gzip.open(shared_multi30k_train(), "rt", encoding="utf-8") as handle:
        first = [next(handle).rstrip("\n") for _ in range(300)]
    assert texts == set(first)  # exactly the de-en members, not cs-en


def test_enfr_wmt14_wordpieces_from_miniature_official_archives(tmp_path, wmt_raw):
    problem = TranslateEnfrWmt14(vocab_spec=VocabSpec(kind="wordpiece", size=1000))
    summary = generate_problem_data(problem, tmp_path / "data", wmt_raw, download=False)
    assert summary.splits["train"].examples == 500  # five corpora incl. UN and giga-fren (.gz in .tar)
    assert summary.splits["dev"].examples == 100  # dev/newstest2013.{en,fr}
    assert summary.splits["test"].examples == 200
    assert summary.vocab_file.endswith(".wordpiece.txt") and summary.vocab_size <= 1000 * 1.1
    vocab = problem.load_vocab(tmp_path / "data")
    assert vocab.decode(vocab.encode("A man in a blue shirt.")) == "A man in a blue shirt."


def test_missing_and_corrupt_archives_say_what_to_do(tmp_path, wmt_raw):
    with pytest.raises(RawDataError) as error:
        generate_problem_data(TranslateEndeWmt14(vocab_spec=VocabSpec(size=500)),
                              tmp_path / "data", tmp_path / "empty", download=False)
    assert ("training-parallel-europarl-v7.tgz  <-  "
            "https://statmt.org/wmt13/training-parallel-europarl-v7.tgz") in str(error.value)
    assert "test-full.tgz  <-  https://statmt.org/wmt14/test-full.tgz" in str(error.value)
    assert "dev.tgz  <-  https://data.statmt.org/wmt19/translation-task/dev.tgz" in str(error.value)
    data = (wmt_raw / "dev.tgz").read_bytes()
    (tmp_path / "dev.tgz").write_bytes(data[: len(data) // 2])
    with pytest.raises(RawDataError, match=r"dev\.tgz is corrupt or truncated .*delete it"):
        extract_members(tmp_path / "dev.tgz", ["dev/newstest2013.de"], tmp_path / "x")
    with pytest.raises(RawDataError, match=r"lacks the member\(s\) dev/newstest2099.sgm"):
        extract_members(wmt_raw / "dev.tgz", ["dev/newstest2099.sgm"], tmp_path / "y")
