"""Int8 inference (t2t_lite.layers.int8): the int8 product is exact, a quantized random
model's logits stay close to float32, --quantize is one flag in the decoder and the
exporter, and an int8 SavedModel translates in a fresh process as the int8 decoder does."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.commands import decoder, exporter
from t2t_lite.decoding import DecodingPlan
from t2t_lite.layers import int8
from t2t_lite.layers.int8 import (ACTIVATION_LEVELS, WEIGHT_LEVELS, Int8Kernel, int8_matmul,
                                  kernel_name, quantize_model, quantization_of)
from t2t_lite.models.transformer import Transformer

from run_dir_helpers import tiny_run_dir
from test_exporter import DECODE_HPARAMS, SENTENCES, serve_in_fresh_process
from test_translator import _NoVocab

# Stated tolerance of int8 logits against float32 on a random-weight model: the largest
# absolute difference at most 5% of the float32 logits' largest magnitude, the mean
# difference at most 1% of it.
MAX_TOLERANCE = 0.05
MEAN_TOLERANCE = 0.01


def reference_int8_matmul(x, w, per_tensor=False):
    """numpy: x [m, k] int8 per row (or with one scale), w [k, n] per-column 7-bit, int64
    product, rescaled."""
    w_scale = np.abs(w).max(axis=0) / WEIGHT_LEVELS
    w_q = np.clip(np.round(w / w_scale), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int64)
    x_scale = np.abs(x).max(axis=None if per_tensor else 1, keepdims=True) / ACTIVATION_LEVELS
    x_q = np.round(x / x_scale).astype(np.int64)
    return (x_q @ w_q).astype(np.float64) * x_scale * w_scale


def test_int8_matmul_is_the_exact_int8_product_rescaled():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3, 40)).astype(np.float32)      # [b, n, k]
    w = rng.standard_normal((40, 24)).astype(np.float32)        # [k, n]
    out = int8_matmul(tf.constant(x), Int8Kernel(w)).numpy()
    assert out.shape == (6, 3, 24)
    expected = reference_int8_matmul(x.reshape(18, 40), w).reshape(6, 3, 24)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    # ... and it is an approximation of the float product, not the float product itself.
    exact = x @ w
    assert 0 < np.abs(out - exact).max() < 0.05 * np.abs(exact).max()


def test_per_tensor_int8_matmul_adds_bias_and_relu_after_one_scale():
    """A per-tensor kernel: one activation scale for all rows (so a row of small values is
    quantized more coarsely than per row would), then the bias and the ReLU."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 3, 40)).astype(np.float32)
    x[0] *= 0.01                                                 # rows far below the max
    w = rng.standard_normal((40, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    kernel = Int8Kernel(w, per_tensor=True)
    rows = x.reshape(18, 40)
    for relu in (False, True):
        out = int8_matmul(tf.constant(x), kernel, bias=tf.constant(bias), relu=relu).numpy()
        expected = reference_int8_matmul(rows, w, per_tensor=True) + bias
        expected = np.maximum(expected, 0) if relu else expected
        np.testing.assert_allclose(out.reshape(18, 24), expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(reference_int8_matmul(rows, w, per_tensor=True)[:3],
                           reference_int8_matmul(rows, w)[:3], rtol=1e-3, atol=0)


ONEDNN_CHECK = r"""
import numpy as np, tensorflow as tf
from t2t_lite.layers.int8 import (Int8Kernel, _xla_product, int8_matmul, kernel_name,
                                  quantize_rows, quantize_tensor)
rng = np.random.default_rng(1)
x = tf.constant(rng.standard_normal((33, 512)).astype(np.float32) * 3)
bias = tf.constant(rng.standard_normal(300).astype(np.float32) * 20)
# Per row, per row, then per tensor with a bias and a ReLU (both fused into oneDNN's op).
kernels = [Int8Kernel(rng.standard_normal((512, 300)).astype(np.float32), per_tensor=i == 2)
           for i in range(3)]
options = [{}, {}, {"bias": bias, "relu": True}]
x_q, scale = quantize_rows(x)
expected = [_xla_product(x_q, k.q).numpy() * scale.numpy() * k.scale.numpy() for k in kernels[:2]]
t_q, largest = quantize_tensor(x)
expected.append(np.maximum(_xla_product(t_q, kernels[2].q).numpy() * kernels[2].scale.numpy()
                           * (largest.numpy() / 127) + bias.numpy(), 0))
traced = [tf.function(lambda x, k=k, o=o: int8_matmul(x, k, **o))
          for k, o in zip(kernels, options)]
differences = []
for i in (0, 1, 2, 0, 1, 2):   # eager (one shared function), then traced (a weight copy per node)
    differences.append(np.abs(int8_matmul(x, kernels[i], **options[i]).numpy()
                              - expected[i]).max())
    differences.append(np.abs(traced[i](x).numpy() - expected[i]).max())
print(kernel_name(), float(max(differences)), int((expected[2] == 0).sum()))
"""


@pytest.mark.parametrize("isa", ["", "AVX2"])
def test_onednn_kernel_gives_the_xla_kernels_product(isa):
    """Eagerly and traced, alternating two kernels of different weights: each call gets
    its own weights (the traced op keeps a blocked copy of them, the eager one must not).
    Also with oneDNN held to AVX2 (``ONEDNN_MAX_CPU_ISA``), whose s8 x s8 kernel sums
    pairs of products in int16: the 7-bit weights must keep it from saturating."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="2",
               ONEDNN_MAX_CPU_ISA=isa)
    result = subprocess.run([sys.executable, "-c", ONEDNN_CHECK], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    name, difference, relu_zeros = result.stdout.split()
    assert name == "onednn"
    assert float(difference) < 1e-3   # the same int32 product; float rescaling order only
    assert int(relu_zeros) > 1000     # the ReLU had work to do


def _random_model(seed=3):
    import keras
    keras.utils.set_random_seed(seed)
    model = Transformer(registry.hparams("transformer_tiny", "num_hidden_layers=2"), 300)
    model.build()
    return model


def _assert_close(quantized, reference):
    scale = np.abs(reference).max()
    difference = np.abs(quantized - reference)
    assert difference.max() <= MAX_TOLERANCE * scale, (difference.max(), scale)
    assert difference.mean() <= MEAN_TOLERANCE * scale, (difference.mean(), scale)
    assert difference.max() > 0  # the int8 path really ran


def test_quantized_random_model_logits_are_close_to_float32():
    model = _random_model()
    rng = np.random.default_rng(0)
    features = {"inputs": rng.integers(2, 300, (4, 9)).astype(np.int32),
                "targets": rng.integers(2, 300, (4, 7)).astype(np.int32)}
    features["inputs"][:, -1] = features["targets"][:, -1] = 1
    plan = DecodingPlan(growing_cache=True)
    _, cache, memory = model.decoding_state(features["inputs"], 0, plan)
    ids = tf.zeros([4], tf.int32)
    reference = model(features).numpy()
    reference_steps = []
    for step in range(3):
        logits, cache = model.decode_step(ids, step, cache, memory, plan)
        reference_steps.append(logits.numpy())
        ids = tf.constant(features["targets"][:, step])
    assert quantization_of(model) == "none"

    weights = quantize_model(model)
    assert quantization_of(model) == "int8"
    # 2 layers x (encoder: qkv, out, ffn 2; decoder: qkv, out, q, kv, out, ffn 2) + softmax
    assert len(weights.kernels) == 2 * (4 + 7) + 1
    assert all(k.q.dtype == tf.int8 and int(tf.reduce_max(tf.abs(tf.cast(k.q, tf.int32))))
               <= WEIGHT_LEVELS for k in weights.kernels)
    # Per tensor: every attention's input projections, the feed-forward's first layer and
    # the softmax projection (2 x (1 + 1) + 2 x (1 + 2 + 1) + 1); the rest per row.
    per_tensor = sorted(k.name.rsplit("_", 1)[-1] for k in weights.kernels if k.per_tensor)
    assert weights.activation_scales == "mixed" and len(per_tensor) == 13
    assert set(per_tensor) == {"kernel", "hidden", "softmax"}
    assert not any(k.per_tensor for k in weights.kernels
                   if k.name.endswith(("output_kernel", "_output")))
    _assert_close(model(features).numpy(), reference)
    _, cache, memory = model.decoding_state(features["inputs"], 0, plan)
    ids = tf.zeros([4], tf.int32)
    for step in range(3):
        logits, cache = model.decode_step(ids, step, cache, memory, plan)
        _assert_close(logits.numpy(), reference_steps[step])
        ids = tf.constant(features["targets"][:, step])
    # The float32 variables are untouched (checkpoints and training see no change).
    assert all(v.dtype == "float32" for v in model.weights)


def test_quantize_needs_a_built_model():
    model = Transformer(registry.hparams("transformer_tiny", ""), 50)
    with pytest.raises(ValueError, match="built model"):
        quantize_model(model)


@pytest.mark.parametrize("command", ["decoder", "exporter"])
def test_bad_quantize_value_is_one_error_line(capsys, tmp_path, command):
    tiny_run_dir()
    capsys.readouterr()  # the run directory's datagen progress
    if command == "decoder":
        source = tmp_path / "in.txt"
        source.write_text("one\n")
        status = decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file",
                               str(source), "--quantize=int4"])
    else:
        status = exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                                str(tmp_path / "export"), "--quantize=int4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert err == ["error: --quantize=int4 is not supported; use --quantize=int8 or "
                   "--quantize=none"]


@pytest.mark.slow
def test_int8_export_translates_as_the_int8_decoder_in_a_fresh_process(capsys, tmp_path):
    export_dir = tmp_path / "export"
    assert exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                          str(export_dir), "--decode_hparams", DECODE_HPARAMS,
                          "--quantize=int8"]) == 0
    info = json.loads((export_dir / "t2t_lite_export.json").read_text())
    assert info["quantize"] == "int8" and info["int8_kernel"] == kernel_name()

    served = serve_in_fresh_process(export_dir)

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    decoded = {}
    for quantize in ("int8", "none"):
        target = tmp_path / f"out.{quantize}.txt"
        capsys.readouterr()
        assert decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file",
                             str(source), "--decode_to_file", str(target),
                             "--decode_hparams", DECODE_HPARAMS,
                             f"--quantize={quantize}"]) == 0
        err = capsys.readouterr().err
        assert ("int8: matmul weights quantized" in err) == (quantize == "int8")
        decoded[quantize] = target.read_text(encoding="utf-8").split("\n")[:-1]
    assert served["translations"] == decoded["int8"]
    assert all(served["translations"][i] for i in (0, 2, 3, 4))
    # Without oneDNN's ops the export still serves (its int8 op is always registered);
    # the float32 ops' rounding may then differ, so only the shape of the answer is fixed.
    plain = serve_in_fresh_process(export_dir, TF_ENABLE_ONEDNN_OPTS="0")
    assert len(plain["translations"]) == len(SENTENCES)


@pytest.mark.parametrize("environment, expected", [(None, "1"), ("0", "0"), ("1", "1")])
def test_the_decoder_turns_on_onednn_for_float32_unless_the_environment_says(environment,
                                                                           expected):
    """The decoder's pre-TensorFlow step sets TF_ENABLE_ONEDNN_OPTS=1 for float32 decoding
    too (oneDNN's float32 matmul is the faster one on CPU); a user's 0 is kept."""
    run_dir = tiny_run_dir()
    code = ("import os, sys, argparse\n"
            "from t2t_lite.commands.quantize_flag import prepare_decoder_command\n"
            f"prepare_decoder_command(argparse.Namespace(output_dir={str(run_dir)!r}, "
            "quantize='none', int8_activation_scales=None, t2t_usr_dir='', "
            "decode_hparams=''))\n"
            "assert 'tensorflow' not in sys.modules\n"
            "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'))\n")
    env = {key: value for key, value in os.environ.items() if key != "TF_ENABLE_ONEDNN_OPTS"}
    if environment is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = environment
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, check=True)
    assert result.stdout.strip() == expected


def _decode_three_steps(model, inputs, targets, growing=True):
    """The logits [b, V] of three cached decoding steps, and the final cache (the
    self-attention caches and the per-sentence memory of every layer)."""
    plan = DecodingPlan(growing_cache=growing)
    _, cache, memory = model.decoding_state(inputs, 3, plan)
    ids = tf.zeros([inputs.shape[0]], tf.int32)
    steps = []
    for step in range(3):
        logits, cache = model.decode_step(ids, step, cache, memory, plan)
        steps.append(logits.numpy())
        ids = tf.constant(targets[:, step])
    for name, layer in cache["decoder"].items():
        layer.update(memory["decoder"][name])
    return steps, cache


@pytest.mark.parametrize("growing", [True, False])
def test_bfloat16_self_attention_keeps_int8_logits_close(growing):
    """``attention_dtype="bfloat16"``: every self-attention cache holds bfloat16 (half the
    bytes to append and reorder), the encoder-decoder memory stays float32, and the
    decoding steps' logits stay within the int8 tolerance of the float32-attention ones
    (growing and preallocated caches alike)."""
    rng = np.random.default_rng(4)
    inputs = rng.integers(2, 300, (3, 8)).astype(np.int32)
    targets = rng.integers(2, 300, (3, 3)).astype(np.int32)
    logits = {}
    for dtype in ("float32", "bfloat16"):
        model = _random_model()
        assert quantize_model(model, attention_dtype=dtype).attention_dtype == dtype
        logits[dtype], cache = _decode_three_steps(model, inputs, targets, growing)
        layer_cache = cache["decoder"]["layer_0"]
        assert layer_cache["self_k"].dtype == layer_cache["self_v"].dtype == dtype
        assert layer_cache["self_k"].shape[2] == 3
        assert all(tensor.dtype == tf.float32 for name, tensor in layer_cache.items()
                   if not name.startswith("self_"))
    for bf16_step, f32_step in zip(logits["bfloat16"], logits["float32"]):
        _assert_close(bf16_step, f32_step)


def test_an_xla_compiled_search_keeps_float32_self_attention():
    """Inside XLA the int8 matmuls take the xla kernel and the cache the compute dtype
    (XLA's bfloat16 attention was slower); outside, the chosen bfloat16."""
    model = _random_model()
    weights = quantize_model(model, attention_dtype="bfloat16")
    inputs = tf.constant(np.random.default_rng(6).integers(2, 300, (2, 5)), tf.int32)

    def first_cache_dtype(inputs):
        plan = DecodingPlan()
        _, cache, memory = model.decoding_state(inputs, 3, plan)
        logits, cache = model.decode_step(tf.zeros([2], tf.int32), 0, cache, memory, plan)
        return cache["decoder"]["layer_0"]["self_k"], logits

    assert tf.function(first_cache_dtype, jit_compile=True)(inputs)[0].dtype == tf.float32
    assert tf.function(first_cache_dtype)(inputs)[0].dtype == tf.bfloat16
    assert int8.describe_quantization(weights, jit_compile=True) == (
        "int8: matmul weights quantized (kernel xla inside the XLA-compiled search, "
        "activation scales mixed, self-attention in the compute dtype)")


def test_attention_dtype_default_needs_onednn_and_bfloat16_arithmetic(monkeypatch):
    """bfloat16 by default only with oneDNN and bfloat16 arithmetic; otherwise the cache
    keeps the model's compute dtype (float32, or a mixed-precision model's own)."""
    for onednn, bf16, expected in [(True, True, "bfloat16"), (True, False, "float32"),
                                   (False, True, "float32"), (False, False, "float32")]:
        monkeypatch.setattr(int8, "onednn_enabled", lambda onednn=onednn: onednn)
        monkeypatch.setattr(int8, "has_native_bfloat16", lambda bf16=bf16: bf16)
        assert int8.default_attention_dtype() == (expected if expected == "bfloat16"
                                                  else None)
        model = _random_model()
        weights = quantize_model(model)
        assert weights.attention_dtype == expected
        assert int8.describe_quantization(weights).endswith(f"self-attention {expected})")
        assert int8.quantize_record(weights)["int8_attention"] == expected
    # No bfloat16 arithmetic: a mixed-precision model's cache stays in its compute dtype.
    mixed = Transformer(registry.hparams("transformer_tiny", "num_hidden_layers=1"), 300,
                        dtype="mixed_float16")
    mixed.build()
    assert quantize_model(mixed).attention_dtype == "float16"
    _, cache, _ = mixed.decoding_state(tf.constant([[5, 6, 1]]), 0,
                                       DecodingPlan(growing_cache=True))
    assert cache["decoder"]["layer_0"]["self_k"].dtype == tf.float16


def test_bad_attention_dtype_is_refused():
    with pytest.raises(ValueError, match="attention_dtype must be one of"):
        quantize_model(_random_model(), attention_dtype="float16")


@pytest.mark.parametrize("scales", ["row", "tensor"])
def test_activation_scales_row_or_tensor_apply_to_every_input_and_are_recorded(scales):
    model = _random_model()
    weights = quantize_model(model, activation_scales=scales)
    assert len(weights.kernels) == 23
    assert [k.per_tensor for k in weights.kernels] == [scales == "tensor"] * 23
    assert int8.quantize_record(weights)["int8_activation_scales"] == scales
    assert f"activation scales {scales}," in int8.describe_quantization(weights)
    with pytest.raises(ValueError, match="activation_scales must be one of"):
        quantize_model(model, activation_scales="column")


@pytest.mark.parametrize("per_tensor", [False, True])
def test_a_rows_product_depends_on_the_other_rows_only_with_one_scale_per_tensor(per_tensor):
    """Per row, a row's int8 product is the same alone and in a batch; per tensor, a row
    with a larger range beside it coarsens its quantization (the decoder's batch_size can
    then change a translation: docs/decoding.md)."""
    rng = np.random.default_rng(5)
    kernel = Int8Kernel(rng.standard_normal([64, 48]).astype(np.float32),
                        per_tensor=per_tensor)
    row = rng.standard_normal([1, 64]).astype(np.float32)
    batch = np.concatenate([row, 30 * rng.standard_normal([3, 64]).astype(np.float32)])
    alone = int8_matmul(tf.constant(row), kernel).numpy()[0]
    in_batch = int8_matmul(tf.constant(batch), kernel).numpy()[0]
    if per_tensor:
        assert np.abs(alone - in_batch).max() > 1e-2 * np.abs(alone).max()
    else:
        np.testing.assert_array_equal(alone, in_batch)


def _sentences_alone_and_batched(activation_scales: str):
    """Five sentences' int8 translations, batched and each alone: (ids [5, T], scores
    [5]) for each, of a random model quantized with ``activation_scales``."""
    from t2t_lite.decoding.translator import Translator
    model = _random_model(seed=11)
    quantize_model(model, activation_scales=activation_scales)
    translator = Translator(model, vocabulary=_NoVocab(), beam_size=4, alpha=0.6,
                            extra_length=5, max_input_length=8)
    rng = np.random.default_rng(2)
    batch = np.zeros([5, 8], np.int32)
    for row, length in enumerate([8, 3, 6, 8, 5]):
        batch[row, :length - 1] = rng.integers(3, 300, length - 1)
        batch[row, length - 1] = 1
    ids, scores = translator.translate_ids(tf.constant(batch))
    alone = [translator.translate_ids(tf.constant(batch[row:row + 1])) for row in range(5)]
    return ((ids.numpy(), scores.numpy()),
            (np.concatenate([i.numpy() for i, _ in alone]),
             np.concatenate([s.numpy() for _, s in alone])))


def test_row_scales_translate_each_sentence_as_alone_in_its_batch():
    """With every input per row, an int8 search gives each sentence the translation it
    gets alone, as float32 does: the batch reaches the int8 products only through float
    rounding (the float ops' results for a row differ in the last bits with the batch's
    shape, enough to move a value across an int8 rounding boundary now and then: scores
    moved by up to 0.011 here). Under the default mixed scales the same five sentences
    do depend on their batch (two of them changed), so this comparison can tell."""
    (ids, scores), (alone_ids, alone_scores) = _sentences_alone_and_batched("row")
    np.testing.assert_array_equal(alone_ids, ids)
    np.testing.assert_allclose(alone_scores, scores, atol=0.05)
    (ids, _), (alone_ids, _) = _sentences_alone_and_batched("mixed")
    assert not np.array_equal(alone_ids, ids)


@pytest.mark.slow
def test_the_decoder_and_exporter_pass_int8_activation_scales_on(capsys, tmp_path):
    run_dir = str(tiny_run_dir())
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES[:2]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert decoder.main(["--output_dir", run_dir, "--decode_from_file", str(source),
                         "--decode_to_file", str(tmp_path / "out.txt"), "--decode_hparams",
                         DECODE_HPARAMS, "--quantize=int8",
                         "--int8_activation_scales=row"]) == 0
    assert "activation scales row," in capsys.readouterr().err
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 2
    export_dir = tmp_path / "export"
    assert exporter.main(["--output_dir", run_dir, "--export_dir", str(export_dir),
                          "--decode_hparams", DECODE_HPARAMS, "--quantize=int8",
                          "--int8_activation_scales=tensor"]) == 0
    info = json.loads((export_dir / "t2t_lite_export.json").read_text())
    assert info["int8_activation_scales"] == "tensor"


@pytest.mark.parametrize("command", ["decoder", "exporter"])
@pytest.mark.parametrize("flags, message", [
    (["--quantize=int8", "--int8_activation_scales=column"],
     "error: --int8_activation_scales=column is not supported; use one of mixed, row, "
     "tensor"),
    (["--int8_activation_scales=row"],
     "error: --int8_activation_scales=row sets int8 decoding's activations; add "
     "--quantize=int8 or drop it"),
    (["--quantize=none", "--int8_activation_scales=mixed"],
     "error: --int8_activation_scales=mixed sets int8 decoding's activations; add "
     "--quantize=int8 or drop it")])
def test_bad_activation_scales_flag_is_one_error_line(capsys, tmp_path, command, flags,
                                                      message):
    run_dir = str(tiny_run_dir())
    capsys.readouterr()
    if command == "decoder":
        source = tmp_path / "in.txt"
        source.write_text("one\n")
        status = decoder.main(["--output_dir", run_dir, "--decode_from_file", str(source)]
                              + flags)
    else:
        status = exporter.main(["--output_dir", run_dir, "--export_dir",
                                str(tmp_path / "export")] + flags)
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not (tmp_path / "export").exists()


def test_cpu_features_read_cpuinfo_flags(tmp_path, monkeypatch):
    from t2t_lite import cpu_features
    read_flags = cpu_features.cpu_flags
    for index, (flags, summary, bf16) in enumerate([
            ("fpu avx2 fma", "avx2+fma", False),
            ("avx2 fma avx512f avx512_vnni avx512_bf16",
             "avx2+fma+avx512f+avx512_vnni+avx512_bf16", True),
            ("sse2 amx_bf16", "none", True)]):
        path = tmp_path / f"cpuinfo.{index}"
        path.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\n"
                        f"flags\t\t: other\n")
        read = read_flags(str(path))   # the first CPU's line
        assert read == frozenset(flags.split())
        monkeypatch.setattr(cpu_features, "cpu_flags", lambda read=read: read)
        assert cpu_features.simd_summary() == summary
        assert cpu_features.has_native_bfloat16() == bf16
    assert read_flags(str(tmp_path / "missing")) == frozenset()
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: frozenset())
    assert cpu_features.simd_summary() == "unknown"
