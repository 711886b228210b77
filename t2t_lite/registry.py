"""Explicit registries of models, problems and hparam sets.

Each registry maps a name to an object (a model class, a problem class, a function that
returns an ``HParams``). Registration is a decorator applied in the defining module;
the built-in modules are imported by ``load_builtins`` from an explicit list, and an
import error is never swallowed. Looking up a name that is not registered raises
``UnknownNameError`` listing the registered names.
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict, Generic, List, Optional, TypeVar

from t2t_lite.errors import UserError

T = TypeVar("T")

# Modules whose import registers the built-in models, problems and hparam sets.
BUILTIN_MODULES = (
    "t2t_lite.models",
    "t2t_lite.hparams",
    "t2t_lite.problems",
)


class UnknownNameError(UserError, KeyError):
    """A name was looked up that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Generic[T]):
    """A name -> object map of one kind (``"model"``, ``"problem"``, ``"hparams set"``)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: Dict[str, T] = {}

    def register(self, name: Optional[str] = None) -> Callable[[T], T]:
        """Decorator: registers the object under ``name`` (default: its ``__name__``) and
        records the name on it as ``registered_name`` (its first name, if registered
        under several)."""

        def decorator(obj: T) -> T:
            key = name or obj.__name__
            if key in self._entries and self._entries[key] is not obj:
                raise ValueError(f"{self.kind} {key!r} is already registered "
                                 f"(by {self._entries[key]!r})")
            self._entries[key] = obj
            if "registered_name" not in vars(obj):
                obj.registered_name = key
            return obj

        return decorator

    def get(self, name: str) -> T:
        load_builtins()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; registered {self.kind}s: "
                + ", ".join(self.names())) from None

    def names(self) -> List[str]:
        load_builtins()
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        load_builtins()
        return name in self._entries


MODELS: Registry = Registry("model")
PROBLEMS: Registry = Registry("problem")
HPARAMS_SETS: Registry = Registry("hparams set")

register_model = MODELS.register
register_problem = PROBLEMS.register
register_hparams = HPARAMS_SETS.register

_loaded = False


def load_builtins() -> None:
    """Imports the built-in modules once; their imports register their contents."""
    global _loaded
    if _loaded:
        return
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    _loaded = True


def hparams(name: str, overrides: str = ""):
    """The hparams set ``name`` with ``overrides`` (``"num_heads=4,label_smoothing=0.2"``)."""
    base = HPARAMS_SETS.get(name)()
    return base.override_from_string(overrides) if overrides else base


def registry_help() -> str:
    """Every registered model, problem and hparams set, one section each."""
    lines = []
    for registry in (MODELS, PROBLEMS, HPARAMS_SETS):
        lines.append(f"{registry.kind}s:")
        lines.extend(f"  {name}" for name in registry.names())
    return "\n".join(lines)
