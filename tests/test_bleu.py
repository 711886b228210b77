"""BLEU through sacreBLEU, checked against mteval-v13a.pl's figure on real WMT files."""
import gzip
import re
from pathlib import Path

import pytest

from t2t_lite.data.raw import RawDataError, read_sgm_text
from t2t_lite.metrics import BleuResult, corpus_bleu


PLAIN = "newstest-2015-100sents.en-ru.{}"
SGML = "newstest2015-100sents-enru-{}.sgm"


def mteval_bleu(path: Path) -> float:
    """The BLEU figure mteval-v13a.pl printed, on sacreBLEU's 0-100 scale."""
    match = re.search(r"BLEU score = ([0-9.]+)", path.read_text(encoding="utf-8"))
    assert match, f"no BLEU figure in {path}"
    return 100.0 * float(match.group(1))


def read_lines(path: Path):
    return path.read_text(encoding="utf-8").splitlines()


def test_plain_text_matches_sacrebleu_and_mteval(wmt_sgm_dir):
    hyps = read_lines(wmt_sgm_dir / PLAIN.format("google.ru"))
    refs = read_lines(wmt_sgm_dir / PLAIN.format("ref.ru"))
    assert len(hyps) == len(refs) == 100
    result = corpus_bleu(hyps, refs)
    assert isinstance(result, BleuResult)
    assert f"{result.score:.1f}" == "23.2"  # what sacreBLEU reports on these files
    assert abs(result.score - mteval_bleu(wmt_sgm_dir / "mteval-13a.output")) <= 0.05
    assert "tok:13a" in result.signature and "nrefs:1" in result.signature
    assert "case:mixed" in result.signature


def test_sgml_matches_mteval_and_plain_text(wmt_sgm_dir):
    hyps = read_sgm_text(wmt_sgm_dir / SGML.format("google.ru"))
    refs = read_sgm_text(wmt_sgm_dir / SGML.format("ref.ru"))
    assert len(hyps) == len(refs) == 100
    # The reference SGML holds exactly the plain-text reference lines.
    assert refs == read_lines(wmt_sgm_dir / PLAIN.format("ref.ru"))
    sgml = corpus_bleu(hyps, refs)
    plain = corpus_bleu(read_lines(wmt_sgm_dir / PLAIN.format("google.ru")), refs)
    mteval = mteval_bleu(wmt_sgm_dir / "mteval-13a.output")
    assert abs(sgml.score - mteval) <= 0.05
    # The SGML system output is Moses-tokenized text; after 13a tokenization the two
    # files give the same figure at the precision BLEU is reported.
    assert f"{sgml.score:.1f}" == f"{plain.score:.1f}" == "23.2"
    assert abs(sgml.score - plain.score) <= 0.05


def test_sgml_keeps_entities_exactly_as_sacrebleu_reads_the_file(wmt_sgm_dir, tmp_path):
    from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
    path = wmt_sgm_dir / SGML.format("google.ru")
    hyps = read_sgm_text(path)
    raw = path.read_text(encoding="utf-8")
    assert raw.count("&quot;") == sum(h.count("&quot;") for h in hyps) > 0
    # sacreBLEU's own SGML conversion of the same file, line for line
    sacrebleu_text = tmp_path / "sacrebleu.txt"
    FakeSGMLDataset.__new__(FakeSGMLDataset)._convert_format(str(path), str(sacrebleu_text))
    assert hyps == sacrebleu_text.read_text(encoding="utf-8").splitlines()
    # an entity, inner whitespace and a gzipped file, against sacreBLEU again
    tiny = tmp_path / "tiny.sgm"
    tiny.write_text('<refset>\n<doc docid="d">\n<seg id="1"> A &amp; B\t &quot;q&quot; </seg>\n'
                    '</doc>\n</refset>\n', encoding="utf-8")
    FakeSGMLDataset.__new__(FakeSGMLDataset)._convert_format(str(tiny), str(sacrebleu_text))
    assert read_sgm_text(tiny) == sacrebleu_text.read_text(encoding="utf-8").splitlines() \
        == ['A &amp; B &quot;q&quot;']
    gz = tmp_path / "tiny.sgm.gz"
    gz.write_bytes(gzip.compress(tiny.read_bytes()))
    assert read_sgm_text(gz) == ['A &amp; B &quot;q&quot;']


def test_full_test_set_segment_count(wmt_sgm_dir):
    assert len(read_sgm_text(wmt_sgm_dir / "newstest2015-enru-src.en.sgm")) == 2818


def test_sgml_segments_in_order_with_entities_kept(tmp_path):
    path = tmp_path / "tiny.sgm"
    path.write_text('<refset>\n<doc docid="d">\n<seg id="1"> A &amp; B </seg>\n'
                    '<seg id="2">x &lt; y &#39;q&#39;</seg>\n</doc>\n</refset>\n',
                    encoding="utf-8")
    assert read_sgm_text(path) == ["A &amp; B", "x &lt; y &#39;q&#39;"]
    # sacreBLEU's 13a tokenizer unescapes &amp; and &lt; itself, so BLEU is unchanged
    assert corpus_bleu(["A & B", "x < y &#39;q&#39;"],
                       read_sgm_text(path)).score == pytest.approx(100.0)


def test_sgml_without_segments_names_the_file(tmp_path):
    path = tmp_path / "empty.sgm"
    path.write_text("<refset>\n</refset>\n", encoding="utf-8")
    with pytest.raises(RawDataError, match="empty.sgm: no <seg id=..> segments found"):
        read_sgm_text(path)


def test_sgml_unclosed_segment_names_file_and_line(tmp_path):
    path = tmp_path / "broken.sgm"
    path.write_text('<doc>\n<seg id="1">a</seg>\n<seg id="2">b\n<seg id="3">c</seg>\n',
                    encoding="utf-8")
    with pytest.raises(RawDataError, match=r"broken.sgm:3: a <seg> element without id=.. or "
                                          r"without a closing </seg>"):
        read_sgm_text(path)


def test_identical_corpus_scores_100_and_mismatch_is_an_error():
    assert corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]).score == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(["a", "b"], ["a"])


def test_lowercase_is_sacrebleus_lc():
    import sacrebleu
    hyps = ["The Cat sat on the mat .", "A dog RUNS in the park"]
    refs = ["the cat sat on the mat .", "A dog runs in the Park"]
    cased, lowered = corpus_bleu(hyps, refs), corpus_bleu(hyps, refs, lowercase=True)
    assert lowered.score == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score)
    assert lowered.score == pytest.approx(100.0) and cased.score < 60
    assert "case:lc" in lowered.signature and "case:mixed" in cased.signature
