"""Int8 inference (t2t_lite.layers.int8, .quantization, .int8_backend): the int8 product
is exact and rescaled per row alike on both kernels, each quantizable layer quantizes
itself and keeps its mode in its config, a quantized random model's logits stay close to
float32, a sentence's int8 translation does not depend on its batch, --quantize is the one
int8 flag of the decoder and the exporter, and an int8 SavedModel translates the same in
fresh processes with and without oneDNN's ops."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.commands import decoder, exporter
from t2t_lite.decoding import DecodingPlan
from t2t_lite.layers import int8, int8_backend, quantization
from t2t_lite.layers.int8 import (ACTIVATION_LEVELS, WEIGHT_LEVELS, Int8Kernel, int8_matmul,
                                  kernel_name, quantize_model, quantization_of)
from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.layers.embedding import SharedEmbedding
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.models.transformer import Transformer

from run_dir_helpers import tiny_run_dir
from test_exporter import DECODE_HPARAMS, SENTENCES
from test_translator import _NoVocab

# Stated tolerance of int8 logits against float32 on a random-weight model: the largest
# absolute difference at most 5% of the float32 logits' largest magnitude, the mean
# difference at most 1% of it.
MAX_TOLERANCE = 0.05
MEAN_TOLERANCE = 0.01


def reference_int8_matmul(x, w, bias=None, relu=False):
    """numpy: x [m, k] int8 per row, w [k, n] per-column 7-bit, int64 product, rescaled
    (float64), plus bias, then ReLU."""
    w_scale = np.abs(w).max(axis=0) / WEIGHT_LEVELS
    w_q = np.clip(np.round(w / w_scale), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int64)
    x_scale = np.abs(x).max(axis=1, keepdims=True) / ACTIVATION_LEVELS
    x_q = np.round(x / x_scale).astype(np.int64)
    out = (x_q @ w_q).astype(np.float64) * x_scale * w_scale
    out = out if bias is None else out + bias
    return np.maximum(out, 0) if relu else out


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


def test_int8_matmul_adds_bias_and_relu_after_the_row_scales():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 3, 40)).astype(np.float32)
    x[0] *= 0.01                                                 # rows far below the max
    w = rng.standard_normal((40, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    kernel = Int8Kernel(w)
    rows = x.reshape(18, 40)
    for relu in (False, True):
        out = int8_matmul(tf.constant(x), kernel, bias=tf.constant(bias), relu=relu).numpy()
        expected = reference_int8_matmul(rows, w, bias, relu)
        np.testing.assert_allclose(out.reshape(18, 24), expected, rtol=1e-5, atol=1e-5)
    assert (out == 0).sum() > 50                                 # the ReLU had work to do


def test_kernel_scale_is_the_column_scale_onednn_derives():
    """oneDNN rescales column j by float32 ``channel_max[j] / 127``; the kernel's ``scale``
    is that very number, so the xla kernel can rescale bit for bit alike."""
    kernel = Int8Kernel(np.random.default_rng(7).standard_normal((30, 200)).astype(np.float32))
    derived = kernel.channel_max.numpy() / np.float32(127)
    np.testing.assert_array_equal(kernel.scale.numpy(), derived)
    np.testing.assert_array_equal(kernel.channel_min.numpy(), -kernel.channel_max.numpy())


ONEDNN_CHECK = r"""
import numpy as np, tensorflow as tf
from t2t_lite.layers import int8_backend
from t2t_lite.layers.int8 import Int8Kernel, int8_matmul, kernel_name
rng = np.random.default_rng(1)
x = tf.constant(rng.standard_normal((33, 512)).astype(np.float32) * 3)
bias = tf.constant(rng.standard_normal(300).astype(np.float32) * 20)
kernels = [Int8Kernel(rng.standard_normal((512, 300)).astype(np.float32)) for i in range(3)]
options = [{}, {}, {"bias": bias, "relu": True}]
traced = lambda: [tf.function(lambda x, k=k, o=o: int8_matmul(x, k, **o),   # noqa: E731
                              autograph=False) for k, o in zip(kernels, options)]
# The xla kernel (the product compiled by XLA), eager and traced, in the same float ops.
available = int8_backend.onednn_kernel_available
int8_backend.onednn_kernel_available = lambda: False
expected = [int8_matmul(x, k, **o).numpy() for k, o in zip(kernels, options)]
expected_traced = [function(x).numpy() for function in traced()]
int8_backend.onednn_kernel_available = available
onednn_traced = traced()
differences = []
for i in (0, 1, 2, 0, 1, 2):   # eager (one shared function), then traced (a weight copy per node)
    differences.append(np.abs(int8_matmul(x, kernels[i], **options[i]).numpy()
                              - expected[i]).max())
    differences.append(np.abs(onednn_traced[i](x).numpy() - expected_traced[i]).max())
print(kernel_name(), float(max(differences)), int((expected[2] == 0).sum()))
"""


@pytest.mark.parametrize("isa", ["", "AVX2"])
def test_onednn_kernel_gives_the_xla_kernels_results_bit_for_bit(isa):
    """Eagerly and traced, alternating kernels of different weights: each call gets its
    own weights (the traced op keeps a blocked copy of them, the eager one must not), and
    the result equals the xla kernel's exactly (the same exact product, the same float32
    rescaling). Also with oneDNN held to AVX2 (``ONEDNN_MAX_CPU_ISA``), whose
    s8 x s8 kernel sums pairs of products in int16: the 7-bit weights must keep it from
    saturating."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="2",
               ONEDNN_MAX_CPU_ISA=isa)
    result = subprocess.run([sys.executable, "-c", ONEDNN_CHECK], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    name, difference, relu_zeros = result.stdout.split()
    assert name == "onednn"
    assert float(difference) == 0.0
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

    float_values = [v.numpy() for v in model.weights]
    summary = quantize_model(model)
    assert quantization_of(model) == "int8"
    # 2 layers x (encoder: qkv, out, ffn 2; decoder: qkv, out, q, kv, out, ffn 2) + softmax
    assert summary.kernel_count == 2 * (4 + 7) + 1
    kernels = [kernel for layer in summary.layers
               for kernel in layer.int8_kernels.by_name.values()]
    assert len(kernels) == summary.kernel_count
    assert all(k.q.dtype == tf.int8 and int(tf.reduce_max(tf.abs(tf.cast(k.q, tf.int32))))
               <= WEIGHT_LEVELS for k in kernels)
    _assert_close(model(features).numpy(), reference)
    _, cache, memory = model.decoding_state(features["inputs"], 0, plan)
    ids = tf.zeros([4], tf.int32)
    for step in range(3):
        logits, cache = model.decode_step(ids, step, cache, memory, plan)
        _assert_close(logits.numpy(), reference_steps[step])
        ids = tf.constant(features["targets"][:, step])
    # The float32 variables are untouched (checkpoints and training see no change).
    assert all(v.dtype == "float32" for v in model.weights)
    for variable, value in zip(model.weights, float_values):
        np.testing.assert_array_equal(variable.numpy(), value)


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


SERVE_ALONE_AND_TOGETHER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
sentences = json.loads(sys.stdin.read())
def run(batch):
    out = serve(sentences=tf.constant(batch, tf.string))
    return ([t.decode("utf-8") for t in out["translations"].numpy()],
            out["scores"].numpy().tolist())
together = run(sentences)
alone = [run([sentence]) for sentence in sentences]
print(json.dumps({"translations": together[0], "scores": together[1],
                  "alone": [a[0][0] for a in alone], "alone_scores": [a[1][0] for a in alone]}))
"""


def _serve_alone_and_together(export_dir, onednn: str) -> dict:
    """SENTENCES through an export in a fresh process with ``TF_ENABLE_ONEDNN_OPTS=onednn``,
    as one call and one sentence a call."""
    result = subprocess.run([sys.executable, "-c", SERVE_ALONE_AND_TOGETHER, str(export_dir)],
                            input=json.dumps(SENTENCES), capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=onednn))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_int8_export_translates_alike_in_fresh_processes_with_and_without_onednn(capsys,
                                                                                 tmp_path):
    """The int8 export serves the int8 decoder's translations, each sentence the same alone
    as among the others, and the same whether the loading process has oneDNN's ops on or
    off: its int8 products are the same
    op in both (oneDNN's ``_QuantizedMatMul`` is always registered) and its self-attention
    is float32. Scores agree to float32 rounding: TensorFlow's float32 kernels (attention
    products, softmax, layer norm) take oneDNN's or its default implementation with the
    process, as in a float32 export."""
    export_dir = tmp_path / "export"
    assert exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                          str(export_dir), "--decode_hparams", DECODE_HPARAMS,
                          "--quantize=int8"]) == 0
    info = json.loads((export_dir / "t2t_lite_export.json").read_text())
    assert info["quantize"] == "int8" and info["int8_kernel"] == kernel_name()
    assert "int8_activation_scales" not in info and "load_environment" not in info

    served = {flag: _serve_alone_and_together(export_dir, flag) for flag in ("0", "1")}
    assert served["0"]["translations"] == served["1"]["translations"]
    np.testing.assert_allclose(served["0"]["scores"], served["1"]["scores"], rtol=1e-5)
    for flag in ("0", "1"):   # each sentence alone translates as among the others
        assert served[flag]["alone"] == served[flag]["translations"]
        np.testing.assert_allclose(served[flag]["alone_scores"], served[flag]["scores"],
                                   rtol=1e-5)
    assert info["int8_attention"] == "float32"

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    decoded = {}
    # The decoder: float32, int8, and int8 one sentence a batch (batch_size=1 token).
    for name, quantize, extra in (("none", "none", ""), ("int8", "int8", ""),
                                  ("int8_alone", "int8", ",batch_size=1")):
        target = tmp_path / f"out.{name}.txt"
        capsys.readouterr()
        assert decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file",
                             str(source), "--decode_to_file", str(target),
                             "--decode_hparams", DECODE_HPARAMS + extra,
                             f"--quantize={quantize}"]) == 0
        err = capsys.readouterr().err
        assert ("int8: matmul weights quantized" in err) == (quantize == "int8")
        decoded[name] = target.read_text(encoding="utf-8").split("\n")[:-1]
    assert decoded["int8_alone"] == decoded["int8"]
    assert served["1"]["translations"] == decoded["int8"]
    assert all(served["1"]["translations"][i] for i in (0, 2, 3, 4))


@pytest.mark.parametrize("environment, expected", [(None, "1"), ("0", "0"), ("1", "1")])
def test_the_decoder_turns_on_onednn_for_float32_unless_the_environment_says(environment,
                                                                           expected):
    """The decoder's pre-TensorFlow step sets TF_ENABLE_ONEDNN_OPTS=1 for float32 decoding
    too (oneDNN's float32 matmul is the faster one on CPU); a user's 0 is kept."""
    run_dir = tiny_run_dir()
    code = ("import os, sys, argparse\n"
            "from t2t_lite.commands.quantize_flag import prepare_decoder_command\n"
            f"prepare_decoder_command(argparse.Namespace(output_dir={str(run_dir)!r}, "
            "quantize='none', t2t_usr_dir='', "
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

    assert tf.function(first_cache_dtype, jit_compile=True, autograph=False)(inputs)[0].dtype == tf.float32
    assert tf.function(first_cache_dtype, autograph=False)(inputs)[0].dtype == tf.bfloat16
    assert int8.describe_quantization(weights, jit_compile=True) == (
        "int8: matmul weights quantized (kernel xla inside the XLA-compiled search, "
        "activations per row, self-attention in the compute dtype)")


def test_attention_dtype_default_needs_onednn_and_bfloat16_arithmetic(monkeypatch):
    """bfloat16 by default only with oneDNN and bfloat16 arithmetic; otherwise the cache
    keeps the model's compute dtype (float32, or a mixed-precision model's own)."""
    for onednn, bf16, expected in [(True, True, "bfloat16"), (True, False, "float32"),
                                   (False, True, "float32"), (False, False, "float32")]:
        monkeypatch.setattr(quantization, "onednn_kernel_available",
                            lambda onednn=onednn: onednn)
        monkeypatch.setattr(quantization, "has_native_bfloat16", lambda bf16=bf16: bf16)
        assert int8.default_attention_dtype() == (expected if expected == "bfloat16"
                                                  else None)
        model = _random_model()
        summary = quantize_model(model)
        assert summary.attention_dtype == expected
        assert int8.describe_quantization(summary).endswith(f"self-attention {expected})")
        assert int8.quantize_record(summary)["int8_attention"] == expected
    # No bfloat16 choice: a mixed-precision model's cache stays in its compute dtype.
    mixed = Transformer(registry.hparams("transformer_tiny", "num_hidden_layers=1"), 300,
                        dtype="mixed_bfloat16")
    mixed.build()
    monkeypatch.setattr(quantization, "has_native_bfloat16", lambda: False)
    assert quantize_model(mixed).attention_dtype == "bfloat16"
    _, cache, _ = mixed.decoding_state(tf.constant([[5, 6, 1]]), 0,
                                       DecodingPlan(growing_cache=True))
    assert cache["decoder"]["layer_0"]["self_k"].dtype == tf.bfloat16


def test_bad_attention_dtype_is_refused():
    with pytest.raises(ValueError, match="attention_dtype must be one of"):
        quantize_model(_random_model(), attention_dtype="float16")


def test_a_rows_product_is_the_same_alone_and_in_a_batch():
    """Each row is quantized alone: a row's int8 product does not change when rows of a
    much larger range are multiplied with it."""
    rng = np.random.default_rng(5)
    kernel = Int8Kernel(rng.standard_normal([64, 48]).astype(np.float32))
    row = rng.standard_normal([1, 64]).astype(np.float32)
    batch = np.concatenate([row, 30 * rng.standard_normal([3, 64]).astype(np.float32)])
    alone = int8_matmul(tf.constant(row), kernel).numpy()[0]
    in_batch = int8_matmul(tf.constant(batch), kernel).numpy()[0]
    np.testing.assert_array_equal(alone, in_batch)


def _sentences_alone_and_batched(translator_for, attention_dtype=None):
    """Five sentences' int8 translations, batched and each alone: (ids [5, T], scores
    [5]) for each, from ``translator_for(model)`` over a random model quantized with
    ``attention_dtype``."""
    model = _random_model(seed=11)
    quantize_model(model, attention_dtype)
    translator = translator_for(model)
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


def _beam_translator(model):
    from t2t_lite.decoding.translator import Translator
    return Translator(model, vocabulary=_NoVocab(), beam_size=4, alpha=0.6, extra_length=5,
                      max_input_length=8)


def test_a_sentence_translates_the_same_alone_and_in_a_batch():
    """An int8 search gives each sentence the ids it gets alone. The batch reaches the
    int8 products only through float rounding (a float op's result for a row can differ
    in its last bits with the batch's shape), so scores agree closely, not bitwise."""
    (ids, scores), (alone_ids, alone_scores) = _sentences_alone_and_batched(_beam_translator)
    np.testing.assert_array_equal(alone_ids, ids)
    np.testing.assert_allclose(alone_scores, scores, atol=0.05)


def test_without_the_private_tensorflow_apis_int8_decoding_falls_back_to_xla(monkeypatch):
    """With a private TensorFlow symbol gone, the backend says so once (a RuntimeWarning
    naming it) and the int8 product takes the public xla kernel: the same ids and scores
    (self-attention float32 in both), as both kernels compute the same numbers."""
    if int8_backend.kernel_name() != "onednn":
        pytest.skip("this process has oneDNN's ops off: the xla kernel is already in use")
    (ids, scores), _ = _sentences_alone_and_batched(_beam_translator, "float32")
    real = int8_backend.private_symbol
    monkeypatch.setattr(int8_backend, "private_symbol", lambda module, name: (
        None if name == "_apply_op_helper" else real(module, name)))
    int8_backend.onednn_kernel_available.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="op_def_library._apply_op_helper .*"
                                                "tested with TensorFlow 2.21.*XLA kernel"):
            assert int8_backend.kernel_name() == "xla"
        (fallback_ids, fallback_scores), _ = _sentences_alone_and_batched(_beam_translator,
                                                                          "float32")
    finally:
        int8_backend.onednn_kernel_available.cache_clear()
    np.testing.assert_array_equal(fallback_ids, ids)
    np.testing.assert_array_equal(fallback_scores, scores)


def test_an_op_that_no_longer_takes_its_attributes_means_the_xla_kernel(monkeypatch):
    """The backend builds ``_QuantizedMatMul`` once in a scratch graph; an op that refuses
    its inputs or attributes (a TensorFlow upgrade) is one warning and the xla kernel."""
    if not int8_backend.onednn_enabled():
        pytest.skip("this process has oneDNN's ops off: the xla kernel is already in use")

    def refused(*args, **kwargs):
        raise TypeError("no such attribute")

    monkeypatch.setattr(int8_backend, "onednn_quantized_matmul", refused)
    int8_backend.onednn_kernel_available.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="_QuantizedMatMul with the inputs"):
            assert int8_backend.kernel_name() == "xla"
        kernel = Int8Kernel(np.random.default_rng(8).standard_normal((16, 8)).astype(np.float32))
        x = np.random.default_rng(9).standard_normal((3, 16)).astype(np.float32)
        np.testing.assert_allclose(int8_matmul(tf.constant(x), kernel).numpy(),
                                   reference_int8_matmul(x, kernel_weights(kernel)),
                                   rtol=1e-5, atol=1e-5)
    finally:
        int8_backend.onednn_kernel_available.cache_clear()


def kernel_weights(kernel):
    """float32 [k, n] weights that quantize to exactly ``kernel``'s."""
    return kernel.dequantized().numpy()


def test_no_import_circle_among_the_layer_modules():
    """Counting imports inside functions, the modules of t2t_lite.layers import each other
    without a circle, and only int8_backend names TensorFlow's private modules."""
    import ast
    import pathlib
    directory = pathlib.Path(int8.__file__).parent
    graph = {}
    for path in directory.glob("*.py"):
        source = path.read_text()
        targets = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            targets.update(name.split(".")[2] for name in names
                           if name.startswith("t2t_lite.layers.")
                           and (directory / f"{name.split('.')[2]}.py").exists())
        graph[path.stem] = targets - {path.stem}
        assert ("tensorflow.python" in source) == (path.stem == "int8_backend"), path.stem

    def reaches(start, goal, seen=()):
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen + (nxt,)))
                   for nxt in graph[start])

    assert not [module for module in graph if reaches(module, module)]
    assert {"int8", "quantization"} <= graph["attention"]


@pytest.mark.parametrize("make, inputs", [
    (lambda: MultiHeadAttention(2, 8, 8, 12, self_attention=True), [[2, 3, 10]]),
    (lambda: MultiHeadAttention(2, 8, 8, 12, self_attention=False), [[2, 3, 10], [2, 4, 6]]),
    (lambda: FeedForward(16, 10), [[2, 3, 10]]),
    (lambda: SharedEmbedding(30, 10), None)])
def test_each_layer_quantizes_itself_and_keeps_its_mode_in_its_config(make, inputs):
    """``quantize("int8")`` turns a built layer's kernels to int8 (its output changes, a
    little); ``get_config`` records it; ``from_config`` gives a layer that is int8 once
    built, and restoring the quantized layer's checkpoint into it gives the same outputs."""
    import keras
    keras.utils.set_random_seed(1)
    layer = make()
    rng = np.random.default_rng(3)
    if inputs is None:    # the embedding: its int8 product is the pre-softmax projection
        layer.build()
        run = lambda target, x: target.logits(x)                             # noqa: E731
        arguments = [tf.constant(rng.standard_normal([2, 3, 10]), tf.float32)]
    else:
        layer.build(*[tuple(shape) for shape in inputs])
        run = lambda target, *x: target(*x)                                   # noqa: E731
        arguments = [tf.constant(rng.standard_normal(shape), tf.float32) for shape in inputs]
    float_out = run(layer, *arguments).numpy()
    assert layer.quantization == "none" and layer.get_config()["quantization"] == "none"

    layer.quantize("int8")
    assert layer.quantization == "int8" and len(layer.int8_kernels) == layer.int8_kernel_count
    int8_out = run(layer, *arguments).numpy()
    assert 0 < np.abs(int8_out - float_out).max() < 0.1 * np.abs(float_out).max()
    config = layer.get_config()
    assert config["quantization"] == "int8"
    with pytest.raises(ValueError, match="'int8' only"):
        layer.quantize("float8")

    clone = type(layer).from_config(config)
    assert clone.quantization == "int8" and clone.int8_kernels is None
    if inputs is None:
        clone.build()
    else:
        clone.build(*[tuple(shape) for shape in inputs])
    assert len(clone.int8_kernels) == layer.int8_kernel_count
    tf.train.Checkpoint(layer=clone).restore(
        tf.train.Checkpoint(layer=layer).save(str(tempfile.mkdtemp()) + "/ckpt")
    ).assert_existing_objects_matched()
    np.testing.assert_array_equal(run(clone, *arguments).numpy(), int8_out)
    with pytest.raises(TypeError, match="quantization must be one of"):   # Keras wraps it
        type(layer).from_config(dict(config, quantization="int4"))


def test_the_int8_activation_scales_flag_is_gone(capsys):
    """--quantize=int8 is the one int8 flag: --help names no other, and the old flag is an
    unknown argument."""
    for command in (decoder, exporter):
        help_text = command.build_parser().format_help()
        assert "--quantize" in help_text and "activation_scales" not in help_text
    run_dir = str(tiny_run_dir())
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_status:
        decoder.main(["--output_dir", run_dir, "--quantize=int8",
                      "--int8_activation_scales=row"])
    assert exit_status.value.code == 2
    assert "unrecognized arguments: --int8_activation_scales=row" in capsys.readouterr().err


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
