"""What every command shares: one parser pattern (``command_parser`` with
``--registry_help``, ``--t2t_usr_dir`` and ``--verbosity``; ``run_command`` as ``main``),
a quiet TensorFlow start with one ``devices:`` line (``startup``), and turning known user
errors into one clear line and exit status 2.

Nothing here imports TensorFlow: every command answers ``--help`` without it."""
from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Callable, List, Optional, Sequence

from t2t_lite.commands.startup import (VERBOSITY_HELP, VERBOSITY_LEVELS, devices_line,
                                       start_tensorflow)
from t2t_lite.flag_fields import non_negative_int, positive_int  # noqa: F401 (flag types)
from t2t_lite.usr_dir import check_usr_dir, import_usr_dir


def command_parser(prog: str, doc: str, *, run_dir: bool = False,
                   tensorflow: bool = True) -> argparse.ArgumentParser:
    """Every command's parser: ``doc`` (its module docstring) as description, then the
    flags all commands share: ``--registry_help``, ``--t2t_usr_dir`` (``run_dir``: see
    ``add_usr_dir_flag``) and, for a command that runs TensorFlow, ``--verbosity``."""
    parser = argparse.ArgumentParser(prog=prog, description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry_help", action="store_true",
                        help="list registered models, problems and hparams sets, then exit")
    add_usr_dir_flag(parser, run_dir)
    if tensorflow:
        parser.add_argument("--verbosity", type=int, choices=sorted(VERBOSITY_LEVELS),
                            default=None, help=VERBOSITY_HELP)
    return parser


def run_command(parser: argparse.ArgumentParser, argv: Optional[List[str]],
                body: Callable[[argparse.Namespace], object], *,
                required: Sequence[str] = (),
                check: Optional[Callable[[argparse.ArgumentParser, argparse.Namespace],
                                         None]] = None,
                failure_types: Callable[[], tuple] = tuple,
                tensorflow: bool = True,
                before_tensorflow: Optional[Callable[[argparse.Namespace], None]] = None
                ) -> int:
    """Every command's ``main``: parses ``argv``; ``--registry_help`` prints the
    registries and returns; a missing ``required`` flag, or one ``check`` refuses
    (``parser.error``), is a usage error (exit status 2). With ``tensorflow`` it then
    imports TensorFlow quietly (``startup.start_tensorflow``) and prints the
    ``devices:`` line, unless ``body`` prints its own (``prints_devices``). Last it runs
    ``body(args)`` through ``run_reporting_errors``: an int ``body`` returns is the exit
    status; an exception of ``failure_types()`` (called once TensorFlow is imported, so
    they may be TensorFlow's) prints one ``error:`` line and exits with status 1.
    ``before_tensorflow(args)`` runs first inside that reporting (a ``UserError`` it raises
    is one ``error:`` line), after ``--t2t_usr_dir``'s path is checked: settings that must
    precede ``import tensorflow``, and checks of the user's flags and paths that need no
    TensorFlow (a mistake is then one line at once, not after TensorFlow's start-up)."""
    args = parser.parse_args(argv)
    if args.registry_help:
        return print_registry_help(args.t2t_usr_dir, getattr(args, "verbosity", None))
    require(parser, args, *required)
    if check is not None:
        check(parser, args)

    def run() -> object:
        check_usr_dir(args.t2t_usr_dir)  # a wrong path: one line before TensorFlow starts
        if before_tensorflow is not None:
            before_tensorflow(args)
        if tensorflow:
            gpus = start_tensorflow(args.verbosity)
            if not getattr(body, "prints_devices", False):
                print(devices_line(gpus[:1]), file=sys.stderr, flush=True)
        try:
            return body(args)
        except failure_types() as error:
            raise ExplainedFailure(str(error)) from error
    return run_reporting_errors(run, (ExplainedFailure,), parser.prog)


class ExplainedFailure(Exception):
    """A run that failed for a reason its message explains (``run_command``)."""


def prints_devices(body: Callable) -> Callable:
    """Marks a command body that prints its own ``devices:`` line (the trainer's, from its
    distribution strategy) for ``run_command``."""
    body.prints_devices = True
    return body


def print_registry_help(usr_dir: str = "", verbosity: Optional[int] = None) -> int:
    """Prints the registries (after importing ``--t2t_usr_dir``, so its names show; its
    modules may import TensorFlow or Keras, so TensorFlow is started quietly first)."""
    from t2t_lite import registry

    def body():
        if usr_dir:
            check_usr_dir(usr_dir)
            start_tensorflow(verbosity)
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


def require(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Exits with a usage error naming every required flag that is missing."""
    missing = [f"--{name}" for name in names if getattr(args, name) in (None, "")]
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


def run_reporting_errors(body: Callable[[], object], failure_types: tuple = (),
                         prog: str = "t2t-lite") -> int:
    """Runs ``body`` and returns 0, or the int ``body`` returned; a user error prints
    ``error: ...`` to stderr and returns 2; one of ``failure_types`` (a run that failed
    for a reason it explains, such as a NaN loss) prints the same way and returns 1. A ``--t2t_usr_dir`` whose own code raised on import
    prints one line naming it, then the traceback of that code, and returns 1. Output
    piped to a reader that has gone (``| head``) ends quietly with ``SIGPIPE_STATUS``, as
    other Unix tools do; Ctrl-C (``KeyboardInterrupt``) prints one line and returns
    ``SIGINT_STATUS``."""
    try:
        status = body()
        sys.stdout.flush()  # a reader that has gone shows here, not at interpreter exit
    except BrokenPipeError:
        return closed_stdout_status()
    except KeyboardInterrupt as error:  # Ctrl-C (or ``Terminated``) where nothing is saved
        signum = getattr(error, "signum", 2)
        name = "SIGTERM" if signum == 15 else "SIGINT"
        print(f"{prog}: interrupted ({name}); nothing was saved", file=sys.stderr)
        return 128 + signum
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
    return status if isinstance(status, int) and not isinstance(status, bool) else 0


SIGPIPE_STATUS = 128 + 13  # what a shell reports for a tool killed by SIGPIPE
SIGINT_STATUS = 128 + 2    # what a shell reports for a tool ended by Ctrl-C


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's ``KeyboardInterrupt`` so that ``with`` blocks clean up
    (``sigterm_raises``); ``run_reporting_errors`` reports it and returns 143."""

    signum = 15


@contextlib.contextmanager
def sigterm_raises():
    """Within the block, SIGTERM raises ``Terminated`` in the main thread (temporary
    files are removed on the way out) instead of ending the process at once."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated()
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
