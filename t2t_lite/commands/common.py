"""Flag helpers shared by the commands: typed argument parsers, registry help,
``--t2t_usr_dir``, and turning known user errors into one clear line and exit status 2.

Nothing here imports TensorFlow: every command answers ``--help`` without it."""
from __future__ import annotations

import argparse
import sys
from typing import Callable


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_registry_help(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry_help", action="store_true",
                        help="list registered models, problems and hparams sets, then exit")


def print_registry_help(usr_dir: str = "") -> int:
    """Prints the registries (after importing ``--t2t_usr_dir``, so its names show)."""
    from t2t_lite import registry

    def body():
        import_usr_dir(usr_dir)
        print(registry.registry_help())
    return run_reporting_errors(body)


def add_usr_dir_flag(parser: argparse.ArgumentParser, run_dir: bool = False) -> None:
    """``--t2t_usr_dir``; ``run_dir``: the command reads a run directory, which records
    the directory it was trained with (the flag is then needed only if it moved)."""
    recorded = (" (default: the one recorded in the run directory's run_config.json)"
                if run_dir else "")
    parser.add_argument("--t2t_usr_dir", default="", metavar="DIR",
                        help="a Python package directory (holding __init__.py) whose "
                             "modules register your own problems, models and hparams sets; "
                             "see docs/extending.md" + recorded)


def import_usr_dir(usr_dir: str) -> str:
    """Imports ``--t2t_usr_dir`` when given; returns its absolute path (``""`` if none)."""
    if not usr_dir:
        return ""
    from t2t_lite.usr_dir import import_usr_dir as import_dir
    return import_dir(usr_dir)


def require(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Exits with a usage error naming every required flag that is missing."""
    missing = [f"--{name}" for name in names if not getattr(args, name)]
    if missing:
        parser.error("missing required flag(s): " + ", ".join(missing))


def user_error_types() -> tuple:
    """Exceptions that are the user's to fix: printed as one line, no traceback.

    ``UserError`` covers bad flags and hparams, unknown registry names, a mismatched or
    broken run directory, unusable data, vocabulary and reference files;
    ``FileNotFoundError`` covers a missing file or checkpoint. Other ``OSError``s of a
    path the user gave are turned into ``UserError`` where that path is used, naming the
    flag (``t2t_lite.user_paths``). Any other exception (a plain ``ValueError`` or
    ``OSError`` included) is a bug and propagates with its traceback."""
    from t2t_lite.errors import UserError
    return (UserError, FileNotFoundError)


def run_reporting_errors(body: Callable[[], object], failure_types: tuple = ()) -> int:
    """Runs ``body``; a user error prints ``error: ...`` to stderr and returns 2; one of
    ``failure_types`` (a run that failed for a reason it explains, such as a NaN loss)
    prints the same way and returns 1. A ``--t2t_usr_dir`` whose own code raised on import
    prints one line naming it, then the traceback of that code, and returns 1. Output
    piped to a reader that has gone (``| head``) ends quietly with ``SIGPIPE_STATUS``, as
    other Unix tools do."""
    try:
        body()
        sys.stdout.flush()  # a reader that has gone shows here, not at interpreter exit
    except BrokenPipeError:
        return closed_stdout_status()
    except user_error_types() as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except failure_types as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except Exception as error:
        from t2t_lite.usr_dir import UsrDirImportError, format_usr_dir_error
        if not isinstance(error, UsrDirImportError):
            raise
        print(format_usr_dir_error(error), file=sys.stderr)
        return 1
    return 0


SIGPIPE_STATUS = 128 + 13  # what a shell reports for a tool killed by SIGPIPE


def closed_stdout_status() -> int:
    """Ends quietly after stdout's reader has gone: points stdout at ``/dev/null`` so that
    the interpreter's final flush prints nothing, and returns ``SIGPIPE_STATUS``."""
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout has no file descriptor (a test's capture)
        pass
    finally:
        os.close(devnull)
    return SIGPIPE_STATUS
