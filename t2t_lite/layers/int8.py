"""Int8 inference: weights stored as int8, activations quantized at run time.

``quantize_model(model)`` replaces, for inference, every matmul of a built and restored
``Transformer`` (fused Q/K/V, Q, K/V and output projections, both feed-forward layers and
the tied softmax projection) with an int8 one; the float32 variables are left untouched
(training and checkpoints are unaffected). Shapes (k input channels, n output channels):

* weights ``w`` float32 [k, n] -> ``q`` int8 [k, n] and ``scale`` float32 [n]:
  symmetric, per output channel, ``q = round(w / scale)``, ``scale = max|w[:, j]| / 63``.
  Weights use 7 bits (|q| <= 63): oneDNN's u8 x s8 kernels sum adjacent products in
  int16 on CPUs where they do not take the VNNI path, and 255 * 63 * 2 cannot saturate.
* activations ``x`` float [..., k] -> int8 [..., k], symmetric and dynamic (computed on
  every call), with one scale per kernel's choice (``Int8Kernel.per_tensor``):
  per row, ``s[r] = max|x[r, :]| / 127``, or per tensor, ``s = max|x| / 127``;
* ``int8_matmul(x, kernel)`` -> float32 [..., n] = (x_q @ q) * s * scale, the product
  accumulated exactly in int32.

Which activations take one scale (``quantize_model``'s ``activation_scales``): by default
(``"mixed"``) the inputs of the sublayers, which a LayerNorm has just normalised (or the
embeddings, for a post-norm model's first layer), are quantized per tensor: the attention
projections (fused Q/K/V, Q, the encoder-decoder K/V), the feed-forward's first layer and
the softmax projection. Their rescaling is then a scalar that oneDNN applies inside the
product, with the feed-forward's bias and ReLU (no pass over the product in TensorFlow:
``python scripts/bench_search_flag.py --option=activation_scales`` times it). The
attention's output projection (over attention contexts) and the feed-forward's second
layer (over ReLU outputs, whose rows differ most) stay per row. ``"row"``: every input per
row; ``"tensor"``: every input per tensor.

A scale per tensor is taken over every row of the call: a batch's sentences (and, in a
search, their hypotheses) share it, so under ``"mixed"`` or ``"tensor"`` a sentence's
translation can change with the rest of its batch (with the decoder's ``batch_size``, or
with the other requests an export is called with). Under ``"row"`` each row is quantized
alone: the batch reaches a row's product only through float rounding (a float op's
result for a row can differ in its last bits with the batch's shape, and now and then
that moves a value across an int8 rounding boundary), so translations depend on the
batch about as little as float32's do (``docs/decoding.md`` has the measured figures).

Two kernels compute the same int32 product:

* ``onednn``: TensorFlow's oneDNN op ``_QuantizedMatMul`` (s8 x s8, VNNI where the CPU
  has it), used when oneDNN's ops are on in this process (``TF_ENABLE_ONEDNN_OPTS=1``
  before TensorFlow is imported; ``t2t-lite-decoder --quantize=int8`` and
  ``t2t-lite-exporter --quantize=int8`` set it). oneDNN applies the per-column scales
  itself, so the result is (x_q @ q) * scale with the product exact (also on CPUs without
  VNNI: checked with ``ONEDNN_MAX_CPU_ISA=AVX2`` and ``AVX512_CORE``, whose s8 x s8
  kernels add 128 to the activations and compensate, which 7-bit weights keep from
  saturating). In a traced function each matmul copies its weights into oneDNN's blocked
  layout once and keeps the copy; the public ``QuantizedMatMulWithBiasAndDequantize``
  makes that copy on every call (on a VNNI CPU the copy took longer than the product) and
  takes one scale for all columns.
* ``xla``: ``tf.linalg.matmul(int8, int8, output_type=int32)`` in an XLA-compiled
  function, used otherwise and always inside an XLA-compiled caller (``jit_compile``)
  (TensorFlow's own BatchMatMulV3 int8 kernel is slower than float32 on CPU).

Self-attention in int8 decoding (``attention_dtype``): the self-attention cache's keys
and values, and the two attention products over them, are bfloat16 where oneDNN's ops are
on and the CPU has bfloat16 arithmetic (AVX512-BF16 or AMX), the model's compute dtype
(float32 unless mixed precision) otherwise (``default_attention_dtype``). On such a CPU that halves the bytes each decoding step
appends, reorders and reads (the softmax over the keys stays float32): a 1.13x faster
int8 search in ``scripts/bench_int8_attention.py``. Elsewhere bfloat16 products would be
converted or emulated (oneDNN held to AVX2 refuses them outright). Inside an
XLA-compiled search the cache keeps the compute dtype, as the matmuls take the ``xla``
kernel there: XLA's bfloat16 attention made that search slower.

A SavedModel keeps the kernel it was traced with (recorded in ``t2t_lite_export.json``).
One traced with ``onednn`` should be loaded with ``TF_ENABLE_ONEDNN_OPTS=1``: it also runs
without (TensorFlow's x86-64 wheels always register ``_QuantizedMatMul``), but its float32
ops then take TensorFlow's default kernels and round differently.
"""
from __future__ import annotations

import functools
from typing import Dict, List, Optional

import tensorflow as tf

from t2t_lite.cpu_features import has_native_bfloat16
from t2t_lite.layers.int8_scales import ACTIVATION_SCALES, DEFAULT_ACTIVATION_SCALES

WEIGHT_LEVELS = 63.0       # 7-bit weights (see the module docstring)
ACTIVATION_LEVELS = 127.0  # 8-bit activations
ATTENTION_DTYPES = ("float32", "bfloat16")
# The kernels whose inputs are a sublayer's input: quantized per tensor under "mixed".
PER_TENSOR_KERNELS = frozenset({"qkv_kernel", "q_kernel", "kv_kernel", "hidden", "softmax"})


def onednn_enabled() -> bool:
    """Whether oneDNN's ops (and so its int8 matmul) are on in this process."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):  # pragma: no cover - other TF builds
        return False


def kernel_name() -> str:
    """The int8 kernel ``int8_matmul`` traces with in this process: onednn or xla."""
    return "onednn" if onednn_enabled() else "xla"


def default_attention_dtype() -> Optional[str]:
    """The self-attention dtype of int8 decoding in this process: bfloat16 where oneDNN's
    ops are on and the CPU has bfloat16 arithmetic, else None (the model's compute dtype;
    module docstring)."""
    return "bfloat16" if onednn_enabled() and has_native_bfloat16() else None


class Int8Kernel(tf.Module):
    """One quantized weight matrix: ``q`` int8 [k, n], ``scale`` float32 [n], and
    ``channel_min``/``channel_max`` float32 [n] = -/+127 * scale, the per-column ranges
    the oneDNN kernel derives the scales from (variables, so that their buffers, which
    TensorFlow's oneDNN primitive cache keys on, stay put).

    ``per_tensor``: its activations take one scale per call rather than one per row
    (module docstring).

    The variables are never assigned after construction: a traced oneDNN matmul keeps
    its own blocked copy of ``q`` (see ``_onednn_op``)."""

    def __init__(self, weights, name: str = "int8_kernel", per_tensor: bool = False):
        super().__init__(name=name)
        self.per_tensor = per_tensor
        w = tf.convert_to_tensor(weights, tf.float32)
        scale = tf.reduce_max(tf.abs(w), axis=0) / WEIGHT_LEVELS
        scale = tf.where(scale > 0, scale, tf.ones_like(scale))
        q = tf.cast(tf.clip_by_value(tf.round(w / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS),
                    tf.int8)
        self.q = tf.Variable(q, trainable=False, name="q")
        self.scale = tf.Variable(scale, trainable=False, name="scale")
        self.channel_min = tf.Variable(-ACTIVATION_LEVELS * scale, trainable=False,
                                       name="channel_min")
        self.channel_max = tf.Variable(ACTIVATION_LEVELS * scale, trainable=False,
                                       name="channel_max")

    def dequantized(self) -> tf.Tensor:
        """float32 [k, n]: the weights this kernel multiplies by."""
        return tf.cast(self.q, tf.float32) * self.scale


def _row_scales(x):
    """x float32 [m, k] -> (scales [m, 1] = max|x[r, :]| / 127 (1 for a zero row), their
    reciprocals [m, 1]); rows are quantized by multiplying with the reciprocal, one
    [m, k] pass instead of a division."""
    scale = tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) / ACTIVATION_LEVELS
    scale = tf.where(scale > 0, scale, tf.ones_like(scale))
    return scale, 1.0 / scale


def quantize_rows(x):
    """x float [m, k] -> (int8 [m, k], float32 scales [m, 1]), symmetric per row."""
    x = tf.cast(x, tf.float32)
    scale, inverse = _row_scales(x)
    return tf.cast(tf.round(x * inverse), tf.int8), scale


def quantize_tensor(x):
    """x float [m, k] -> (int8 [m, k], float32 scalar ``m = max|x|``, 1 for a zero x): one
    symmetric scale ``m / 127`` for the whole tensor."""
    x = tf.cast(x, tf.float32)
    largest = tf.reduce_max(tf.abs(x))
    largest = tf.where(largest > 0, largest, tf.ones_like(largest))
    return tf.cast(tf.round(x * (ACTIVATION_LEVELS / largest)), tf.int8), largest


def in_xla_context() -> bool:
    """Whether the op being traced belongs to an XLA-compiled function."""
    try:
        from tensorflow.python.ops import control_flow_util
        graph = tf.compat.v1.get_default_graph()
        return bool(control_flow_util.GraphOrParentsInXlaContext(graph))
    except (ImportError, AttributeError):  # pragma: no cover - other TF builds
        return False


def _onednn_op(x_q, q, channel_min, channel_max, bias, activation_max, relu: bool = False,
               weight_const: bool = True):
    """Builds TensorFlow's ``_QuantizedMatMul`` (a graph-only op with no Python wrapper,
    so it is built with TensorFlow's private ``_apply_op_helper``; setup.py pins
    TensorFlow to 2.21): int8 [m, k] x int8 [k, n] -> float32 [m, n] =
    (x_q @ q) * (activation_max / 127) * scale + bias, then ReLU when ``relu``, all
    applied by oneDNN: the activation scale from the float32 scalar ``activation_max``
    (a tensor: a new value each call reuses the primitive), the per-column weight scales
    max(|channel_min|, |channel_max|) / 127, ``bias`` float32 [n].

    With ``weight_const`` the op copies ``q`` into oneDNN's blocked layout on its first
    call and keeps that copy for every later call of the same graph node (the VNNI
    kernels need it; without it the op multiplies ``q`` where it lies, more slowly).
    That is right because a graph node's ``q`` is a variable the traced function
    captured, and an ``Int8Kernel``'s variables are never assigned after it is made
    (``quantize_model`` makes new kernels). Eager calls pass their variables to one
    shared function instead, so they use ``weight_const=False``."""
    from tensorflow.python.framework import op_def_library
    activation_max = tf.cast(activation_max, tf.float32)
    inputs = [tf.bitcast(x_q, tf.qint8), tf.bitcast(q, tf.qint8), bias,
              -activation_max, activation_max, channel_min, channel_max]
    _, _, _, outputs = op_def_library._apply_op_helper(
        "_QuantizedMatMul", name="QuantizedMatMul", device_inputs=inputs, host_inputs=[],
        Tdevice_outputs=[tf.float32], Thost_outputs=[], T1=tf.qint8, T2=tf.qint8,
        Tbias=tf.float32, U=tf.float32, Tout=tf.float32, transpose_a=False,
        transpose_b=False, is_weight_const=weight_const, is_bias_const=False,
        fused_ops=["BiasAdd", "Relu", "Dequantize"] if relu else ["BiasAdd", "Dequantize"],
        input_quant_mode="SCALED",
        output_quant_mode="SCALED", leakyrelu_alpha=0.2)
    return outputs[0]


_eager_onednn_op = tf.function(functools.partial(_onednn_op, weight_const=False),
                               autograph=False, reduce_retracing=True)


def _onednn_product(x_q, kernel: Int8Kernel, activation_max, bias=None, relu=False):
    """int8 [m, k] -> float32 [m, n] = (x_q @ q) * (activation_max / 127) * scale (+ bias
    [n], then ReLU), the product exact (oneDNN)."""
    if bias is None:
        # Traced: n is static, so grappler folds the zeros into a constant (no Fill runs
        # in scripts/profile_decode.py's profile of a search).
        bias = tf.zeros(kernel.channel_min.shape, tf.float32)
    bias = tf.cast(bias, tf.float32)
    if tf.executing_eagerly():
        return _eager_onednn_op(x_q, kernel.q, kernel.channel_min, kernel.channel_max, bias,
                                activation_max, relu)
    return _onednn_op(x_q, kernel.q, kernel.channel_min, kernel.channel_max, bias,
                      activation_max, relu)


@tf.function(jit_compile=True)
def _xla_product(x_q, q):
    """int8 [m, k] @ int8 [k, n] -> float32 [m, n], accumulated in int32 (XLA)."""
    return tf.cast(tf.linalg.matmul(x_q, q, output_type=tf.int32), tf.float32)


def _column_scaled_product(x_q, kernel: Int8Kernel):
    """int8 [m, k] -> float32 [m, n] = (x_q @ q) * scale, outside oneDNN: inside an
    XLA-compiled caller (the int8 dot compiles with it) or with oneDNN's ops off."""
    if in_xla_context():
        product = tf.cast(tf.linalg.matmul(x_q, kernel.q, output_type=tf.int32), tf.float32)
    else:
        product = _xla_product(x_q, tf.convert_to_tensor(kernel.q))
    return product * kernel.scale


def int8_product(rows, kernel: Int8Kernel):
    """rows float [m, k] -> (float32 [m, n] = (x_q @ q) * scale, the rows' scales [m, 1]):
    the rows quantized, multiplied by the kernel's int8 weights (exactly, in int32) and
    rescaled by the columns' scales, not yet by the rows'."""
    x_q, row_scale = quantize_rows(rows)
    if onednn_enabled() and not in_xla_context():
        return _onednn_product(x_q, kernel, ACTIVATION_LEVELS), row_scale
    return _column_scaled_product(x_q, kernel), row_scale


def _per_tensor_product(rows, kernel: Int8Kernel, bias, relu: bool):
    """rows float [m, k] -> float32 [m, n]: quantized with one scale, times the kernel,
    rescaled, plus ``bias`` [n] (or None) and ReLU'd when ``relu`` (oneDNN does all of
    it in one op where it runs the product)."""
    x_q, largest = quantize_tensor(rows)
    if onednn_enabled() and not in_xla_context():
        return _onednn_product(x_q, kernel, largest, bias, relu)
    out = _column_scaled_product(x_q, kernel) * (largest / ACTIVATION_LEVELS)
    return _bias_relu(out, bias, relu)


def _bias_relu(x, bias, relu: bool):
    x = x if bias is None else x + tf.cast(bias, x.dtype)
    return tf.nn.relu(x) if relu else x


def int8_matmul(x, kernel: Int8Kernel, dtype=tf.float32, bias=None, relu: bool = False):
    """x float [..., k] -> [..., n] in ``dtype``: x quantized (per row, or per tensor where
    ``kernel.per_tensor``) times the int8 kernel, rescaled by the column and activation
    scales, plus ``bias`` [n] (None: none), then ReLU when ``relu``."""
    shape = tf.shape(x)
    rows = tf.reshape(x, [-1, shape[-1]])
    if kernel.per_tensor:
        out = _per_tensor_product(rows, kernel, bias, relu)
    else:
        product, row_scale = int8_product(rows, kernel)
        out = _bias_relu(product * row_scale, bias, relu)
    n = tf.shape(kernel.q)[1]
    return tf.cast(tf.reshape(out, tf.concat([shape[:-1], [n]], axis=0)), dtype)


class Int8Weights(tf.Module):
    """Every quantized kernel of a model (so that a SavedModel tracks them), the dtype its
    self-attention layers decode in (``attention_dtype``) and how its activations are
    scaled (``activation_scales``, one of ``ACTIVATION_SCALES``)."""

    def __init__(self, kernels: List[Int8Kernel], attention_dtype: str = "float32",
                 activation_scales: str = DEFAULT_ACTIVATION_SCALES):
        super().__init__(name="int8_weights")
        self.kernels = kernels
        self.attention_dtype = attention_dtype
        self.activation_scales = activation_scales


def get_kernel(layer, name: str):
    """The ``Int8Kernel`` that replaces ``layer``'s weight ``name``, or None (float)."""
    kernels: Dict[str, Int8Kernel] = getattr(layer, "_t2t_int8_kernels", None) or {}
    return kernels.get(name)


def _attach(layer, name: str, weights, kernels: List[Int8Kernel],
            activation_scales: str) -> None:
    table = getattr(layer, "_t2t_int8_kernels", None)
    if table is None:
        table = {}
        object.__setattr__(layer, "_t2t_int8_kernels", table)  # untracked by Keras
    per_tensor = activation_scales == "tensor" or (activation_scales == "mixed"
                                                   and name in PER_TENSOR_KERNELS)
    kernel = Int8Kernel(weights, name=f"{layer.name}_{name}", per_tensor=per_tensor)
    table[name] = kernel
    kernels.append(kernel)


def quantize_model(model, attention_dtype: Optional[str] = None,
                   activation_scales: str = DEFAULT_ACTIVATION_SCALES) -> Int8Weights:
    """Quantizes a built ``Transformer``'s matmul weights for inference (in place: its
    attention, feed-forward and embedding layers then multiply in int8), and sets its
    self-attention layers' decoding cache to ``attention_dtype`` (float32 or bfloat16;
    None: ``default_attention_dtype()``, or the model's compute dtype where that is
    None). ``activation_scales``: ``"mixed"`` (the sublayers' inputs per tensor, the rest
    per row), ``"row"`` or ``"tensor"`` (module docstring). Returns the kernels as one ``tf.Module``
    (also ``model.int8_weights``) for SavedModel tracking. Calling it again re-quantizes
    from the current float32 variables."""
    from t2t_lite.layers.attention import MultiHeadAttention
    from t2t_lite.layers.embedding import SharedEmbedding
    from t2t_lite.layers.feed_forward import FeedForward

    if not model.built:
        raise ValueError("quantize_model needs a built model with its weights restored")
    if attention_dtype is not None and attention_dtype not in ATTENTION_DTYPES:
        raise ValueError(f"attention_dtype must be one of {ATTENTION_DTYPES}, got "
                         f"{attention_dtype!r}")
    if activation_scales not in ACTIVATION_SCALES:
        raise ValueError(f"activation_scales must be one of {ACTIVATION_SCALES}, got "
                         f"{activation_scales!r}")
    attention_dtype = attention_dtype or default_attention_dtype() or model.compute_dtype
    kernels: List[Int8Kernel] = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, MultiHeadAttention):
            names = (("qkv_kernel",) if layer.self_attention
                     else ("q_kernel", "kv_kernel")) + ("output_kernel",)
            for name in names:
                _attach(layer, name, getattr(layer, name), kernels, activation_scales)
            if layer.self_attention:   # untracked by Keras, as the kernels' table
                object.__setattr__(layer, "_t2t_cache_dtype", attention_dtype)
        elif isinstance(layer, FeedForward):
            _attach(layer, "hidden", layer.hidden.kernel, kernels, activation_scales)
            _attach(layer, "output", layer.output_dense.kernel, kernels, activation_scales)
        elif isinstance(layer, SharedEmbedding):
            _attach(layer, "softmax", tf.transpose(layer.softmax_weights), kernels,
                    activation_scales)
    weights = Int8Weights(kernels, attention_dtype, activation_scales)
    object.__setattr__(model, "int8_weights", weights)
    return weights


def quantization_of(model) -> str:
    """"int8" when ``quantize_model`` was applied to ``model``, else "none"."""
    return "int8" if getattr(model, "int8_weights", None) is not None else "none"


def describe_quantization(weights: Int8Weights, jit_compile: bool = False) -> str:
    """The line the decoder and the benchmark print after ``quantize_model``, for a search
    compiled with XLA (``jit_compile``) or not."""
    if jit_compile:
        return ("int8: matmul weights quantized (kernel xla inside the XLA-compiled search, "
                f"activation scales {weights.activation_scales}, self-attention in the "
                "compute dtype)")
    return (f"int8: matmul weights quantized (kernel {kernel_name()}, activation scales "
            f"{weights.activation_scales}, self-attention {weights.attention_dtype})")


def quantize_record(weights: Int8Weights) -> dict:
    """What an export records about its int8 weights (``t2t_lite_export.json``)."""
    record = {"quantize": "int8", "int8_kernel": kernel_name(),
              "int8_activation_scales": weights.activation_scales,
              "int8_attention": weights.attention_dtype}
    if record["int8_kernel"] == "onednn":
        record["load_environment"] = "TF_ENABLE_ONEDNN_OPTS=1"
    return record
