"""Beam search as the paper decodes (tensor2tensor semantics), model-agnostic, XLA-ready.

Shapes: ``b`` sentences, ``k`` = ``beam_size``, ``V`` = vocabulary, ``T`` = the length of
the preallocated id buffers (``max_length``, or the largest ``decode_length``).

Each step ``i`` (0-based) feeds the last token of every alive hypothesis (``initial_ids``
at step 0) to ``symbols_to_logits_fn(ids [b*k], i, states) -> (logits [b*k, V], states)``
and extends the hypotheses by one token, so a hypothesis has length ``i + 1`` (EOS
included) after step ``i``. Log-probabilities accumulate; a hypothesis of length ``n``
scores ``log P / length_penalty(n, alpha)`` with GNMT's ``((5 + n) / 6) ** alpha``. The
top ``2k`` candidates of the ``k * V`` extensions are taken; those ending in EOS that rank
among the best ``k`` of them (the hypotheses a plain top-k beam would keep) compete with
the finished hypotheses for the ``k`` finished slots (ties keep the older one, so the best
finished hypothesis is never dropped); the ``k`` best candidates not ending in EOS become
the alive ones. With ``k = 1`` and ``alpha = 0`` this is exactly greedy decoding. At a
sentence's last position (step ``decode_length - 1``) only EOS may be chosen, so every
hypothesis is EOS-terminated within ``decode_length`` tokens.

A sentence is done when it reaches its ``decode_length`` or, with ``stop_early``, when no
alive hypothesis can beat its best finished one: the best alive log-probability divided by
the largest length penalty it could still get, ``length_penalty(decode_length, alpha)``, is
an upper bound on any score it can reach (log-probabilities only fall, and the penalty
grows with length for ``alpha >= 0``). A done sentence is frozen, so its result does not
depend on the other sentences of the batch; the loop ends when every sentence is done.

An optional ``constraint`` (a ``SearchConstraint``, e.g. parsing's ``TreeConstraint``)
restricts the extensions: each step, tokens it does not allow for a hypothesis get
``NEG_INF`` (the allowed ones keep the model's log-probabilities, so a hypothesis scores the
same with or without the constraint), and its state follows the surviving hypotheses like
the model's states. Without one the graph is the unconstrained search's.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Tuple

import tensorflow as tf

# Log-probability given to impossible tokens and to the empty initial beams. Finite, so
# that sums never produce NaN; a log-probability below NEG_INF / 2 marks a hypothesis
# that does not exist.
NEG_INF = -1e9

SymbolsToLogitsFn = Callable[[tf.Tensor, tf.Tensor, Any], Tuple[tf.Tensor, Any]]


class SearchConstraint(Protocol):
    """Which tokens each hypothesis may emit next; its state is a dict of [n, ...] tensors."""

    def initial_state(self, inputs: tf.Tensor, decode_length: tf.Tensor) -> Any:
        """The state of every sentence before its first token: inputs int32 [b, s],
        decode_length int32 [b] (the tokens each sentence may emit)."""

    def allowed(self, state: Any, budget: tf.Tensor) -> tf.Tensor:
        """bool [n, V]; ``budget`` int32 [n]: tokens the row may still emit, EOS included."""

    def update(self, state: Any, tokens: tf.Tensor) -> Any:
        """The state after each row emitted ``tokens`` int32 [n]."""


def constrain(log_probs, constraint: SearchConstraint, state: Any, budget) -> tf.Tensor:
    """``log_probs`` [n, V] with the tokens ``constraint`` forbids set to ``NEG_INF``."""
    return tf.where(constraint.allowed(state, budget), log_probs, NEG_INF)


def length_penalty(length, alpha: float) -> tf.Tensor:
    """GNMT's length penalty ``((5 + length) / 6) ** alpha`` (float32, shape of ``length``)."""
    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, alpha)


def beam_search(symbols_to_logits_fn: SymbolsToLogitsFn,
                initial_ids,
                beam_size: int,
                decode_length,
                vocab_size: int,
                alpha: float,
                states: Any = None,
                eos_id: int = 1,
                stop_early: bool = True,
                max_length: Optional[int] = None,
                constraint: Optional[SearchConstraint] = None,
                constraint_state: Any = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Beam search over ``b`` sentences; returns every sentence's ``k`` hypotheses, best first.

    Args:
      symbols_to_logits_fn: ``(ids int32 [b*k], step int32 [], states) -> (logits
        [b*k, V], states)``, e.g. ``Transformer.decode_step``. Rows ``s*k .. s*k + k-1``
        are sentence ``s``'s hypotheses. State tensors must keep their shapes across steps.
      initial_ids: int32 [b], the id fed at step 0 (the start id).
      beam_size: ``k``, hypotheses kept per sentence.
      decode_length: int32 [b] (or a scalar for all), the most output tokens per sentence,
        EOS included; usually input length + ``extra_length``. Clipped to [1, T].
      vocab_size: ``V``.
      alpha: length-penalty exponent, >= 0 (0 = plain log-probability).
      states: nested structure (dict) of tensors with leading dim b, or None; tiled to
        b*k and reordered each step to follow the surviving hypotheses. A state of static
        length 0 on axis 1 may grow along it (a growing decode cache); every other state
        keeps its shape.
      eos_id: the end-of-sentence id.
      stop_early: stop a sentence once no alive hypothesis can beat its best finished one;
        False decodes every sentence to its ``decode_length`` (exact N-best lists).
      max_length: ``T``, the static length of the id buffers (required under XLA when
        ``decode_length`` is not a constant); default: max(decode_length).
      constraint: restricts each step's tokens (see the module doc); None = no restriction.
      constraint_state: its initial state, tensors with leading dim b (tiled to b*k).

    Returns:
      ids: int32 [b, k, T], without the initial id, EOS-terminated, 0 after EOS.
      scores: float32 [b, k], log P / length_penalty, best first. A slot that holds no
        finished hypothesis scores -inf (ids all 0); a sentence with no finished hypothesis
        at all returns its alive hypotheses instead (not EOS-terminated).
    """
    _check_arguments(beam_size, vocab_size, alpha, eos_id)
    states = {} if states is None else states
    initial_ids = tf.cast(tf.convert_to_tensor(initial_ids), tf.int32)
    batch = tf.shape(initial_ids)[0]
    decode_length, max_length = _decode_lengths(decode_length, batch, max_length)
    k = beam_size
    num_candidates = min(2 * k, k * vocab_size)
    positions = tf.range(max_length, dtype=tf.int32)                  # [T]
    eos_mask = tf.one_hot(eos_id, vocab_size, on_value=True, off_value=False,
                          dtype=tf.bool)                               # [V]
    row_offsets = tf.range(batch, dtype=tf.int32)[:, None] * k         # [b, 1]
    max_penalty = length_penalty(decode_length, alpha)                 # [b]
    if constraint is not None:
        row_decode_length = tf.repeat(decode_length, k)                 # [b*k]

    def step(i, alive_seq, alive_log_probs, alive_last, finished_seq, finished_scores,
             finished_flags, steps, done, states, constraint_state):
        # alive_seq [b,k,T], alive_log_probs [b,k], alive_last [b,k], finished_seq [b,k,T],
        # finished_scores [b,k], finished_flags [b,k] bool, steps [b], done [b] bool.
        logits, new_states = symbols_to_logits_fn(tf.reshape(alive_last, [-1]), i, states)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        if constraint is not None:
            log_probs = constrain(log_probs, constraint, constraint_state,
                                  row_decode_length - i)
        log_probs = tf.maximum(tf.reshape(log_probs, [batch, k, vocab_size]), NEG_INF)
        last_position = (i + 1 >= decode_length)[:, None, None]         # [b,1,1]
        log_probs = tf.where(last_position & ~eos_mask, NEG_INF, log_probs)

        # The 2k best extensions: [b, 2k] log-probs, scores, origin beams and tokens.
        candidate_log_probs = tf.reshape(alive_log_probs[:, :, None] + log_probs,
                                         [batch, k * vocab_size])
        penalty = length_penalty(i + 1, alpha)
        top_scores, top_index = tf.math.top_k(candidate_log_probs / penalty, num_candidates)
        top_log_probs = tf.gather(candidate_log_probs, top_index, batch_dims=1)
        top_beam = top_index // vocab_size
        top_token = top_index % vocab_size
        top_seq = tf.gather(alive_seq, top_beam, batch_dims=1)          # [b,2k,T]
        top_seq = tf.where(positions == i, top_token[:, :, None], top_seq)
        top_is_eos = tf.equal(top_token, eos_id)
        top_exists = top_log_probs > NEG_INF / 2

        # Alive: the k best candidates that do not end in EOS.
        alive_keys = tf.where(top_is_eos, NEG_INF, top_log_probs)
        new_alive_log_probs, choice = tf.math.top_k(alive_keys, k)     # [b,k]
        new_alive_seq = tf.gather(top_seq, choice, batch_dims=1)
        new_alive_last = tf.gather(top_token, choice, batch_dims=1)
        origin = tf.gather(top_beam, choice, batch_dims=1) + row_offsets  # rows of b*k
        flat_origin = tf.reshape(origin, [-1])
        reorder = lambda state: tf.gather(state, flat_origin)  # noqa: E731
        new_states = tf.nest.map_structure(reorder, new_states)
        if constraint is not None:
            constraint_state = constraint.update(
                tf.nest.map_structure(reorder, constraint_state),
                tf.reshape(new_alive_last, [-1]))

        # Finished: the k best of the old finished and the candidates ending in EOS that
        # rank among the k best candidates (so that beam 1 is greedy).
        new_flags = top_is_eos & top_exists & (tf.range(num_candidates) < k)
        all_flags = tf.concat([finished_flags, new_flags], axis=1)
        all_scores = tf.concat([finished_scores, top_scores], axis=1)
        all_keys = tf.where(all_flags, all_scores, -float("inf"))
        _, choice = tf.math.top_k(all_keys, k)                          # old first on ties
        new_finished_seq = tf.gather(tf.concat([finished_seq, top_seq], 1), choice,
                                     batch_dims=1)
        new_finished_scores = tf.gather(all_scores, choice, batch_dims=1)
        new_finished_flags = tf.gather(all_flags, choice, batch_dims=1)

        # Done sentences keep what they had.
        def keep(old, new):
            mask = tf.reshape(done, [-1] + [1] * (len(old.shape) - 1))
            return tf.where(mask, old, new)

        alive_seq = keep(alive_seq, new_alive_seq)
        alive_log_probs = keep(alive_log_probs, new_alive_log_probs)
        alive_last = keep(alive_last, new_alive_last)
        finished_seq = keep(finished_seq, new_finished_seq)
        finished_scores = keep(finished_scores, new_finished_scores)
        finished_flags = keep(finished_flags, new_finished_flags)
        steps = steps + tf.cast(~done, tf.int32)

        now_done = done | (i + 1 >= decode_length)
        if stop_early:
            best_finished = tf.reduce_max(
                tf.where(finished_flags, finished_scores, -float("inf")), axis=1)
            alive_bound = tf.reduce_max(alive_log_probs, axis=1) / max_penalty
            now_done |= tf.reduce_any(finished_flags, axis=1) & (best_finished >= alive_bound)
        return (i + 1, alive_seq, alive_log_probs, alive_last, finished_seq,
                finished_scores, finished_flags, steps, now_done, new_states, constraint_state)

    def not_done(i, *loop_vars):
        done = loop_vars[-3]
        return (i < max_length) & ~tf.reduce_all(done)

    initial_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch, 1])
    loop_vars = (
        tf.constant(0, tf.int32),
        tf.zeros([batch, k, max_length], tf.int32),
        initial_log_probs,
        tf.tile(initial_ids[:, None], [1, k]),
        tf.zeros([batch, k, max_length], tf.int32),
        tf.zeros([batch, k], tf.float32),
        tf.zeros([batch, k], tf.bool),
        tf.zeros([batch], tf.int32),
        tf.zeros([batch], tf.bool),
        tile_beams(states, k),
        tile_beams({} if constraint is None else constraint_state, k),
    )
    (_, alive_seq, alive_log_probs, _, finished_seq, finished_scores, finished_flags,
     steps, _, _, _) = tf.while_loop(not_done, step, loop_vars,
                                  shape_invariants=loop_shape_invariants(loop_vars))

    finished_scores = tf.where(finished_flags, finished_scores, -float("inf"))
    alive_scores = alive_log_probs / length_penalty(steps, alpha)[:, None]
    alive_scores = tf.where(alive_log_probs > NEG_INF / 2, alive_scores, -float("inf"))
    has_finished = tf.reduce_any(finished_flags, axis=1)
    ids = tf.where(has_finished[:, None, None], finished_seq, alive_seq)
    scores = tf.where(has_finished[:, None], finished_scores, alive_scores)
    return ids, scores


def loop_shape_invariants(loop_vars: Any) -> Any:
    """``tf.while_loop`` shape invariants for ``loop_vars``: each tensor keeps its shape,
    except that a state of static length 0 on axis 1 (a growing self-attention cache,
    ``initial_cache(b, 0)``) may grow along it."""
    def invariant(tensor):
        shape = tf.TensorShape(tensor.shape)
        if shape.rank is not None and shape.rank >= 2 and shape[1] == 0:
            return tf.TensorShape([shape[0], None] + shape[2:].as_list())
        return shape
    return tf.nest.map_structure(invariant, loop_vars)


def tile_beams(states: Any, beam_size: int) -> Any:
    """Repeats every tensor of ``states`` ([b, ...] -> [b*beam_size, ...]), sentence-major."""
    return tf.nest.map_structure(lambda state: tf.repeat(state, beam_size, axis=0), states)


def _decode_lengths(decode_length, batch, max_length: Optional[int]):
    """``decode_length`` as int32 [b] clipped to [1, T], and ``T`` (static when possible)."""
    decode_length = tf.cast(tf.convert_to_tensor(decode_length), tf.int32)
    if decode_length.shape.rank == 0:
        decode_length = tf.fill([batch], decode_length)
    elif decode_length.shape.rank != 1:
        raise ValueError(f"decode_length must be a scalar or int32 [b], got shape "
                         f"{decode_length.shape}")
    if max_length is None:
        longest = tf.reduce_max(decode_length)
        static = tf.get_static_value(longest)
        max_length = int(static) if static is not None else longest
    elif max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if isinstance(max_length, int):
        max_length = max(max_length, 1)
    else:
        max_length = tf.maximum(max_length, 1)
    return tf.clip_by_value(decode_length, 1, max_length), max_length


def _check_arguments(beam_size: int, vocab_size: int, alpha: float, eos_id: int) -> None:
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if not 0 <= eos_id < vocab_size:
        raise ValueError(f"eos_id {eos_id} is outside the vocabulary [0, {vocab_size})")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 (the early-termination bound assumes the "
                         f"length penalty grows with length), got {alpha}")
