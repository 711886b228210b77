"""scripts/benchmark.py runs one tiny training step and one tiny search and prints its last
lines in the documented format (no timing is asserted)."""
import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark.py"
TINY = ["--hparams_set=transformer_tiny", "--hparams=num_hidden_layers=1",
        "--vocab_size=50", "--no-jit_compile", "--warmup=1", "--peak_size=64",
        "--peak_seconds=0.01"]


def _run(args, timeout=120):
    out = subprocess.run([sys.executable, str(SCRIPT)] + args + TINY, capture_output=True,
                         text=True, timeout=timeout)
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
                          "--cache_length=4", "--repeats=1", "--onednn"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("transformer_tiny V=50 rows=4 (batch 2 x beam 2)")
    assert lines[0].endswith("onednn=True")     # the product without XLA is oneDNN's
    names = [line.split(":")[0] for line in lines[1:]]
    assert names == ["softmax projection",
                     "softmax projection, no XLA, [V, d] read transposed",
                     "softmax projection, no XLA, [d, V]", "log_softmax", "log_softmax, no XLA",
                     "benchmark EOS suppression, no XLA", "top_k", "cache reorder",
                     "candidates, reference (no XLA)", "candidates, current (no XLA)",
                     "candidates, reference (no XLA) again", "candidates, current (no XLA) again"]
    assert all(re.search(r": [\d.]+ ms per step", line) for line in lines[1:])
    assert all(re.search(r"[\d.]+ GFLOP/s$", line) for line in lines[1:4])


def test_decode_parts_whole_search_ab_checks_both_searches_agree():
    script = SCRIPT.with_name("bench_decode_parts.py")
    out = subprocess.run([sys.executable, str(script), "--whole_search",
                          "--hparams_set=transformer_tiny", "--hparams=num_hidden_layers=1",
                          "--vocab_size=50", "--batch=2",
                          "--beam_size=2", "--source_length=4", "--target_length=5",
                          "--repeats=1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert "identical ids and scores: True" in lines[0]
    assert [line.split(":")[0] for line in lines[1:3]] == ["reference", "current"]
    assert re.fullmatch(r"speedup current/reference: [\d.]+", lines[-1])


def _peers_installed() -> bool:
    import importlib.util
    return all(importlib.util.find_spec(name) for name in ("ctranslate2", "torch"))


@pytest.mark.skipif(not _peers_installed(),
                    reason='the peers are not installed (pip install -e ".[bench]")')
def test_decode_compare_times_the_peers_and_keeps_the_last_line():
    lines = _run(["decode", "--batch=2", "--source_length=5", "--target_length=4",
                  "--beam_size=2", "--repeats=1", "--memory_per_sentence", "--compare",
                  "--quantize=int8"], timeout=900)
    assert "int8: matmul weights quantized" in "\n".join(lines)
    for name in ("ctranslate2_float32", "ctranslate2_int8", "torch"):
        peer = [line for line in lines if line.startswith(f"peer {name}: ")]
        assert len(peer) == 1 and re.search(r"tgt_tok_s=\d+$", peer[0]), lines
        ratio = [line for line in lines if line.startswith(f"ratio_vs_{name}=")]
        assert len(ratio) == 1 and float(ratio[0].split("=")[1]) > 0, lines
        rounds = [line for line in lines if line.startswith(f"rounds vs {name}: ")]
        assert len(rounds) == 1 and len(rounds[0].split(": ")[1].split()) == 1, lines
    assert re.fullmatch(r"tgt_tok_s=\d+ mfu=[\d.]+", lines[-1]), lines[-1]


def test_peers_are_timed_in_paired_rounds_and_the_ratio_is_the_median_of_the_rounds(capsys):
    """Each round runs t2t-lite and every peer once in turn, so that a change of the
    machine's load moves both sides of a round's ratio; the reported ratio is the median
    of the rounds' ratios. Fake runs whose durations change between rounds show both."""
    sys.path.insert(0, str(SCRIPT.parent))
    import benchmark_peers

    calls = []
    # Per round and library: an untimed run (0 s here), then the timed one.
    durations = {"t2t-lite": iter([0, 0.03, 0, 0.09, 0, 0.045]),
                 "slow_peer": iter([0, 0.06, 0, 0.18, 0, 0.045])}

    def make(name):
        def run():
            calls.append(name)
            time.sleep(next(durations[name]))
        return run

    ratios = benchmark_peers.compare_paired(make("t2t-lite"), {"slow_peer": make("slow_peer")},
                                            rounds=3, tokens=100, pause=0.0)
    assert calls == ["t2t-lite", "t2t-lite", "slow_peer", "slow_peer"] * 3
    # Rounds: 0.06/0.03 = 2, 0.18/0.09 = 2, 0.045/0.045 = 1 -> median 2, where the ratio
    # of the two sides' median times (0.06 / 0.045) would say 1.33.
    assert ratios["slow_peer"] == pytest.approx(2.0, rel=0.15)
    out = capsys.readouterr().out.splitlines()
    rounds_line = next(line for line in out if line.startswith("rounds vs slow_peer: "))
    rounds = [float(r) for r in rounds_line.split(": ")[1].split()]
    assert len(rounds) == 3 and rounds[2] == pytest.approx(1.0, rel=0.3)
    assert out[-1] == f"ratio_vs_slow_peer={ratios['slow_peer']:.3f}"


@pytest.mark.skipif(not _peers_installed(),
                    reason='the peers are not installed (pip install -e ".[bench]")')
def test_train_compare_times_torch_and_keeps_the_last_lines():
    lines = _run(["train", "--batch=2", "--length=4", "--steps=1", "--compare"], timeout=900)
    assert [line for line in lines if line.startswith("peer torch: ")], lines
    ratio = [line for line in lines if line.startswith("ratio_vs_torch=")]
    assert len(ratio) == 1 and re.fullmatch(r"ratio_vs_torch=[\d.]+", ratio[0]), lines
    assert lines[-2].startswith("peak_rss_mb=")
    assert re.fullmatch(r"tgt_tok_s=\d+ step_s=[\d.]+ mfu=[\d.]+", lines[-1]), lines[-1]


def test_compare_without_the_peers_says_what_to_install(monkeypatch, capsys):
    sys.path.insert(0, str(SCRIPT.parent))
    import benchmark
    import benchmark_peers
    monkeypatch.setattr(benchmark_peers, "missing", lambda: ["ctranslate2", "torch"])
    assert benchmark.peers_ready() is False
    assert capsys.readouterr().out.strip().splitlines() == [
        '--compare: ctranslate2, torch not installed; install the peers with '
        'pip install -e ".[bench]"']


def test_unknown_peer_is_one_error_line():
    out = subprocess.run([sys.executable, str(SCRIPT), "decode", "--compare",
                          "--peers=ctranslate2_int8,onnx"] + TINY,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: --peers: unknown onnx for decode; choose from "
        "ctranslate2_float32,ctranslate2_int8,torch"]
    assert out.stdout == ""  # refused before any work (no header, no TensorFlow)


@pytest.mark.parametrize("layout,title,names", [
    ("attention_cache", "cache layout", ("head-major", "token-major")),
    ("softmax_weights", "softmax weights layout",
     ("\\[V, d\\] read transposed", "\\[d, V\\] copy"))])
def test_layout_ab_runs_both_layouts_and_they_agree(layout, title, names, capsys, monkeypatch):
    # In process (the script sets nothing that must precede TensorFlow's import); the
    # methods it replaces on the library's layers are put back after the test.
    from t2t_lite.layers.attention import MultiHeadAttention
    from t2t_lite.layers.embedding import SharedEmbedding
    for cls, names_replaced in ((MultiHeadAttention, ("project_self", "project_memory",
                                                      "attend", "initial_cache",
                                                      "self_attention_step")),
                                (SharedEmbedding, ("logits",))):
        for name in names_replaced:
            monkeypatch.setattr(cls, name, cls.__dict__[name])
    _script_module("bench_cache_layout").main([
        "--hparams_set=transformer_tiny", "--hparams=num_hidden_layers=1", "--vocab_size=50",
        "--batch=2", "--source_length=4", "--target_length=5", "--beam_size=2", "--rounds=1",
        f"--layout={layout}"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"{title} A/B: quantize=none")
    assert "identical ids: True" in lines
    assert re.fullmatch(rf"{names[0]} [\d.]+ s, {names[1]} [\d.]+ s \(median of 1\): "
                        r"speed-up [\d.]+x", lines[-1]), lines[-1]
    if layout == "softmax_weights":
        assert re.fullmatch(r"largest score difference: [\d.e+-]+", lines[-2]), lines[-2]


def test_profile_decode_prints_op_types_with_times():
    script = SCRIPT.with_name("profile_decode.py")
    out = subprocess.run([sys.executable, str(script), "--hparams_set=transformer_tiny",
                          "--hparams=num_hidden_layers=1", "--vocab_size=50", "--batch=2",
                          "--top=40"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("profile: quantize=none") and "cpu=" in lines[0]
    assert re.fullmatch(r"profiled search: [\d.]+ s", lines[1]), lines[1]
    rows = [re.fullmatch(r"(\S+)\s+([\d.]+) s\s+(\d+) calls", line) for line in lines[2:]]
    assert 5 <= len(rows) <= 40 and all(rows), lines[2:]
    assert "_MklMatMul" in [row.group(1) for row in rows]   # oneDNN on, as in the decoder


def _script_module(name):
    """scripts/NAME.py imported in this process (no interpreter start-up)."""
    import importlib.util
    for path in (str(SCRIPT.parent.parent), str(SCRIPT.parent)):
        if path not in sys.path:
            sys.path.insert(0, path)
    spec = importlib.util.spec_from_file_location(name, SCRIPT.with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_beam_reorder_variants_compute_what_gathering_computes(capsys):
    script = _script_module("bench_beam_reorder")
    script.main(["--batch=2", "--beam_size=3", "--heads=2", "--depth=4", "--length=6",
                 "--layers=2", "--rounds=1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("beam reorder under XLA: 2 x beam 3, 2 heads x 4, 6 positions")
    rows = [re.fullmatch(r"(\w+): [\d.]+ ms per search, [\d.]+x gather's time, "
                         r"agrees with gather: (True|False)", line) for line in lines[1:]]
    assert all(rows), lines
    # no reorder at all gives other outputs: the comparison can tell them apart
    assert {row.group(1): row.group(2) for row in rows} == {
        "gather": "True", "none": "False", "index_all_beams": "True",
        "index_gather": "True", "unrolled": "True"}


POSITIVE = "must be a positive integer, got 0"


@pytest.mark.parametrize("script, flags, message", [
    ("bench_beam_reorder", ["--variants=gather,swap"], "--variants: swap (choose from"),
    ("bench_beam_reorder", ["--variants=none"], "--variants: gather is required"),
    ("bench_beam_reorder", ["--length=5"], "--length=5: unrolled runs two steps per iteration"),
    ("bench_beam_reorder", ["--layers=0"], f"argument --layers: {POSITIVE}"),
    ("bench_cache_layout", ["--layout=softmax_weights", "--quantize=int8"],
     "--layout=softmax_weights compares float32 weights; drop --quantize"),
    ("bench_cache_layout", ["--layout=softmax_weights", "--jit_compile"],
     "--layout=softmax_weights compares the search without XLA (XLA chooses its own "
     "layout); drop --jit_compile"),
    ("bench_cache_layout", ["--rounds=0"], f"argument --rounds: {POSITIVE}"),
    ("bench_cache_layout", ["--hparams_set=nope"], "unknown hparams set 'nope'"),
    ("bench_int8_rescale", ["--batch=0"], f"argument --batch: {POSITIVE}"),
    ("bench_int8_rescale", ["--hparams=no_such_hparam=1"], "no_such_hparam"),
    ("bench_int8_attention", ["--rounds=0"], f"argument --rounds: {POSITIVE}"),
    ("bench_decode_parts", ["--repeats=0"], f"argument --repeats: {POSITIVE}"),
    ("bench_decode_parts", ["--whole_search", "--hparams_set=nope"],
     "unknown hparams set 'nope'"),
    ("profile_decode", ["--top=0"], f"argument --top: {POSITIVE}"),
    ("bench_search_flag", ["--option=fused_qkv"], "argument --option: invalid choice"),
    ("bench_search_flag", ["--option=activation_scales"],
     "--option=activation_scales compares int8 activations; add --quantize=int8"),
    ("bench_growing_reorder", ["--rounds=0"], f"argument --rounds: {POSITIVE}"),
    ("benchmark", ["decode", "--int8_activation_scales=row"],
     "--int8_activation_scales sets int8 decoding's activations; add --quantize=int8 or "
     "drop it"),
    ("benchmark", ["decode", "--repeats=0"], f"argument --repeats: {POSITIVE}"),
    ("benchmark", ["decode", "--int8_attention=bfloat16"],
     "--int8_attention sets int8 decoding's self-attention; add --quantize=int8 or drop it"),
    ("benchmark", ["decode", "--quantize=int8", "--int8_attention=bfloat16"],
     "--int8_attention applies without XLA (an XLA-compiled search keeps the compute dtype); "
     "add --no-jit_compile or drop it"),
    ("benchmark", ["train", "--hparams_set=nope"], "unknown hparams set 'nope'"),
])
def test_scripts_refuse_bad_flags_in_one_error_line(script, flags, message, capsys):
    """Before any work: argparse's usage and one ``error:`` line naming the flag, exit 2."""
    with pytest.raises(SystemExit) as exit_info:
        _script_module(script).main(flags)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and message in errors[0], err


def test_int8_rescale_times_the_library_and_the_unscaled_search(capsys, monkeypatch):
    from t2t_lite.layers import attention, embedding, feed_forward
    for module in (attention, embedding, feed_forward):   # undone after the test
        monkeypatch.setattr(module, "int8_matmul", module.int8_matmul)
    script = _script_module("bench_int8_rescale")
    script.main(["--hparams_set=transformer_tiny", "--vocab_size=50", "--batch=2",
                 "--beam_size=2", "--source_length=4", "--target_length=5", "--rounds=1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("int8 rescaling A/B: kernel=")
    assert re.fullmatch(r"library [\d.]+ s, no rescaling [\d.]+ s \(median of 1\): "
                        r"upper bound [\d.]+x", lines[-1]), lines[-1]


def test_int8_attention_ab_times_both_dtypes(capsys):
    script = _script_module("bench_int8_attention")
    script.main(["--hparams_set=transformer_tiny", "--vocab_size=50", "--batch=2",
                 "--beam_size=2", "--source_length=4", "--target_length=5", "--rounds=1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("int8 attention dtype A/B: ") and "cpu=" in lines[0]
    assert "self-attention float32)" in lines[1] and "self-attention bfloat16)" in lines[2]
    for dtype, line in zip(("float32", "bfloat16"), lines[-3:-1]):
        assert re.fullmatch(rf"{dtype}: [\d.]+ s wall, [\d.]+ s CPU \(median of 1\)", line)
    assert re.fullmatch(r"bfloat16 speed-up: [\d.]+x wall, [\d.]+x CPU; same ids: [\d.]+",
                        lines[-1]), lines[-1]


def test_the_decode_benchmarks_eos_never_wins_before_the_last_position():
    """``make_eos_lose``: EOS's logit is the lowest of every row at every step, so the
    benchmark's hypotheses all run to their forced length without a filter on the logits."""
    import numpy as np
    import tensorflow as tf
    benchmark = _script_module("benchmark")
    parser = argparse.ArgumentParser()
    benchmark.add_search_flags(parser)
    parsed = parser.parse_args(["--hparams_set=transformer_tiny", "--vocab_size=50"])
    args = benchmark.search_args(parsed, "none", False)
    model = benchmark.build_model(args, benchmark.checked_hparams(parser, parsed))
    benchmark.make_eos_lose(model, 1)
    from t2t_lite.decoding import DecodingPlan
    plan = DecodingPlan(growing_cache=True)
    ids, cache, memory = model.decoding_state(tf.constant([[5, 9, 1], [7, 2, 1]]), 0, plan)
    for step in range(4):
        logits, cache = model.decode_step(ids, step, cache, memory, plan)
        logits = logits.numpy()
        assert (logits.argmin(axis=1) == 1).all()
        assert (np.delete(logits, 1, axis=1).min(axis=1) - logits[:, 1] > 50).all()
        ids = tf.constant(logits.argmax(axis=1).astype(np.int32))


def test_search_flag_ab_runs_both_and_finds_the_first_step_changes_nothing(capsys):
    script = _script_module("bench_search_flag")
    script.main(["--option=expand_after_first_step", "--quantize=int8",
                 "--hparams_set=transformer_tiny", "--vocab_size=50", "--batch=3",
                 "--beam_size=3", "--source_length=4", "--target_length=5", "--rounds=1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("expand_after_first_step A/B: quantize=int8 ")
    for state, line in zip(("off", "on"), lines[-3:-1]):
        assert re.fullmatch(rf"expand_after_first_step {state}: [\d.]+ s wall, [\d.]+ s CPU "
                            rf"\(median of 1\)", line), line
    assert re.fullmatch(r"speed-up of expand_after_first_step: [\d.]+x wall, [\d.]+x CPU; "
                        r"same ids: True, largest score difference: 0", lines[-1]), lines[-1]


@pytest.mark.parametrize("option", ["activation_scales", "activation_scales_tensor",
                                    "log_probs_from_softmax"])
def test_search_flag_ab_times_the_int8_options(option, capsys):
    """Both searches run; per-tensor activations change the numbers (not necessarily the
    ids of a tiny model), the softmax's log-probabilities only their last bits."""
    script = _script_module("bench_search_flag")
    script.main([f"--option={option}", "--quantize=int8", "--hparams_set=transformer_tiny",
                 "--vocab_size=50", "--batch=3", "--beam_size=3", "--source_length=4",
                 "--target_length=5", "--rounds=1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"{option} A/B: quantize=int8 ")
    scales = [line for line in lines if line.startswith("int8: ")]
    expected = {"activation_scales": ["row", "mixed"],
                "activation_scales_tensor": ["mixed", "tensor"]}.get(option, ["mixed"] * 2)
    assert [f"activation scales {e}," in line for e, line in zip(expected, scales)] == [True] * 2
    match = re.fullmatch(rf"speed-up of {option}: [\d.]+x wall, [\d.]+x CPU; same ids: "
                         r"(True|False), largest score difference: ([\d.e+-]+)", lines[-1])
    assert match, lines[-1]
    difference = float(match.group(2))
    if option.startswith("activation_scales"):
        assert difference > 0
    else:
        assert match.group(1) == "True" and difference < 1e-5


def test_growing_reorder_times_its_three_variants(capsys):
    _script_module("bench_growing_reorder").main(["--rounds=1", "--dtype=float32"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["gather", "no_gather", "lineage"]
    for line in lines[:3]:
        assert re.search(r": [\d.]+ s per 30 steps x 6 layers \(float32, median of 1\)$", line)
    # The lineage way computes the gather way's attention; leaving the reorder out does not.
    difference = {line.split()[0]: float(line.split("difference ")[1].split()[0])
                  for line in lines[3:]}
    assert difference["lineage"] < 1e-3 < difference["no_gather"], lines


def test_onednn_verbose_summary_sums_exec_lines_per_run(tmp_path, capsys):
    log = tmp_path / "onednn.log"
    log.write_text(
        "onednn_verbose,v1,info,oneDNN v3\n"
        "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,brg,undef,src,,,2x3:3x4,0.5\n"
        "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src,,,2x3:3x4,1.5\n"
        "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src,,,2x3:3x4,2.5\n"
        "onednn_verbose,v1,primitive,exec,cpu,inner_product,brgemm:avx512_core_vnni,undef,src,,,"
        "mb128ic512oc512,6.0\n"
        "some other output\n")
    _script_module("onednn_verbose_summary").main([str(log), "--runs=2"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "oneDNN primitives: 5.0 ms per run over 2 run(s)"
    assert lines[1].split() == ["3.0", "ms", "0.5", "calls", "6.000", "ms/call", "inner_product",
                                "brgemm:avx512_core_vnni", "(all", "shapes)"]
    assert lines[2].split()[:6] == ["2.0", "ms", "1.0", "calls", "2.000", "ms/call"]
    assert lines[-1].split()[-1] == "2x3:3x4"
    (tmp_path / "empty.log").write_text("no verbose lines\n")
    with pytest.raises(SystemExit) as exit_info:
        _script_module("onednn_verbose_summary").main([str(tmp_path / "empty.log")])
    assert exit_info.value.code == 2
    assert "holds no oneDNN 'exec' line" in capsys.readouterr().err
