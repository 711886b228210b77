"""The decoding plan: how the searches compute, decided once, in one typed object.

A ``DecodingPlan`` holds every choice that changes how a search and the model's decode
step run but not what they mean: the beam size the model's step is built for, the layout
of the model's cache, whether finished sentences leave the batch, and where beam search
takes its log-probabilities from. The ``Translator`` builds one with
``DecodingPlan.choose(beam_size, jit_compile, quantization)`` and hands the same object to
the model (``decoding_state``, ``decode_step``) and to the search (``beam_search``,
``greedy_search``), so the two can never disagree.

This module does not import TensorFlow.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DecodingPlan:
    """How to decode.

    Attributes:
      beam_size: ``k``, the hypotheses beam search keeps per sentence; 1 for greedy search.
        The model's decode step is built for it: with k > 1 a step's rows hold several
        hypotheses per sentence (sentence-major) over per-sentence memory.
      growing_cache: True: the model's per-hypothesis states (the self-attention cache)
        start empty and grow by one position per step, and the searches let every state of
        rank >= 2 change the sizes of its middle axes between steps (a step then costs
        O(step) rather than O(T) in cache reads, writes and beam reorders). False: they are
        preallocated to the output length ``T`` and keep their shapes, as XLA needs.
      shrink: beam search takes finished sentences out of the batch (once an eighth of it
        is done, their results are set aside and every state keeps only the others), so a
        step's matmuls cover only sentences still being decoded. The search means the same
        (float32 products over fewer rows may round their last bits differently); the
        batch dimension becomes dynamic, so not under XLA. Beam search only.
      log_probs_from_softmax: beam search takes each hypothesis's ``2k + 1`` best tokens
        from the step's softmax and the log of those alone, instead of ``log_softmax`` over
        every [rows, V] logit (fewer passes over the logits). The log of a softmax rounds
        differently from ``log_softmax``: scores differ in their last float32 bits and two
        extensions a few ulps apart may swap. Steps where a sentence is at its last
        position, where the kept tokens cannot prove the ranking, or with a constraint take
        ``log_softmax``. Beam search only.
    """

    beam_size: int = 1
    growing_cache: bool = False
    shrink: bool = False
    log_probs_from_softmax: bool = False

    def __post_init__(self):
        if isinstance(self.beam_size, bool) or not isinstance(self.beam_size, int) \
                or self.beam_size < 1:
            raise ValueError(f"beam_size must be a positive int, got {self.beam_size!r}")
        for name in ("growing_cache", "shrink", "log_probs_from_softmax"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")

    @classmethod
    def choose(cls, beam_size: int, jit_compile: bool, quantization: str) -> "DecodingPlan":
        """The plan the ``Translator`` decodes with.

        Args:
          beam_size: hypotheses per sentence; 1 is greedy search.
          jit_compile: the search is compiled with XLA, which needs fixed shapes: the cache
            is preallocated and the batch never shrinks. Without XLA the cache grows and
            (beam search) finished sentences leave the batch.
          quantization: the model's, ``t2t_lite.layers.int8.quantization_of(model)``
            (``"none"`` or ``"int8"``). An int8 model's beam search without XLA takes its
            log-probabilities from the softmax; float32 decoding never does, so that it
            returns exactly the scores of ``log_softmax``.
        """
        growing = not jit_compile
        beams = beam_size > 1
        return cls(beam_size=beam_size, growing_cache=growing, shrink=growing and beams,
                   log_probs_from_softmax=beams and growing and quantization == "int8")
