"""Multi-head scaled dot-product attention with fused projections and a decoding cache.

Shapes (b batch, q query length, k key length, h heads, d_k = key_channels / h,
d_v = value_channels / h, L the self-attention cache length: the preallocated decode
length, or the positions decoded so far in a growing cache):

* self-attention: ``query`` [b, q, d_in] -> output [b, q, output_channels]; one fused
  kernel ``qkv_kernel`` [d_in, 2 * key_channels + value_channels] projects Q, K and V.
* encoder-decoder attention: ``query`` [b, q, d_in], ``memory`` [b, k, d_mem]; kernels
  ``q_kernel`` [d_in, key_channels] and fused ``kv_kernel`` [d_mem, key_channels +
  value_channels].
* ``output_kernel`` [value_channels, output_channels]. No biases (as tensor2tensor).
* masks are boolean, True where a query may attend to a key, broadcastable to
  [b, h, q, k] (see ``padding_mask`` and ``causal_mask``).

Channel c of a projection belongs to head ``c // d`` (row-major ``reshape(..., h, d)``),
so the weights map onto ``keras.layers.MultiHeadAttention(num_heads=h, key_dim=d_k,
value_dim=d_v, use_bias=False)`` by a split and a reshape (``to_keras_mha_kernels``):

    query  = qkv_kernel[:, :K].reshape(d_in, h, d_k)       (or q_kernel)
    key    = qkv_kernel[:, K:2K].reshape(d_in, h, d_k)     (or kv_kernel[:, :K])
    value  = qkv_kernel[:, 2K:].reshape(d_in, h, d_v)      (or kv_kernel[:, K:])
    output = output_kernel.reshape(h, d_v, output_channels)

with K = key_channels.

Queries are token-major [b, q, h, d_k]; keys and values are head-major [b, h, k, d], the
layout of the batched matmuls over (b, h), so that a decoding step never transposes its
caches (only the step's own query, key and value).

Incremental decoding: ``self_attention_step`` takes one of two caches. A preallocated
cache [b, h, L, d] (used under XLA, which needs static shapes) gets the new key and value
written at position ``step`` with ``keras.ops.slice_update`` (an XLA
dynamic-update-slice), and attention is masked to positions <= step. A growing cache
[b, h, step, d] (the default without XLA; length 0 at step 0) gets them appended, so
writes, attention and beam reorders cost only the positions decoded so far.
``memory_attention`` attends with encoder keys and values computed once by
``project_memory``. The cache holds ``cache_dtype``: the compute dtype, or the dtype
``set_decode_dtype`` chose (int8 decoding's bfloat16, ``t2t_lite.layers.quantization``:
half the bytes to append, reorder and attend over each step).

Int8 (``quantize("int8")``, ``t2t_lite.layers.quantization`` states the contract): the
fused Q/K/V (or Q and K/V) and output kernels multiply in int8
(``t2t_lite.layers.int8.int8_matmul``); ``get_config()["quantization"]`` records it.
"""
from __future__ import annotations

from typing import Dict, Tuple

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from t2t_lite.layers.int8 import Int8Kernels, in_xla_context, int8_matmul
from t2t_lite.layers.quantization import QuantizableLayer, check_quantization


def padding_mask(ids: tf.Tensor, pad_id: int = 0) -> tf.Tensor:
    """ids [b, k] -> bool [b, 1, 1, k], True at real (non-padding) keys."""
    return ops.not_equal(ids, pad_id)[:, None, None, :]


def causal_mask(length) -> tf.Tensor:
    """bool [1, 1, length, length], True where key position <= query position."""
    positions = ops.arange(length)
    return (positions[None, :] <= positions[:, None])[None, None, :, :]


def large_negative(dtype) -> float:
    """A logit that softmax turns into exactly zero weight, representable in ``dtype``."""
    return -3e4 if tf.as_dtype(dtype) == tf.float16 else -1e9


class MultiHeadAttention(QuantizableLayer, keras.layers.Layer):
    """Multi-head attention (Vaswani et al., 2017, section 3.2.2) without biases.

    Args:
      num_heads: h.
      key_channels: total query/key channels over heads, d_k * h.
      value_channels: total value channels over heads, d_v * h.
      output_channels: channels of the output projection.
      dropout: dropout rate on the attention weights (training only); a float, applied
        by ``dropout_layer``.
      self_attention: True for self-attention (fused Q,K,V kernel), False for
        encoder-decoder attention (Q kernel and fused K,V kernel).
      quantization: "none" or "int8" (int8 from the end of ``build``; see
        ``t2t_lite.layers.quantization``).
    """

    def __init__(self, num_heads: int, key_channels: int, value_channels: int,
                 output_channels: int, dropout: float = 0.0, self_attention: bool = True,
                 quantization: str = "none", **kwargs):
        super().__init__(**kwargs)
        for name, channels in (("key_channels", key_channels),
                               ("value_channels", value_channels)):
            if channels % num_heads:
                raise ValueError(f"{name} ({channels}) must be divisible by num_heads "
                                 f"({num_heads})")
        self.num_heads = num_heads
        self.key_channels = key_channels
        self.value_channels = value_channels
        self.output_channels = output_channels
        self.dropout = dropout
        self.self_attention = self_attention
        self.key_depth = key_channels // num_heads
        self.value_depth = value_channels // num_heads
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.quantization = check_quantization(quantization)
        self.int8_kernels = None      # Int8Kernels once quantized
        self.decode_dtype = None      # set_decode_dtype's choice for the cache

    @property
    def kernel_names(self) -> Tuple[str, ...]:
        """The names of this layer's kernels (each a [d_in, channels] weight)."""
        return (("qkv_kernel",) if self.self_attention
                else ("q_kernel", "kv_kernel")) + ("output_kernel",)

    @property
    def int8_kernel_count(self) -> int:
        return len(self.kernel_names)

    def build(self, query_shape, memory_shape=None):
        d_in = query_shape[-1]
        k, v = self.key_channels, self.value_channels
        init = keras.initializers.GlorotUniform()
        if self.self_attention:
            self.qkv_kernel = self.add_weight(name="qkv_kernel", shape=(d_in, 2 * k + v),
                                              initializer=init)
        else:
            d_mem = d_in if memory_shape is None else memory_shape[-1]
            self.q_kernel = self.add_weight(name="q_kernel", shape=(d_in, k),
                                            initializer=init)
            self.kv_kernel = self.add_weight(name="kv_kernel", shape=(d_mem, k + v),
                                             initializer=init)
        self.output_kernel = self.add_weight(name="output_kernel",
                                             shape=(v, self.output_channels),
                                             initializer=init)
        if self.quantization == "int8":
            self._make_int8_kernels()

    def _make_int8_kernels(self):
        self.int8_kernels = Int8Kernels({name: getattr(self, name)
                                         for name in self.kernel_names},
                                        name=f"{self.name}_int8")

    def set_decode_dtype(self, dtype: str) -> None:
        """The dtype of the self-attention decoding cache and of the attention products
        over it, outside XLA (``cache_dtype``); encoder-decoder attention keeps none."""
        if self.self_attention:
            self.decode_dtype = dtype

    # Projections -----------------------------------------------------------------
    def _split_heads(self, x, depth):
        """[b, n, h * depth] -> [b, n, h, depth] (token-major: queries)."""
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], self.num_heads, depth))

    def _split_heads_first(self, x, depth):
        """[b, n, h * depth] -> [b, h, n, depth] (head-major: keys and values)."""
        return ops.transpose(self._split_heads(x, depth), (0, 2, 1, 3))

    def _kernel(self, variable):
        return ops.cast(variable, self.compute_dtype)

    @property
    def cache_dtype(self) -> str:
        """The dtype of the self-attention cache's keys and values and of the attention
        products over them: the compute dtype, unless ``set_decode_dtype`` chose another
        one for decoding without XLA (inside an XLA-compiled function the compute dtype
        stays)."""
        chosen = self.decode_dtype
        return self.compute_dtype if chosen is None or in_xla_context() else chosen

    def _matmul(self, x, name: str, dtype=None):
        """x [..., d] @ the kernel ``name`` -> [..., channels] in ``dtype`` (default: the
        compute dtype); int8 once quantized."""
        dtype = dtype or self.compute_dtype
        if self.int8_kernels is not None:
            return int8_matmul(x, self.int8_kernels[name], dtype)
        return ops.cast(ops.matmul(x, self._kernel(getattr(self, name))), dtype)

    def project_self(self, x) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """x [b, n, d_in] -> q [b, n, h, d_k], k [b, h, n, d_k], v [b, h, n, d_v]."""
        kc = self.key_channels
        q, k, v = ops.split(self._matmul(x, "qkv_kernel"), [kc, 2 * kc], axis=-1)
        return (self._split_heads(q, self.key_depth),
                self._split_heads_first(k, self.key_depth),
                self._split_heads_first(v, self.value_depth))

    def project_position(self, x, dtype=None) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """One decoding position: x [b, 1, d_in] -> q [b, h, 1, d_k], k [b, h, 1, d_k],
        v [b, h, 1, d_v], all head-major, in ``dtype`` (default: the compute dtype). With
        one position, [b, 1, h, d] and [b, h, 1, d] hold the same order, so the heads are
        split by a reshape (and one unstack when d_k == d_v), not by transposes."""
        qkv = self._matmul(x, "qkv_kernel", dtype)
        h, kc = self.num_heads, self.key_channels
        if self.key_depth == self.value_depth:
            q, k, v = ops.unstack(ops.reshape(qkv, (-1, 3, h, 1, self.key_depth)), axis=1)
            return q, k, v
        return (ops.reshape(qkv[..., :kc], (-1, h, 1, self.key_depth)),
                ops.reshape(qkv[..., kc:2 * kc], (-1, h, 1, self.key_depth)),
                ops.reshape(qkv[..., 2 * kc:], (-1, h, 1, self.value_depth)))

    def project_query(self, x) -> tf.Tensor:
        """x [b, n, d_in] -> q [b, n, h, d_k] (encoder-decoder attention)."""
        return self._split_heads(self._matmul(x, "q_kernel"), self.key_depth)

    def project_memory(self, memory) -> Tuple[tf.Tensor, tf.Tensor]:
        """memory [b, k, d_mem] -> keys [b, h, k, d_k], values [b, h, k, d_v]."""
        memory = ops.cast(memory, self.compute_dtype)
        k, v = ops.split(self._matmul(memory, "kv_kernel"), [self.key_channels], axis=-1)
        return (self._split_heads_first(k, self.key_depth),
                self._split_heads_first(v, self.value_depth))

    # Attention core --------------------------------------------------------------
    def attend(self, q, k, v, mask=None, training=False, one_position=False):
        """q [b, q, h, d_k], k [b, h, k, d_k], v [b, h, k, d_v], mask bool broadcastable
        to [b, h, q, k] -> (output [b, q, output_channels], weights float32 [b, h, q, k]).
        Keys and values are contracted in place (batched over b, h); only q and the
        context [b, h, q, d_v] are transposed. ``one_position``: q is one decoding
        position, head-major [b, h, 1, d_k] (``project_position``), and nothing is
        transposed. The two products run in the keys' and values' dtype (``cache_dtype``
        for a decoding step), the softmax in float32."""
        queries = "bhqd" if one_position else "bqhd"
        q = ops.cast(q * ops.cast(self.key_depth ** -0.5, q.dtype), k.dtype)
        logits = ops.cast(ops.einsum(f"{queries},bhkd->bhqk", q, k), "float32")
        if mask is not None:
            logits = ops.where(mask, logits, large_negative("float32"))
        # One key (the first step of a growing cache): softmax is 1; Keras warns on a
        # size-1 softmax axis, so say it directly.
        weights = (ops.ones_like(logits) if logits.shape[-1] == 1
                   else ops.softmax(logits, axis=-1))
        # Dropout first, then the values' dtype: the Dropout layer casts its input to the
        # layer's compute dtype, which turned a bfloat16 cache's product into float32.
        dropped = ops.cast(self.dropout_layer(weights, training=training), v.dtype)
        context = ops.cast(ops.einsum(f"bhqk,bhkd->{queries}", dropped, v),
                           self.compute_dtype)
        if one_position:   # [b, h, 1, d_v] holds the order of [b, 1, h * d_v]
            context = ops.reshape(context, (-1, 1, self.value_channels))
        else:
            shape = ops.shape(context)
            context = ops.reshape(context, (shape[0], shape[1], self.value_channels))
        return self._matmul(context, "output_kernel"), weights

    def call(self, query, memory=None, attention_mask=None, training=False,
             return_attention_weights=False):
        """query [b, q, d_in], memory [b, k, d_mem] (encoder-decoder attention only),
        attention_mask bool broadcastable to [b, h, q, k] -> output [b, q, output_channels]
        (and weights [b, h, q, k] when ``return_attention_weights``)."""
        if self.self_attention:
            if memory is not None:
                raise ValueError("a self-attention layer takes no memory")
            q, k, v = self.project_self(query)
        else:
            if memory is None:
                raise ValueError("an encoder-decoder attention layer needs memory")
            q = self.project_query(query)
            k, v = self.project_memory(memory)
        output, weights = self.attend(q, k, v, attention_mask, training=training)
        return (output, weights) if return_attention_weights else output

    # Incremental decoding --------------------------------------------------------
    def initial_cache(self, batch_size, max_length: int) -> Dict[str, tf.Tensor]:
        """Zeroed self-attention cache: {"k": [b, h, L, d_k], "v": [b, h, L, d_v]}.

        ``max_length`` L > 0 preallocates L positions, written in place at each step (the
        fixed shapes XLA needs). L = 0 gives an empty, *growing* cache: each step appends
        its position, so a step costs O(step) rather than O(L) in cache reads, writes and
        beam reorders (what pays without XLA). Its dtype is ``cache_dtype``."""
        dtype = self.cache_dtype
        return {"k": ops.zeros((batch_size, self.num_heads, max_length, self.key_depth), dtype),
                "v": ops.zeros((batch_size, self.num_heads, max_length, self.value_depth),
                               dtype)}

    def self_attention_step(self, x, step, cache: Dict[str, tf.Tensor], growing: bool = False):
        """One decoding position. x [b, 1, d_in], step int32 scalar, cache from
        ``initial_cache`` -> (output [b, 1, output_channels], new cache).

        ``growing`` says which cache ``initial_cache`` made: False, a preallocated one
        ([b, h, L, d], L > step), which gets this position's keys and values written at
        ``step`` and positions > step masked; True, a growing one holding exactly ``step``
        positions ([b, h, step, d]), which gets this position appended."""
        q, k, v = self.project_position(x, cache["k"].dtype)
        if growing:
            keys = ops.concatenate([cache["k"], k], axis=2)
            values = ops.concatenate([cache["v"], v], axis=2)
            output, _ = self.attend(q, keys, values, one_position=True)
            return output, {"k": keys, "v": values}
        step = ops.cast(step, "int32")
        start = (0, 0, step, 0)
        keys = ops.slice_update(cache["k"], start, k)
        values = ops.slice_update(cache["v"], start, v)
        visible = (ops.arange(ops.shape(keys)[2]) <= step)[None, None, None, :]
        output, _ = self.attend(q, keys, values, visible, one_position=True)
        return output, {"k": keys, "v": values}

    def memory_attention(self, x, keys, values, mask, beam_size: int = 1):
        """Encoder-decoder attention with precomputed memory keys/values.
        x [b, q, d_in], keys [b, h, k, d_k], values [b, h, k, d_v], mask broadcastable to
        [b, h, q, k] -> output [b, q, output_channels].

        With ``beam_size`` > 1, keys, values and mask stay per sentence ([b, ...]) while
        ``x`` holds n hypotheses per sentence ([b*n, q, d_in], sentence-major; n is read
        from the shapes, so a beam search's first step may feed one row per sentence):
        the queries of a sentence's
        n hypotheses are attended together (as [b, n*q]), so memory keys/values are
        neither tiled to every beam nor reordered each step."""
        q = self.project_query(x)
        if beam_size == 1:
            output, _ = self.attend(q, keys, values, mask)
            return output
        shape = ops.shape(q)
        q = ops.reshape(q, (ops.shape(keys)[0], -1, shape[2], shape[3]))
        output, _ = self.attend(q, keys, values, mask)
        return ops.reshape(output, (shape[0], shape[1], self.output_channels))

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_channels=self.key_channels,
                      value_channels=self.value_channels,
                      output_channels=self.output_channels, dropout=self.dropout,
                      self_attention=self.self_attention, quantization=self.quantization)
        return config


def to_keras_mha_kernels(layer: MultiHeadAttention) -> Dict[str, np.ndarray]:
    """The kernels of ``layer`` as ``keras.layers.MultiHeadAttention(use_bias=False)``
    stores them: {"query": [d_in, h, d_k], "key": [d_mem, h, d_k], "value": [d_mem, h, d_v],
    "output": [h, d_v, output_channels]} (numpy arrays)."""
    h, dk, dv, kc = layer.num_heads, layer.key_depth, layer.value_depth, layer.key_channels
    if layer.self_attention:
        qkv = ops.convert_to_numpy(layer.qkv_kernel)
        query, key, value = qkv[:, :kc], qkv[:, kc:2 * kc], qkv[:, 2 * kc:]
    else:
        kv = ops.convert_to_numpy(layer.kv_kernel)
        query, key, value = ops.convert_to_numpy(layer.q_kernel), kv[:, :kc], kv[:, kc:]
    return {"query": query.reshape(query.shape[0], h, dk),
            "key": key.reshape(key.shape[0], h, dk),
            "value": value.reshape(value.shape[0], h, dv),
            "output": ops.convert_to_numpy(layer.output_kernel).reshape(
                h, dv, layer.output_channels)}
