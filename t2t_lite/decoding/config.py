"""Decode hyperparameters: a typed, immutable ``DecodeHParams`` and its string parser.

``parse_decode_hparams("beam_size=4,alpha=0.6,extra_length=50,batch_size=4096,
return_beams=false", defaults)`` starts from the dataclass defaults, applies the problem's
``defaults`` dict (translation: beam 4, alpha 0.6, extra length 50; parsing: beam 21,
alpha 0.3, extra length 300), then the string. An unknown key, a badly typed or
out-of-range value (NaN and infinity included), or a key given twice raises
``DecodeHParamsError`` naming the key and the valid keys (the parsing itself is
``t2t_lite.typed_config``, shared with ``HParams``).
This module does not import TensorFlow.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from t2t_lite.hparams_lib import HParamsError
from t2t_lite.typed_config import TypedConfig


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

    def _validate(self) -> None:
        # NaN and infinity are refused for every float (alpha) by ``TypedConfig``.
        self._require_at_least({"beam_size": 1, "batch_size": 1, "extra_length": 0,
                                "max_input_length": 0, "alpha": 0.0})


def parse_decode_hparams(text: str, defaults: Optional[Mapping[str, Any]] = None
                         ) -> DecodeHParams:
    """``DecodeHParams`` from ``defaults`` (the problem's dict) overridden by ``text``.

    Args:
      text: ``"key=value,key=value"``; empty means the defaults.
      defaults: the problem's decode defaults, e.g. ``{"beam_size": 21, "alpha": 0.3,
        "extra_length": 300}``; keys must be valid decode hparams.
    """
    return DecodeHParams().replace(**dict(defaults or {})).override_from_string(text)
