"""Benchmark: what reordering the self-attention caches costs a beam search under XLA.

    python scripts/bench_beam_reorder.py [--rounds=5] [--variants=gather,none,...]

Under XLA the decoder's self-attention caches are preallocated, [b*k, h, L, d] per layer
for keys and for values, and after every step the search gathers every one of them by the
rows the surviving hypotheses came from (``beam_search._reorder``). A gather cannot write
in place, so XLA also copies each gathered cache back into the loop's buffer. This script
times that part of a search alone, on the benchmark's shapes by default (32 sentences x
beam 4, 8 heads of 64, 30 positions, 6 layers): an XLA ``while_loop`` of L steps that per
layer writes the step's key and value, attends from every hypothesis, and then reorders,
with within-sentence parents drawn at random (fixed seed). Variants (``--variants``):

* ``gather``: the search's way, every cache gathered by the parents at every step;
* ``none``: no reorder at all, the floor (its outputs are wrong, so it must disagree:
  that shows the comparison can fail);
* ``index_all_beams``: caches never move; an int32 [b*k, L] table says which beam's row
  holds each position of each hypothesis, and attention scores every beam of the
  sentence (k times the attention work) and keeps the right one per position;
* ``index_gather``: the same table, with the keys and values gathered for attention
  (one gather per step, no copy back);
* ``unrolled``: ``gather`` with two steps per loop iteration (even ``--length`` only), so
  that the two gathers can alternate between two buffers instead of copying back.

Prints each variant's median milliseconds per search and its ratio to ``gather``, and
whether each variant's final hidden states equal ``gather``'s (every one but ``none``
should).
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)

from t2t_lite.flag_fields import positive_int  # noqa: E402  (no TensorFlow)

VARIANTS = ("gather", "none", "index_all_beams", "index_gather", "unrolled")


def build_search(variant: str, shapes: argparse.Namespace):
    """An XLA-compiled function () -> hidden float32 [b*k, h, d] after ``shapes.length``
    steps of ``variant``."""
    import keras
    import numpy as np
    import tensorflow as tf

    s, k, h, steps, d = (shapes.batch, shapes.beam_size, shapes.heads, shapes.length,
                         shapes.depth)
    rows = s * k
    rng = np.random.default_rng(0)
    parents = tf.constant(np.stack([(np.arange(rows) // k) * k + rng.integers(0, k, rows)
                                    for _ in range(steps)]).astype(np.int32))   # [L, rows]
    start = tf.constant(rng.standard_normal((rows, h, d)).astype(np.float32))
    own_beam = tf.reshape(tf.tile(tf.range(k)[None, :], [s, 1]), [rows, 1])
    positions = tf.range(steps)

    def softmax_upto(logits, step):
        return tf.nn.softmax(tf.where(positions <= step, logits, -1e9), axis=-1)

    def attend_rows(q, keys, values, step):                 # keys [rows, h, L, d]
        weights = softmax_upto(tf.einsum("rhd,rhpd->rhp", q, keys), step)
        return tf.einsum("rhp,rhpd->rhd", weights, values)

    def attend_all_beams(q, keys, values, step, table):
        qs = tf.reshape(q, [s, k, h, d])
        ks, vs = (tf.reshape(t, [s, k, h, steps, d]) for t in (keys, values))
        scores = tf.einsum("sihd,sjhpd->sihpj", qs, ks)                  # [s, k, h, L, k]
        which = tf.broadcast_to(tf.reshape(table, [s, k, 1, steps, 1]), [s, k, h, steps, 1])
        logits = tf.squeeze(tf.experimental.numpy.take_along_axis(scores, which, -1), -1)
        weights = softmax_upto(logits, step)                              # [s, k, h, L]
        spread = weights[..., None] * tf.one_hot(tf.reshape(table, [s, k, 1, steps]), k)
        return tf.reshape(tf.einsum("sihpj,sjhpd->sihd", spread, vs), [rows, h, d])

    def attend_gathered(q, keys, values, step, table):
        source = (tf.range(rows)[:, None] // k) * k + table                # [rows, L]
        index = tf.stack([source, tf.broadcast_to(positions[None], [rows, steps])], -1)
        kt = tf.gather_nd(tf.transpose(keys, [0, 2, 1, 3]), index)         # [rows, L, h, d]
        vt = tf.gather_nd(tf.transpose(values, [0, 2, 1, 3]), index)
        weights = softmax_upto(tf.einsum("rhd,rphd->rhp", q, kt), step)
        return tf.einsum("rhp,rphd->rhd", weights, vt)

    def step_fn(i, caches, table, hidden):
        if variant.startswith("index"):
            table = keras.ops.slice_update(table, (0, i), own_beam)
        written, x = [], hidden
        for layer in range(shapes.layers):
            update = tf.tanh(x)[:, :, None, :]
            keys = keras.ops.slice_update(caches[2 * layer], (0, 0, i, 0), update)
            values = keras.ops.slice_update(caches[2 * layer + 1], (0, 0, i, 0), -update)
            if variant == "index_all_beams":
                context = attend_all_beams(x, keys, values, i, table)
            elif variant == "index_gather":
                context = attend_gathered(x, keys, values, i, table)
            else:
                context = attend_rows(x, keys, values, i)
            x = x + context
            written += [keys, values]
        hidden = tf.gather(x, parents[i])
        if variant in ("gather", "unrolled"):
            written = [tf.gather(cache, parents[i]) for cache in written]
        elif variant.startswith("index"):
            table = tf.gather(table, parents[i])
        return i + 1, tuple(written), table, hidden

    def two_steps(i, caches, table, hidden):
        return step_fn(*step_fn(i, caches, table, hidden))

    body = two_steps if variant == "unrolled" else step_fn

    @tf.function(jit_compile=True)
    def search():
        caches = tuple(tf.zeros((rows, h, steps, d)) for _ in range(2 * shapes.layers))
        loop_vars = (tf.constant(0), caches, tf.zeros((rows, steps), tf.int32), start)
        return tf.while_loop(lambda i, *rest: i < steps, body, loop_vars)[3]

    return search


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--batch", type=positive_int, default=32, help="sentences")
    parser.add_argument("--beam_size", type=positive_int, default=4)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--depth", type=positive_int, default=64, help="channels per head")
    parser.add_argument("--length", type=positive_int, default=30, help="positions decoded")
    parser.add_argument("--layers", type=positive_int, default=6)
    shapes = parser.parse_args(argv)
    variants = shapes.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or "gather" not in variants:
        parser.error(f"--variants: {', '.join(unknown) or 'gather is required'} "
                     f"(choose from {', '.join(VARIANTS)}, gather included)")
    if "unrolled" in variants and shapes.length % 2:
        parser.error(f"--length={shapes.length}: unrolled runs two steps per iteration; "
                     "give an even length or leave unrolled out of --variants")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    import benchmark
    searches = {name: build_search(name, shapes) for name in variants}
    hidden = {name: search().numpy() for name, search in searches.items()}   # compiles
    medians = benchmark.interleaved_medians(
        {name: (lambda search=search: search().numpy()) for name, search in searches.items()},
        shapes.rounds)
    print(f"beam reorder under XLA: {shapes.batch} x beam {shapes.beam_size}, "
          f"{shapes.heads} heads x {shapes.depth}, {shapes.length} positions, "
          f"{shapes.layers} layers (median of {shapes.rounds})")
    base = medians["gather"]
    for name in variants:
        median = medians[name]
        agree = bool(np.allclose(hidden[name], hidden["gather"], rtol=1e-4, atol=1e-4))
        print(f"{name}: {median * 1000:.1f} ms per search, {median / base:.3f}x gather's "
              f"time, agrees with gather: {agree}")


if __name__ == "__main__":
    main()
