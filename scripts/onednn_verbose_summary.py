"""Sums a oneDNN verbose log by primitive: where the time of oneDNN's kernels goes.

    ONEDNN_VERBOSE=1 python scripts/profile_decode.py --quantize=int8 > onednn.log
    python scripts/onednn_verbose_summary.py onednn.log --runs=3 [--top=25]

With ``ONEDNN_VERBOSE=1`` oneDNN prints one line per primitive it executes
(``onednn_verbose,v1,primitive,exec,cpu,KIND,IMPLEMENTATION,...,SHAPE,MILLISECONDS``).
This script adds up the ``exec`` lines' milliseconds by kind, implementation and shape,
divides the totals and call counts by ``--runs`` (``scripts/profile_decode.py`` runs its
search 3 times), and prints the totals by kind and implementation (all shapes), then the
``--top`` rows by time: ms per run, calls per run, ms per call, kind, implementation, shape. Times of small primitives include waiting for the
other threads when other ops run beside them, so they are upper bounds.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Dict, Iterable, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from t2t_lite.flag_fields import positive_int  # noqa: E402


def summarize(lines: Iterable[str]) -> Dict[Tuple[str, str, str], Tuple[float, int]]:
    """{(kind, implementation, shape): (total milliseconds, calls)} over the ``exec``
    lines of a oneDNN verbose log; other lines are skipped."""
    totals: Dict[Tuple[str, str, str], list] = collections.defaultdict(lambda: [0.0, 0])
    for line in lines:
        fields = line.strip().split(",")
        if len(fields) < 8 or fields[0] != "onednn_verbose" or "exec" not in fields[:4]:
            continue
        at = fields.index("exec")
        try:
            milliseconds = float(fields[-1])
        except ValueError:
            continue
        entry = totals[(fields[at + 2], fields[at + 3], fields[-2])]
        entry[0] += milliseconds
        entry[1] += 1
    return {key: (total, calls) for key, (total, calls) in totals.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="a file holding the oneDNN verbose output")
    parser.add_argument("--runs", type=positive_int, default=1,
                        help="how many runs of the work the log holds (per-run figures)")
    parser.add_argument("--top", type=positive_int, default=25)
    parsed = parser.parse_args(argv)
    try:
        with open(parsed.log, encoding="utf-8", errors="replace") as log:
            totals = summarize(log)
    except OSError as error:
        parser.error(f"{parsed.log}: {error.strerror}; give the file the verbose log was "
                     f"written to")
    if not totals:
        parser.error(f"{parsed.log} holds no oneDNN 'exec' line; write it with "
                     f"ONEDNN_VERBOSE=1 in the environment")
    everything = sum(total for total, _ in totals.values()) / parsed.runs
    print(f"oneDNN primitives: {everything:.1f} ms per run over {parsed.runs} run(s)")
    by_implementation: Dict[Tuple[str, str], list] = collections.defaultdict(lambda: [0.0, 0])
    for (kind, implementation, _), (total, calls) in totals.items():
        by_implementation[(kind, implementation)][0] += total
        by_implementation[(kind, implementation)][1] += calls
    for (kind, implementation), (total, calls) in sorted(by_implementation.items(),
                                                         key=lambda item: -item[1][0]):
        print(f"{total / parsed.runs:9.1f} ms {calls / parsed.runs:8.1f} calls "
              f"{total / calls:7.3f} ms/call  {kind} {implementation} (all shapes)")
    rows = sorted(totals.items(), key=lambda item: -item[1][0])
    for (kind, implementation, shape), (total, calls) in rows[:parsed.top]:
        print(f"{total / parsed.runs:9.1f} ms {calls / parsed.runs:8.1f} calls "
              f"{total / calls:7.3f} ms/call  {kind} {implementation} {shape}")


if __name__ == "__main__":
    main()
