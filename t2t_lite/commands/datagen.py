"""t2t-lite-datagen: raw corpora -> vocabulary + shuffled TFRecord shards.

    t2t-lite-datagen --problem=translate_ende_multi30k --tmp_dir=RAW --data_dir=OUT

Missing raw files are downloaded into ``--tmp_dir`` (default ``DATA_DIR/raw``, as for
``t2t-lite-trainer --generate_data``) when the network is reachable; otherwise the files
already there are used, and when some are missing the error lists each expected file
with its URL. Re-running reuses complete output without reading the raw files (offline
too). A ``--data_source`` the problem does not declare is one error naming the valid one.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from t2t_lite.commands.common import command_parser, run_command
from t2t_lite.data.tfds_source import DATA_SOURCE_HELP, DATA_SOURCES, TFDS_DATA_DIR_HELP
from t2t_lite.errors import UserError
from t2t_lite.flag_fields import positive_int
from t2t_lite.registry import PROBLEMS
from t2t_lite.user_paths import creatable_dir, existing_or_new_dir
from t2t_lite.usr_dir import import_usr_dir

__all__ = ["generate", "main"]


def __getattr__(name: str):
    """``generate`` stays importable from here; TensorFlow is imported on first use, not
    for ``--help``."""
    if name == "generate":
        from t2t_lite.data.datagen import generate
        return generate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("t2t-lite-datagen", __doc__)
    parser.add_argument("--problem", help="registered problem name")
    parser.add_argument("--data_dir", help="where vocabulary and shards go")
    parser.add_argument("--tmp_dir", default=None,
                        help="raw files (downloaded here, or put here by hand); "
                             "default: <data_dir>/raw")
    parser.add_argument("--no_download", action="store_true",
                        help="never try the network; use only the files in --tmp_dir")
    parser.add_argument("--data_source", choices=DATA_SOURCES, default="raw",
                        help=DATA_SOURCE_HELP)
    parser.add_argument("--tfds_data_dir", default=None, help=TFDS_DATA_DIR_HELP)
    parser.add_argument("--num_workers", type=positive_int, default=None,
                        help="processes encoding text into ids (default: one per CPU core; "
                             "a split of up to 100,000 pairs is encoded in this process); "
                             "the output does not depend on it")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(build_parser(), argv, run, required=("problem", "data_dir"),
                       before_tensorflow=check_before_tensorflow,
                       failure_types=lambda: (DiskFullError,))


class DiskFullError(RuntimeError):
    """The disk filled up while datagen wrote; what it was writing was removed."""


def check_before_tensorflow(args: argparse.Namespace) -> None:
    """The flags and paths that need no TensorFlow, checked before it starts (one error
    line at once): ``--data_dir`` can be made, ``--tmp_dir`` is no file, and
    ``--tfds_data_dir`` comes with ``--data_source=tfds``. Creates nothing."""
    creatable_dir(args.data_dir, "--data_dir")
    if args.tmp_dir:
        existing_or_new_dir(args.tmp_dir, "--tmp_dir")
    if args.tfds_data_dir and args.data_source != "tfds":
        raise UserError(f"--tfds_data_dir={args.tfds_data_dir} is only read with "
                        f"--data_source=tfds; add that flag or drop this one")


def run(args: argparse.Namespace) -> None:
    """Generates the data for parsed flags and prints the summary; user errors raise."""
    import_usr_dir(args.t2t_usr_dir)
    from t2t_lite.data.datagen import (DatagenSummary, check_data_source, default_tmp_dir,
                                       generate_problem_data)
    problem = PROBLEMS.get(args.problem)()  # an unknown name lists the registered ones
    check_data_source(problem, args.data_source)
    tmp_dir = args.tmp_dir or default_tmp_dir(problem, args.data_dir)
    # --data_dir was checked before TensorFlow (creatable_dir); generate_problem_data
    # makes it, and removes it again if it fails before writing anything.
    # Not created here: a problem that downloads creates it (fetch_raw_files), and one
    # that reads a folder itself (parsing) reports a wrong path as "no such directory".
    existing_or_new_dir(tmp_dir, "--tmp_dir" if args.tmp_dir else "--data_dir")
    try:
        summary: DatagenSummary = generate_problem_data(problem, args.data_dir, tmp_dir,
                                                        download=not args.no_download,
                                                        data_source=args.data_source,
                                                        tfds_data_dir=args.tfds_data_dir,
                                                        workers=args.num_workers)
    except Exception as error:
        if not is_disk_full(error):
            raise
        raise DiskFullError(f"no space left on device while writing --data_dir="
                            f"{args.data_dir}; the file being written was removed, complete "
                            f"splits are kept. Free space on that disk and re-run: it goes "
                            f"on from there") from None
    print(summary.format())


def is_disk_full(error: BaseException) -> bool:
    """``OSError(ENOSPC)``, or TensorFlow's error of a write that found the disk full."""
    import errno
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC
    return "No space left on device" in str(error) and \
        type(error).__module__.startswith("tensorflow")


if __name__ == "__main__":
    sys.exit(main())
