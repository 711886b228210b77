"""Encoding text pairs into serialized records, in this process or on several.

``encode_batches(batches, vocab, max_length, workers)`` maps batches of ``(source,
target)`` strings to, per pair, ``(record or None, source length, target length)``:
ids without EOS serialized as a ``tf.train.Example`` (see ``records.serialize_pair``),
``None`` when a side exceeds ``max_length - 1`` tokens (room for EOS). Results come
back in input order whatever ``workers`` is, so datagen's output does not depend on it.

With ``workers > 1``, processes are started (``spawn``: TensorFlow must not be forked)
once more than ``workers`` batches and more than ``MIN_PAIRS_FOR_WORKERS`` pairs are
waiting, each loading the vocabulary from its file. Those waiting batches go to the
workers at once; after them at most ``2 * workers`` batches are in flight, so memory
stays bounded (by about ``MIN_PAIRS_FOR_WORKERS`` pairs at the start). A smaller split
never starts a process: each one imports TensorFlow (seconds) before it encodes
anything, more than this process needs to encode such a split itself (docs/data.md).
"""
from __future__ import annotations

import collections
import multiprocessing
import os
from pathlib import Path
from typing import Deque, Iterable, Iterator, List, Optional, Sequence, Tuple

EncodedPair = Tuple[Optional[bytes], int, int]
# Below this many pairs a split is encoded in this process. Each worker imports
# TensorFlow before it encodes anything: on 2 cores, 2 workers made Multi30k's datagen
# (29,000 train pairs) 1.65x slower than encoding in process, and synthetic WMT-like
# splits of 100,000 and 200,000 pairs 0.86x and 0.96x as fast; they pay from ~400,000
# (docs/data.md). Machines with more cores gain sooner; not measured here.
MIN_PAIRS_FOR_WORKERS = 100_000
_worker_state = {}


def encode_pairs(vocab, pairs: Sequence[Tuple[str, str]], max_length: int) -> List[EncodedPair]:
    """Tokenizes one batch with ``vocab`` and serializes the pairs that fit."""
    from t2t_lite.data.records import serialize_pair
    sources = vocab.encode_batch([source for source, _ in pairs])
    targets = vocab.encode_batch([target for _, target in pairs])
    limit = max_length - 1
    return [(serialize_pair(s, t) if len(s) <= limit and len(t) <= limit else None,
             len(s), len(t)) for s, t in zip(sources, targets)]


def _init_worker(vocab_path: str) -> None:
    # An exception here would make the pool start replacement workers forever; it is
    # kept and raised by the first task instead, so datagen fails with it.
    try:
        from t2t_lite.quiet_tf import filtered_stderr, quiet_requested
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with filtered_stderr(quiet_requested()):  # quiet when the command started quietly
            import tensorflow as tf
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            from t2t_lite.data.vocab import load_vocabulary
            _worker_state["vocab"] = load_vocabulary(vocab_path)
    except Exception as error:  # pragma: no cover - re-raised in _encode_in_worker
        _worker_state["error"] = error


def _encode_in_worker(pairs: Sequence[Tuple[str, str]], max_length: int) -> List[EncodedPair]:
    if "error" in _worker_state:
        raise _worker_state["error"]
    return encode_pairs(_worker_state["vocab"], pairs, max_length)


def default_workers() -> int:
    """One encoding process per CPU core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def encode_batches(batches: Iterable[Sequence[Tuple[str, str]]], vocab, max_length: int,
                   workers: int = 1) -> Iterator[List[EncodedPair]]:
    """The encoded batches, in order; see the module doc."""
    if workers <= 1:
        for batch in batches:
            yield encode_pairs(vocab, batch, max_length)
        return
    pending: Deque[Sequence[Tuple[str, str]]] = collections.deque()
    pending_pairs = 0
    batches = iter(batches)
    for batch in batches:  # buffer before paying for process start-up
        pending.append(batch)
        pending_pairs += len(batch)
        if len(pending) > workers and pending_pairs > MIN_PAIRS_FOR_WORKERS:
            break
    else:
        for batch in pending:
            yield encode_pairs(vocab, batch, max_length)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_init_worker,
                      initargs=(str(Path(vocab.path)),)) as pool:
        in_flight: Deque = collections.deque(
            pool.apply_async(_encode_in_worker, (batch, max_length)) for batch in pending)
        pending.clear()
        for batch in batches:
            if len(in_flight) >= 2 * workers:
                yield in_flight.popleft().get()
            in_flight.append(pool.apply_async(_encode_in_worker, (batch, max_length)))
        while in_flight:
            yield in_flight.popleft().get()
