"""Benchmark: what one beam-search step spends outside the decoder layers, under XLA.

    python scripts/bench_decode_parts.py --hparams_set=transformer_base --vocab_size=37000 \
        --batch=32 --beam_size=4 --cache_length=74

Times, each as its own XLA-compiled function on random data of the shapes one step of
``beam_search`` sees (rows = batch * beam_size):
* ``softmax projection``: [rows, d] x [d, V] (the tied pre-softmax matmul), with GFLOP/s;
* ``log_softmax``: over [rows, V];
* ``top_k``: the 2 * beam_size best of [batch, beam_size * V] (beam_search's candidates);
* ``cache reorder``: gathering every layer's self-attention keys and values
  ([rows, cache_length, h, d_k]) by the surviving hypotheses' origins, as beam search
  does each step. ``cache_length`` is the whole buffer for the preallocated cache (XLA),
  or the positions decoded so far for the growing cache used without XLA.
Run ``scripts/benchmark.py decode`` with the same shapes for the whole search's step time.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def time_ms(fn: Callable, args: Sequence, repeats: int) -> float:
    """Mean milliseconds of ``fn(*args)`` over ``repeats`` calls after one warm-up call."""
    import tensorflow as tf
    tf.nest.map_structure(lambda t: t.numpy(), fn(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        result = fn(*args)
    tf.nest.map_structure(lambda t: t.numpy(), result)
    return (time.perf_counter() - start) / repeats * 1000.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--hparams", default="")
    parser.add_argument("--vocab_size", type=int, default=37000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--cache_length", type=int, default=74,
                        help="self-attention cache length: the preallocated buffer T "
                             "(source bucket + extra_length) or, growing, the step")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)

    import tensorflow as tf
    from t2t_lite import registry

    hparams = registry.hparams(args.hparams_set, args.hparams)
    d, vocab, rows = hparams.hidden_size, args.vocab_size, args.batch * args.beam_size
    heads = hparams.num_heads
    key_depth = (hparams.attention_key_channels or d) // heads
    value_depth = (hparams.attention_value_channels or d) // heads
    x = tf.random.normal([rows, d])
    embedding = tf.random.normal([d, vocab])
    logits = tf.random.normal([rows, vocab])
    candidates = tf.random.normal([args.batch, args.beam_size * vocab])
    caches = [tf.random.normal([rows, args.cache_length, heads, depth])
              for _ in range(hparams.num_hidden_layers) for depth in (key_depth, value_depth)]
    origins = tf.random.uniform([rows], 0, rows, tf.int32)

    jit = lambda fn: tf.function(fn, jit_compile=True, autograph=False)
    parts = [
        ("softmax projection", jit(lambda a: tf.matmul(a, embedding)), (x,)),
        ("log_softmax", jit(tf.nn.log_softmax), (logits,)),
        ("top_k", jit(lambda c: tf.math.top_k(c, 2 * args.beam_size)), (candidates,)),
        ("cache reorder", jit(lambda cs, o: [tf.gather(c, o) for c in cs]), (caches, origins)),
    ]
    print(f"{args.hparams_set} V={vocab} rows={rows} (batch {args.batch} x beam "
          f"{args.beam_size}) cache_length={args.cache_length}")
    for name, fn, fn_args in parts:
        ms = time_ms(fn, fn_args, args.repeats)
        extra = ""
        if name == "softmax projection":
            extra = f"  {2.0 * rows * d * vocab / (ms / 1000.0) / 1e9:.1f} GFLOP/s"
        elif name == "cache reorder":
            megabytes = sum(int(tf.size(c)) for c in caches) * 4 / 2**20
            extra = f"  {megabytes:.0f} MiB gathered"
        print(f"{name}: {ms:.2f} ms per step{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
