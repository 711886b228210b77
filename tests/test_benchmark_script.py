"""scripts/benchmark.py and scripts/profile_decode.py: each subcommand runs on tiny shapes
and prints its documented lines (no timing is asserted); ``decode`` times the decoder's
own ``Translator`` with the decoder's defaults; a bad flag is one ``error:`` line."""
import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
SCRIPT = SCRIPTS / "benchmark.py"
TINY_MODEL = ["--hparams_set=transformer_tiny", "--hparams=num_hidden_layers=1",
              "--vocab_size=50"]
TINY = TINY_MODEL + ["--warmup=1", "--peak_size=64", "--peak_seconds=0.01"]
TINY_DECODE = ["--batch=2", "--source_length=3", "--target_length=5", "--beam_size=2"]
LAST_DECODE_LINE = r"tgt_tok_s=\d+ mfu=[\d.]+"
LAST_TRAIN_LINE = r"tgt_tok_s=\d+ step_s=[\d.]+ mfu=[\d.]+"


def _run(args, script=SCRIPT, timeout=300):
    out = subprocess.run([sys.executable, str(script)] + args, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()


def _script_module(name):
    """scripts/NAME.py imported in this process, as ``python scripts/NAME.py`` finds its
    neighbours (the scripts folder first on the path)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _peers_installed() -> bool:
    return all(importlib.util.find_spec(name) for name in ("ctranslate2", "torch"))


# train and decode -------------------------------------------------------------------------
def test_train_prints_tokens_step_and_mfu():
    lines = _run(["train", "--batch=2", "--length=4", "--steps=1"] + TINY)
    assert lines[0].startswith("train transformer_tiny") and "jit_compile=False" in lines[0]
    assert re.fullmatch(LAST_TRAIN_LINE, lines[-1]), lines[-1]
    assert lines[-2].startswith("peak_rss_mb=")


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_decode_prints_tokens_and_mfu(quantize):
    lines = _run(["decode", "--repeats=1", f"--quantize={quantize}"] + TINY_DECODE + TINY)
    header = next(line for line in lines if line.startswith("decode "))
    # the decoder's settings: no XLA, oneDNN's ops on, for float32 and int8 alike
    assert f"quantize={quantize} jit_compile=False" in header and "onednn=True" in header
    assert ("int8: matmul weights quantized" in "\n".join(lines)) == (quantize == "int8")
    assert re.fullmatch(LAST_DECODE_LINE, lines[-1]), lines[-1]


def _decode_args(benchmark, extra=()):
    return benchmark.parse_args(["decode", "--repeats=1"] + TINY_DECODE + TINY + list(extra))


@pytest.mark.parametrize("flags,jit_compile,quantized", [
    ([], False, "none"), (["--quantize=int8"], False, "int8"), (["--jit_compile"], True, "none")])
def test_decode_builds_the_decoders_translator(flags, jit_compile, quantized, monkeypatch):
    """``decode`` goes through ``Translator.from_decode_hparams`` with the decoder's decode
    hparams (beam and alpha as given, its batch size and input limit), the decoder's
    ``jit_compile`` (off unless asked) and int8 by ``quantize_model``; every hypothesis has
    the stated length."""
    from t2t_lite.decoding.config import DecodeHParams
    from t2t_lite.decoding.translator import Translator
    from t2t_lite.layers.int8 import quantization_of
    benchmark = _script_module("benchmark")
    built = []
    original = Translator.from_decode_hparams.__func__

    def recording(cls, model, vocabulary, decode_hparams, jit_compile=False, constraint=None):
        built.append((model, decode_hparams, jit_compile))
        return original(cls, model, vocabulary, decode_hparams, jit_compile, constraint)

    monkeypatch.setattr(Translator, "from_decode_hparams", classmethod(recording))
    args = _decode_args(benchmark, flags)
    run = benchmark.make_decode(args, benchmark.get_hparams(args.hparams_set, args.hparams))
    nbest = run()
    [(model, decode_hparams, jit)] = built
    assert jit is jit_compile and quantization_of(model) == quantized
    assert decode_hparams == DecodeHParams().replace(beam_size=2, extra_length=5 - 3)
    assert len(nbest) == 2 and all(len(beams) == 2 for beams in nbest)
    assert {len(text.split()) for beams in nbest for text, _ in beams} == {4}  # EOS not shown


def test_decode_refuses_to_time_other_work_than_stated(monkeypatch):
    """With pad and EOS winning every step instead of losing, hypotheses end at once:
    ``run`` raises instead of timing less work than the FLOP count assumes."""
    benchmark = _script_module("benchmark")
    monkeypatch.setattr(benchmark, "LOSING_LOGIT_PER_CHANNEL", 4.0)
    args = _decode_args(benchmark)
    run = benchmark.make_decode(args, benchmark.get_hparams(args.hparams_set, args.hparams))
    with pytest.raises(RuntimeError, match=r"hypotheses of \[0\] tokens before EOS, not 4"):
        run()


def test_the_decode_benchmarks_pad_and_eos_never_win():
    """``make_ids_lose``: the logits of pad and EOS are the lowest of every row at every
    step, so hypotheses run to their forced length without a filter on the logits."""
    import numpy as np
    import tensorflow as tf
    benchmark = _script_module("benchmark")
    model = benchmark.build_model(benchmark.get_hparams("transformer_tiny"), 50)
    benchmark.make_ids_lose(model, (0, 1))
    from t2t_lite.decoding import DecodingPlan
    plan = DecodingPlan(growing_cache=True)
    ids, cache, memory = model.decoding_state(tf.constant([[5, 9, 1], [7, 2, 1]]), 0, plan)
    for step in range(4):
        logits, cache = model.decode_step(ids, step, cache, memory, plan)
        logits = logits.numpy()
        assert set(np.argsort(logits, axis=1)[:, :2].ravel()) == {0, 1}
        assert (np.delete(logits, [0, 1], axis=1).min(axis=1) - logits[:, :2].max(axis=1)
                > 50).all()
        ids = tf.constant(logits.argmax(axis=1).astype(np.int32))


# the peers --------------------------------------------------------------------------------
def test_peers_are_timed_in_paired_rounds_and_the_ratio_is_the_median_of_the_rounds(capsys):
    """Each round runs t2t-lite and every peer once in turn, so that a change of the
    machine's load moves both sides of a round's ratio; the reported ratio is the median
    of the rounds' ratios. Fake runs whose durations change between rounds show both."""
    benchmark_peers = _script_module("benchmark_peers")
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


def test_compare_without_the_peers_says_what_to_install(monkeypatch, capsys):
    benchmark = _script_module("benchmark")
    benchmark_peers = _script_module("benchmark_peers")
    monkeypatch.setattr(benchmark_peers, "missing", lambda: ["ctranslate2", "torch"])
    args = benchmark.parse_args(["decode", "--compare"])
    assert args.compare_ready is False
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


@pytest.mark.slow
@pytest.mark.skipif(not _peers_installed(),
                    reason='the peers are not installed (pip install -e ".[bench]")')
def test_decode_compare_times_the_peers_and_keeps_the_last_line():
    lines = _run(["decode", "--batch=2", "--source_length=4", "--target_length=5",
                  "--beam_size=2", "--repeats=1", "--compare", "--quantize=int8"] + TINY,
                 timeout=900)
    assert "int8: matmul weights quantized" in "\n".join(lines)
    for name in ("ctranslate2_float32", "ctranslate2_int8", "torch"):
        peer = [line for line in lines if line.startswith(f"peer {name}: ")]
        assert len(peer) == 1 and re.search(r"tgt_tok_s=\d+$", peer[0]), lines
        ratio = [line for line in lines if line.startswith(f"ratio_vs_{name}=")]
        assert len(ratio) == 1 and float(ratio[0].split("=")[1]) > 0, lines
        rounds = [line for line in lines if line.startswith(f"rounds vs {name}: ")]
        assert len(rounds) == 1 and len(rounds[0].split(": ")[1].split()) == 1, lines
    assert re.fullmatch(LAST_DECODE_LINE, lines[-1]), lines[-1]


@pytest.mark.slow
@pytest.mark.skipif(not _peers_installed(),
                    reason='the peers are not installed (pip install -e ".[bench]")')
def test_train_compare_times_torch_and_keeps_the_last_lines():
    lines = _run(["train", "--batch=2", "--length=4", "--steps=1", "--compare"] + TINY,
                 timeout=900)
    assert [line for line in lines if line.startswith("peer torch: ")], lines
    ratio = [line for line in lines if line.startswith("ratio_vs_torch=")]
    assert len(ratio) == 1 and re.fullmatch(r"ratio_vs_torch=[\d.]+", ratio[0]), lines
    assert lines[-2].startswith("peak_rss_mb=")
    assert re.fullmatch(LAST_TRAIN_LINE, lines[-1]), lines[-1]


# input, attention, sweep and plot ---------------------------------------------------------
@pytest.mark.slow
def test_input_times_the_pipeline_and_a_training_step(numbers_data):
    lines = _run(["input", "--problem=translate_ende_numbers", f"--data_dir={numbers_data}",
                  "--hparams_set=transformer_tiny", "--steps=3", "--warmup=1",
                  "--model_hparams=transformer_tiny", "--model_batch_size=256",
                  "--model_steps=1"])
    assert re.fullmatch(r"pipeline translate_ende_numbers batch_size=\d+ max_length=\d+: "
                        r"[\d.]+ batches/s, [\d,]+ target tokens/s \([\d,]+ with padding\)",
                        lines[-3]), lines
    assert lines[-2].startswith("model transformer_tiny batch_size=256: ")
    assert re.fullmatch(r"pipeline / model tokens per second: \d+x", lines[-1]), lines[-1]


@pytest.mark.slow
def test_attention_prints_the_monitors_overhead(numbers_data):
    import json
    lines = _run(["attention", f"--data_dir={numbers_data}", "--steps=2", "--writes=1",
                  "--hparams=num_hidden_layers=1"])
    figures = json.loads(lines[-1])
    assert figures["hparams_set"] == "transformer_tiny" and figures["every_steps"] == 1000
    assert len(figures["write_seconds"]) == 1 and figures["overhead_percent_mean"] > 0


@pytest.mark.slow
def test_sweep_prints_csv_rows_and_plot_draws_them(tmp_path):
    lines = _run(["sweep", "--batches=2", "--lengths=4,8", "--steps=1"] + TINY)
    assert lines[0] == "batch,length,step_s,peak_rss_mb,mfu"
    assert [line.split(",")[:2] for line in lines[1:]] == [["2", "4"], ["2", "8"]]
    assert all(re.fullmatch(r"2,\d+,[\d.]+,\d+,[\d.]+", line) for line in lines[1:]), lines
    csv = tmp_path / "sweep.csv"
    csv.write_text("\n".join(lines) + "\n")
    out = _run(["plot", f"--csv={csv}", f"--out={tmp_path / 'sweep.png'}"])
    assert out[-1].startswith(f"wrote {tmp_path / 'sweep.png'} (")
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


# profile_decode ---------------------------------------------------------------------------
def test_profile_decode_prints_op_types_with_times():
    lines = _run(TINY_MODEL + TINY_DECODE + ["--top=40"], script=SCRIPTS / "profile_decode.py")
    assert lines[0].startswith("profile: quantize=none") and "cpu=" in lines[0]
    assert re.fullmatch(r"profiled search: [\d.]+ s", lines[1]), lines[1]
    rows = [re.fullmatch(r"(\S+)\s+([\d.]+) s\s+(\d+) calls", line) for line in lines[2:]]
    assert 5 <= len(rows) <= 40 and all(rows), lines[2:]
    assert "_MklMatMul" in [row.group(1) for row in rows]   # oneDNN on, as in the decoder


def test_profile_decode_sums_a_onednn_verbose_log_per_run(tmp_path, capsys):
    log = tmp_path / "onednn.log"
    log.write_text(
        "onednn_verbose,v1,info,oneDNN v3\n"
        "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,brg,undef,src,,,2x3:3x4,0.5\n"
        "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src,,,2x3:3x4,1.5\n"
        "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src,,,2x3:3x4,2.5\n"
        "onednn_verbose,v1,primitive,exec,cpu,inner_product,brgemm:avx512_core_vnni,undef,src,,,"
        "mb128ic512oc512,6.0\n"
        "some other output\n")
    profile = _script_module("profile_decode")
    profile.main([f"--onednn_log={log}", "--runs=2"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "oneDNN primitives: 5.0 ms per run over 2 run(s)"
    assert lines[1].split() == ["3.0", "ms", "0.5", "calls", "6.000", "ms/call", "inner_product",
                                "brgemm:avx512_core_vnni", "(all", "shapes)"]
    assert lines[2].split()[:6] == ["2.0", "ms", "1.0", "calls", "2.000", "ms/call"]
    assert lines[-1].split()[-1] == "2x3:3x4"
    (tmp_path / "empty.log").write_text("no verbose lines\n")
    with pytest.raises(SystemExit) as exit_info:
        profile.main([f"--onednn_log={tmp_path / 'empty.log'}"])
    assert exit_info.value.code == 2
    assert "holds no oneDNN 'exec' line" in capsys.readouterr().err


# bad flags --------------------------------------------------------------------------------
POSITIVE = "must be a positive integer"


@pytest.mark.parametrize("script,flags,message", [
    ("benchmark", ["decode", "--repeats=0"], f"argument --repeats: {POSITIVE}"),
    ("benchmark", ["train", "--hparams_set=nope"], "unknown hparams set 'nope'"),
    ("benchmark", ["decode", "--hparams=num_heads=x"], "num_heads"),
    ("benchmark", ["decode", "--quantize=int4"], "argument --quantize: invalid choice"),
    ("benchmark", ["decode", "--source_length=10", "--target_length=5"],
     "--target_length=5 is below --source_length=10"),
    ("benchmark", ["decode", "--hparams_set=transformer_tiny", "--source_length=500",
                   "--target_length=600"], "--source_length=500 exceeds the model's"),
    ("benchmark", ["input"], "the following arguments are required: --data_dir"),
    ("profile_decode", ["--batch=0"], f"argument --batch: {POSITIVE}"),
    ("profile_decode", ["--onednn_log=/nonexistent/onednn.log"],
     "--onednn_log=/nonexistent/onednn.log: No such file or directory"),
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
