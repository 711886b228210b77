"""What beam and greedy search share: the constraint protocol, the length penalty, the
log-probability floor, length clipping and the loop's shape invariants (the step
function's interface is ``t2t_lite.decoding.step``).

Shapes: ``b`` sentences, ``n`` rows fed to the step function (``b`` for greedy search,
``b * k`` for beam search), ``V`` the vocabulary, ``T`` the id buffers' length.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, Tuple

import tensorflow as tf

# Log-probability given to impossible tokens and to the empty initial beams. Finite, so
# that sums never produce NaN; a log-probability below NEG_INF / 2 marks a hypothesis
# that does not exist.
NEG_INF = -1e9


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


def step_log_probs(logits, step, decode_length, eos_id: int,
                   constraint: Optional[SearchConstraint] = None,
                   constraint_state: Any = None, floor: bool = True) -> tf.Tensor:
    """One step's token log-probabilities as both searches score them.

    Args:
      logits: [n, V], any float dtype.
      step: int32 scalar, the output position being chosen.
      decode_length: int32 [n], each row's most output tokens (EOS included).
      eos_id: the end-of-sentence id; at a row's last position (``step + 1 >=
        decode_length``) every other token gets ``NEG_INF`` (that pass over [n, V] runs
        only at steps where some row is there).
      constraint, constraint_state: forbidden tokens get ``NEG_INF`` after the softmax
        (None: no constraint).
      floor: clip at ``NEG_INF`` (False: beam search floors only the few values it keeps).

    Returns:
      float32 [n, V]: ``log_softmax(logits)`` with those tokens at ``NEG_INF``.
    """
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    if constraint is not None:
        log_probs = constrain(log_probs, constraint, constraint_state, decode_length - step)
    if floor:
        log_probs = tf.maximum(log_probs, NEG_INF)
    last_position = step + 1 >= decode_length                            # [n]

    def force_eos():
        not_eos = tf.not_equal(tf.range(tf.shape(log_probs)[-1]), eos_id)   # [V]
        return tf.where(last_position[:, None] & not_eos, NEG_INF, log_probs)

    return tf.cond(tf.reduce_any(last_position), force_eos, lambda: log_probs)


def decode_lengths(decode_length, batch, max_length: Optional[int]):
    """``decode_length`` (int32 [b] or a scalar) as int32 [b] clipped to [1, T], and ``T``
    (``max_length``, or the largest ``decode_length``; a Python int when static)."""
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
    elif isinstance(max_length, int) and max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if isinstance(max_length, int):
        max_length = max(max_length, 1)
    else:
        max_length = tf.maximum(max_length, 1)
    return tf.clip_by_value(decode_length, 1, max_length), max_length


def loop_shape_invariants(loop_vars: Tuple, growing: Tuple[int, ...] = ()) -> Tuple:
    """``tf.while_loop`` shape invariants: every tensor of ``loop_vars`` keeps its shape,
    except the tensors of rank >= 2 in the loop variables at the indices ``growing``, whose
    axes between the first and the last may grow (axis 1 of a rank-2 tensor): the
    Transformer's growing self-attention cache [n, h, step, d], or a caller's [n, step,
    ...] state."""
    def fixed(tensor):
        return tf.TensorShape(tensor.shape)

    def grows(tensor):
        shape = tf.TensorShape(tensor.shape)
        if shape.rank is None or shape.rank < 2:
            return shape
        if shape.rank == 2:
            return tf.TensorShape([shape[0], None])
        return tf.TensorShape([shape[0]] + [None] * (shape.rank - 2) + [shape[-1]])

    return tuple(tf.nest.map_structure(grows if index in growing else fixed, var)
                 for index, var in enumerate(loop_vars))


def start_tensors(start) -> Tuple[tf.Tensor, Any, Any]:
    """A search's ``start`` (a ``DecodingState`` or a tuple of its three fields) ->
    (ids int32 [b], states, sentence_states), a None state as an empty dict."""
    initial_ids, states, sentence_states = start
    return (tf.cast(tf.convert_to_tensor(initial_ids), tf.int32),
            {} if states is None else states,
            {} if sentence_states is None else sentence_states)


def tile_beams(states: Any, beam_size: int) -> Any:
    """Repeats every tensor of ``states`` ([b, ...] -> [b*beam_size, ...]), sentence-major."""
    return tf.nest.map_structure(lambda state: tf.repeat(state, beam_size, axis=0), states)


def check_eos(eos_id: int, vocab_size: int) -> None:
    """``eos_id`` must be a token of the vocabulary [0, V)."""
    if not 0 <= eos_id < vocab_size:
        raise ValueError(f"eos_id {eos_id} is outside the vocabulary [0, {vocab_size})")


def vocab_size_of(logits, eos_id: int) -> int:
    """``V``, the static last dimension of a step's ``logits`` [n, V], which must hold
    ``eos_id``."""
    vocab_size = logits.shape[-1]
    if vocab_size is None:
        raise ValueError("the step function's logits need a static last dimension (the "
                         f"vocabulary size), got shape {logits.shape}")
    check_eos(eos_id, vocab_size)
    return int(vocab_size)


def chunk_size(vocab_size: int, k: int) -> int:
    """The chunk length ``top_k_last_axis`` uses for rows of ``vocab_size``: the divisor of
    ``vocab_size`` (at least 8, with more than ``k`` chunks) nearest ``sqrt(vocab_size /
    k)``, which balances the two ``top_k`` passes (over ``V / c`` chunk maxima and over
    ``k * c`` values), or 0 when there is none (a plain ``tf.math.top_k`` is used then)."""
    target = (vocab_size / k) ** 0.5
    divisors = [c for c in range(8, vocab_size // (k + 1) + 1) if vocab_size % c == 0]
    return min(divisors, key=lambda c: abs(c - target), default=0)


def top_k_last_axis(x, k: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """Exactly ``tf.math.top_k(x, k)`` (values and int32 indices [..., k], best first, ties
    to the lower index) for x float32 [..., V] with a static V, in about one pass over x.

    The full sort runs over ``k * c`` values instead of ``V``: the last axis is cut into
    chunks of ``c`` (``chunk_size``), reduced to their maxima in one pass; the ``k`` chunks
    with the largest maxima (ties: lower chunk) hold the ``k`` best values, since any other
    chunk has ``k`` chunks whose maxima rank ahead of all its values. Those chunks, in index
    order, go to a ``top_k`` over ``k * c`` values, which breaks ties as one over ``V``.
    """
    vocab_size = x.shape[-1]
    c = chunk_size(vocab_size, k)
    if not c:
        return tf.math.top_k(x, k)
    chunks = tf.reshape(x, tf.concat([tf.shape(x)[:-1], [vocab_size // c, c]], 0))
    _, best_chunks = tf.math.top_k(tf.reduce_max(chunks, axis=-1), k)      # [..., k]
    best_chunks = tf.sort(best_chunks, axis=-1)
    batch_dims = len(x.shape) - 1
    gathered = tf.gather(chunks, best_chunks, batch_dims=batch_dims)       # [..., k, c]
    values, within = tf.math.top_k(
        tf.reshape(gathered, tf.concat([tf.shape(x)[:-1], [k * c]], 0)), k)
    index = tf.gather(best_chunks, within // c, batch_dims=batch_dims) * c + within % c
    return values, index
