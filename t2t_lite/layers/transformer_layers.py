"""Encoder and decoder layers and stacks with post-norm or pre-norm residual blocks.

Every sub-layer F (self-attention, encoder-decoder attention, feed-forward) is wrapped as

* ``"post"`` (the paper):  y = LayerNorm(x + Dropout(F(x)))
* ``"pre"``:               y = x + Dropout(F(LayerNorm(x))); the stack then ends with a
  final LayerNorm.

The layers take plain numbers (sizes, dropout rates, the norm position); the model maps
its hparams onto them (``models.transformer.layer_kwargs``). ``dropout`` is the rate
of that residual dropout (the paper's P_drop, tensor2tensor's
``layer_prepostprocess_dropout``); as everywhere in ``layers/``, an argument or attribute
named ``*dropout`` is a float rate and the ``keras.layers.Dropout`` applying it is
``*dropout_layer``. Shapes: b batch, s source length, t target length, d = hidden_size,
h heads, L the self-attention cache length (preallocated decode length, or the positions
decoded so far for a growing cache).

Each layer and stack lists its direct sublayers in ``layers``, as ``keras.Model.layers``
does (``t2t_lite.layers.quantization.quantize_model`` finds the quantizable ones there).
"""
from __future__ import annotations

from typing import Any, Dict, List

import keras
from keras import ops

from t2t_lite.layers.attention import MultiHeadAttention, causal_mask
from t2t_lite.layers.feed_forward import FeedForward


class _ResidualLayer(keras.layers.Layer):
    """Shared configuration and the residual wrapper of encoder and decoder layers."""

    def __init__(self, hidden_size: int, filter_size: int, num_heads: int,
                 key_channels: int, value_channels: int, dropout: float = 0.1,
                 attention_dropout: float = 0.0, relu_dropout: float = 0.0,
                 layer_norm_position: str = "post", layer_norm_epsilon: float = 1e-6,
                 **kwargs):
        super().__init__(**kwargs)
        if layer_norm_position not in ("post", "pre"):
            raise ValueError(f"layer_norm_position must be 'post' or 'pre', "
                             f"got {layer_norm_position!r}")
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.num_heads = num_heads
        self.key_channels = key_channels
        self.value_channels = value_channels
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.layer_norm_position = layer_norm_position
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.feed_forward = FeedForward(filter_size, hidden_size, relu_dropout,
                                        name="feed_forward", dtype=self.dtype_policy)

    def _attention(self, self_attention: bool, name: str) -> MultiHeadAttention:
        return MultiHeadAttention(self.num_heads, self.key_channels, self.value_channels,
                                  self.hidden_size, self.attention_dropout,
                                  self_attention=self_attention, name=name,
                                  dtype=self.dtype_policy)

    def _norm(self, name: str) -> keras.layers.LayerNormalization:
        return keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, name=name,
                                               dtype=self.dtype_policy)

    def _residual(self, x, norm, sublayer, training):
        """Post-norm: norm(x + drop(F(x))); pre-norm: x + drop(F(norm(x)))."""
        if self.layer_norm_position == "pre":
            return x + self.dropout_layer(sublayer(norm(x)), training=training)
        return norm(x + self.dropout_layer(sublayer(x), training=training))

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, filter_size=self.filter_size,
                      num_heads=self.num_heads, key_channels=self.key_channels,
                      value_channels=self.value_channels, dropout=self.dropout,
                      attention_dropout=self.attention_dropout,
                      relu_dropout=self.relu_dropout,
                      layer_norm_position=self.layer_norm_position,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config


class EncoderLayer(_ResidualLayer):
    """Self-attention then feed-forward. x [b, s, d], mask broadcastable to [b, h, s, s]."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention(True, "self_attention")
        self.self_attention_norm = self._norm("self_attention_norm")
        self.feed_forward_norm = self._norm("feed_forward_norm")

    @property
    def layers(self) -> List[keras.layers.Layer]:
        """The sublayers, in the order they apply."""
        return [self.self_attention, self.self_attention_norm, self.feed_forward,
                self.feed_forward_norm]

    def build(self, x_shape):
        for layer in self.layers:
            layer.build(x_shape)

    def call(self, x, attention_mask=None, training=False, return_attention_weights=False):
        """-> y [b, s, d] (and self-attention weights [b, h, s, s] on request)."""
        weights = []

        def attend(y):
            out, w = self.self_attention(y, attention_mask=attention_mask, training=training,
                                         return_attention_weights=True)
            weights.append(w)
            return out

        x = self._residual(x, self.self_attention_norm, attend, training)
        x = self._residual(x, self.feed_forward_norm,
                           lambda y: self.feed_forward(y, training=training), training)
        return (x, weights[0]) if return_attention_weights else x


class DecoderLayer(_ResidualLayer):
    """Masked self-attention, encoder-decoder attention, feed-forward.

    x [b, t, d], memory [b, s, d]; self_mask broadcastable to [b, h, t, t], memory_mask
    broadcastable to [b, h, t, s].
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention(True, "self_attention")
        self.encdec_attention = self._attention(False, "encdec_attention")
        self.self_attention_norm = self._norm("self_attention_norm")
        self.encdec_attention_norm = self._norm("encdec_attention_norm")
        self.feed_forward_norm = self._norm("feed_forward_norm")

    @property
    def layers(self) -> List[keras.layers.Layer]:
        """The sublayers, in the order they apply."""
        return [self.self_attention, self.self_attention_norm, self.encdec_attention,
                self.encdec_attention_norm, self.feed_forward, self.feed_forward_norm]

    def build(self, x_shape, memory_shape=None):
        memory_shape = x_shape if memory_shape is None else memory_shape
        self.encdec_attention.build(x_shape, memory_shape)
        for layer in (self.self_attention, self.self_attention_norm,
                      self.encdec_attention_norm, self.feed_forward, self.feed_forward_norm):
            layer.build(x_shape)

    def call(self, x, memory, self_mask=None, memory_mask=None, training=False,
             return_attention_weights=False):
        """-> y [b, t, d] (and weights [b, h, t, t], [b, h, t, s] on request)."""
        weights = {}

        def self_attend(y):
            out, weights["self"] = self.self_attention(
                y, attention_mask=self_mask, training=training, return_attention_weights=True)
            return out

        def memory_attend(y):
            out, weights["encdec"] = self.encdec_attention(
                y, memory, attention_mask=memory_mask, training=training,
                return_attention_weights=True)
            return out

        x = self._residual(x, self.self_attention_norm, self_attend, training)
        x = self._residual(x, self.encdec_attention_norm, memory_attend, training)
        x = self._residual(x, self.feed_forward_norm,
                           lambda y: self.feed_forward(y, training=training), training)
        if return_attention_weights:
            return x, weights["self"], weights["encdec"]
        return x

    def initial_cache(self, memory, max_length: int) -> Dict[str, Any]:
        """memory [b, s, d] -> {"self_k": [b, h, L, d_k], "self_v": [b, h, L, d_v],
        "encdec_k": [b, h, s, d_k], "encdec_v": [b, h, s, d_v]} (head-major)."""
        cache = self.self_attention.initial_cache(ops.shape(memory)[0], max_length)
        encdec_k, encdec_v = self.encdec_attention.project_memory(memory)
        return {"self_k": cache["k"], "self_v": cache["v"],
                "encdec_k": encdec_k, "encdec_v": encdec_v}

    def step(self, x, step, cache: Dict[str, Any], memory_mask, beam_size: int = 1,
             growing: bool = False):
        """One position: x [b, 1, d], step int32 scalar, memory_mask broadcastable to
        [b, h, 1, s] -> (y [b, 1, d], new cache). With ``beam_size`` n > 1, ``encdec_k``,
        ``encdec_v`` and ``memory_mask`` are per sentence ([b / n, ...]) while ``x`` and
        the self-attention cache hold n hypotheses per sentence (sentence-major).
        ``growing``: the self-attention cache grows ([b, h, step, d]) rather than being
        preallocated (``MultiHeadAttention.self_attention_step``)."""
        new_cache = dict(cache)

        def self_attend(y):
            out, updated = self.self_attention.self_attention_step(
                y, step, {"k": cache["self_k"], "v": cache["self_v"]}, growing=growing)
            new_cache["self_k"], new_cache["self_v"] = updated["k"], updated["v"]
            return out

        def memory_attend(y):
            return self.encdec_attention.memory_attention(y, cache["encdec_k"],
                                                          cache["encdec_v"], memory_mask,
                                                          beam_size=beam_size)

        x = self._residual(x, self.self_attention_norm, self_attend, False)
        x = self._residual(x, self.encdec_attention_norm, memory_attend, False)
        x = self._residual(x, self.feed_forward_norm, self.feed_forward, False)
        return x, new_cache


class _Stack(keras.layers.Layer):
    """N identical layers and, with pre-norm, a final LayerNorm."""

    layer_class = None

    def __init__(self, num_layers: int, layer_config: Dict[str, Any], **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.layer_config = dict(layer_config)
        self.blocks = [self.layer_class(**self.layer_config, name=f"layer_{i}",
                                        dtype=self.dtype_policy)
                       for i in range(num_layers)]
        # Keras 3 lists are not TensorFlow-tracked: without this, tf.train.Checkpoint
        # would save none of the blocks' weights (and restore "successfully").
        for i, block in enumerate(self.blocks):
            self._track_trackable(block, name=f"layer_{i}")
        self.pre_norm = self.layer_config.get("layer_norm_position", "post") == "pre"
        self.final_norm = (keras.layers.LayerNormalization(
            epsilon=self.layer_config.get("layer_norm_epsilon", 1e-6), name="final_norm",
            dtype=self.dtype_policy) if self.pre_norm else None)

    @property
    def layers(self) -> List[keras.layers.Layer]:
        """The blocks in order, then the final LayerNorm (pre-norm only)."""
        return list(self.blocks) + ([self.final_norm] if self.pre_norm else [])

    def _finish(self, x):
        return self.final_norm(x) if self.pre_norm else x

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, layer_config=self.layer_config)
        return config


class Encoder(_Stack):
    """x [b, s, d], attention_mask broadcastable to [b, h, s, s] -> [b, s, d]."""

    layer_class = EncoderLayer

    def build(self, x_shape):
        for layer in self.blocks:
            layer.build(x_shape)
        if self.pre_norm:
            self.final_norm.build(x_shape)

    def call(self, x, attention_mask=None, training=False, return_attention_weights=False):
        """-> y [b, s, d] (and a list of per-layer weights [b, h, s, s] on request)."""
        weights: List = []
        for layer in self.blocks:
            x, w = layer(x, attention_mask=attention_mask, training=training,
                         return_attention_weights=True)
            weights.append(w)
        x = self._finish(x)
        return (x, weights) if return_attention_weights else x


class Decoder(_Stack):
    """x [b, t, d] (embedded shifted targets), memory [b, s, d] -> [b, t, d]; the causal
    mask is applied here."""

    layer_class = DecoderLayer

    def build(self, x_shape, memory_shape=None):
        for layer in self.blocks:
            layer.build(x_shape, memory_shape)
        if self.pre_norm:
            self.final_norm.build(x_shape)

    def call(self, x, memory, memory_mask=None, training=False,
             return_attention_weights=False):
        """memory_mask broadcastable to [b, h, t, s] -> y [b, t, d] (and lists of per-layer
        weights [b, h, t, t] and [b, h, t, s] on request)."""
        self_mask = causal_mask(ops.shape(x)[1])
        self_weights, encdec_weights = [], []
        for layer in self.blocks:
            x, ws, we = layer(x, memory, self_mask=self_mask, memory_mask=memory_mask,
                              training=training, return_attention_weights=True)
            self_weights.append(ws)
            encdec_weights.append(we)
        x = self._finish(x)
        return (x, self_weights, encdec_weights) if return_attention_weights else x

    def initial_cache(self, memory, max_length: int) -> Dict[str, Any]:
        """{"layer_i": DecoderLayer cache} for every layer."""
        return {f"layer_{i}": layer.initial_cache(memory, max_length)
                for i, layer in enumerate(self.blocks)}

    def step(self, x, step, cache: Dict[str, Any], memory_mask, beam_size: int = 1,
             growing: bool = False):
        """x [b, 1, d], step int32 scalar -> (y [b, 1, d], new cache); ``beam_size`` and
        ``growing`` as ``DecoderLayer.step``."""
        new_cache = {}
        for i, layer in enumerate(self.blocks):
            x, new_cache[f"layer_{i}"] = layer.step(x, step, cache[f"layer_{i}"], memory_mask,
                                                    beam_size=beam_size, growing=growing)
        return self._finish(x), new_cache
