"""Benchmark: what one beam-search step spends outside the decoder layers, under XLA.

    python scripts/bench_decode_parts.py --hparams_set=transformer_base --vocab_size=37000 \
        --batch=32 --beam_size=4 --cache_length=74

Times, each as its own XLA-compiled function on random data of the shapes one step of
``beam_search`` sees (rows = batch * beam_size):
* ``softmax projection``: [rows, d] x [d, V] (the tied pre-softmax matmul), with GFLOP/s;
  then the same product without XLA (with ``--onednn``, oneDNN's MatMul, as the decoder
  runs float32 on real files), with the weights as the model stores them ([V, d], read
  transposed) and as [d, V];
* ``log_softmax``: over [rows, V], with XLA and without;
* ``benchmark EOS suppression``: the ``tf.where`` over [rows, V] logits by which
  ``scripts/benchmark.py decode`` forced every hypothesis to its full length until the
  random model's EOS logit was made low instead (``benchmark.make_eos_lose``): a pass of
  the harness that was timed inside t2t-lite's search, while CTranslate2's
  ``min_decoding_length`` writes one value per row;
* ``top_k``: the 2 * beam_size best of [batch, beam_size * V] (beam_search's candidates);
* ``cache reorder``: gathering every layer's self-attention keys and values
  ([rows, cache_length, h, d_k]) by the surviving hypotheses' origins, as beam search
  does each step. ``cache_length`` is the whole buffer for the preallocated cache (XLA),
  or the positions decoded so far for the growing cache used without XLA.
* ``candidates``: one step's log-softmax + top-2k candidate selection over [batch, beam,
  V] logits, as the search before issue #16 did it (over the whole [batch, beam * V] score
  matrix: ``tests/reference_beam_search.py``) and as ``beam_search`` does it now (each
  hypothesis's 2k + 1 best tokens first), interleaved in this process.
Run ``scripts/benchmark.py decode`` with the same shapes for the whole search's step time.

``--whole_search`` instead times the benchmark's whole search (random-weight model,
``--source_length`` source tokens, every hypothesis forced to ``--target_length`` tokens,
no XLA, growing cache) with the reference search and the current one, interleaved
``--repeats`` times in one process, checks that both return the same ids and scores, and
prints each one's median seconds and the ratio.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)

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
    import benchmark
    from t2t_lite.flag_fields import positive_int
    benchmark.add_search_flags(parser)
    parser.add_argument("--cache_length", type=positive_int, default=74,
                        help="self-attention cache length: the preallocated buffer T "
                             "(source bucket + extra_length) or, growing, the step")
    parser.add_argument("--repeats", type=positive_int, default=20)
    parser.add_argument("--onednn", action=argparse.BooleanOptionalAction, default=False,
                        help="oneDNN's ops for what runs without XLA, as t2t-lite-decoder "
                             "has them (TF_ENABLE_ONEDNN_OPTS=1)")
    parser.add_argument("--whole_search", action="store_true",
                        help="A/B the whole search (reference vs current) instead")
    args = parser.parse_args(argv)
    hparams = benchmark.checked_hparams(parser, args)
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if args.onednn else "0"
    if args.whole_search:
        return whole_search(args, hparams)

    import tensorflow as tf
    from t2t_lite.layers.int8 import onednn_enabled

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

    embedding_rows = tf.transpose(embedding)           # [V, d], as SharedEmbedding stores it
    eos_column = tf.one_hot(1, vocab, on_value=True, off_value=False, dtype=tf.bool)
    jit = lambda fn: tf.function(fn, jit_compile=True, autograph=False)  # noqa: E731
    graph = lambda fn: tf.function(fn, autograph=False)  # noqa: E731
    parts = [
        ("softmax projection", jit(lambda a: tf.matmul(a, embedding)), (x,)),
        ("softmax projection, no XLA, [V, d] read transposed",
         graph(lambda a: tf.matmul(a, embedding_rows, transpose_b=True)), (x,)),
        ("softmax projection, no XLA, [d, V]", graph(lambda a: tf.matmul(a, embedding)), (x,)),
        ("log_softmax", jit(tf.nn.log_softmax), (logits,)),
        ("log_softmax, no XLA", graph(tf.nn.log_softmax), (logits,)),
        ("benchmark EOS suppression, no XLA", graph(lambda a: tf.where(eos_column, -1e9, a)),
         (logits,)),
        ("top_k", jit(lambda c: tf.math.top_k(c, 2 * args.beam_size)), (candidates,)),
        ("cache reorder", jit(lambda cs, o: [tf.gather(c, o) for c in cs]), (caches, origins)),
    ]
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import importlib
    import reference_beam_search as reference
    current = importlib.import_module("t2t_lite.decoding.beam_search")
    k = args.beam_size
    step_logits = tf.random.normal([args.batch * k, vocab]) * 3.0
    alive = tf.sort(tf.random.normal([args.batch, k]) - 5.0, direction="DESCENDING")
    beams = reference._initial_beams(tf.zeros([args.batch], tf.int32), k, 40)._replace(
        alive_log_probs=alive)
    lengths = tf.fill([args.batch * k], 100)

    def reference_candidates(logits):
        log_probs = reference.step_log_probs(logits, 10, lengths, 1)
        return reference._top_candidates(tf.reshape(log_probs, [args.batch, k, vocab]),
                                         beams, tf.constant(10), 0.6)

    def current_candidates(logits):
        log_probs = current.step_log_probs(logits, 10, lengths, 1, floor=False)
        return current._top_candidates(tf.reshape(log_probs, [args.batch, k, vocab]),
                                       beams, tf.constant(10), 0.6)

    for a, b in zip(graph(reference_candidates)(step_logits),
                    graph(current_candidates)(step_logits)):
        assert (a.numpy() == b.numpy()).all(), "current candidates differ from the reference"
    print(f"{args.hparams_set} V={vocab} rows={rows} (batch {args.batch} x beam "
          f"{args.beam_size}) cache_length={args.cache_length} onednn={onednn_enabled()}")
    parts += [("candidates, reference (no XLA)", graph(reference_candidates), (step_logits,)),
              ("candidates, current (no XLA)", graph(current_candidates), (step_logits,)),
              ("candidates, reference (no XLA) again", graph(reference_candidates),
               (step_logits,)),
              ("candidates, current (no XLA) again", graph(current_candidates),
               (step_logits,))]
    for name, fn, fn_args in parts:
        ms = time_ms(fn, fn_args, args.repeats)
        extra = ""
        if name.startswith("softmax projection"):
            extra = f"  {2.0 * rows * d * vocab / (ms / 1000.0) / 1e9:.1f} GFLOP/s"
        elif name == "cache reorder":
            megabytes = sum(int(tf.size(c)) for c in caches) * 4 / 2**20
            extra = f"  {megabytes:.0f} MiB gathered"
        print(f"{name}: {ms:.2f} ms per step{extra}")
    return 0


def whole_search(args, hparams) -> int:
    """Reference vs current beam search on the benchmark's work, interleaved."""
    import statistics

    import numpy as np
    import tensorflow as tf
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import reference_beam_search as reference
    import benchmark
    from t2t_lite.decoding.beam_search import beam_search

    model = benchmark.build_model(args, hparams)
    vocab, target, k = args.vocab_size, args.target_length, args.beam_size
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, vocab, size=(args.batch, args.source_length), dtype=np.int32)
    inputs[:, -1] = 1
    inputs = tf.constant(inputs)
    eos_column = tf.one_hot(1, vocab, on_value=True, off_value=False, dtype=tf.bool)

    def make(search):
        def run(inputs):
            memory, memory_mask = model.encode(inputs, training=False)
            cache = model.initial_decode_cache(memory, memory_mask, 0)
            cache, constants = model.split_memory_cache(cache)
            decode_step = model.beam_decode_step(constants, k, growing=True)

            def symbols_to_logits(ids, i, states):
                logits, states = decode_step(ids, i, states)
                return tf.where((i < target - 1) & eos_column, -1e9, logits), states

            start = tf.zeros([tf.shape(inputs)[0]], tf.int32)
            return search(symbols_to_logits, start, k, target, vocab, 0.6, states=cache,
                          eos_id=1, max_length=target, growing_states=True)
        return tf.function(run)

    fns = {"reference": make(reference.beam_search), "current": make(beam_search)}
    outputs = {name: [t.numpy() for t in fn(inputs)] for name, fn in fns.items()}
    same = all((a == b).all() for a, b in zip(outputs["reference"], outputs["current"]))
    times = benchmark.interleaved_seconds(
        {name: (lambda fn=fn: fn(inputs)[0].numpy()) for name, fn in fns.items()},
        args.repeats)
    print(f"whole search {args.hparams_set} V={vocab} batch={args.batch} beam={k} "
          f"source={args.source_length} target={target}, no XLA (onednn={args.onednn}), "
          f"growing cache; "
          f"identical ids and scores: {same}; load average {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.3f} s "
              f"({', '.join(f'{v:.3f}' for v in values)})")
    ratio = statistics.median(times["reference"]) / statistics.median(times["current"])
    print(f"speedup current/reference: {ratio:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
