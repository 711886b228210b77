"""Token embeddings (shared with the pre-softmax projection) and position encodings.

* ``timing_signal``: the paper's sinusoids (section 3.5), interleaved as in the formula:
  PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).
* ``SinusoidalPositionEncoding``: positions [n] -> [n, d], no weights (``pos="timing"``).
* ``LearnedPositionEmbedding``: a [max_length, d] table (``pos="emb"``, Table 3 row E).
* ``SharedEmbedding``: one [vocab, d_model] matrix for source tokens, target tokens and
  (when ``shared_softmax``) the pre-softmax projection; lookups are scaled by
  sqrt(d_model) and the padding id 0 embeds to zeros (as tensor2tensor). With
  ``shared_softmax=False`` a separate [vocab, d_model] softmax matrix is used. Its
  ``quantize("int8")`` (contract in ``t2t_lite.layers.quantization``) makes the
  pre-softmax projection an int8 product (``t2t_lite.layers.int8.int8_matmul``); the
  lookups stay float32.
"""
from __future__ import annotations

import math

import keras
from keras import ops

from t2t_lite.layers.int8 import Int8Kernels, int8_matmul
from t2t_lite.layers.quantization import QuantizableLayer, check_quantization


def timing_signal(positions, channels: int):
    """positions [n] (int or float) -> float32 [n, channels] sinusoids; channels even."""
    if channels % 2:
        raise ValueError(f"the sinusoidal timing signal needs even channels, got {channels}")
    positions = ops.cast(positions, "float32")
    # 1 / 10000^(2i/d) for i = 0 .. d/2 - 1.
    inverse_timescales = ops.exp(
        ops.arange(0, channels, 2, dtype="float32") * (-math.log(10000.0) / channels))
    angles = positions[:, None] * inverse_timescales[None, :]          # [n, d/2]
    signal = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)      # [n, d/2, 2]
    return ops.reshape(signal, (-1, channels))


class SinusoidalPositionEncoding(keras.layers.Layer):
    """positions int [n] -> [n, channels] sinusoids (no weights)."""

    def __init__(self, channels: int, **kwargs):
        super().__init__(**kwargs)
        if channels % 2:
            raise ValueError(f"sinusoidal positions need an even hidden_size, got {channels}")
        self.channels = channels

    def call(self, positions):
        return ops.cast(timing_signal(positions, self.channels), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(channels=self.channels)
        return config


class LearnedPositionEmbedding(keras.layers.Layer):
    """positions int [n] (each < max_length) -> [n, channels] from a learned table."""

    def __init__(self, max_length: int, channels: int, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.channels = channels

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.max_length, self.channels),
            initializer=keras.initializers.RandomNormal(stddev=self.channels ** -0.5))

    def call(self, positions):
        return ops.cast(ops.take(self.embeddings, positions, axis=0), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(max_length=self.max_length, channels=self.channels)
        return config


class SharedEmbedding(QuantizableLayer, keras.layers.Layer):
    """Token embedding [vocab, d_model] and the pre-softmax projection.

    ``call(ids [b, n] int) -> [b, n, d_model]``: lookup * sqrt(d_model), zeros at id 0.
    ``logits(x [b, n, d_model]) -> float32 [b, n, vocab]``: x @ W^T with W the embedding
    matrix (``shared_softmax``) or a separate softmax matrix; int8 once quantized
    (``quantization``: "none" or "int8", int8 from the end of ``build``).
    """

    int8_kernel_count = 1

    def __init__(self, vocab_size: int, hidden_size: int, shared_softmax: bool = True,
                 pad_id: int = 0, quantization: str = "none", **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.shared_softmax = shared_softmax
        self.pad_id = pad_id
        self.quantization = check_quantization(quantization)
        self.int8_kernels = None      # Int8Kernels once quantized

    def build(self, input_shape=None):
        init = keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5)
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.vocab_size, self.hidden_size),
                                          initializer=init)
        if not self.shared_softmax:
            self.softmax_kernel = self.add_weight(name="softmax_kernel",
                                                  shape=(self.vocab_size, self.hidden_size),
                                                  initializer=init)
        if self.quantization == "int8":
            self._make_int8_kernels()

    def _make_int8_kernels(self):
        self.int8_kernels = Int8Kernels(
            {"softmax": keras.ops.transpose(self.softmax_weights)},   # [d_model, vocab]
            name=f"{self.name}_int8")

    def call(self, ids):
        x = ops.take(ops.cast(self.embeddings, self.compute_dtype), ids, axis=0)
        x = x * ops.cast(self.hidden_size ** 0.5, self.compute_dtype)
        return x * ops.cast(ops.not_equal(ids, self.pad_id), self.compute_dtype)[..., None]

    def logits(self, x):
        if self.int8_kernels is not None:  # int8 inference
            return int8_matmul(x, self.int8_kernels["softmax"], "float32")
        logits = ops.matmul(x, ops.transpose(ops.cast(self.softmax_weights, self.compute_dtype)))
        return ops.cast(logits, "float32")

    @property
    def softmax_weights(self):
        """The pre-softmax projection's [vocab, d_model] weights."""
        return self.embeddings if self.shared_softmax else self.softmax_kernel

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      shared_softmax=self.shared_softmax, pad_id=self.pad_id,
                      quantization=self.quantization)
        return config
