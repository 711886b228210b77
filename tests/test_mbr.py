"""Minimum Bayes risk reranking (``decode_hparams`` ``mbr=true``): hand-computed cases,
the settings it needs, and the decoder's lines against the reranked N-best lists."""
import math

import pytest

from t2t_lite.commands import decoder, exporter
from t2t_lite.decoding import DecodeHParamsError, parse_decode_hparams
from t2t_lite.decoding.mbr import expected_bleu, mbr_order

from run_dir_helpers import tiny_run_dir

SENTENCES = ["twenty-one", "nine hundred and seven", "", "three thousand and forty"]


def test_the_hypothesis_the_others_agree_with_beats_the_most_probable():
    # A twice and B once, B the most probable: weights e^-1, e^-1, e^-0.5 normalised.
    # BLEU(A, A) = 100 and BLEU(A, B) = 0 (no shared word), so A expects
    # 100 * 2e^-1 / (2e^-1 + e^-0.5) = 54.8 and B 45.2.
    a, b = "a red bus stops here", "the cat sleeps"
    hypotheses = [(b, -0.5), (a, -1.0), (a, -1.0)]
    share_a = 2 * math.exp(-1.0) / (2 * math.exp(-1.0) + math.exp(-0.5))
    assert expected_bleu(hypotheses) == pytest.approx(
        [100 * (1 - share_a), 100 * share_a, 100 * share_a])
    assert mbr_order(hypotheses) == [(a, -1.0), (a, -1.0), (b, -0.5)]


def test_ties_keep_the_search_order_and_short_lists_are_returned_as_they_are():
    same = [("x y z", -0.1), ("x y z", -0.2), ("x y z", -0.3)]
    assert mbr_order(same) == same
    assert mbr_order([("only", -1.0)]) == [("only", -1.0)]
    assert mbr_order([]) == []


@pytest.mark.parametrize("text, fragment", [
    ("mbr=true,beam_size=1", "'mbr' reranks a beam's hypotheses: it needs beam_size > 1"),
    ("mbr=true,sampling_method=random", "sampling_method=argmax, got beam_size=4 with "
                                        "sampling_method=random"),
])
def test_mbr_needs_a_beam(text, fragment):
    with pytest.raises(DecodeHParamsError, match=fragment):
        parse_decode_hparams(text)


def _decode(capsys, tmp_path, name, decode_hparams):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    target = tmp_path / f"{name}.txt"
    assert decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file", str(source),
                         "--decode_to_file", str(target),
                         f"--decode_hparams={decode_hparams}"]) == 0
    err = capsys.readouterr().err
    return target.read_text(encoding="utf-8").split("\n")[:-1], err


def test_the_decoder_writes_each_lines_mbr_choice_of_the_full_beam(capsys, tmp_path):
    lines, err = _decode(capsys, tmp_path, "mbr", "beam_size=3,extra_length=6,mbr=true")
    assert "mbr=true" in err
    nbest, _ = _decode(capsys, tmp_path, "nbest", "beam_size=3,extra_length=6,return_beams=true")
    assert len(lines) == len(nbest) == len(SENTENCES) and lines[2] == nbest[2] == ""
    for line, beams in zip(lines, nbest):
        if not beams:
            continue
        fields = beams.split("\t")
        hypotheses = list(zip(fields[0::2], map(float, fields[1::2])))
        assert len(hypotheses) == 3           # a complete N-best list: no early stop
        assert line == mbr_order(hypotheses)[0][0]


def test_the_exporter_refuses_mbr_before_tensorflow(capsys, tmp_path):
    status = exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                            str(tmp_path / "export"), "--decode_hparams=mbr=true"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("error:") == 1 and "SavedModel cannot run" in err
    assert not (tmp_path / "export").exists()


def test_scoring_refuses_mbr(capsys, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("twenty-one\teinundzwanzig\n", encoding="utf-8")
    status = decoder.main(["--output_dir", str(tiny_run_dir()), "--score_file", str(pairs),
                           "--decode_hparams=mbr=true"])
    err = capsys.readouterr().err
    assert status == 2 and "scoring takes no --decode_hparams=mbr=true" in err
