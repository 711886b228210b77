"""Greedy (argmax) decoding with the same step API and length rules as ``beam_search``.

Each step feeds the last chosen token (``initial_ids`` at step 0) to
``symbols_to_logits_fn(ids [b], step, states) -> (logits [b, V], states)`` and appends the
most probable token; a sentence ends at EOS, and at its last position
(``decode_length - 1``) EOS is the only choice. ``beam_search`` with ``beam_size=1`` and
``alpha=0`` returns the same ids and scores, with or without a ``constraint`` (tokens it
forbids are never chosen; see ``beam_search``).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import tensorflow as tf

from t2t_lite.decoding.search_common import (SearchConstraint, SymbolsToLogitsFn, check_eos,
                                             decode_lengths, length_penalty,
                                             loop_shape_invariants, step_log_probs)


def greedy_search(symbols_to_logits_fn: SymbolsToLogitsFn,
                  initial_ids,
                  decode_length,
                  vocab_size: int,
                  states: Any = None,
                  eos_id: int = 1,
                  alpha: float = 0.0,
                  max_length: Optional[int] = None,
                  constraint: Optional[SearchConstraint] = None,
                  constraint_state: Any = None,
                  growing_states: bool = False) -> Tuple[tf.Tensor, tf.Tensor]:
    """Argmax decoding of ``b`` sentences.

    Args:
      symbols_to_logits_fn: ``(ids int32 [b], step int32 [], states) -> (logits [b, V],
        states)``.
      initial_ids: int32 [b], the id fed at step 0.
      decode_length: int32 [b] (or a scalar), the most output tokens, EOS included.
      vocab_size: ``V``.
      states: nested structure of tensors with leading dim b, or None.
      eos_id: the end-of-sentence id.
      alpha: length-penalty exponent for the returned score (the choice ignores it).
      max_length: ``T``, the static length of the id buffer; default max(decode_length).
      constraint: restricts each step's tokens; None = no restriction.
      constraint_state: its initial state, tensors with leading dim b.
      growing_states: False: every state keeps its shape; True: every state of rank >= 2
        may grow along its middle axes (``loop_shape_invariants``; the Transformer's
        growing self-attention cache [b, h, step, d]).

    Returns:
      ids: int32 [b, T], without the initial id, EOS-terminated, 0 after EOS.
      scores: float32 [b], log P / length_penalty(length, alpha).
    """
    check_eos(eos_id, vocab_size)
    states = {} if states is None else states
    initial_ids = tf.cast(tf.convert_to_tensor(initial_ids), tf.int32)
    batch = tf.shape(initial_ids)[0]
    decode_length, max_length = decode_lengths(decode_length, batch, max_length)
    positions = tf.range(max_length, dtype=tf.int32)

    def step(i, ids, last, log_prob, steps, done, states, constraint_state):
        # ids [b,T], last [b], log_prob [b], steps [b], done [b] bool.
        logits, states = symbols_to_logits_fn(last, i, states)
        log_probs = step_log_probs(logits, i, decode_length, eos_id, constraint,
                                   constraint_state)                      # [b,V]
        token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        token_log_prob = tf.gather(log_probs, token, batch_dims=1)
        active = ~done
        ids = tf.where((positions == i) & active[:, None], token[:, None], ids)
        log_prob = tf.where(active, log_prob + token_log_prob, log_prob)
        steps = steps + tf.cast(active, tf.int32)
        done = done | tf.equal(token, eos_id) | (i + 1 >= decode_length)
        if constraint is not None:
            constraint_state = constraint.update(constraint_state, token)
        return i + 1, ids, token, log_prob, steps, done, states, constraint_state

    def not_done(i, ids, last, log_prob, steps, done, states, constraint_state):
        return (i < max_length) & ~tf.reduce_all(done)

    loop_vars = (tf.constant(0, tf.int32), tf.zeros([batch, max_length], tf.int32),
                 initial_ids, tf.zeros([batch], tf.float32), tf.zeros([batch], tf.int32),
                 tf.zeros([batch], tf.bool), states,
                 {} if constraint is None else constraint_state)
    _, ids, _, log_prob, steps, _, _, _ = tf.while_loop(
        not_done, step, loop_vars,
        shape_invariants=loop_shape_invariants(loop_vars, (6,) if growing_states else ()))
    return ids, log_prob / length_penalty(steps, alpha)
