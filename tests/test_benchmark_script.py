"""scripts/benchmark.py runs one tiny training step and one tiny search and prints its last
lines in the documented format (no timing is asserted)."""
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark.py"
TINY = ["--hparams_set=transformer_tiny", "--hparams=num_hidden_layers=1",
        "--vocab_size=50", "--no-jit_compile", "--warmup=1", "--peak_size=64",
        "--peak_seconds=0.01"]


def _run(args):
    out = subprocess.run([sys.executable, str(SCRIPT)] + args + TINY, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()


def test_train_prints_tokens_step_and_mfu():
    lines = _run(["train", "--batch=2", "--length=4", "--steps=1"])
    assert re.fullmatch(r"tgt_tok_s=\d+ step_s=[\d.]+ mfu=[\d.]+", lines[-1]), lines[-1]
    assert lines[-2].startswith("peak_rss_mb=")


def test_decode_prints_tokens_and_mfu():
    lines = _run(["decode", "--batch=2", "--source_length=3", "--target_length=4",
                  "--beam_size=2", "--repeats=1", "--memory_per_sentence"])
    assert re.fullmatch(r"tgt_tok_s=\d+ mfu=[\d.]+", lines[-1]), lines[-1]


def test_decode_parts_prints_each_piece_of_a_beam_step():
    script = SCRIPT.with_name("bench_decode_parts.py")
    out = subprocess.run([sys.executable, str(script), "--hparams_set=transformer_tiny",
                          "--vocab_size=50", "--batch=2", "--beam_size=2",
                          "--cache_length=4", "--repeats=1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("transformer_tiny V=50 rows=4 (batch 2 x beam 2)")
    names = [line.split(":")[0] for line in lines[1:]]
    assert names == ["softmax projection", "log_softmax", "top_k", "cache reorder",
                     "candidates, reference (no XLA)", "candidates, current (no XLA)",
                     "candidates, reference (no XLA) again", "candidates, current (no XLA) again"]
    assert all(re.search(r": [\d.]+ ms per step", line) for line in lines[1:])


def test_decode_parts_whole_search_ab_checks_both_searches_agree():
    script = SCRIPT.with_name("bench_decode_parts.py")
    out = subprocess.run([sys.executable, str(script), "--whole_search",
                          "--hparams_set=transformer_tiny", "--vocab_size=50", "--batch=2",
                          "--beam_size=2", "--source_length=4", "--target_length=5",
                          "--repeats=1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert "identical ids and scores: True" in lines[0]
    assert [line.split(":")[0] for line in lines[1:3]] == ["reference", "current"]
    assert re.fullmatch(r"speedup current/reference: [\d.]+", lines[-1])
