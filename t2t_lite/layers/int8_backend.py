"""The private TensorFlow APIs of int8 inference, each looked up once, with public fallbacks.

Three private symbols give the fast CPU int8 matmul (``TESTED_TENSORFLOW``):

* ``tensorflow.python.util._pywrap_util_port.IsMklEnabled``: whether oneDNN's ops are on
  in this process (``TF_ENABLE_ONEDNN_OPTS=1`` before TensorFlow is imported);
* ``tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext``: whether the op
  being traced belongs to an XLA-compiled function (which cannot hold a oneDNN op);
* ``tensorflow.python.framework.op_def_library._apply_op_helper``, which builds the
  graph-only op ``_QuantizedMatMul`` (oneDNN's s8 x s8 product; it has no public Python
  wrapper).

``kernel_name()`` is ``"onednn"`` where all three are found, ``_QuantizedMatMul`` is
registered and oneDNN's ops are on, else ``"xla"``: the public
``tf.linalg.matmul(int8, int8, output_type=int32)`` compiled by XLA. A symbol that a
TensorFlow upgrade removed costs speed, not decoding: it is reported once, as one
``warnings.warn`` line naming it and this TensorFlow's version, and the int8 product takes
the ``xla`` kernel. Nothing else in t2t-lite reaches these symbols.
"""
from __future__ import annotations

import functools
import importlib
import warnings
from typing import Callable, Optional

import tensorflow as tf

TESTED_TENSORFLOW = "2.21"
ONEDNN_OP = "_QuantizedMatMul"


def _warn_missing(what: str, consequence: str) -> None:
    warnings.warn(f"t2t-lite int8: TensorFlow {tf.__version__} has no {what} (a private "
                  f"API, tested with TensorFlow {TESTED_TENSORFLOW}); {consequence}",
                  RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def private_symbol(module: str, name: str) -> Optional[Callable]:
    """``module.name`` from TensorFlow's private modules, or None where it is gone."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _is_mkl_enabled():
    return private_symbol("tensorflow.python.util._pywrap_util_port", "IsMklEnabled")


def _xla_context_test():
    return private_symbol("tensorflow.python.ops.control_flow_util",
                          "GraphOrParentsInXlaContext")


def _apply_op_helper():
    return private_symbol("tensorflow.python.framework.op_def_library", "_apply_op_helper")


def onednn_enabled() -> bool:
    """Whether oneDNN's ops are on in this process (False where TensorFlow cannot say)."""
    is_enabled = _is_mkl_enabled()
    return bool(is_enabled()) if is_enabled is not None else False


def in_xla_context() -> bool:
    """Whether the op being traced belongs to an XLA-compiled function. Where TensorFlow
    cannot say, False (``kernel_name`` is then ``"xla"`` everywhere, which is right inside
    and outside XLA)."""
    test = _xla_context_test()
    if test is None:
        return False
    return bool(test(tf.compat.v1.get_default_graph()))


def _op_registered(name: str) -> bool:
    registry = private_symbol("tensorflow.python.framework.op_def_registry", "get")
    return registry is not None and registry(name) is not None


def _op_builds() -> bool:
    """Whether ``onednn_quantized_matmul`` builds (in a scratch graph, nothing runs): the
    op still takes the inputs and attributes it is given."""
    try:
        with tf.Graph().as_default():
            onednn_quantized_matmul(tf.zeros([1, 4], tf.int8), tf.zeros([4, 2], tf.int8),
                                    -tf.ones([2]), tf.ones([2]), tf.zeros([2]))
        return True
    except Exception:  # noqa: BLE001  (any refusal means: use the public kernel)
        return False


@functools.lru_cache(maxsize=None)
def onednn_kernel_available() -> bool:
    """Whether this TensorFlow offers everything the ``onednn`` kernel needs (checked
    once; a missing piece is one warning, where oneDNN's ops are on)."""
    if not onednn_enabled():
        return False
    checks = ((_xla_context_test, "control_flow_util.GraphOrParentsInXlaContext"),
              (_apply_op_helper, "op_def_library._apply_op_helper"),
              (lambda: _op_registered(ONEDNN_OP), f"registered op {ONEDNN_OP}"),
              (_op_builds, f"{ONEDNN_OP} with the inputs and attributes t2t-lite gives it"))
    for check, what in checks:
        if not check():
            _warn_missing(what, "int8 matmuls use the slower public XLA kernel")
            return False
    return True


def kernel_name() -> str:
    """The int8 kernel this process traces with: ``onednn`` or ``xla`` (module docstring)."""
    return "onednn" if onednn_kernel_available() else "xla"


def onednn_quantized_matmul(x_q, q, channel_min, channel_max, bias,
                            weight_const: bool = True):
    """TensorFlow's ``_QuantizedMatMul``: int8 x_q [m, k] x int8 q [k, n] -> float32
    [m, n] = (x_q @ q) * (max(|channel_min|, |channel_max|) / 127) + bias, the product
    exact in int32 and rescaled per column by oneDNN (an activation range of +-127: scale
    1). ``channel_min``/``channel_max``/``bias`` float32 [n].

    With ``weight_const`` the op copies ``q`` into oneDNN's blocked layout on its first
    call and keeps that copy for every later call of the same graph node: right only
    where ``q`` never changes under that node (a captured variable that is never
    assigned). Callers check ``onednn_kernel_available()`` first."""
    levels = tf.constant(127.0, tf.float32)
    inputs = [tf.bitcast(x_q, tf.qint8), tf.bitcast(q, tf.qint8), bias,
              -levels, levels, channel_min, channel_max]
    _, _, _, outputs = _apply_op_helper()(
        ONEDNN_OP, name="QuantizedMatMul", device_inputs=inputs, host_inputs=[],
        Tdevice_outputs=[tf.float32], Thost_outputs=[], T1=tf.qint8, T2=tf.qint8,
        Tbias=tf.float32, U=tf.float32, Tout=tf.float32, transpose_a=False,
        transpose_b=False, is_weight_const=weight_const, is_bias_const=False,
        fused_ops=["BiasAdd", "Dequantize"], input_quant_mode="SCALED",
        output_quant_mode="SCALED", leakyrelu_alpha=0.2)
    return outputs[0]
