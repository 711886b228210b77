"""Decode hyperparameters: a typed, immutable ``DecodeHParams`` and its string parser.

``parse_decode_hparams("beam_size=4,alpha=0.6,extra_length=50,batch_size=4096,
return_beams=false", defaults, hparams)`` starts from the dataclass defaults, applies the
problem's ``defaults`` dict (translation: beam 4, alpha 0.6, extra length 50; parsing: beam
21, alpha 0.3, extra length 300), then the run's hparams set's ``decode_beam_size`` and
``decode_alpha`` where it sets them, then the string. An unknown key, a badly typed or
out-of-range value (NaN and infinity included), or a key given twice raises
``DecodeHParamsError`` naming the key and the valid keys (the parsing itself is
``t2t_lite.typed_config``, shared with ``HParams``).
This module does not import TensorFlow.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from t2t_lite.hparams_lib import HParams, HParamsError
from t2t_lite.typed_config import TypedConfig


SAMPLING_METHODS = ("argmax", "random")


class DecodeHParamsError(HParamsError):
    """An unknown decode hparams key, or a badly typed or out-of-range value."""


@dataclasses.dataclass(frozen=True)
class DecodeHParams(TypedConfig):
    """How to decode: beam search settings and batching (defaults: the paper's EN-DE).

    Attributes:
      beam_size: hypotheses kept per sentence; 1 is greedy decoding.
      alpha: GNMT length penalty exponent; scores are log P / ((5 + len) / 6) ** alpha.
      extra_length: maximum output length = input length + extra_length.
      batch_size: tokens (source tokens, padded) per decode batch.
      return_beams: return all ``beam_size`` hypotheses (N-best) instead of the best.
      max_input_length: inputs longer than this are truncated; 0 = the model's maximum.
      sampling_method: ``argmax``: search (beam search, or greedy with ``beam_size=1``);
        ``random``: draw ``num_samples`` samples per sentence (``decoding.sampling``).
      sampling_temp: random sampling divides the logits by it (> 0; 1 = the model's
        distribution).
      sampling_topk: random sampling keeps the ``sampling_topk`` most probable tokens; 0
        keeps all.
      sampling_topp: random sampling keeps the smallest set of most probable tokens whose
        probability reaches it, in (0, 1]; 1 keeps all.
      num_samples: samples per sentence (``sampling_method=random`` only); more than one
        are written like ``return_beams``'s N-best lists, in draw order.
      seed: the samples' random key, in [0, 2**32): the same seed, model and input line
        give the same samples however the input is batched; -1 draws a fresh seed.
      mbr: rerank each sentence's ``beam_size`` hypotheses by minimum Bayes risk (their
        expected sentence BLEU against each other, weighted by probability;
        ``decoding.mbr``) and output the first; needs ``beam_size`` > 1 and
        ``sampling_method=argmax``.
    """

    KIND = "decode hparam"
    FLAG = "--decode_hparams"
    CONFIG_ERROR = DecodeHParamsError

    beam_size: int = 4
    alpha: float = 0.6
    extra_length: int = 50
    batch_size: int = 4096
    return_beams: bool = False
    max_input_length: int = 0
    sampling_method: str = "argmax"
    sampling_temp: float = 1.0
    sampling_topk: int = 0
    sampling_topp: float = 1.0
    num_samples: int = 1
    seed: int = -1
    mbr: bool = False

    def _validate(self) -> None:
        # NaN and infinity are refused for every float (alpha) by ``TypedConfig``.
        self._require_at_least({"beam_size": 1, "batch_size": 1, "extra_length": 0,
                                "max_input_length": 0, "alpha": 0.0, "sampling_topk": 0,
                                "num_samples": 1, "seed": -1})
        self._require_above({"sampling_temp": 0.0, "sampling_topp": 0.0})
        if self.sampling_method not in SAMPLING_METHODS:
            self._fail(f"{self.KIND} 'sampling_method' must be one of "
                       f"{', '.join(SAMPLING_METHODS)}, got {self.sampling_method!r}")
        if self.sampling_topp > 1.0:
            self._fail(f"{self.KIND} 'sampling_topp' must be <= 1, got {self.sampling_topp!r}")
        if self.seed >= 2 ** 32:
            self._fail(f"{self.KIND} 'seed' must be < 2**32, got {self.seed!r}")
        if self.mbr and (self.beam_size < 2 or self.sampling):
            self._fail(f"{self.KIND} 'mbr' reranks a beam's hypotheses: it needs beam_size > 1 "
                       f"and sampling_method=argmax, got beam_size={self.beam_size} with "
                       f"sampling_method={self.sampling_method}")
        if self.num_samples > 1 and self.sampling_method != "random":
            self._fail(f"{self.KIND} 'num_samples' > 1 needs sampling_method=random, got "
                       f"num_samples={self.num_samples} with sampling_method="
                       f"{self.sampling_method}")

    @property
    def sampling(self) -> bool:
        """Whether these hparams draw random samples instead of searching."""
        return self.sampling_method == "random"


def parse_decode_hparams(text: str, defaults: Optional[Mapping[str, Any]] = None,
                         hparams: Optional[HParams] = None) -> DecodeHParams:
    """``DecodeHParams`` from ``defaults`` (the problem's dict), then the run's ``hparams``
    (its ``decode_beam_size`` and ``decode_alpha``, where set), then ``text``.

    Args:
      text: ``"key=value,key=value"``; empty means the defaults.
      defaults: the problem's decode defaults, e.g. ``{"beam_size": 21, "alpha": 0.3,
        "extra_length": 300}``; keys must be valid decode hparams.
      hparams: the trained run's hparams; ``None``: the problem's defaults alone.
    """
    layered = {**(defaults or {}), **(hparams.decode_defaults if hparams else {})}
    return DecodeHParams().replace(**layered).override_from_string(text)
