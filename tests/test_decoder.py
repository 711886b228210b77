"""t2t-lite-decoder: one output line per input line, in order, whatever the input holds;
N-best output; sacreBLEU against a reference; output written as it is made."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from t2t_lite.commands import decoder
from t2t_lite.decoding.lines import chunks, decode_lines, split_lines
from t2t_lite.decoding.translator import Translator
from t2t_lite.runs.loading import load_trained_model

from run_dir_helpers import tiny_run_dir

GREEDY = "beam_size=1,extra_length=3,max_input_length=8"
LONG = "ninety-nine thousand, nine hundred and ninety-nine"


def run_decoder(capsys, input_bytes, tmp_path, *flags):
    source = tmp_path / "input.txt"
    source.write_bytes(input_bytes)
    target = tmp_path / "output.txt"
    status = decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file",
                           str(source), "--decode_to_file", str(target), *flags])
    captured = capsys.readouterr()
    lines = target.read_bytes().decode("utf-8").split("\n") if target.exists() else None
    if lines is not None:
        assert lines[-1] == ""   # every line ends in a newline
        lines = lines[:-1]
    return status, lines, captured.out, captured.err


def test_split_lines_counts_like_an_editor():
    assert split_lines(b"") == []
    assert split_lines(b"a\n") == [b"a"]
    assert split_lines(b"a") == [b"a"]
    assert split_lines(b"a\r\n\nb") == [b"a", b"", b"b"]
    assert split_lines(b"\n\n") == [b"", b""]
    assert split_lines(b"\xef\xbb\xbfa\r\nb") == [b"a", b"b"]   # a Windows editor's BOM
    assert split_lines(b"\xef\xbb\xbf") == []
    texts, bad = decode_lines([b"ok", b"bad \xff here", b"f\xc3\xbcnf"])
    assert texts == ["ok", "bad \ufffd here", "fünf"]
    assert [(b.line, b.column) for b in bad] == [(2, 4)]


def test_odd_lines_keep_count_and_order(capsys, tmp_path):
    lines = [b"twenty-one", b"", b"   \t ", LONG.encode(), b"f\xc3\xbcnf und \xf0\x9f\x98\x80",
             b"nine hundred \xff and one", b"three\r", b"twenty-one", b"", b"seven"]
    data = b"\n".join(lines)            # the last line has no newline
    status, output, _, err = run_decoder(capsys, data, tmp_path, "--decode_hparams", GREEDY)
    assert status == 0
    assert len(output) == len(lines)
    assert output[1] == output[2] == output[8] == ""
    assert output[0] == output[7]       # the same sentence, far apart
    assert all(output[i] for i in (0, 3, 4, 5, 6, 9))
    assert "line 4: " in err and "truncated to 8" in err
    assert "line 6: not valid UTF-8 at byte 13" in err
    assert "decoded 10 lines (7 translated, 3 blank)" in err

    # Same translations, in the same places, as the Translator on the decoded text.
    _, _, model, vocabulary = load_trained_model(tiny_run_dir())
    translator = Translator(model, vocabulary, beam_size=1, extra_length=3, max_input_length=8)
    texts, _ = decode_lines(split_lines(data))
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    assert [output[i] for i in wanted] == translator.translate([texts[i] for i in wanted])


def test_chunks_cover_the_lines_in_order():
    assert chunks([], 10) == []
    assert chunks([0, 0], 10) == [range(0, 2)]                    # all blank: one chunk
    assert chunks([0, 4, 4, 0, 4, 0], 8) == [range(0, 4), range(4, 6)]
    assert chunks([3, 20, 3], 8) == [range(0, 1), range(1, 2), range(2, 3)]  # 20 alone
    assert chunks([8, 8], 16) == [range(0, 2)]
    with pytest.raises(ValueError):
        chunks([1], 0)


@pytest.mark.slow
def test_head_1_gets_the_first_line_early_and_ends_the_decoder(capsys, tmp_path):
    """``t2t-lite-decoder | head -1`` on many lines: head's line is the full run's first
    line, and the decoder ends with 141 long before it has translated the input."""
    words = ["one", "two hundred", "three thousand and four", "fifty-five", "six"]
    lines = ["seven hundred and twelve"] + [words[i % 5] for i in range(3999)]
    data = ("\n".join(lines) + "\n").encode()
    # Chunks of CHUNK_BATCHES * 64 padded tokens: a few hundred of these short lines.
    hparams = "beam_size=1,extra_length=3,batch_size=64"
    source = tmp_path / "input.txt"
    source.write_bytes(data)
    command = [str(Path(sys.executable).parent / "t2t-lite-decoder"),
               f"--output_dir={tiny_run_dir()}", f"--decode_from_file={source}",
               f"--decode_hparams={hparams}"]
    result = subprocess.run(
        ["bash", "-c", f"{shlex.join(command)} | head -1; echo \"${{PIPESTATUS[*]}}\" >&2"],
        capture_output=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
    err = result.stderr.decode()
    assert err.splitlines()[-1] == "141 0", err          # decoder: SIGPIPE's status
    assert "Traceback" not in err and "error:" not in err, err
    assert "decoded 4000 lines" not in err, err
    reached = max(int(done) for done in re.findall(r"(\d+)/4000", err))
    assert reached < 2000, err                           # stopped after a chunk or two

    status, output, _, _ = run_decoder(capsys, data, tmp_path, "--decode_hparams", hparams)
    assert status == 0 and len(output) == 4000
    assert result.stdout.decode() == output[0] + "\n" and output[0]


@pytest.mark.slow
def test_ten_thousand_lines(capsys, tmp_path):
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    lines = ["" if i % 97 == 0 else words[i % 10] for i in range(10_000)]
    data = ("\n".join(lines) + "\n").encode()
    status, output, _, err = run_decoder(capsys, data, tmp_path, "--decode_hparams",
                                         "beam_size=1,extra_length=1,batch_size=8192")
    assert status == 0 and len(output) == 10_000
    by_word = {}
    for line, out in zip(lines, output):
        if not line:
            assert out == ""
        else:
            assert out, line
            assert by_word.setdefault(line, out) == out
    assert "decoding" in err and "sent/s" in err   # tqdm progress bar on stderr


def test_return_beams_writes_tab_separated_nbest(capsys, tmp_path):
    status, output, _, _ = run_decoder(capsys, b"twenty-one\n\nthree hundred\n", tmp_path,
                                       "--decode_hparams",
                                       "beam_size=3,extra_length=3,return_beams=true")
    assert status == 0 and len(output) == 3 and output[1] == ""
    for line in (output[0], output[2]):
        fields = line.split("\t")
        assert len(fields) == 6
        scores = [float(score) for score in fields[1::2]]
        assert scores == sorted(scores, reverse=True)


def test_decode_reference_prints_the_problems_metrics(capsys, tmp_path, monkeypatch):
    reference = tmp_path / "reference.txt"
    reference.write_text("einundzwanzig\ndreihundert\n", encoding="utf-8")
    status, output, out, _ = run_decoder(capsys, b"twenty-one\nthree hundred\n", tmp_path,
                                         "--decode_hparams", GREEDY,
                                         "--decode_reference", str(reference))
    assert status == 0 and len(output) == 2
    # The numbers problem is scored by exact match (its outputs are one word).
    matches = sum(h == r for h, r in zip(output, ["einundzwanzig", "dreihundert"]))
    assert out.strip() == f"exact_match = {100.0 * matches / 2:.4f}"

    # A BLEU problem prints sacreBLEU's line with its signature.
    from t2t_lite.problems.translate_numbers import TranslateEndeNumbers
    monkeypatch.setattr(TranslateEndeNumbers, "eval_metrics", ("bleu",))
    status, output, out, _ = run_decoder(capsys, b"twenty-one\nthree hundred\n", tmp_path,
                                         "--decode_hparams", GREEDY,
                                         "--decode_reference", str(reference))
    assert status == 0 and len(output) == 2
    cased, lowercased = out.strip().splitlines()
    assert cased.startswith("BLEU = ") and lowercased.startswith("BLEU = ")
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in cased
    assert "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:" in lowercased

    reference.write_text("only one line\n", encoding="utf-8")
    status, _, _, err = run_decoder(capsys, b"twenty-one\nthree hundred\n", tmp_path,
                                    "--decode_hparams", GREEDY,
                                    "--decode_reference", str(reference))
    assert status == 2 and "has 1 references but the input has 2 lines" in err


@pytest.mark.parametrize("flags,message", [
    (["--decode_hparams", "beam=3"], "unknown decode hparam"),
    (["--checkpoint_path", "/nonexistent/ckpt-3"], "no checkpoint there"),
])
def test_user_errors_are_one_line(capsys, tmp_path, flags, message):
    status, _, _, err = run_decoder(capsys, b"one\n", tmp_path, *flags)
    assert status == 2 and message in err and "Traceback" not in err


def test_references_saved_with_a_byte_order_mark_read_as_without(tmp_path):
    from t2t_lite.data.problem import get_problem
    path = tmp_path / "refs.de"
    path.write_bytes(b"\xef\xbb\xbfsieben\r\nacht\r\n")
    assert get_problem("translate_ende_numbers").read_references(path) == ["sieben", "acht"]
