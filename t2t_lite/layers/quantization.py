"""Model-level int8 inference: ask every quantizable layer to quantize itself.

A ``QuantizableLayer`` (``MultiHeadAttention``, ``FeedForward``, ``SharedEmbedding``)
quantizes its own kernels with ``layer.quantize("int8")`` (as Keras's ``Dense.quantize``)
and reports its mode as ``layer.quantization`` (``"none"`` or ``"int8"``), which is part of
its ``get_config``. The contract of each such layer:

* ``quantize("int8")`` needs a built layer (Keras checks that, and refuses int8 for a
  float16 compute dtype: quantize a ``mixed_float16`` model's float32 or bfloat16
  rebuild instead); it derives int8 kernels
  (``t2t_lite.layers.int8.Int8Kernel``) from the layer's float32 kernels as they are
  now, and from then on ``call`` multiplies in int8. The float32 variables stay (training
  and checkpoints of them are unaffected); calling it again re-derives the int8 kernels
  from the current float32 ones. The int8 kernels are tracked by the layer, so a
  checkpoint or SavedModel written afterwards holds them.
* a layer made from a config with ``quantization="int8"`` quantizes itself at the end of
  ``build``, from its float32 kernels at that moment: restoring a checkpoint written from
  a quantized layer then restores its int8 kernels too; after restoring float32 weights
  alone, call ``quantize("int8")`` to derive the int8 kernels from them.

``quantize_model(model)`` applies this to every quantizable layer of a built and restored
model (found through ``layers``: ``keras.Model.layers``, and the ``layers`` each
container layer of ``t2t_lite.layers`` lists) and sets the self-attention layers' decoding
cache dtype. Nothing here imports the layer modules (they import this one).
"""
from __future__ import annotations

from typing import Iterator, List, Optional

from t2t_lite.cpu_features import has_native_bfloat16
from t2t_lite.layers.int8_backend import kernel_name, onednn_kernel_available

QUANTIZATION_MODES = ("none", "int8")
ATTENTION_DTYPES = ("float32", "bfloat16")


class QuantizableLayer:
    """Mixin of the layers that run in int8 by their own ``quantize("int8")`` (module
    docstring). ``quantization``: ``"none"`` or ``"int8"``; ``int8_kernel_count``: how many
    int8 kernels ``quantize`` makes; ``set_decode_dtype(dtype)``: the dtype of a decoding
    cache the layer keeps (a no-op where it keeps none)."""

    quantization = "none"
    int8_kernel_count = 0

    def quantize(self, mode, config=None, **kwargs):
        """Quantizes this layer's kernels to int8 (``mode="int8"``; the contract in the
        module docstring). ``config``: Keras's default for the mode."""
        del config, kwargs
        check_quantize_mode(mode)
        self._make_int8_kernels()
        self.quantization = "int8"

    def _make_int8_kernels(self) -> None:
        """Derives ``self.int8_kernels`` from the layer's float32 kernels as they are now."""
        raise NotImplementedError

    def set_decode_dtype(self, dtype: str) -> None:
        del dtype


def check_quantization(mode: str) -> str:
    """``mode`` if it is one of ``QUANTIZATION_MODES``, else ValueError."""
    if mode not in QUANTIZATION_MODES:
        raise ValueError(f"quantization must be one of {QUANTIZATION_MODES}, got {mode!r}")
    return mode


def check_quantize_mode(mode: str) -> None:
    """What ``QuantizableLayer.quantize`` accepts: ``"int8"``."""
    if mode != "int8":
        raise ValueError(f"t2t-lite layers quantize to 'int8' only, got mode={mode!r}")


def quantizable_layers(model) -> Iterator[QuantizableLayer]:
    """Every ``QuantizableLayer`` under ``model``, depth first, through the public
    ``layers`` lists (``keras.Model.layers`` and this package's container layers')."""
    pending = list(getattr(model, "layers", ()))
    while pending:
        layer = pending.pop(0)
        if isinstance(layer, QuantizableLayer):
            yield layer
        pending[:0] = list(getattr(layer, "layers", ()))


def default_attention_dtype() -> Optional[str]:
    """The self-attention dtype of int8 decoding in this process: bfloat16 where the
    ``onednn`` int8 kernel is in use (oneDNN's ops on, and the private TensorFlow APIs
    that also tell an XLA-compiled function apart, outside which alone it applies) and the
    CPU has bfloat16 arithmetic; else None (the model's compute dtype)."""
    return "bfloat16" if onednn_kernel_available() and has_native_bfloat16() else None


class Int8Summary:
    """What ``quantize_model`` did: ``layers`` (the quantized layers), ``kernel_count``
    and ``attention_dtype`` (the self-attention layers' decoding dtype)."""

    def __init__(self, layers: List[QuantizableLayer], attention_dtype: str):
        self.layers = layers
        self.attention_dtype = attention_dtype

    @property
    def kernel_count(self) -> int:
        return sum(layer.int8_kernel_count for layer in self.layers)


def quantize_model(model, attention_dtype: Optional[str] = None) -> Int8Summary:
    """Quantizes every quantizable layer of a built ``Transformer`` in place
    (``layer.quantize("int8")``: its attention, feed-forward and embedding layers then
    multiply in int8) and sets its self-attention layers' decoding cache to
    ``attention_dtype`` (float32 or bfloat16; None: ``default_attention_dtype()``, or the
    model's compute dtype where that is None). Calling it again re-quantizes from the
    current float32 variables. Returns an ``Int8Summary``."""
    if not model.built:
        raise ValueError("quantize_model needs a built model with its weights restored")
    if attention_dtype is not None and attention_dtype not in ATTENTION_DTYPES:
        raise ValueError(f"attention_dtype must be one of {ATTENTION_DTYPES}, got "
                         f"{attention_dtype!r}")
    attention_dtype = attention_dtype or default_attention_dtype() or model.compute_dtype
    layers = list(quantizable_layers(model))
    for layer in layers:
        layer.quantize("int8")
        layer.set_decode_dtype(attention_dtype)
    return Int8Summary(layers, attention_dtype)


def quantization_of(model) -> str:
    """``"int8"`` when the model's quantizable layers run in int8, else ``"none"``."""
    return ("int8" if any(layer.quantization == "int8" for layer in quantizable_layers(model))
            else "none")


def describe_quantization(summary: Int8Summary, jit_compile: bool = False) -> str:
    """The line the decoder prints after ``quantize_model``, for a search compiled with
    XLA (``jit_compile``) or not."""
    if jit_compile:
        return ("int8: matmul weights quantized (kernel xla inside the XLA-compiled search, "
                "activations per row, self-attention in the compute dtype)")
    return (f"int8: matmul weights quantized (kernel {kernel_name()}, activations per row, "
            f"self-attention {summary.attention_dtype})")


def quantize_record(summary: Int8Summary) -> dict:
    """What an export records about its int8 weights (``t2t_lite_export.json``)."""
    return {"quantize": "int8", "int8_kernel": kernel_name(),
            "int8_attention": summary.attention_dtype}
