"""Benchmark: the most that cheaper int8 rescaling could give a whole int8 search.

    python scripts/bench_int8_rescale.py [--rounds=5]

Every int8 matmul (``t2t_lite.layers.int8.int8_matmul``) rescales its exact integer
products by the columns' scales and the activations' scales. oneDNN's kernel applies the
columns' scales itself, and the activation scale of the kernels quantized per tensor (the
sublayers' inputs, the softmax projection's included); the rows' scales of the kernels
quantized per row (the attention's output projection, the feed-forward's second layer:
one scale per activation row, computed on every call) stay a pass of their own over the
[rows, n] output. This script times ``scripts/benchmark.py decode``'s int8 search (base
dimensions, V = 37,000, 32 sentences x 24 source tokens, beam 4, 30 forced target tokens,
oneDNN's kernel where this process has it, no XLA) on the same weights twice in one
process, interleaved ``--rounds`` times after one untimed round: as the library runs it,
and with the rows' pass left out (and, with the ``xla`` kernel, the columns' too). The
second search's values are wrong (it is timed, not compared); its speed-up is an upper
bound on what any folding of the remaining rescaling could give.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)


def leave_out_rescaling() -> None:
    """Makes every layer's int8 matmul skip the rows' rescaling pass."""
    import tensorflow as tf
    from t2t_lite.layers import attention, embedding, feed_forward, int8

    library = int8.int8_matmul

    def unscaled_int8_matmul(x, kernel, dtype=tf.float32, bias=None, relu=False):
        if kernel.per_tensor:   # oneDNN rescales these inside the product already
            return library(x, kernel, dtype, bias=bias, relu=relu)
        shape = tf.shape(x)
        product, _ = int8.int8_product(tf.reshape(x, [-1, shape[-1]]), kernel)
        product = int8._bias_relu(product, bias, relu)
        n = tf.shape(kernel.q)[1]
        return tf.cast(tf.reshape(product, tf.concat([shape[:-1], [n]], axis=0)), dtype)

    for module in (attention, embedding, feed_forward):
        module.int8_matmul = unscaled_int8_matmul


def main(argv=None) -> None:
    import benchmark
    parsed, hparams, args, tf = benchmark.int8_search_ab_setup(__doc__.splitlines()[0], 5,
                                                               argv)
    from t2t_lite.layers.int8 import kernel_name
    print(f"int8 rescaling A/B: kernel={kernel_name()} {benchmark.describe(args, tf)}",
          flush=True)
    (library, _), (unscaled, _) = benchmark.same_weight_searches(
        args, hparams, leave_out_rescaling)
    medians = benchmark.interleaved_medians(
        {"library": library, "no rescaling": unscaled}, parsed.rounds, warmup_rounds=1)
    with_rescaling, without = medians["library"], medians["no rescaling"]
    print(f"library {with_rescaling:.3f} s, no rescaling {without:.3f} s (median of "
          f"{parsed.rounds}): upper bound {with_rescaling / without:.3f}x")


if __name__ == "__main__":
    main()
