"""The step interface every search shares: a model's state before its first step, the step
function, and the protocol a model implements to be searched.

Shapes: ``b`` sentences, ``r`` rows per sentence fed to a step (1 for greedy search and
for beam search's first step, ``k`` after it), ``n = b * r`` rows (sentence-major: rows
``s*r .. s*r + r-1`` are sentence ``s``'s), ``V`` the vocabulary.

A search (``beam_search``, ``greedy_search``, and any later one: sampling, scoring,
ensembles) calls ``step_fn(ids, step, states, sentence_states) -> (logits, states)``:

* ``ids`` int32 [n]: each row's last token (``DecodingState.ids`` at step 0);
* ``step`` int32 scalar: the output position being chosen (0-based);
* ``states``: per-hypothesis tensors [n, ...], e.g. the self-attention cache. The search
  repeats them to its rows per sentence and gathers them by the row each surviving
  hypothesis extends; the step returns them updated;
* ``sentence_states``: per-sentence tensors [b', ...], e.g. the encoder-decoder keys and
  values: never repeated nor reordered, returned by no one; ``b'`` is ``b`` or, when beam
  search drops finished sentences (``DecodingPlan.shrink``), the sentences still decoded;
* ``logits`` [n, V], any float dtype; ``V`` must be static.

A model offers it by implementing the ``DecodingModel`` protocol (structurally: a model
need not import this module, which sits in a stage above it); ``step_function(model,
plan)`` binds the plan. The searches take their ``start`` as a ``DecodingState`` or any
tuple of its three fields. This module does not import TensorFlow.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Protocol, Tuple

from t2t_lite.decoding.plan import DecodingPlan

# ``(ids [n], step [], states, sentence_states) -> (logits [n, V], states)``.
StepFn = Callable[[Any, Any, Any, Any], Tuple[Any, Any]]


class DecodingState(NamedTuple):
    """What a search starts from, for ``b`` sentences.

    Attributes:
      ids: int32 [b], the ids fed at step 0 (the model's start symbol).
      states: nested structure of per-hypothesis tensors [b, ...], or None.
      sentence_states: nested structure of per-sentence tensors [b, ...], or None.
    """

    ids: Any
    states: Any = None
    sentence_states: Any = None


class DecodingModel(Protocol):
    """A model the searches can decode (``Transformer`` is one)."""

    vocab_size: int

    def decoding_state(self, inputs, max_length, plan: DecodingPlan) -> Tuple[Any, Any, Any]:
        """(ids, states, sentence_states), a ``DecodingState``'s fields: the state before
        the first step of the sentences ``inputs`` int32 [b, s] (0-padded), for outputs of
        at most ``max_length`` tokens (``T``; a Python int where ``plan.growing_cache`` is
        False)."""

    def decode_step(self, ids, step, states, sentence_states, plan: DecodingPlan
                    ) -> Tuple[Any, Any]:
        """One step of the step interface (see the module doc), computed as ``plan`` says."""


def step_function(model: DecodingModel, plan: DecodingPlan) -> StepFn:
    """``model.decode_step`` with ``plan`` bound: the step function a search calls."""
    return functools.partial(model.decode_step, plan=plan)
