"""Decode hyperparameters: a typed, immutable ``DecodeHParams`` and its string parser.

``parse("beam_size=4,alpha=0.6,extra_length=50,batch_size=4096,return_beams=false",
defaults)`` starts from the dataclass defaults, applies the problem's ``defaults`` dict
(translation: beam 4, alpha 0.6, extra length 50; parsing: beam 21, alpha 0.3, extra
length 300), then the string. An unknown key, a badly typed or out-of-range value, or a
key given twice raises ``DecodeHParamsError`` naming the key and the valid keys.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional

from t2t_lite.hparams_lib import HParamsError


class DecodeHParamsError(HParamsError):
    """An unknown decode hparams key, or a badly typed or out-of-range value."""


@dataclasses.dataclass(frozen=True)
class DecodeHParams:
    """How to decode: beam search settings and batching (defaults: the paper's EN-DE).

    Attributes:
      beam_size: hypotheses kept per sentence; 1 is greedy decoding.
      alpha: GNMT length penalty exponent; scores are log P / ((5 + len) / 6) ** alpha.
      extra_length: maximum output length = input length + extra_length.
      batch_size: tokens (source tokens, padded) per decode batch.
      return_beams: return all ``beam_size`` hypotheses (N-best) instead of the best.
      max_input_length: inputs longer than this are truncated; 0 = the model's maximum.
    """

    beam_size: int = 4
    alpha: float = 0.6
    extra_length: int = 50
    batch_size: int = 4096
    return_beams: bool = False
    max_input_length: int = 0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            expected = _FIELD_TYPES[field.name]
            if expected is float and _is_instance(value, int):
                object.__setattr__(self, field.name, float(value))
            elif not _is_instance(value, expected):
                raise DecodeHParamsError(f"decode hparam {field.name!r} must be "
                                         f"{expected.__name__}, got {value!r}")
        for name, minimum in (("beam_size", 1), ("batch_size", 1), ("extra_length", 0),
                              ("max_input_length", 0), ("alpha", 0.0)):
            if getattr(self, name) < minimum:
                raise DecodeHParamsError(f"decode hparam {name!r} must be >= {minimum}, "
                                         f"got {getattr(self, name)!r}")

    def replace(self, **changes: Any) -> "DecodeHParams":
        """A new set with ``changes`` applied; unknown keys raise ``DecodeHParamsError``."""
        _check_keys(changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_string(self) -> str:
        """``"alpha=0.6,batch_size=4096,..."``: the form ``parse`` reads back."""
        return ",".join(f"{key}={str(value).lower() if isinstance(value, bool) else value}"
                        for key, value in sorted(self.to_dict().items()))


_FIELD_TYPES = {field.name: field.type if isinstance(field.type, type)
                else {"int": int, "float": float, "bool": bool}[field.type]
                for field in dataclasses.fields(DecodeHParams)}

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def valid_keys() -> str:
    return ", ".join(sorted(_FIELD_TYPES))


def parse(text: str, defaults: Optional[Mapping[str, Any]] = None) -> DecodeHParams:
    """``DecodeHParams`` from ``defaults`` (the problem's dict) overridden by ``text``.

    Args:
      text: ``"key=value,key=value"``; empty means the defaults.
      defaults: the problem's decode defaults, e.g. ``{"beam_size": 21, "alpha": 0.3,
        "extra_length": 300}``; keys must be valid decode hparams.
    """
    base = DecodeHParams().replace(**dict(defaults or {}))
    return base.replace(**parse_overrides(text))


def parse_overrides(text: str) -> Dict[str, Any]:
    """``"beam_size=8,return_beams=true"`` -> ``{"beam_size": 8, "return_beams": True}``."""
    values: Dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise DecodeHParamsError(
                f"decode hparams item {item!r} is not key=value; example: "
                f"--decode_hparams='beam_size=4,alpha=0.6'; valid keys: {valid_keys()}")
        _check_keys({key: None})
        if key in values:
            raise DecodeHParamsError(f"decode hparam {key!r} is given twice in {text!r}")
        values[key] = _parse_value(key, raw.strip())
    return values


def _parse_value(key: str, raw: str) -> Any:
    expected = _FIELD_TYPES[key]
    try:
        if expected is bool:
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise ValueError(raw)
        return expected(raw)
    except ValueError:
        raise DecodeHParamsError(f"decode hparam {key!r} takes a {expected.__name__}, "
                                 f"got {raw!r}; valid keys: {valid_keys()}") from None


def _is_instance(value: Any, expected: type) -> bool:
    if expected in (int, float):
        return isinstance(value, expected) and not isinstance(value, bool)
    return isinstance(value, expected)


def _check_keys(values: Mapping[str, Any]) -> None:
    unknown = sorted(set(values) - set(_FIELD_TYPES))
    if unknown:
        raise DecodeHParamsError(f"unknown decode hparam {unknown[0]!r}; "
                                 f"valid keys: {valid_keys()}")
