"""Position-wise feed-forward network: FFN(x) = max(0, x W1 + b1) W2 + b2 (section 3.3).

Shapes: x [b, n, d_model] -> hidden [b, n, filter_size] -> output [b, n, d_model].
Dropout with rate ``relu_dropout`` acts on the ReLU output (training only), as in
tensor2tensor. Both dense layers carry biases, as in the paper and tensor2tensor.

Int8 (``quantize("int8")``, contract in ``t2t_lite.layers.quantization``): both kernels
multiply in int8 (``t2t_lite.layers.int8.int8_matmul``), the biases and the ReLU stay
float32; ``get_config()["quantization"]`` records it.
"""
from __future__ import annotations

import keras

from t2t_lite.layers.int8 import Int8Kernels, int8_matmul
from t2t_lite.layers.quantization import QuantizableLayer, check_quantization


class FeedForward(QuantizableLayer, keras.layers.Layer):
    """Two dense layers with a ReLU between them.

    Args:
      filter_size: d_ff, the hidden width.
      output_channels: d_model, the output width.
      relu_dropout: dropout rate on the hidden activations.
      quantization: "none" or "int8" (int8 from the end of ``build``).
    """

    int8_kernel_count = 2

    def __init__(self, filter_size: int, output_channels: int, relu_dropout: float = 0.0,
                 quantization: str = "none", **kwargs):
        super().__init__(**kwargs)
        self.filter_size = filter_size
        self.output_channels = output_channels
        self.relu_dropout = relu_dropout
        self.hidden = keras.layers.Dense(filter_size, activation="relu", name="hidden",
                                         dtype=self.dtype_policy)
        self.dropout_layer = keras.layers.Dropout(relu_dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(output_channels, name="output",
                                               dtype=self.dtype_policy)
        self.quantization = check_quantization(quantization)
        self.int8_kernels = None      # Int8Kernels once quantized

    def build(self, input_shape):
        self.hidden.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.filter_size,))
        if self.quantization == "int8":
            self._make_int8_kernels()

    def _make_int8_kernels(self):
        self.int8_kernels = Int8Kernels({"hidden": self.hidden.kernel,
                                         "output": self.output_dense.kernel},
                                        name=f"{self.name}_int8")

    def call(self, x, training=False):
        """x [b, n, d_in] -> [b, n, output_channels]."""
        if self.int8_kernels is not None:  # int8 inference
            dtype = self.compute_dtype
            h = int8_matmul(x, self.int8_kernels["hidden"], dtype, bias=self.hidden.bias,
                            relu=True)
            return int8_matmul(h, self.int8_kernels["output"], dtype,
                               bias=self.output_dense.bias)
        return self.output_dense(self.dropout_layer(self.hidden(x), training=training))

    def get_config(self):
        config = super().get_config()
        config.update(filter_size=self.filter_size, output_channels=self.output_channels,
                      relu_dropout=self.relu_dropout, quantization=self.quantization)
        return config
