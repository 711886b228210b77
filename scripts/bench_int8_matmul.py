"""Which matmul kernel is fastest on this CPU for the decoder's shapes: float32, bfloat16,
and the int8 routes of ``t2t_lite.layers.int8`` (quantize activations per row, int8
product, rescale, all included in the timing).

    python scripts/bench_int8_matmul.py [--rows=128] [--repeats=5] [--no-onednn]

Shapes: ``rows`` x d_model 512 against the base model's kernels (fused QKV 512x1536,
feed-forward 512x2048 and 2048x512, softmax 512x37000). Variants, timed interleaved in one
process, each ``tf.function``:

* ``float32``: ``tf.matmul``; ``bfloat16``: ``tf.matmul`` on bfloat16 inputs;
* ``int8_bmm``: ``tf.linalg.matmul(int8, int8, output_type=int32)`` without XLA
  (TensorFlow's BatchMatMulV3 int8 kernel);
* ``int8_xla``: the same compiled by XLA (``int8_matmul``'s ``xla`` kernel);
* ``int8_onednn``: ``int8_matmul``'s ``onednn`` kernel, TensorFlow's ``_QuantizedMatMul``
  with per-column scales and a blocked copy of the weights kept by the op (only with
  oneDNN's ops on, which the script turns on unless ``--no-onednn``);
* ``int8_onednn_public``: what that kernel was before, the public
  ``QuantizedMatMulWithBiasAndDequantize`` (one scale for all columns, so the columns are
  rescaled in a pass of their own, and the weights copied into oneDNN's layout on every
  call on CPUs whose int8 kernels want another layout, such as VNNI's).

Prints per shape the median ms per call (wall and process CPU) and each variant's speed
relative to float32 by CPU time (> 1: faster), which time-slicing by other processes on a
shared machine disturbs least.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=128, help="32 sentences x beam 4")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="calls per timing")
    parser.add_argument("--onednn", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if args.onednn else "0"
    import numpy as np
    import tensorflow as tf
    from t2t_lite.layers import int8

    rng = np.random.default_rng(0)
    print(f"rows={args.rows} onednn={int8.onednn_enabled()}", flush=True)
    for k, n in ((512, 1536), (512, 2048), (2048, 512), (512, 37000)):
        x = tf.constant(rng.standard_normal((args.rows, k)), tf.float32)
        w = tf.constant(rng.standard_normal((k, n)) * k ** -0.5, tf.float32)
        kernel = int8.Int8Kernel(w)
        q = tf.convert_to_tensor(kernel.q)

        def bmm(x):
            x_q, scale = int8.quantize_rows(x)
            product = tf.cast(tf.linalg.matmul(x_q, q, output_type=tf.int32), tf.float32)
            return product * scale * kernel.scale

        variants = {
            "float32": (tf.function(lambda x: tf.matmul(x, w)), x),
            "bfloat16": (tf.function(lambda x: tf.matmul(x, tf.cast(w, tf.bfloat16))),
                         tf.cast(x, tf.bfloat16)),
            "int8_bmm": (tf.function(bmm), x),
            "int8_xla": (tf.function(bmm, jit_compile=True), x),
        }
        if int8.onednn_enabled():
            # u8 activations x_q + 128; the bias -128 * colsum(q) removes the offset.
            public_bias = -128.0 * tf.reduce_sum(tf.cast(q, tf.float32), axis=0)

            def onednn_public(x):
                x_q, scale = int8.quantize_rows(x)
                x_u8 = tf.bitcast(tf.cast(tf.cast(x_q, tf.int16) + 128, tf.uint8), tf.quint8)
                product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
                    a=x_u8, b=tf.bitcast(q, tf.qint8), bias=public_bias, min_a=0.0,
                    max_a=255.0, min_b=-127.0, max_b=127.0, min_freezed_output=-1.0,
                    max_freezed_output=1.0, Toutput=tf.float32, input_quant_mode="SCALED")
                return product * scale * kernel.scale

            variants["int8_onednn"] = (tf.function(lambda x: int8.int8_matmul(x, kernel)), x)
            variants["int8_onednn_public"] = (tf.function(onednn_public), x)
        for fn, arg in variants.values():
            fn(arg).numpy()
        times = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, (fn, arg) in variants.items():
                start, cpu = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    out = fn(arg)
                out.numpy()
                times[name].append(((time.perf_counter() - start) / args.calls * 1e3,
                                    (time.process_time() - cpu) / args.calls * 1e3))
        base = statistics.median(t[1] for t in times["float32"])
        cells = []
        for name, values in times.items():
            wall = statistics.median(t[0] for t in values)
            cpu = statistics.median(t[1] for t in values)
            cells.append(f"{name} {wall:.2f}/{cpu:.2f} ms x{base / cpu:.2f}")
        print(f"[{args.rows},{k}]x[{k},{n}]: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
