"""``--t2t_usr_dir``: a user's own problems, models and hparams sets, outside the package.

``DIR`` is a Python package: a directory holding ``__init__.py``, imported under the
directory's own name (``~/my_t2t`` is imported as ``my_t2t``). Its ``__init__.py``
imports the modules that hold ``@register_problem``, ``@register_hparams`` and
``@register_model`` definitions (``from . import my_problem``), so one flag brings in a
whole tree of modules that may import each other.

    import_usr_dir("~/my_t2t")          # -> "/home/me/my_t2t" (absolute, as recorded)

A path that is not such a directory, or whose name cannot be a module (or is taken by
another module), raises ``UserError`` naming the flag and the fix. An exception raised
by the user's own code while importing it is their bug: it is wrapped in
``UsrDirImportError``, which the commands print as one line naming the directory
followed by the traceback of the user's code (``format_usr_dir_error``).

The trainer records the absolute path in ``run_config.json`` (``usr_dir``); the decoder,
exporter and checkpoint averager import it from there (``import_run_usr_dir``), so a
run's later commands need no flag. Importing the same directory twice does nothing.
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Dict, Optional, Tuple

from t2t_lite.errors import UserError

FLAG = "--t2t_usr_dir"

_imported: Dict[str, str] = {}  # absolute directory -> module name


class UsrDirImportError(Exception):
    """The user's module raised while being imported; ``__cause__`` is their exception."""

    def __init__(self, usr_dir: str, cause: BaseException):
        super().__init__(f"{FLAG}={usr_dir} failed to import; the traceback below is from "
                         f"its code")
        self.usr_dir = usr_dir
        self.cause = cause


def _checked_dir(usr_dir: str, flag: str) -> Path:
    """The absolute package directory of ``usr_dir``; a wrong path raises ``UserError``."""
    path = Path(usr_dir).expanduser()
    if not path.exists():
        raise UserError(f"{flag}={usr_dir} does not exist; pass the directory that holds "
                        f"your modules and their __init__.py")
    if not path.is_dir():
        raise UserError(f"{flag}={usr_dir} is not a directory; pass the directory that "
                        f"holds your modules and their __init__.py")
    path = path.resolve()
    if not (path / "__init__.py").is_file():
        raise UserError(f"{flag}={usr_dir} holds no __init__.py; create {path / '__init__.py'} "
                        f"importing your modules (from . import my_problem)")
    if not path.name.isidentifier():
        raise UserError(f"{flag}={usr_dir}: {path.name!r} cannot be a Python module name; "
                        f"rename the directory (letters, digits, underscores)")
    return path


def import_usr_dir(usr_dir: str, flag: str = FLAG) -> str:
    """Imports the package ``usr_dir`` (see the module docstring); returns its absolute
    path. Its registrations are then visible in ``t2t_lite.registry``. An empty
    ``usr_dir`` (the flag not given) imports nothing and returns ``""``."""
    if not usr_dir:
        return ""
    from t2t_lite import registry
    registry.load_builtins()  # a user's name that clashes with a built-in one fails now
    path = _checked_dir(usr_dir, flag)
    key = str(path)
    if key in _imported:
        return key
    name = path.name
    existing = sys.modules.get(name)
    if existing is not None:
        raise UserError(f"{flag}={usr_dir}: a module named {name!r} is already imported "
                        f"(from {getattr(existing, '__file__', None) or 'elsewhere'}); "
                        f"rename the directory")
    spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                  submodule_search_locations=[key])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        raise UsrDirImportError(usr_dir, error) from error
    _imported[key] = name
    return key


def check_usr_dir(usr_dir: str, flag: str = FLAG) -> None:
    """``import_usr_dir``'s path checks without importing anything (the commands run them
    before TensorFlow starts): a wrong ``usr_dir`` raises ``UserError``."""
    if usr_dir:
        _checked_dir(usr_dir, flag)


def _run_usr_dir(output_dir: str, usr_dir: str) -> Optional[Tuple[str, str]]:
    """The (directory, flag) ``import_run_usr_dir`` imports: the flag's, else the one
    recorded in the run; ``None`` when neither. A recorded one that is gone raises."""
    if usr_dir:
        return usr_dir, FLAG
    from t2t_lite.runs.config import RunConfig
    run_config = RunConfig.load_if_present(output_dir)
    if run_config is None or not run_config.usr_dir:
        return None
    recorded = run_config.usr_dir
    if not (Path(recorded) / "__init__.py").is_file():
        raise UserError(f"{output_dir} was trained with {FLAG}={recorded}, which is gone; "
                        f"pass {FLAG}=DIR with the same modules (problem "
                        f"{run_config.problem!r}, model {run_config.model!r})")
    return recorded, f"{FLAG} (recorded in {output_dir}/run_config.json)"


def check_run_usr_dir(output_dir: str, usr_dir: str = "") -> None:
    """``import_run_usr_dir``'s checks without importing anything (before TensorFlow)."""
    resolved = _run_usr_dir(output_dir, usr_dir)
    if resolved is not None:
        check_usr_dir(*resolved)


def import_run_usr_dir(output_dir: str, usr_dir: str = "") -> Optional[str]:
    """For the commands that read a run directory: imports ``usr_dir`` when given (the
    flag), else the one recorded in ``OUTPUT_DIR/run_config.json``; ``None`` when neither.
    A recorded directory that is gone raises ``UserError`` naming it and the flag."""
    resolved = _run_usr_dir(output_dir, usr_dir)
    return import_usr_dir(*resolved) if resolved is not None else None


def format_usr_dir_error(error: UsrDirImportError) -> str:
    """``error: <which directory failed>`` then the traceback of the user's code only
    (the frames before their first file, importlib's and t2t-lite's, are left out; a
    ``SyntaxError`` shows its file, line and message alone)."""
    cause = error.cause
    tb = cause.__traceback__
    root = str(Path(error.usr_dir).expanduser().resolve())
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(root):
        tb = tb.tb_next
    if tb is None and isinstance(cause, SyntaxError):  # raised by the compiler: no frame of
        lines = traceback.format_exception_only(type(cause), cause)   # theirs; file and line
    else:
        lines = traceback.format_exception(type(cause), cause, tb or cause.__traceback__)
    return f"error: {error}\n" + "".join(lines).rstrip("\n")
