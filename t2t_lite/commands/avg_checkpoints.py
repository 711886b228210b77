"""``t2t-lite-avg-checkpoints``: average a run's checkpoints into one checkpoint.

    t2t-lite-avg-checkpoints --output_dir=runs/base                  # the run's last 5 (base)
    t2t-lite-avg-checkpoints --output_dir=RUN --num_last_checkpoints=20 --output_path=RUN/avg20/ckpt
    t2t-lite-avg-checkpoints --output_dir=RUN --checkpoints=RUN/ckpt-8,RUN/ckpt-9

``--num_last_checkpoints`` defaults to the run's ``hparams.average_checkpoints`` (the
paper's 5 for base, 20 for big); with fewer checkpoints kept, all are averaged and a
warning says so. The result (default ``OUTPUT_DIR/averaged/ckpt-avg``) is a checkpoint of
the model alone; decode or export it with ``--checkpoint_path=PATH``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from t2t_lite.commands.common import command_parser, run_command
from t2t_lite.flag_fields import positive_int

DEFAULT_OUTPUT = Path("averaged") / "ckpt-avg"


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("t2t-lite-avg-checkpoints", __doc__, run_dir=True)
    parser.add_argument("--output_dir", help="run directory written by t2t-lite-trainer")
    parser.add_argument("--num_last_checkpoints", type=positive_int, default=None,
                        help="average the newest N checkpoints (default: the run's "
                             "hparams.average_checkpoints)")
    parser.add_argument("--checkpoints", default=None, metavar="RUN/ckpt-A,RUN/ckpt-B,...",
                        help="comma-separated checkpoint prefixes to average instead")
    parser.add_argument("--output_path", default="",
                        help=f"checkpoint prefix to write (default: "
                             f"OUTPUT_DIR/{DEFAULT_OUTPUT.as_posix()})")
    return parser


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--checkpoints`` and ``--num_last_checkpoints`` exclude each other; a
    ``--checkpoints`` given must name at least one (an empty shell glob or variable is not
    taken to mean the default last N)."""
    if args.checkpoints is None:
        return
    if args.num_last_checkpoints:
        parser.error("give --checkpoints or --num_last_checkpoints, not both")
    if not args.checkpoints.strip():
        parser.error(f"--checkpoints={args.checkpoints!r} names no checkpoint: list them as "
                     f"RUN/ckpt-A,RUN/ckpt-B, or leave the flag out to average the run's last N")


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(build_parser(), argv, run, required=("output_dir",), check=check_flags,
                       before_tensorflow=check_run_dir, failure_types=failure_types)


def failure_types() -> tuple:
    """A full disk while writing: one ``error:`` line, exit status 1, nothing left."""
    from t2t_lite.runs.averaging import AveragingWriteError
    return (AveragingWriteError,)


def check_run_dir(args: argparse.Namespace) -> None:
    """Before TensorFlow starts: the ``--t2t_usr_dir`` the run recorded (if any) is still
    there, ``--checkpoints`` has no empty item, and the averaged checkpoint's directory can
    be written (or created)."""
    from t2t_lite.runs.ensemble_members import split_items
    from t2t_lite.user_paths import creatable_dir
    from t2t_lite.usr_dir import check_run_usr_dir
    check_run_usr_dir(args.output_dir, args.t2t_usr_dir)
    if args.checkpoints is not None:
        split_items(args.checkpoints, "--checkpoints")
    if args.output_path:
        creatable_dir(Path(args.output_path).parent, "--output_path")
    else:
        creatable_dir(Path(args.output_dir) / DEFAULT_OUTPUT.parent, "--output_dir")


def run(args: argparse.Namespace) -> str:
    from t2t_lite.runs.averaging import average_checkpoints, last_checkpoints
    from t2t_lite.runs.config import RunConfig
    from t2t_lite.runs.ensemble_members import split_items
    from t2t_lite.usr_dir import import_run_usr_dir

    import_run_usr_dir(args.output_dir, args.t2t_usr_dir)
    if args.checkpoints is not None:
        checkpoints = split_items(args.checkpoints, "--checkpoints")
    else:
        count = args.num_last_checkpoints
        if count is None:
            count = RunConfig.load(args.output_dir).resolved_hparams().average_checkpoints
        checkpoints = last_checkpoints(args.output_dir, count)
        if len(checkpoints) < count:
            print(f"warning: {args.output_dir} keeps {len(checkpoints)} checkpoint(s), fewer "
                  f"than the {count} asked for; averaging those", file=sys.stderr)
    output_path = args.output_path or str(Path(args.output_dir) / DEFAULT_OUTPUT)
    written = average_checkpoints(args.output_dir, checkpoints, output_path)
    print(f"averaged {len(checkpoints)} checkpoint(s): {', '.join(checkpoints)}")
    print(f"wrote {written}; decode it with --checkpoint_path={written}")
    return written


if __name__ == "__main__":
    sys.exit(main())
