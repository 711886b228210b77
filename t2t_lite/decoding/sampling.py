"""Random sampling through the step interface: ``m`` samples per sentence, reproducible.

Shapes: ``b`` sentences, ``m`` = ``plan.beam_size`` samples per sentence, ``n = b * m``
rows (sentence-major: rows ``s*m .. s*m + m-1`` are sentence ``s``'s samples), ``V`` the
vocabulary, ``T`` the id buffers' length.

Each step feeds every row's last token (``start.ids`` at step 0) to the step function
(``t2t_lite.decoding.step``; the model's step is built for ``m`` rows per sentence over
per-sentence memory, as for beam search) and draws the next token from the row's
distribution: the model's softmax over the tokens the search allows (a ``constraint``'s,
and only EOS at a sentence's last position, as ``beam_search`` rules), with the logits
divided by ``temperature``, then cut to the ``top_k`` most probable tokens (0: no cut;
tokens tied with the ``k``-th are kept), then to the smallest set of most probable tokens
whose probability reaches ``top_p`` of what is left (1: no cut; ties with the last kept
token are kept), renormalised. A row ends at EOS or at its ``decode_length``.

The draw of row (sentence ``s``, sample ``j``) at step ``i`` is the inverse CDF of its
distribution (in vocabulary order) at one uniform number, a hash of ``(seed, s, j, i)``
where ``s`` is the sentence's id given by the caller (its index in the input) and
``seed`` the sampler's, or the sentence's own where the caller gives one seed per
sentence (``seeds``): a sentence's samples depend on the seed, its id and the model only,
not on the batch it is decoded in nor on the rows beside it (up to the float rounding of
the batch's matmuls).

A sample's score is its log-probability under the model (the un-tempered, uncut
``log_softmax`` summed over its tokens, EOS included) divided by
``length_penalty(length, alpha)``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

import tensorflow as tf

from t2t_lite.decoding.plan import DecodingPlan
from t2t_lite.decoding.greedy import row_search
from t2t_lite.decoding.search_common import NEG_INF, SearchConstraint, start_tensors
from t2t_lite.decoding.step import DecodingState, StepFn

_U32 = tf.uint32


@dataclasses.dataclass(frozen=True)
class Sampler:
    """How to draw each token.

    Attributes:
      temperature: the logits are divided by it, > 0 (1: the model's distribution).
      top_k: keep the ``top_k`` most probable tokens; 0 keeps all.
      top_p: keep the smallest set of most probable tokens whose probability reaches
        ``top_p``, in (0, 1]; 1 keeps all.
      seed: the random stream's key, in [0, 2**32).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be an int >= 0, got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.seed < 2 ** 32:
            raise ValueError(f"seed must be in [0, 2**32), got {self.seed}")


def sample_search(step_fn: StepFn,
                  start: DecodingState,
                  plan: DecodingPlan,
                  decode_length,
                  sampler: Sampler,
                  sentence_ids=None,
                  alpha: float = 0.0,
                  eos_id: int = 1,
                  max_length: Optional[int] = None,
                  constraint: Optional[SearchConstraint] = None,
                  constraint_state: Any = None,
                  seeds=None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Draws ``m = plan.beam_size`` samples of each of ``b`` sentences.

    Args:
      step_fn: ``(ids [n], step, states, sentence_states) -> (logits [n, V], states)``.
      start: the ids fed at step 0 (int32 [b]), the per-hypothesis ``states`` ([b, ...],
        repeated to the ``m`` rows of each sentence) and the per-sentence
        ``sentence_states`` ([b, ...], never repeated).
      plan: ``beam_size`` is ``m``; ``growing_cache`` as for the other searches; ``shrink``
        and ``log_probs_from_softmax`` are beam search's and must be off.
      decode_length: int32 [b] (or a scalar), the most output tokens, EOS included.
      sampler: temperature, top-k, top-p and seed.
      sentence_ids: int32 [b], each sentence's id in the random stream (its index in the
        input); None: 0 .. b-1.
      alpha: length-penalty exponent of the returned scores (the draw ignores it).
      eos_id: the end-of-sentence id.
      max_length: ``T``, the static length of the id buffers; default max(decode_length).
      constraint, constraint_state: restrict every draw (see ``beam_search``).
      seeds: int [b] (any integer dtype, values in [0, 2**32)), each sentence's seed in
        the random stream; None: ``sampler.seed`` for every sentence.

    Returns:
      ids: int32 [b, m, T], EOS-terminated within ``decode_length``, 0 after EOS, in
        sample order (not sorted by score).
      scores: float32 [b, m], log P / length_penalty(length, alpha).
    """
    if plan.shrink or plan.log_probs_from_softmax:
        raise ValueError(f"sample_search needs a plan without shrink and "
                         f"log_probs_from_softmax, got {plan}")
    m = plan.beam_size
    batch = tf.shape(start_tensors(start)[0])[0]
    if sentence_ids is None:
        sentence_ids = tf.range(batch, dtype=tf.int32)
    row_sentence = tf.repeat(tf.cast(sentence_ids, tf.int32), m)            # [n]
    row_sample = tf.tile(tf.range(m, dtype=tf.int32), [batch])              # [n]
    row_seed = sampler.seed if seeds is None else tf.repeat(seeds, m)       # int or [n]

    def draw(logits, log_probs, step):
        probs = sampling_probabilities(logits, log_probs > NEG_INF / 2, sampler)
        return inverse_cdf(probs, uniform_draws(row_seed, row_sentence, row_sample, step))

    ids, scores = row_search(step_fn, start, plan, decode_length, draw, alpha, eos_id,
                             max_length, constraint, constraint_state)
    width = ids.shape[1] if ids.shape[1] is not None else tf.shape(ids)[1]   # T
    return tf.reshape(ids, [batch, m, width]), tf.reshape(scores, [batch, m])


def sampling_probabilities(logits, allowed, sampler: Sampler) -> tf.Tensor:
    """float32 [n, V]: each row's sampling distribution (sums to 1; 0 outside the kept
    tokens) from ``logits`` [n, V] over the ``allowed`` bool [n, V] tokens: temperature,
    then top-k, then top-p (see the module doc)."""
    scaled = tf.cast(logits, tf.float32) / sampler.temperature
    probs = tf.nn.softmax(tf.where(allowed, scaled, -float("inf")), axis=-1)
    vocab_size = logits.shape[-1]
    if 0 < sampler.top_k < vocab_size:
        kth = tf.math.top_k(probs, sampler.top_k).values[:, -1:]
        probs = tf.where(probs >= kth, probs, 0.0)
    if sampler.top_p < 1:
        ranked = tf.sort(probs, axis=-1, direction="DESCENDING")
        before = tf.cumsum(ranked, axis=-1, exclusive=True)                # mass above
        total = tf.reduce_sum(ranked, axis=-1, keepdims=True)
        kept = (before < sampler.top_p * total) & (ranked > 0)
        threshold = tf.reduce_min(tf.where(kept, ranked, float("inf")), axis=-1,
                                  keepdims=True)
        probs = tf.where(probs >= threshold, probs, 0.0)
    return probs / tf.reduce_sum(probs, axis=-1, keepdims=True)


def inverse_cdf(probs, uniform) -> tf.Tensor:
    """int32 [n]: for each row of ``probs`` [n, V] (>= 0, not all 0) the first token whose
    cumulative probability (vocabulary order) exceeds ``uniform`` [n] in [0, 1) times the
    row's total; never a token of probability 0."""
    cumulative = tf.cumsum(probs, axis=-1)
    target = uniform[:, None] * cumulative[:, -1:]
    token = tf.reduce_sum(tf.cast(cumulative <= target, tf.int32), axis=-1)
    vocab_size = tf.shape(probs)[-1]
    last_possible = vocab_size - 1 - tf.argmax(tf.reverse(probs > 0, [-1]), axis=-1,
                                               output_type=tf.int32)
    return tf.minimum(token, last_possible)


def uniform_draws(seed, sentence, sample, step) -> tf.Tensor:
    """float32 [n] in [0, 1): a hash of ``(seed, sentence [n], sample [n], step)`` (24
    bits), the same for the same four numbers in any batch, graph or device. ``seed`` is
    an int or an integer tensor (a scalar or [n], one per row), in [0, 2**32) either way;
    an int and a tensor of the same value give the same draws."""
    def mix(value):
        # MurmurHash3's 32-bit finaliser: every input bit flips each output bit with
        # probability about 1/2.
        value = tf.bitwise.bitwise_xor(value, tf.bitwise.right_shift(value, _u32(16)))
        value = value * _u32(0x85EBCA6B)
        value = tf.bitwise.bitwise_xor(value, tf.bitwise.right_shift(value, _u32(13)))
        value = value * _u32(0xC2B2AE35)
        return tf.bitwise.bitwise_xor(value, tf.bitwise.right_shift(value, _u32(16)))

    if isinstance(seed, int):
        seed = tf.fill(tf.shape(sentence), _u32(seed))
    else:   # via int64: a uint32 cast of int32 or int64 keeps the low 32 bits
        seed = tf.broadcast_to(tf.cast(tf.cast(seed, tf.int64) & 0xFFFFFFFF, _U32),
                               tf.shape(sentence))
    state = mix(seed + _u32(0x9E3779B9))
    for part, salt in ((sentence, 0x7F4A7C15), (sample, 0x94D049BB), (step, 0xBF58476D)):
        part = tf.broadcast_to(tf.cast(part, _U32), tf.shape(sentence))
        state = mix(tf.bitwise.bitwise_xor(state, mix(part + _u32(salt))) + _u32(0x9E3779B9))
    return tf.cast(tf.bitwise.right_shift(state, _u32(8)), tf.float32) * (1.0 / (1 << 24))


def _u32(value: int) -> tf.Tensor:
    return tf.constant(value & 0xFFFFFFFF, _U32)
