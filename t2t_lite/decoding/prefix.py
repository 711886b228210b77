"""Target prefixes: a search that starts each output with given tokens and continues it.

A ``PrefixConstraint`` is a ``SearchConstraint`` (``search_common``): while a hypothesis
has emitted fewer tokens than its sentence's prefix, the only token it may emit is the
prefix's next one; after it, whatever an ``inner`` constraint (e.g. parsing's
``TreeConstraint``, which then sees prefix and continuation as one output) or, without
one, the model allows. Beam search, greedy search and sampling take it like any
constraint, so a prefix costs nothing when no prefix is given (no constraint, the
unconstrained graph) and the forced tokens score with the model's own log-probabilities
(an output's score is that of prefix + continuation).

Shapes: ``b`` sentences, ``n`` rows (hypotheses), ``P`` the longest prefix, ``V`` the
vocabulary. Prefixes are int32 [b, P], 0-padded (0 is the padding id, never a prefix
token); a row of zeros is no prefix.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from t2t_lite.decoding.search_common import SearchConstraint


class PrefixConstraint:
    """Forces each sentence's ``prefixes`` row, then defers to ``inner``.

    Args:
      prefixes: int32 [b, P], each sentence's prefix, 0-padded (P may be 0).
      vocab_size: ``V``.
      inner: a constraint on the whole output (prefix included), or None.
    """

    def __init__(self, prefixes, vocab_size: int, inner: Optional[SearchConstraint] = None):
        prefixes = tf.cast(tf.convert_to_tensor(prefixes), tf.int32)
        self.prefixes = tf.pad(prefixes, [[0, 0], [0, 1]])   # a 0 after every prefix
        self.vocab_size = int(vocab_size)
        self.inner = inner

    def initial_state(self, inputs, decode_length) -> Any:
        """{"prefix": [b, P+1], "position": [b], "inner": the inner state}."""
        state = {"prefix": self.prefixes,
                 "position": tf.zeros([tf.shape(self.prefixes)[0]], tf.int32)}
        if self.inner is not None:
            state["inner"] = self.inner.initial_state(inputs, decode_length)
        return state

    def allowed(self, state, budget) -> tf.Tensor:
        """bool [n, V]: the prefix's next token only, while one is left; then ``inner``'s."""
        prefix = state["prefix"]
        position = tf.minimum(state["position"], tf.shape(prefix)[1] - 1)
        forced = tf.gather(prefix, position, batch_dims=1)                    # [n]
        forcing = tf.not_equal(forced, 0)
        tokens = tf.range(self.vocab_size, dtype=tf.int32)[None, :]
        allowed = ~forcing[:, None] | tf.equal(tokens, forced[:, None])
        if self.inner is not None:
            allowed &= self.inner.allowed(state["inner"], budget)
        return allowed

    def update(self, state, tokens) -> Any:
        new = dict(state, position=state["position"] + 1)
        if self.inner is not None:
            new["inner"] = self.inner.update(state["inner"], tokens)
        return new


def pad_prefixes(prefixes: Sequence[Sequence[int]], width: Optional[int] = None) -> np.ndarray:
    """int32 [len(prefixes), width] (default: the longest), 0-padded."""
    width = max([len(p) for p in prefixes] + [0]) if width is None else width
    array = np.zeros([len(prefixes), width], np.int32)
    for row, prefix in enumerate(prefixes):
        array[row, :len(prefix)] = prefix
    return array


def first_refusal(constraint: SearchConstraint, inputs, decode_length,
                  prefixes: np.ndarray) -> Optional[Tuple[int, int]]:
    """Runs ``constraint`` (eagerly) over ``prefixes`` int32 [b, P] (0-padded) of the
    sentences ``inputs`` int32 [b, s] with ``decode_length`` int32 [b]: the first (row,
    position) whose prefix token the constraint does not allow, or None when every prefix
    can start an output it allows."""
    state = constraint.initial_state(tf.constant(inputs), tf.constant(decode_length))
    for position in range(prefixes.shape[1]):
        tokens = prefixes[:, position]
        allowed = constraint.allowed(state, tf.constant(decode_length - position)).numpy()
        refused = (tokens != 0) & ~allowed[np.arange(len(tokens)), tokens]
        if refused.any():
            return int(np.flatnonzero(refused)[0]), position
        state = constraint.update(state, tf.constant(tokens))
    return None
