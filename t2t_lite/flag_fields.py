"""Command-line flags declared once, on the fields of a command's config dataclass.

A field made with ``flag(help, ...)`` carries its flag in its metadata: ``add_flags``
adds one ``--name`` per such field (in field order) to an ``argparse`` parser, and
``config_from_args`` builds the dataclass from the parsed namespace, so a flag's name,
type, default and help are written in one place::

    @dataclasses.dataclass(kw_only=True)
    class Config:
        problem: str = flag("registered problem name")              # required
        train_steps: Optional[int] = flag("stop here", default=None, type=positive_int)
        jit_compile: bool = flag("compile with XLA", default=False)  # --jit_compile

A field without a default is required (``required_flags``); a ``bool`` field defaulting
to False is a switch (``store_true``); ``name`` gives the flag another name than the
field's and ``aliases`` older names still accepted; with ``const`` the value is optional
(``--mixed_precision`` alone means ``--mixed_precision=bfloat16``). Fields without ``flag`` metadata are
set by the caller (``config_from_args(Config, args, usr_dir=...)``).

Nothing here imports TensorFlow: ``--help`` stays fast.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, List, Optional, Sequence, Tuple, Type, TypeVar

C = TypeVar("C")
_KEY = "t2t_lite_flag"


def positive_int(text: str) -> int:
    """``argparse`` type: an integer > 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """``argparse`` type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def seed_int(text: str) -> int:
    """``argparse`` type: a random seed, an integer in [0, 2**32)."""
    value = int(text)
    if not 0 <= value < 2 ** 32:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**32), got {text}")
    return value


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """How one config field appears on the command line."""

    help: Optional[str]
    type: Callable[[str], Any] = str
    name: Optional[str] = None            # the flag's name without "--" (default: the field's)
    aliases: Tuple[str, ...] = ()         # other accepted spellings, e.g. ("--old_name",)
    choices: Optional[Sequence[str]] = None
    metavar: Optional[str] = None
    const: Any = None                     # the value of the bare flag (its value optional)


def flag(help: Optional[str], *, default: Any = dataclasses.MISSING,
         type: Callable[[str], Any] = str, name: Optional[str] = None,
         aliases: Sequence[str] = (), choices: Optional[Sequence[str]] = None,
         metavar: Optional[str] = None, const: Any = None) -> Any:
    """A dataclass field that is also a command-line flag (see the module doc)."""
    spec = FlagSpec(help, type, name, tuple(aliases), choices, metavar, const)
    return dataclasses.field(default=default, metadata={_KEY: spec})


def flag_fields(config_cls: type) -> List[Tuple[dataclasses.Field, FlagSpec]]:
    """The fields of ``config_cls`` that are flags, in declaration order."""
    return [(field, field.metadata[_KEY]) for field in dataclasses.fields(config_cls)
            if _KEY in field.metadata]


def flag_name(field: dataclasses.Field, spec: FlagSpec) -> str:
    """The flag's name without ``--`` (also its ``argparse`` dest)."""
    return spec.name or field.name


def _is_required(field: dataclasses.Field) -> bool:
    return (field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING)


def add_flags(parser: argparse.ArgumentParser, config_cls: type) -> None:
    """Adds one flag per ``flag`` field of ``config_cls``. A required field's flag
    defaults to None (checked with ``required_flags`` after ``--registry_help``)."""
    for field, spec in flag_fields(config_cls):
        name = flag_name(field, spec)
        options = [f"--{name}", *spec.aliases]
        default = None if _is_required(field) else field.default
        if isinstance(default, bool) and default is False:
            parser.add_argument(*options, dest=name, action="store_true", help=spec.help)
            continue
        extra = {"metavar": spec.metavar} if spec.metavar else {}
        if spec.type is not str:
            extra["type"] = spec.type
        if spec.const is not None:
            extra.update(nargs="?", const=spec.const)
        parser.add_argument(*options, dest=name, default=default, choices=spec.choices,
                            help=spec.help, **extra)


def required_flags(config_cls: type) -> List[str]:
    """The names of the flags that must be given (fields without a default)."""
    return [flag_name(field, spec) for field, spec in flag_fields(config_cls)
            if _is_required(field)]


def config_from_args(config_cls: Type[C], args: argparse.Namespace, **values: Any) -> C:
    """``config_cls`` from parsed flags; ``values`` sets the fields that are no flags."""
    for field, spec in flag_fields(config_cls):
        values[field.name] = getattr(args, flag_name(field, spec))
    return config_cls(**values)
