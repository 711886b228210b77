"""Benchmark: what reordering the growing self-attention caches costs a search without XLA.

    python scripts/bench_growing_reorder.py [--dtype=bfloat16] [--rounds=7]

Without XLA the decoder's self-attention caches grow one position a step ([b*k, h, t, d]
per layer for keys and for values): each step appends (``ConcatV2``), attends, and then
``beam_search._reorder`` gathers every cache by the rows the surviving hypotheses came
from (``GatherV2``), a second copy. This script times that part of a search alone, on the
benchmark's shapes (32 sentences x beam 4, 8 heads of 64, 30 steps, 6 layers, parents
drawn at random within each sentence, fixed seed), as a ``tf.function`` loop, in three
variants timed interleaved:

* ``gather``: the search's way (append, attend, gather);
* ``no_gather``: append and attend only, the floor (its outputs are wrong);
* ``lineage``: the caches are never reordered: they hold each sentence's k beams side by
  side ([b, h, t*k, d]), an int32 [b*k, t] table says which beam's entry each
  hypothesis's position is, every query scores all k beams' keys of its sentence (k times
  the product's work, one product per sentence and head), and the table picks each
  position's logit and spreads the softmax weights back for the values product.

Prints each variant's median seconds per loop (``--dtype`` of the caches: the int8
decoder's bfloat16, or float32) and how far ``lineage``'s and ``no_gather``'s results are
from ``gather``'s (lineage: rounding only; no_gather: wrong).
"""
from __future__ import annotations

import argparse

SENTENCES, BEAMS, HEADS, DEPTH, STEPS, LAYERS = 32, 4, 8, 64, 30, 6


def build(tf, dtype):
    import numpy as np
    b, k, h, d = SENTENCES, BEAMS, HEADS, DEPTH
    rows = b * k
    rng = np.random.default_rng(0)
    # Each step's keys and values (also its queries), [steps, rows, h, 1, d] per layer:
    # different every step, so that the attention's result depends on the reorders.
    new = [tf.constant(rng.standard_normal((STEPS, rows, h, 1, d)), dtype)
           for _ in range(LAYERS)]
    parents = tf.constant(np.stack([(np.arange(rows) // k) * k + rng.integers(0, k, rows)
                                    for _ in range(STEPS)]), tf.int32)

    def query(i, t):   # another layer's step tensor, scaled as attention scales queries
        return new[(i + 1) % LAYERS][t] * tf.cast(d ** -0.5, dtype)

    def attend(q, keys, values):
        weights = tf.nn.softmax(tf.cast(tf.matmul(q, keys, transpose_b=True), tf.float32))
        return tf.matmul(tf.cast(weights, dtype), values)

    def reordered(gather: bool):
        def loop():
            caches = [tf.zeros((rows, h, 0, d), dtype) for _ in range(2 * LAYERS)]
            out = tf.zeros((rows, h, 1, d), dtype)
            for t in tf.range(STEPS):
                tf.autograph.experimental.set_loop_options(shape_invariants=[
                    (caches, [tf.TensorShape([rows, h, None, d])] * (2 * LAYERS))])
                grown = []
                for i in range(LAYERS):
                    step = new[i][t]
                    keys = tf.concat([caches[2 * i], step], 2)
                    values = tf.concat([caches[2 * i + 1], step], 2)
                    out += attend(query(i, t), keys, values)
                    grown += [keys, values]
                caches = [tf.gather(c, parents[t]) for c in grown] if gather else grown
            return out
        return tf.function(loop)

    def lineage():
        slot = tf.range(rows) % k
        caches = [tf.zeros((b, h, 0, d), dtype) for _ in range(2 * LAYERS)]
        table = tf.zeros((rows, 0), tf.int32)
        out = tf.zeros((rows, h, 1, d), dtype)
        for t in tf.range(STEPS):
            tf.autograph.experimental.set_loop_options(shape_invariants=[
                (caches, [tf.TensorShape([b, h, None, d])] * (2 * LAYERS)),
                (table, tf.TensorShape([rows, None]))])
            table = tf.concat([table, slot[:, None]], 1)                     # [rows, n]
            n = tf.shape(table)[1]
            index = tf.reshape(table, [b, 1, k, n]) + tf.range(n)[None, None, None, :] * k
            index = tf.tile(index, [1, h, 1, 1])                              # [b, h, k, n]
            spread = tf.reshape(tf.one_hot(table, k, dtype=dtype), [b, 1, k, n * k])
            grown = []
            for i in range(LAYERS):
                step = tf.transpose(tf.reshape(new[i][t], [b, k, h, d]), [0, 2, 1, 3])
                keys = tf.concat([caches[2 * i], step], 2)                    # [b, h, n*k, d]
                values = tf.concat([caches[2 * i + 1], step], 2)
                q = tf.transpose(tf.reshape(query(i, t), [b, k, h, d]), [0, 2, 1, 3])
                every_beam = tf.cast(tf.matmul(q, keys, transpose_b=True), tf.float32)
                weights = tf.nn.softmax(tf.gather(every_beam, index, batch_dims=3))
                weights = tf.reshape(tf.repeat(tf.cast(weights, dtype), k, axis=-1),
                                     [b, h, k, n * k]) * spread
                context = tf.matmul(weights, values)                          # [b, h, k, d]
                out += tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [rows, h, 1, d])
                grown += [keys, values]
            caches = grown
            table = tf.gather(table, parents[t])
        return out

    return {"gather": reordered(True), "no_gather": reordered(False),
            "lineage": tf.function(lineage)}


def main(argv=None) -> None:
    import os
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in (root, os.path.join(root, "scripts")):
        if path not in sys.path:
            sys.path.insert(0, path)
    import benchmark
    from t2t_lite.flag_fields import positive_int
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--rounds", type=positive_int, default=7)
    parsed = parser.parse_args(argv)
    import tensorflow as tf
    runs = build(tf, tf.as_dtype(parsed.dtype))
    medians = benchmark.interleaved_medians(runs, parsed.rounds, warmup_rounds=1)
    for name, seconds in medians.items():
        print(f"{name}: {seconds:.4f} s per {STEPS} steps x {LAYERS} layers "
              f"({parsed.dtype}, median of {parsed.rounds})")
    reference = tf.cast(runs["gather"](), tf.float32)
    scale = float(tf.reduce_max(tf.abs(reference)))
    for name in ("lineage", "no_gather"):
        difference = float(tf.reduce_max(tf.abs(tf.cast(runs[name](), tf.float32) - reference)))
        print(f"{name} against gather: largest difference {difference:.3g} "
              f"(largest value {scale:.3g})")

if __name__ == "__main__":
    main()
