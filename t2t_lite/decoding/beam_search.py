"""Beam search as the paper decodes (tensor2tensor semantics), model-agnostic, XLA-ready.

Shapes: ``b`` sentences, ``k`` = ``plan.beam_size``, ``V`` = vocabulary (the static last
dimension of the step's logits), ``T`` = the length of the preallocated id buffers
(``max_length``, or the largest ``decode_length``).

Each step ``i`` (0-based) feeds the last token of every alive hypothesis (``start.ids`` at
step 0) to the step function (``t2t_lite.decoding.step``) and extends the hypotheses by
one token, so a hypothesis has length ``i + 1`` (EOS included) after step ``i``.
Log-probabilities (``log_softmax`` of the logits) accumulate; a hypothesis of length ``n``
scores ``log P / length_penalty(n, alpha)`` with GNMT's ``((5 + n) / 6) ** alpha``. The
top ``2k`` candidates of the ``k * V`` extensions are taken (ties to the lower beam, then
the lower token); those ending in EOS that rank among the best ``k`` of them (the
hypotheses a plain top-k beam would keep) compete with the finished hypotheses for the
``k`` finished slots (ties keep the older one, so the best finished hypothesis is never
dropped); the ``k`` best candidates not ending in EOS become the alive ones. With
``k = 1`` and ``alpha = 0`` this is exactly greedy decoding. At a sentence's last position
(step ``decode_length - 1``) only EOS may be chosen, so every hypothesis is EOS-terminated
within ``decode_length`` tokens.

A sentence is done when it reaches its ``decode_length`` or, with ``stop_early``, when no
alive hypothesis can beat its best finished one: the best alive log-probability divided by
the largest length penalty it could still get, ``length_penalty(decode_length, alpha)``, is
an upper bound on any score it can reach (log-probabilities only fall, and the penalty
grows with length for ``alpha >= 0``). A done sentence is frozen, so its result does not
depend on the other sentences of the batch; the loop ends when every sentence is done.

Step 0 runs on one row per sentence (a sentence has one alive hypothesis then, so its
``k`` rows would compute the same logits) and the states are repeated to the ``k`` beams
after it; the step function must accept any number of rows per sentence. How the search
computes (cache layout, dropping finished sentences, log-probabilities from the softmax)
is the ``DecodingPlan``'s; none of its choices changes the semantics above, but a step's
float32 products may round differently with the rows they cover, and
``log_probs_from_softmax`` rounds log-probabilities differently (see ``DecodingPlan``), so
scores may differ in their last bits between plans.

An optional ``constraint`` (a ``SearchConstraint``, e.g. parsing's ``TreeConstraint``)
restricts the extensions: each step, tokens it does not allow for a hypothesis get
``NEG_INF`` (the allowed ones keep the model's log-probabilities, so a hypothesis scores the
same with or without the constraint), and its state follows the surviving hypotheses like
the model's states. Without one the graph is the unconstrained search's.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import tensorflow as tf

from t2t_lite.decoding.plan import DecodingPlan
from t2t_lite.decoding.search_common import (  # noqa: F401  (re-exported)
    NEG_INF, SearchConstraint, decode_lengths, length_penalty, loop_shape_invariants,
    start_tensors, step_log_probs, tile_beams, top_k_last_axis, vocab_size_of)
from t2t_lite.decoding.step import DecodingState, StepFn


class Beams(NamedTuple):
    """The search's per-sentence state between steps (``b`` sentences, ``k`` beams).

    Attributes:
      alive_seq: int32 [b, k, T], the alive hypotheses' tokens so far (0 after them).
      alive_log_probs: float32 [b, k], their log-probabilities (``NEG_INF`` or below: none).
      alive_last: int32 [b, k], their last tokens (the next step's input).
      finished_seq: int32 [b, k, T], the finished (EOS-terminated) hypotheses.
      finished_scores: float32 [b, k], their ``log P / length_penalty``.
      finished_flags: bool [b, k], whether the slot holds a finished hypothesis.
      steps: int32 [b], tokens decoded so far per sentence.
      done: bool [b], sentences whose result is final (frozen).
    """

    alive_seq: tf.Tensor
    alive_log_probs: tf.Tensor
    alive_last: tf.Tensor
    finished_seq: tf.Tensor
    finished_scores: tf.Tensor
    finished_flags: tf.Tensor
    steps: tf.Tensor
    done: tf.Tensor


class Candidates(NamedTuple):
    """The ``c = 2k`` best one-token extensions of a step, best first; each [b, c].

    Attributes:
      scores: float32, ``log_probs / length_penalty(step + 1)``.
      log_probs: float32, the extended hypotheses' log-probabilities.
      beam: int32, the alive beam each extends (0 .. k-1).
      token: int32, the token it adds.
      seq: int32 [b, c, T], the extended hypotheses' tokens.
    """

    scores: tf.Tensor
    log_probs: tf.Tensor
    beam: tf.Tensor
    token: tf.Tensor
    seq: tf.Tensor


def beam_search(step_fn: StepFn,
                start: DecodingState,
                plan: DecodingPlan,
                decode_length,
                alpha: float,
                eos_id: int = 1,
                stop_early: bool = True,
                max_length: Optional[int] = None,
                constraint: Optional[SearchConstraint] = None,
                constraint_state: Any = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Beam search over ``b`` sentences; returns every sentence's ``k`` hypotheses, best first.

    Args:
      step_fn: ``(ids [n], step, states, sentence_states) -> (logits [n, V], states)``
        (``t2t_lite.decoding.step``), e.g. ``step_function(model, plan)``; ``n`` is ``b``
        at step 0 and ``b*k`` after (fewer sentences with ``plan.shrink``).
      start: the ids fed at step 0 (int32 [b]), the per-hypothesis ``states`` (repeated
        to the beams after step 0 and reordered each step to follow the surviving
        hypotheses) and the per-sentence ``sentence_states`` (neither repeated nor
        reordered), e.g. ``model.decoding_state(inputs, T, plan)``.
      plan: ``k`` = ``plan.beam_size`` and how to compute (``DecodingPlan``).
      decode_length: int32 [b] (or a scalar for all), the most output tokens per sentence,
        EOS included; usually input length + ``extra_length``. Clipped to [1, T].
      alpha: length-penalty exponent, >= 0 (0 = plain log-probability).
      eos_id: the end-of-sentence id.
      stop_early: stop a sentence once no alive hypothesis can beat its best finished one;
        False decodes every sentence to its ``decode_length`` (exact N-best lists).
      max_length: ``T``, the static length of the id buffers (required under XLA when
        ``decode_length`` is not a constant); default: max(decode_length).
      constraint: restricts each step's tokens (see the module doc); None = no restriction.
      constraint_state: its initial state, tensors with leading dim b.

    Returns:
      ids: int32 [b, k, T], without the initial id, EOS-terminated, 0 after EOS.
      scores: float32 [b, k], log P / length_penalty, best first. A slot that holds no
        finished hypothesis scores -inf (ids all 0); a sentence with no finished hypothesis
        at all returns its alive hypotheses instead (not EOS-terminated).
    """
    k = plan.beam_size
    _check_arguments(alpha)
    initial_ids, states, sentence_states = start_tensors(start)
    batch = tf.shape(initial_ids)[0]
    decode_length, max_length = decode_lengths(decode_length, batch, max_length)
    shrink = plan.shrink

    def step(i, beams: Beams, states, constraint_state, shrinking_sentence_states, active,
             out, decode_length, untiled=False):
        # Every tensor here covers the a sentences still in the batch (a = b unless
        # ``shrink``); ``active`` int32 [a] are their indices in the caller's batch. The
        # sentence states are a loop variable only when they shrink.
        # ``untiled``: step 0, one row per sentence.
        rows = tf.shape(beams.done)[0]
        ids = tf.reshape(beams.alive_last[:, :1] if untiled else beams.alive_last, [-1])
        current_sentence_states = shrinking_sentence_states if shrink else sentence_states
        logits, states = step_fn(ids, i, states, current_sentence_states)
        vocab_size = vocab_size_of(logits, eos_id)
        row_decode_length = decode_length if untiled else tf.repeat(decode_length, k)

        def all_log_probs():                                              # [a, k, V]
            log_probs = step_log_probs(logits, i, row_decode_length, eos_id, constraint,
                                       constraint_state, floor=False)    # [a*k or a, V]
            if untiled:   # what the k identical rows would have given
                log_probs = tf.repeat(log_probs, k, axis=0)
            return tf.reshape(log_probs, [rows, k, vocab_size])

        if plan.log_probs_from_softmax and constraint is None and 2 * k + 1 < vocab_size:
            candidates = _softmax_candidates(logits, all_log_probs, beams, i, alpha,
                                             tf.reduce_any(i + 1 >= decode_length), untiled)
        else:
            candidates = _top_candidates(all_log_probs(), beams, i, alpha)
        new_beams, origin = _select(candidates, beams, k, eos_id)
        tokens = tf.reshape(new_beams.alive_last, [-1])
        beams = _freeze_done(beams, new_beams)
        done = beams.done | (i + 1 >= decode_length)
        if stop_early:
            done |= _cannot_improve(beams, length_penalty(decode_length, alpha))
        beams = beams._replace(done=done)
        if shrink:
            (beams, origin, tokens, shrinking_sentence_states, active, out,
             decode_length) = _drop_done(beams, origin, tokens, shrinking_sentence_states,
                                         active, out, decode_length, k)
        if untiled:   # row s*k + j of the tiled batch is row s of the untiled one
            origin = origin // k
        states, constraint_state = _reorder(states, constraint_state, origin, constraint,
                                            tokens)
        return (i + 1, beams, states, constraint_state, shrinking_sentence_states, active,
                out, decode_length)

    def not_done(i, beams, *rest):
        return (i < max_length) & ~tf.reduce_all(beams.done)

    initial = _initial_beams(initial_ids, k, max_length)
    constraint_state = {} if constraint is None else constraint_state
    loop_vars = step(tf.constant(0, tf.int32), initial, states, constraint_state,
                     sentence_states if shrink else {}, tf.range(batch, dtype=tf.int32),
                     initial, decode_length, untiled=True)
    invariants = loop_shape_invariants(loop_vars, (2,) if plan.growing_cache else ())
    if shrink:   # the batch dimension of everything but ``out`` shrinks
        invariants = tuple(
            invariant if index in (0, 6) else
            tf.nest.map_structure(lambda shape: tf.TensorShape([None] + shape[1:].as_list()),
                                  invariant)
            for index, invariant in enumerate(invariants))
    _, beams, _, _, _, active, out, _ = tf.while_loop(not_done, step, loop_vars,
                                                     shape_invariants=invariants)
    if shrink:
        beams = _scatter_beams(out, active, beams)
    return _results(beams, alpha)


def _drop_done(beams: Beams, origin, tokens, sentence_states, active, out, decode_length,
               k: int):
    """Takes the done sentences out of the batch once at least an eighth of it is done.

    A done sentence is frozen, so its result is final: it is written to ``out`` (Beams
    over the caller's b sentences) at its index in ``active``, and every per-sentence
    tensor ([a, ...]: the beams, ``sentence_states``, ``active``, ``decode_length``) and
    per-hypothesis one ([a*k]: ``origin``, ``tokens``, so that the state reorder also
    compacts) keeps only the sentences not done. Returns them in that order.
    """
    rows = tf.shape(beams.done)[0]
    num_done = tf.reduce_sum(tf.cast(beams.done, tf.int32))

    def drop():
        keep = tf.reshape(tf.where(~beams.done), [-1])                     # [a']
        keep_rows = tf.reshape(tf.gather(tf.reshape(origin, [rows, k]), keep), [-1])
        keep_tokens = tf.reshape(tf.gather(tf.reshape(tokens, [rows, k]), keep), [-1])
        gather = lambda tensor: tf.gather(tensor, keep)  # noqa: E731
        return (Beams(*(gather(field) for field in beams)), keep_rows, keep_tokens,
                tf.nest.map_structure(gather, sentence_states), gather(active),
                _scatter_beams(out, active, beams), gather(decode_length))

    def stay():
        return beams, origin, tokens, sentence_states, active, out, decode_length

    return tf.cond((num_done > 0) & (num_done * 8 >= rows), drop, stay)


def _scatter_beams(out: Beams, active, beams: Beams) -> Beams:
    """``out`` (over all b sentences) with the rows ``active`` [a] replaced by ``beams``."""
    index = active[:, None]
    return Beams(*(tf.tensor_scatter_nd_update(whole, index, part)
                   for whole, part in zip(out, beams)))


def _initial_beams(initial_ids, k: int, max_length) -> Beams:
    """Step 0's beams: one alive hypothesis (the start id) per sentence, k-1 empty slots."""
    batch = tf.shape(initial_ids)[0]
    return Beams(
        alive_seq=tf.zeros([batch, k, max_length], tf.int32),
        alive_log_probs=tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch, 1]),
        alive_last=tf.tile(initial_ids[:, None], [1, k]),
        finished_seq=tf.zeros([batch, k, max_length], tf.int32),
        finished_scores=tf.zeros([batch, k], tf.float32),
        finished_flags=tf.zeros([batch, k], tf.bool),
        steps=tf.zeros([batch], tf.int32),
        done=tf.zeros([batch], tf.bool))


def _top_candidates(log_probs, beams: Beams, step, alpha: float) -> Candidates:
    """The ``2k`` best extensions (at most ``k * V``) of the alive hypotheses at ``step``.

    log_probs: float32 [b, k, V], the step's token log-probabilities per alive hypothesis
    (``step_log_probs(..., floor=False)``).

    The reference ranks all ``k * V`` extensions by ``(alive log P + max(token log P,
    NEG_INF)) / length_penalty(step + 1)``, ties to the lower index (beam-major, then
    token), as ``tf.math.top_k`` over [b, k * V] does (``_all_candidates``). Here each
    hypothesis first keeps its ``2k + 1`` best tokens (one ``top_k`` over [b*k, V]; the
    score is non-decreasing in the token's log-probability), and the ``2k`` best of the
    ``k * 2k`` kept extensions are taken in index order. That is the reference's answer
    whenever every hypothesis's ``2k + 1``-th extension scores strictly below the ``2k``
    chosen, i.e. nothing left out could have ranked or tied among them; at a step where
    some sentence fails that test (ties, e.g. at a last position where only EOS scores
    above ``NEG_INF``), the whole step falls back to ``_all_candidates``. Either way the
    result equals the reference bit for bit.
    """
    if 2 * log_probs.shape[1] + 1 >= log_probs.shape[2]:      # nothing to leave out
        return _all_candidates(tf.maximum(log_probs, NEG_INF), beams, step, alpha)
    candidates, exact = _kept_candidates(log_probs, beams, step, alpha)
    return tf.cond(exact, lambda: candidates,
                   lambda: _all_candidates(tf.maximum(log_probs, NEG_INF), beams, step,
                                           alpha))


def _softmax_candidates(logits, all_log_probs: Callable[[], tf.Tensor], beams: Beams,
                        step, alpha: float, at_last_position, untiled: bool) -> Candidates:
    """``_top_candidates`` with each hypothesis's ``2k + 1`` best tokens taken from the
    softmax of ``logits`` [b*k, V] (or [b, V] when ``untiled``: step 0 on one row per
    sentence) and their log-probabilities as the log of those probabilities
    (``DecodingPlan.log_probs_from_softmax``). Falls back to ``_all_candidates`` on
    ``all_log_probs()`` [b, k, V] (run only then) where the kept tokens cannot prove the
    ranking or ``at_last_position`` (bool scalar: a sentence may only emit EOS now)."""
    k = beams.alive_log_probs.shape[1]
    probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
    values, tokens = top_k_last_axis(probabilities, 2 * k + 1)         # [n, 2k+1]
    log_values = tf.math.log(values)
    if untiled:   # what the k identical rows would have given
        log_values, tokens = tf.repeat(log_values, k, axis=0), tf.repeat(tokens, k, axis=0)
    rows = tf.shape(beams.alive_log_probs)[0]
    candidates, exact = _candidates_from_kept(tf.reshape(log_values, [rows, k, 2 * k + 1]),
                                              tf.reshape(tokens, [rows, k, 2 * k + 1]),
                                              beams, step, alpha)
    return tf.cond(exact & ~at_last_position, lambda: candidates,
                   lambda: _all_candidates(tf.maximum(all_log_probs(), NEG_INF), beams, step,
                                           alpha))


def _kept_candidates(log_probs, beams: Beams, step, alpha: float
                     ) -> Tuple[Candidates, tf.Tensor]:
    """``_top_candidates`` from each hypothesis's ``2k + 1`` best tokens, and whether that
    is provably the reference's answer (bool scalar: no sentence has a left-out extension
    scoring at or above its ``2k``-th chosen one). log_probs [b, k, V], 2k + 1 < V."""
    values, tokens = top_k_last_axis(log_probs, 2 * log_probs.shape[1] + 1)   # [b, k, 2k+1]
    return _candidates_from_kept(values, tokens, beams, step, alpha)


def _candidates_from_kept(values, tokens, beams: Beams, step, alpha: float
                          ) -> Tuple[Candidates, tf.Tensor]:
    """``_kept_candidates`` from each hypothesis's ``2k + 1`` best tokens ``tokens`` int32
    [b, k, 2k+1] and their log-probabilities ``values`` (best first)."""
    batch, k = tf.shape(values)[0], values.shape[1]
    kept = 2 * k
    penalty = length_penalty(step + 1, alpha)
    sums = beams.alive_log_probs[:, :, None] + tf.maximum(values, NEG_INF)
    scores = sums / penalty
    # The 2k kept per hypothesis, in token order, so that [b, k * 2k] is in index order.
    order = tf.argsort(tokens[:, :, :kept], axis=-1, stable=True)
    flat = lambda x: tf.reshape(tf.gather(x[:, :, :kept], order, batch_dims=2),  # noqa: E731
                                [batch, k * kept])
    kept_tokens, kept_sums, kept_scores = flat(tokens), flat(sums), flat(scores)
    top_scores, index = tf.math.top_k(kept_scores, kept)                # [b, 2k]
    exact = tf.reduce_all(scores[:, :, kept] < top_scores[:, -1:])
    token = tf.gather(kept_tokens, index, batch_dims=1)
    beam = index // kept
    return Candidates(scores=top_scores, log_probs=tf.gather(kept_sums, index, batch_dims=1),
                      beam=beam, token=token,
                      seq=_extend(beams.alive_seq, beam, token, step)), exact


def _all_candidates(log_probs, beams: Beams, step, alpha: float) -> Candidates:
    """``_top_candidates`` over the whole [b, k * V] score matrix (the reference's way).

    log_probs: float32 [b, k, V], floored at ``NEG_INF``."""
    batch, k, vocab_size = tf.shape(log_probs)[0], log_probs.shape[1], log_probs.shape[2]
    num_candidates = min(2 * k, k * vocab_size)
    candidate_log_probs = tf.reshape(beams.alive_log_probs[:, :, None] + log_probs,
                                     [batch, k * vocab_size])
    scores, index = tf.math.top_k(candidate_log_probs / length_penalty(step + 1, alpha),
                                  num_candidates)
    token = index % vocab_size
    beam = index // vocab_size
    return Candidates(scores=scores,
                      log_probs=tf.gather(candidate_log_probs, index, batch_dims=1),
                      beam=beam, token=token, seq=_extend(beams.alive_seq, beam, token, step))


def _extend(alive_seq, beam, token, step) -> tf.Tensor:
    """int32 [b, c, T]: the alive hypotheses ``beam`` [b, c] (of alive_seq [b, k, T]) with
    ``token`` [b, c] written at position ``step``."""
    seq = tf.gather(alive_seq, beam, batch_dims=1)
    positions = tf.range(tf.shape(seq)[2], dtype=tf.int32)
    return tf.where(positions == step, token[:, :, None], seq)


def _select(candidates: Candidates, beams: Beams, k: int, eos_id: int
            ) -> Tuple[Beams, tf.Tensor]:
    """The new alive and finished hypotheses from a step's candidates.

    Alive: the ``k`` best candidates that do not end in EOS. Finished: the ``k`` best of
    the old finished hypotheses and the candidates that end in EOS and rank among the best
    ``k`` (so that beam 1 is greedy); on a tie the old one stays.

    Returns:
      the new beams (``steps`` and ``done`` unchanged), and ``origin`` int32 [b*k]: the
      row of ``b*k`` each new alive hypothesis extends (for reordering the states).
    """
    batch = tf.shape(candidates.token)[0]
    num_candidates = candidates.token.shape[1]
    is_eos = tf.equal(candidates.token, eos_id)
    exists = candidates.log_probs > NEG_INF / 2

    alive_log_probs, choice = tf.math.top_k(
        tf.where(is_eos, NEG_INF, candidates.log_probs), k)             # [b, k]
    alive_seq = tf.gather(candidates.seq, choice, batch_dims=1)
    alive_last = tf.gather(candidates.token, choice, batch_dims=1)
    row_offsets = tf.range(batch, dtype=tf.int32)[:, None] * k          # [b, 1]
    origin = tf.gather(candidates.beam, choice, batch_dims=1) + row_offsets

    new_flags = is_eos & exists & (tf.range(num_candidates) < k)
    all_flags = tf.concat([beams.finished_flags, new_flags], axis=1)    # [b, k + 2k]
    all_scores = tf.concat([beams.finished_scores, candidates.scores], axis=1)
    _, choice = tf.math.top_k(tf.where(all_flags, all_scores, -float("inf")), k)
    finished_seq = tf.gather(tf.concat([beams.finished_seq, candidates.seq], 1), choice,
                             batch_dims=1)
    return beams._replace(
        alive_seq=alive_seq, alive_log_probs=alive_log_probs, alive_last=alive_last,
        finished_seq=finished_seq,
        finished_scores=tf.gather(all_scores, choice, batch_dims=1),
        finished_flags=tf.gather(all_flags, choice, batch_dims=1)), tf.reshape(origin, [-1])


def _reorder(states, constraint_state, origin, constraint: Optional[SearchConstraint],
             tokens) -> Tuple[Any, Any]:
    """The model's and the constraint's states [b*k, ...] gathered by ``origin`` int32
    [b*k] (the row each new alive hypothesis came from); the constraint's then advanced
    by the alive hypotheses' new ``tokens`` int32 [b*k]."""
    def reorder(state):
        return tf.gather(state, origin)

    states = tf.nest.map_structure(reorder, states)
    if constraint is not None:
        constraint_state = constraint.update(tf.nest.map_structure(reorder, constraint_state),
                                             tokens)
    return states, constraint_state


def _freeze_done(old: Beams, new: Beams) -> Beams:
    """``new`` where a sentence is not done yet, ``old`` where it is (done sentences keep
    what they had); ``steps`` counts one more token for the sentences not done."""
    def keep(old_tensor, new_tensor):
        mask = tf.reshape(old.done, [-1] + [1] * (len(old_tensor.shape) - 1))
        return tf.where(mask, old_tensor, new_tensor)

    frozen = Beams(*(keep(a, b) for a, b in zip(old, new)))
    return frozen._replace(steps=old.steps + tf.cast(~old.done, tf.int32), done=old.done)


def _cannot_improve(beams: Beams, max_penalty) -> tf.Tensor:
    """bool [b]: the best finished score is at least the best alive log P divided by
    ``max_penalty`` [b] (the largest length penalty it can still get), an upper bound on
    any score an alive hypothesis can still reach."""
    best_finished = tf.reduce_max(
        tf.where(beams.finished_flags, beams.finished_scores, -float("inf")), axis=1)
    alive_bound = tf.reduce_max(beams.alive_log_probs, axis=1) / max_penalty
    return tf.reduce_any(beams.finished_flags, axis=1) & (best_finished >= alive_bound)


def _results(beams: Beams, alpha: float) -> Tuple[tf.Tensor, tf.Tensor]:
    """(ids int32 [b, k, T], scores float32 [b, k]): the finished hypotheses (empty slots
    -inf), or the alive ones scored at their length for a sentence with none finished."""
    finished_scores = tf.where(beams.finished_flags, beams.finished_scores, -float("inf"))
    alive_scores = beams.alive_log_probs / length_penalty(beams.steps, alpha)[:, None]
    alive_scores = tf.where(beams.alive_log_probs > NEG_INF / 2, alive_scores, -float("inf"))
    has_finished = tf.reduce_any(beams.finished_flags, axis=1)
    ids = tf.where(has_finished[:, None, None], beams.finished_seq, beams.alive_seq)
    scores = tf.where(has_finished[:, None], finished_scores, alive_scores)
    return ids, scores


def _check_arguments(alpha: float) -> None:
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 (the early-termination bound assumes the "
                         f"length penalty grows with length), got {alpha}")
