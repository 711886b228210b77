"""Position-wise feed-forward network: FFN(x) = max(0, x W1 + b1) W2 + b2 (section 3.3).

Shapes: x [b, n, d_model] -> hidden [b, n, filter_size] -> output [b, n, d_model].
Dropout with rate ``relu_dropout`` acts on the ReLU output (training only), as in
tensor2tensor. Both dense layers carry biases, as in the paper and tensor2tensor.
"""
from __future__ import annotations

import keras
from keras import ops

from t2t_lite.layers.int8 import get_kernel, int8_matmul


class FeedForward(keras.layers.Layer):
    """Two dense layers with a ReLU between them.

    Args:
      filter_size: d_ff, the hidden width.
      output_channels: d_model, the output width.
      relu_dropout: dropout rate on the hidden activations.
    """

    def __init__(self, filter_size: int, output_channels: int, relu_dropout: float = 0.0,
                 **kwargs):
        super().__init__(**kwargs)
        self.filter_size = filter_size
        self.output_channels = output_channels
        self.relu_dropout = relu_dropout
        self.hidden = keras.layers.Dense(filter_size, activation="relu", name="hidden",
                                         dtype=self.dtype_policy)
        self.dropout_layer = keras.layers.Dropout(relu_dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(output_channels, name="output",
                                               dtype=self.dtype_policy)

    def build(self, input_shape):
        self.hidden.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.filter_size,))

    def call(self, x, training=False):
        """x [b, n, d_in] -> [b, n, output_channels]."""
        hidden, output = get_kernel(self, "hidden"), get_kernel(self, "output")
        if hidden is not None and output is not None:  # int8 inference (quantize_model)
            dtype = self.compute_dtype
            h = int8_matmul(x, hidden, dtype, bias=self.hidden.bias, relu=True)
            return int8_matmul(h, output, dtype, bias=self.output_dense.bias)
        return self.output_dense(self.dropout_layer(self.hidden(x), training=training))

    def get_config(self):
        config = super().get_config()
        config.update(filter_size=self.filter_size, output_channels=self.output_channels,
                      relu_dropout=self.relu_dropout)
        return config
