"""Explicit registries of models, problems and hparam sets.

Each registry maps a name to an object (a model class, a problem class, a function that
returns an ``HParams``). Registration is a decorator applied in the defining module;
the built-in modules are imported by ``load_builtins`` from an explicit list, and an
import error is never swallowed. Looking up a name that is not registered raises
``UnknownNameError`` listing the registered names.

Registration can be lazy: ``Registry.declare(name, module)`` lists ``name`` without
importing ``module``; the first ``get(name)`` imports it, and its decorator registers the
object. Built-in models are declared this way, so listing the registries
(``--registry_help``) does not import TensorFlow. Users add their own modules with
``--t2t_usr_dir`` (``t2t_lite.usr_dir``).
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
        self._declared: Dict[str, str] = {}  # name -> module whose import registers it

    def declare(self, name: str, module: str) -> None:
        """Lazy registration: ``name`` is registered by importing ``module``, which is
        imported on the first ``get(name)``, not now."""
        self._declared[name] = module

    def _taken(self, key: str, owner: str) -> ValueError:
        return ValueError(f"{self.kind} {key!r} is already registered (by {owner}); "
                          f"register yours under another name, or drop it to use that one")

    def register(self, name: Optional[str] = None) -> Callable[[T], T]:
        """Decorator: registers the object under ``name`` (default: its ``__name__``) and
        records the name on it as ``registered_name`` (its first name, if registered
        under several)."""

        def decorator(obj: T) -> T:
            key = name or obj.__name__
            if key in self._entries and self._entries[key] is not obj:
                raise self._taken(key, repr(self._entries[key]))
            declared = self._declared.get(key)
            if declared is not None and declared != obj.__module__:
                raise self._taken(key, f"module {declared}")
            self._entries[key] = obj
            if "registered_name" not in vars(obj):
                obj.registered_name = key
            return obj

        return decorator

    def get(self, name: str) -> T:
        load_builtins()
        if name not in self._entries and name in self._declared:
            importlib.import_module(self._declared[name])
            if name not in self._entries:
                raise LookupError(f"module {self._declared[name]} was declared to register "
                                  f"{self.kind} {name!r} but did not")
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; registered {self.kind}s: "
                + ", ".join(self.names())) from None

    def names(self) -> List[str]:
        load_builtins()
        return sorted(set(self._entries) | set(self._declared))

    def __contains__(self, name: str) -> bool:
        load_builtins()
        return name in self._entries or name in self._declared


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
