"""Greedy (argmax) decoding with the same step interface and length rules as
``beam_search``.

Each step feeds every sentence's last chosen token (``start.ids`` at step 0) to the step
function (``t2t_lite.decoding.step``; one row per sentence) and appends the most probable
token; a sentence ends at EOS, and at its last position (``decode_length - 1``) EOS is the
only choice. ``beam_search`` with ``beam_size=1`` and ``alpha=0`` returns the same ids and
scores, with or without a ``constraint`` (tokens it forbids are never chosen; see
``beam_search``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import tensorflow as tf

from t2t_lite.decoding.plan import DecodingPlan
from t2t_lite.decoding.search_common import (SearchConstraint, decode_lengths,
                                             length_penalty, loop_shape_invariants,
                                             start_tensors, step_log_probs, tile_beams,
                                             vocab_size_of)
from t2t_lite.decoding.step import DecodingState, StepFn


def greedy_search(step_fn: StepFn,
                  start: DecodingState,
                  plan: DecodingPlan,
                  decode_length,
                  alpha: float = 0.0,
                  eos_id: int = 1,
                  max_length: Optional[int] = None,
                  constraint: Optional[SearchConstraint] = None,
                  constraint_state: Any = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Argmax decoding of ``b`` sentences.

    Args:
      step_fn: ``(ids [b], step, states, sentence_states) -> (logits [b, V], states)``
        (``t2t_lite.decoding.step``).
      start: the ids fed at step 0 (int32 [b]), the per-hypothesis ``states`` and the
        per-sentence ``sentence_states`` (both [b, ...], or None).
      plan: ``plan.beam_size`` must be 1; ``plan.growing_cache`` says whether states of
        rank >= 2 may grow along their middle axes; ``shrink`` and
        ``log_probs_from_softmax`` are beam search's and must be off.
      decode_length: int32 [b] (or a scalar), the most output tokens, EOS included.
      alpha: length-penalty exponent for the returned score (the choice ignores it).
      eos_id: the end-of-sentence id.
      max_length: ``T``, the static length of the id buffer; default max(decode_length).
      constraint: restricts each step's tokens; None = no restriction.
      constraint_state: its initial state, tensors with leading dim b.

    Returns:
      ids: int32 [b, T], without the initial id, EOS-terminated, 0 after EOS.
      scores: float32 [b], log P / length_penalty(length, alpha).
    """
    if plan.beam_size != 1 or plan.shrink or plan.log_probs_from_softmax:
        raise ValueError(f"greedy_search needs a plan with beam_size 1, no shrink and no "
                         f"log_probs_from_softmax, got {plan}")
    return row_search(step_fn, start, plan, decode_length,
                      lambda logits, log_probs, step: tf.argmax(log_probs, axis=-1,
                                                                output_type=tf.int32),
                      alpha, eos_id, max_length, constraint, constraint_state)


# ``(logits [n, V], log_probs [n, V], step int32 []) -> token int32 [n]``: a row's choice.
ChooseToken = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]


def row_search(step_fn: StepFn,
               start: DecodingState,
               plan: DecodingPlan,
               decode_length,
               choose_token: ChooseToken,
               alpha: float = 0.0,
               eos_id: int = 1,
               max_length: Optional[int] = None,
               constraint: Optional[SearchConstraint] = None,
               constraint_state: Any = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """``m = plan.beam_size`` independent rows per sentence, each extended by one
    ``choose_token`` per step (greedy search: argmax, m = 1; sampling: a draw): the loop
    both share. Rows are sentence-major (``n = b * m``); ``start``'s states are repeated to
    the m rows, its sentence states are not. A row ends at EOS, and at its last position
    (``decode_length - 1``) EOS is its only choice.

    Returns:
      ids: int32 [n, T], without the initial id, EOS-terminated, 0 after EOS.
      scores: float32 [n], the rows' log P / length_penalty(length, alpha) (log P from
        the model's log-probabilities, whatever ``choose_token`` drew from).
    """
    m = plan.beam_size
    initial_ids, states, sentence_states = start_tensors(start)
    batch = tf.shape(initial_ids)[0]
    decode_length, max_length = decode_lengths(decode_length, batch, max_length)
    row_decode_length = tf.repeat(decode_length, m)                       # [n]
    positions = tf.range(max_length, dtype=tf.int32)

    def step(i, ids, last, log_prob, steps, done, states, constraint_state):
        # ids [n,T], last [n], log_prob [n], steps [n], done [n] bool.
        logits, states = step_fn(last, i, states, sentence_states)
        vocab_size_of(logits, eos_id)
        log_probs = step_log_probs(logits, i, row_decode_length, eos_id, constraint,
                                   constraint_state)                      # [n,V]
        token = choose_token(logits, log_probs, i)
        token_log_prob = tf.gather(log_probs, token, batch_dims=1)
        active = ~done
        ids = tf.where((positions == i) & active[:, None], token[:, None], ids)
        log_prob = tf.where(active, log_prob + token_log_prob, log_prob)
        steps = steps + tf.cast(active, tf.int32)
        done = done | tf.equal(token, eos_id) | (i + 1 >= row_decode_length)
        if constraint is not None:
            constraint_state = constraint.update(constraint_state, token)
        return i + 1, ids, token, log_prob, steps, done, states, constraint_state

    def not_done(i, ids, last, log_prob, steps, done, states, constraint_state):
        return (i < max_length) & ~tf.reduce_all(done)

    rows = batch * m
    loop_vars = (tf.constant(0, tf.int32), tf.zeros([rows, max_length], tf.int32),
                 tf.repeat(initial_ids, m), tf.zeros([rows], tf.float32),
                 tf.zeros([rows], tf.int32), tf.zeros([rows], tf.bool),
                 tile_beams(states, m),
                 {} if constraint is None else tile_beams(constraint_state, m))
    _, ids, _, log_prob, steps, _, _, _ = tf.while_loop(
        not_done, step, loop_vars,
        shape_invariants=loop_shape_invariants(loop_vars, (6,) if plan.growing_cache else ()))
    return ids, log_prob / length_penalty(steps, alpha)
