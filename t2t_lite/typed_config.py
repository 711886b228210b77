"""Typed, immutable configuration objects parsed from ``"key=value,key=value"`` strings.

``TypedConfig`` is the base of ``HParams`` and ``DecodeHParams``: a frozen dataclass whose
fields are checked against their annotated types (an int is accepted for a float field;
NaN and infinity are refused in every float field),
derived with ``replace``, overridden from a string with type checking, and round-tripped
through JSON. Every error is a ``CONFIG_ERROR`` naming the key and the valid keys.
Subclasses set ``KIND`` (used in messages: "hparam", "decode hparam"), ``CONFIG_ERROR``,
``FLAG`` (the command-line flag, for examples) and may add checks in ``_validate``.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, ClassVar, Dict, Mapping, Type, TypeVar

from t2t_lite.errors import UserError

C = TypeVar("C", bound="TypedConfig")

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")
_KIND_OF_VALUE = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


class ConfigError(UserError):
    """An unknown key, a badly typed or out-of-range value, or an inconsistent config."""


@dataclasses.dataclass(frozen=True)
class TypedConfig:
    KIND: ClassVar[str] = "config key"
    FLAG: ClassVar[str] = "--config"
    CONFIG_ERROR: ClassVar[Type[ConfigError]] = ConfigError

    def __post_init__(self):
        types = self.field_types()
        for name, expected in types.items():
            value = getattr(self, name)
            if expected is float and _is_instance(value, int):
                object.__setattr__(self, name, float(value))
            elif not _is_instance(value, expected):
                self._fail(f"{self.KIND} {name!r} must be {_KIND_OF_VALUE[expected]}, got {value!r}")
            if expected is float and not math.isfinite(getattr(self, name)):
                self._fail(f"{self.KIND} {name!r} must be a finite number, got {value!r}")
        self._validate()

    def _validate(self) -> None:
        """Subclass hook: raise via ``_fail`` when values are inconsistent."""

    def _fail(self, message: str):
        raise self.CONFIG_ERROR(message)

    def _require_at_least(self, minimums: Mapping[str, float]) -> None:
        for name, minimum in minimums.items():
            if getattr(self, name) < minimum:
                self._fail(f"{self.KIND} {name!r} must be >= {minimum}, got {getattr(self, name)!r}")

    def _require_above(self, minimums: Mapping[str, float]) -> None:
        for name, minimum in minimums.items():
            if not getattr(self, name) > minimum:
                self._fail(f"{self.KIND} {name!r} must be > {minimum}, got {getattr(self, name)!r}")

    def _require_unit_interval(self, *names: str) -> None:
        """Each of ``names`` in [0, 1) (dropout rates, smoothing, Adam betas)."""
        for name in names:
            if not 0.0 <= getattr(self, name) < 1.0:
                self._fail(f"{self.KIND} {name!r} must be in [0, 1), got {getattr(self, name)!r}")

    # Keys and types ------------------------------------------------------------------
    @classmethod
    def field_types(cls) -> Dict[str, type]:
        return {field.name: field.type if isinstance(field.type, type) else _TYPES[field.type]
                for field in dataclasses.fields(cls)}

    @classmethod
    def valid_keys(cls) -> str:
        return ", ".join(sorted(cls.field_types()))

    @classmethod
    def check_keys(cls, values: Mapping[str, Any]) -> None:
        unknown = sorted(set(values) - set(cls.field_types()))
        if unknown:
            more = f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else ""
            raise cls.CONFIG_ERROR(f"unknown {cls.KIND} {unknown[0]!r}{more}; "
                                   f"valid keys: {cls.valid_keys()}")

    # Derivation, parsing, serialisation ----------------------------------------------
    def replace(self: C, **changes: Any) -> C:
        """A new config with ``changes`` applied; unknown keys raise ``CONFIG_ERROR``."""
        self.check_keys(changes)
        return dataclasses.replace(self, **changes)

    def override_from_string(self: C, overrides: str) -> C:
        """Applies ``"key=value,key=value"``; values are parsed by each key's type."""
        return self.replace(**self.parse_overrides(overrides))

    @classmethod
    def parse_overrides(cls, overrides: str) -> Dict[str, Any]:
        """``"num_heads=4,label_smoothing=0.2"`` -> ``{"num_heads": 4, "label_smoothing": 0.2}``."""
        values: Dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in overrides.split(","))):
            key, sep, text = item.partition("=")
            key = key.strip()
            if not sep:
                raise cls.CONFIG_ERROR(
                    f"{cls.KIND} item {item!r} is not key=value; example: "
                    f"{cls.FLAG}='{cls._example()}'; valid keys: {cls.valid_keys()}")
            cls.check_keys({key: None})
            if key in values:
                raise cls.CONFIG_ERROR(f"{cls.KIND} {key!r} is given twice in {overrides!r}")
            values[key] = cls._parse_value(key, text.strip())
        return values

    @classmethod
    def _example(cls) -> str:
        defaults = cls()
        return ",".join(f"{name}={_format(getattr(defaults, name))}"
                        for name in list(cls.field_types())[:2])

    @classmethod
    def _parse_value(cls, key: str, text: str) -> Any:
        expected = cls.field_types()[key]
        try:
            if expected is bool:
                if text.lower() in _TRUE:
                    return True
                if text.lower() in _FALSE:
                    return False
                raise ValueError(text)
            return expected(text)
        except ValueError:
            raise cls.CONFIG_ERROR(f"{cls.KIND} {key!r} takes {_KIND_OF_VALUE[expected]}, got "
                                   f"{text!r}; valid keys: {cls.valid_keys()}") from None

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def to_string(self) -> str:
        """``"key=value,..."``: the form ``override_from_string`` reads back."""
        return ",".join(f"{key}={_format(value)}" for key, value in sorted(self.to_dict().items()))

    @classmethod
    def from_dict(cls: Type[C], values: Mapping[str, Any]) -> C:
        cls.check_keys(values)
        return cls(**values)

    @classmethod
    def from_json(cls: Type[C], text: str) -> C:
        return cls.from_dict(json.loads(text))

    def diff(self, other: "TypedConfig") -> Dict[str, tuple]:
        """``{key: (self value, other value)}`` for every key that differs."""
        return {key: (value, getattr(other, key)) for key, value in self.to_dict().items()
                if getattr(other, key) != value}


def _is_instance(value: Any, expected: type) -> bool:
    if expected is int or expected is float:
        return isinstance(value, expected) and not isinstance(value, bool)
    return isinstance(value, expected)


def _format(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
