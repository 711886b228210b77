"""Decoding with an ensemble: several models decoded as one ``DecodingModel``.

    ensemble = Ensemble([model_a, model_b])          # same vocabulary, any hparams
    Translator.from_decode_hparams(ensemble, vocabulary, decode_hparams)
    Scorer(ensemble, vocabulary)

The contract. With ``M`` members whose next-token distributions are ``p_1 .. p_M``, the
ensemble's next-token log-probabilities are the mean of the members' log-probabilities,
renormalised over the vocabulary::

    log p(y) = (1/M) sum_i log p_i(y) - log Z,    Z = sum_y prod_i p_i(y) ** (1/M)

(the normalised geometric mean of the members' distributions). Every search applies
``log_softmax`` to what a step returns, so renormalising is what the searches do to the
mean: beam search, greedy search, sampling (which draws from this distribution), target
prefixes and constraints, and the ``Scorer`` (whose score of a target is the sum of these
log-probabilities over its tokens, EOS included) all decode the same distribution. ``Z``
<= 1 (a geometric mean is at most the arithmetic one), so these log-probabilities are at
least the unnormalised mean; with one member, or members that agree, ``Z = 1``.

Since ``log p_i = logits_i - logsumexp(logits_i)`` and the per-row constants cancel in the
renormalisation, ``log_softmax`` of the members' mean logits is this distribution exactly;
the step and the teacher-forced call return that mean (float32), which is cheaper (no
per-member ``log_softmax``) and makes an ensemble of a model with itself compute exactly the
model's numbers (``(x + x) / 2 == x`` in floating point).

Each member keeps its own states: ``decoding_state`` returns the members' states and
sentence states as tuples (member ``i``'s at index ``i``), which the searches repeat,
reorder and shrink like any other nested state. Members may differ in hparams (each is
built from its own run's config) but must share the vocabulary; ``hparams`` holds the
limits a ``Translator`` or ``Scorer`` reads (``max_length``, ``pos``): the smallest
``max_length`` of the members, and ``"emb"`` when any member has learned positions.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence, Tuple

import tensorflow as tf

from t2t_lite.decoding.plan import DecodingPlan


class EnsembleLimits(NamedTuple):
    """What bounds an ensemble's lengths, read as ``model.hparams`` by the ``Translator``
    and the ``Scorer``: ``max_length``, the smallest of the members'; ``pos``, ``"emb"``
    when any member's positions are learned (its ``max_length`` then bounds inputs and
    outputs), else ``"timing"``."""

    max_length: int
    pos: str


class Ensemble:
    """``M >= 1`` models decoded together (see the module doc for the contract).

    Args:
      members: models implementing ``DecodingModel`` (``decoding_state``, ``decode_step``,
        ``vocab_size``), a teacher-forced ``__call__({"inputs" [b, s], "targets" [b, t]},
        training) -> logits [b, t, V]`` and ``hparams.max_length`` / ``hparams.pos``
        (``Transformer`` has them), with their variables restored. The same object may
        appear more than once. Every member must have the same ``vocab_size`` ``V``.

    Attributes:
      members: the models, in order.
      vocab_size: ``V``.
      hparams: an ``EnsembleLimits``.
      layers: the members (so ``t2t_lite.layers.int8.quantization_of`` sees their layers:
        the ensemble runs in int8 when its members were quantized).
    """

    def __init__(self, members: Sequence[Any]):
        self.members = tuple(members)
        if not self.members:
            raise ValueError("an Ensemble needs at least one member")
        sizes = sorted({int(member.vocab_size) for member in self.members})
        if len(sizes) != 1:
            raise ValueError(f"ensemble members have different vocabulary sizes {sizes}; "
                             f"they must share one vocabulary")
        self.vocab_size = sizes[0]
        learned = [m.hparams.max_length for m in self.members if m.hparams.pos == "emb"]
        self.hparams = EnsembleLimits(
            max_length=min(int(m.hparams.max_length) for m in self.members),
            pos="emb" if learned else "timing")

    @property
    def layers(self) -> list:
        return list(self.members)

    def decoding_state(self, inputs, max_length, plan: DecodingPlan
                       ) -> Tuple[Any, Tuple[Any, ...], Tuple[Any, ...]]:
        """inputs int32 [b, s] -> (ids int32 [b], states, sentence_states): the first
        member's start ids (every member starts from the start symbol) and the tuples of
        the members' states and sentence states."""
        starts = [member.decoding_state(inputs, max_length, plan) for member in self.members]
        return (starts[0][0], tuple(start[1] for start in starts),
                tuple(start[2] for start in starts))

    def decode_step(self, ids, step, states: Tuple[Any, ...],
                    sentence_states: Tuple[Any, ...], plan: DecodingPlan
                    ) -> Tuple[tf.Tensor, Tuple[Any, ...]]:
        """One step of every member on its own states -> (float32 [n, V], whose
        ``log_softmax`` is the ensemble's next-token log-probabilities; the members' new
        states, a tuple)."""
        logits, new_states = [], []
        for member, state, sentence_state in zip(self.members, states, sentence_states):
            member_logits, new_state = member.decode_step(ids, step, state, sentence_state,
                                                          plan)
            logits.append(member_logits)
            new_states.append(new_state)
        return mean_logits(logits), tuple(new_states)

    def __call__(self, features, training: bool = False) -> tf.Tensor:
        """Teacher-forced pass of every member: {"inputs" [b, s], "targets" [b, t]} ->
        float32 [b, t, V], whose ``log_softmax`` is the ensemble's log-probabilities of each
        target position (what the ``Scorer`` sums)."""
        return mean_logits([member(features, training=training) for member in self.members])


def mean_logits(logits: Sequence[Any]) -> tf.Tensor:
    """The mean of the members' logits [..., V] (any float dtype), in float32: one member's
    logits are returned unchanged (cast)."""
    logits = [tf.cast(member_logits, tf.float32) for member_logits in logits]
    if len(logits) == 1:
        return logits[0]
    return tf.add_n(logits) / float(len(logits))
