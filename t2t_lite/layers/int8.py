"""Int8 kernel arithmetic: int8 weights, activations quantized per row at run time.

Shapes (k input channels, n output channels, m rows):

* weights ``w`` float32 [k, n] -> ``Int8Kernel``: ``q`` int8 [k, n] and ``scale`` float32
  [n], symmetric per output channel, ``q = round(w / scale)``, ``scale = max|w[:, j]| / 63``.
  Weights use 7 bits (|q| <= 63): oneDNN's s8 x s8 kernels on CPUs without VNNI sum
  adjacent products in int16, which 7-bit weights keep from saturating.
* activations ``x`` float [..., k] -> int8, symmetric and dynamic, one scale per row:
  ``s[r] = max|x[r, :]| / 127`` (1 for a zero row). Each row is quantized alone, so a
  row's product does not depend on the other rows of the call (a sentence's translation
  does not depend on what else is in its batch).
* ``int8_matmul(x, kernel)`` -> [..., n] = ((x_q @ q) * scale) * s (+ bias, then ReLU): the
  product accumulated exactly in int32, converted to float32, rescaled per column, then
  per row, in that order on every kernel.

Two kernels compute the product (``kernel_name()``, from ``t2t_lite.layers.int8_backend``):

* ``onednn``: TensorFlow's oneDNN op ``_QuantizedMatMul`` where oneDNN's ops are on in this
  process and the op is traced outside XLA. In a traced function each matmul copies its
  weights into oneDNN's blocked layout once and keeps the copy (an ``Int8Kernel``'s
  variables are never assigned after it is made); eager calls share one function that
  does not keep a copy.
* ``xla``: ``tf.linalg.matmul(int8, int8, output_type=int32)`` compiled by XLA: otherwise,
  and always inside an XLA-compiled caller.

For the same input rows both give bit-identical results: the same exact product, and
``Int8Kernel.scale`` is the float32 column scale oneDNN derives. A graph traced with the
``onednn`` kernel also runs where oneDNN's ops are off: TensorFlow registers
``_QuantizedMatMul`` in its oneDNN builds (x86-64) either way.

The quantizable layers (``MultiHeadAttention``, ``FeedForward``, ``SharedEmbedding``) hold
their kernels in an ``Int8Kernels``; ``t2t_lite.layers.quantization`` has the model-level
entry points, re-exported here (``quantize_model``, ``quantization_of``).
"""
from __future__ import annotations

import functools
from typing import Dict

import tensorflow as tf

from t2t_lite.layers.int8_backend import (in_xla_context, kernel_name,  # noqa: F401
                                          onednn_enabled, onednn_quantized_matmul)
from t2t_lite.layers.quantization import (  # noqa: F401  (the public entry points)
    ATTENTION_DTYPES, default_attention_dtype, describe_quantization, quantization_of,
    quantize_model, quantize_record)

WEIGHT_LEVELS = 63.0       # 7-bit weights (see the module docstring)
ACTIVATION_LEVELS = 127.0  # 8-bit activations


class Int8Kernel(tf.Module):
    """One quantized weight matrix: ``q`` int8 [k, n], ``scale`` float32 [n], and
    ``channel_min``/``channel_max`` float32 [n] = -/+127 * scale, the per-column ranges
    the oneDNN kernel derives its scales from (variables, so that their buffers, which
    TensorFlow's oneDNN primitive cache keys on, stay put). ``scale`` is
    ``channel_max / 127``, the very float32 column scale oneDNN derives, so that both
    kernels rescale alike. The variables are never assigned after construction."""

    def __init__(self, weights, name: str = "int8_kernel"):
        super().__init__(name=name)
        w = tf.convert_to_tensor(weights, tf.float32)
        scale = tf.reduce_max(tf.abs(w), axis=0) / WEIGHT_LEVELS
        scale = tf.where(scale > 0, scale, tf.ones_like(scale))
        q = tf.cast(tf.clip_by_value(tf.round(w / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS),
                    tf.int8)
        channel_max = ACTIVATION_LEVELS * scale
        self.q = tf.Variable(q, trainable=False, name="q")
        self.scale = tf.Variable(channel_max / ACTIVATION_LEVELS, trainable=False,
                                 name="scale")
        self.channel_min = tf.Variable(-channel_max, trainable=False, name="channel_min")
        self.channel_max = tf.Variable(channel_max, trainable=False, name="channel_max")

    def dequantized(self) -> tf.Tensor:
        """float32 [k, n]: the weights this kernel multiplies by."""
        return tf.cast(self.q, tf.float32) * self.scale


class Int8Kernels(tf.Module):
    """A layer's quantized weights by name (tracked, so that checkpoints and SavedModels
    hold them): ``kernels[name]`` is the ``Int8Kernel`` of float32 [k, n] ``weights[name]``."""

    def __init__(self, weights: Dict[str, tf.Tensor], name: str = "int8_kernels"):
        super().__init__(name=name)
        self.by_name = {key: Int8Kernel(value, name=key) for key, value in weights.items()}

    def __getitem__(self, name: str) -> Int8Kernel:
        return self.by_name[name]

    def __len__(self) -> int:
        return len(self.by_name)


def quantize_rows(x):
    """x float [m, k] -> (int8 [m, k], float32 scales [m, 1]), symmetric per row: rows are
    multiplied by their scales' reciprocals (one [m, k] pass, no division)."""
    x = tf.cast(x, tf.float32)
    scale = tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) / ACTIVATION_LEVELS
    scale = tf.where(scale > 0, scale, tf.ones_like(scale))
    return tf.cast(tf.round(x * (1.0 / scale)), tf.int8), scale


_eager_onednn_op = tf.function(
    functools.partial(onednn_quantized_matmul, weight_const=False),
    autograph=False, reduce_retracing=True)


def _onednn_product(x_q, kernel: Int8Kernel):
    """int8 [m, k] -> float32 [m, n] = (x_q @ q) * scale (oneDNN)."""
    # Traced: n is static, so grappler folds the zeros into a constant.
    bias = tf.zeros(kernel.channel_min.shape, tf.float32)
    op = _eager_onednn_op if tf.executing_eagerly() else onednn_quantized_matmul
    return op(x_q, kernel.q, kernel.channel_min, kernel.channel_max, bias)


@tf.function(autograph=False, jit_compile=True)
def _xla_product(x_q, q):
    """int8 [m, k] @ int8 [k, n] -> float32 [m, n], accumulated in int32 (XLA)."""
    return tf.cast(tf.linalg.matmul(x_q, q, output_type=tf.int32), tf.float32)


def _xla_column_scaled_product(x_q, kernel: Int8Kernel):
    """int8 [m, k] -> float32 [m, n] = (x_q @ q) * scale, the product compiled by XLA
    (inline inside an XLA-compiled caller)."""
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
    if kernel_name() == "onednn" and not in_xla_context():
        return _onednn_product(x_q, kernel), row_scale
    return _xla_column_scaled_product(x_q, kernel), row_scale


def _bias_relu(x, bias, relu: bool):
    x = x if bias is None else x + tf.cast(bias, x.dtype)
    return tf.nn.relu(x) if relu else x


def int8_matmul(x, kernel: Int8Kernel, dtype=tf.float32, bias=None, relu: bool = False):
    """x float [..., k] -> [..., n] in ``dtype``: x quantized per row times the int8
    kernel, rescaled by the column and row scales, plus ``bias`` [n] (None: none), then
    ReLU when ``relu``."""
    shape = tf.shape(x)
    product, row_scale = int8_product(tf.reshape(x, [-1, shape[-1]]), kernel)
    out = _bias_relu(product * row_scale, bias, relu)
    n = tf.shape(kernel.q)[1]
    return tf.cast(tf.reshape(out, tf.concat([shape[:-1], [n]], axis=0)), dtype)
