"""Profile: where ``benchmark.py decode``'s translation spends its time, by op type.

Run with the repository installed (``pip install -e .``)::

    python scripts/profile_decode.py [--quantize=int8] [--jit_compile] [--top=30]
        [benchmark.py decode's model and work flags: --hparams_set, --batch, ...]
    ONEDNN_VERBOSE=1 python scripts/profile_decode.py --quantize=int8 > onednn.log
    python scripts/profile_decode.py --onednn_log=onednn.log [--runs=3] [--top=25]

Builds ``benchmark.py decode``'s work (the decoder's ``Translator``; by default base
dimensions, V = 37,000, 32 sentences x 24 source tokens, beam 4, every hypothesis 30
tokens; oneDNN's ops on, as in the decoder), runs it twice, then once under the TensorFlow
profiler, and prints the profiled run's wall time and the ``--top`` op types by summed
duration on the host, with their call counts. The sums can exceed the wall time:
TensorFlow runs independent ops side by side. Under ``--jit_compile`` the search is one
XLA cluster, so only the profile without XLA breaks down by op.

``--onednn_log=LOG`` instead sums a oneDNN verbose log (with ``ONEDNN_VERBOSE=1`` oneDNN
prints one ``onednn_verbose,...,exec,cpu,KIND,IMPLEMENTATION,...,SHAPE,MILLISECONDS`` line
per primitive it runs) by kind, implementation and shape, divided by ``--runs`` (this
script runs its work 3 times): the totals by kind and implementation, then the ``--top``
rows: ms per run, calls per run, ms per call, kind, implementation, shape. Times of small
primitives include waiting for other threads, so they are upper bounds.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import tempfile
import time
from typing import Dict, Iterable, Tuple

import benchmark
from t2t_lite.flag_fields import positive_int  # no TensorFlow

NOT_OPS = ("Process", "Run")   # the executor's own events, around every op


def op_times(logdir: str):
    """(seconds, calls) per op type, summed over the host events of the trace in logdir."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0],
              "rb") as trace:
        space.ParseFromString(trace.read())
    seconds, calls = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name:                  # ops are "op_name:OpType"
                    continue
                op_type = name.rsplit(":", 1)[1]
                if (op_type.isidentifier() and not op_type.startswith("__")
                        and op_type not in NOT_OPS):
                    seconds[op_type] += event.duration_ps / 1e12
                    calls[op_type] += 1
    return seconds, calls


def summarize_onednn(lines: Iterable[str]) -> Dict[Tuple[str, str, str], Tuple[float, int]]:
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


def print_onednn_summary(parser: argparse.ArgumentParser, log_path: str, runs: int,
                         top: int) -> None:
    try:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            totals = summarize_onednn(log)
    except OSError as error:
        parser.error(f"--onednn_log={log_path}: {error.strerror}; give the file the "
                     f"verbose log was written to")
    if not totals:
        parser.error(f"--onednn_log={log_path} holds no oneDNN 'exec' line; write it with "
                     f"ONEDNN_VERBOSE=1 in the environment")
    everything = sum(total for total, _ in totals.values()) / runs
    print(f"oneDNN primitives: {everything:.1f} ms per run over {runs} run(s)")
    by_implementation: Dict[Tuple[str, str], list] = collections.defaultdict(lambda: [0.0, 0])
    for (kind, implementation, _), (total, calls) in totals.items():
        by_implementation[(kind, implementation)][0] += total
        by_implementation[(kind, implementation)][1] += calls
    for (kind, implementation), (total, calls) in sorted(by_implementation.items(),
                                                         key=lambda item: -item[1][0]):
        print(f"{total / runs:9.1f} ms {calls / runs:8.1f} calls "
              f"{total / calls:7.3f} ms/call  {kind} {implementation} (all shapes)")
    rows = sorted(totals.items(), key=lambda item: -item[1][0])
    for (kind, implementation, shape), (total, calls) in rows[:top]:
        print(f"{total / runs:9.1f} ms {calls / runs:8.1f} calls "
              f"{total / calls:7.3f} ms/call  {kind} {implementation} {shape}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=positive_int, default=30)
    parser.add_argument("--onednn_log", default="",
                        help="sum this oneDNN verbose log instead of profiling")
    parser.add_argument("--runs", type=positive_int, default=3,
                        help="with --onednn_log: how many runs of the work the log holds")
    benchmark.add_model_flags(parser)
    benchmark.add_jit_flag(parser)
    benchmark.add_decode_work_flags(parser)
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.onednn_log:
        print_onednn_summary(parser, args.onednn_log, args.runs, args.top)
        return
    hparams = benchmark.checked_hparams(parser, args.hparams_set, args.hparams)
    benchmark.check_decode_work(parser, args, hparams)
    args.mode = "decode"
    tf = benchmark.setup_tf(args)
    print(f"profile: quantize={args.quantize} {benchmark.describe(args, tf)}", flush=True)
    run = benchmark.make_decode(args, hparams)
    run()
    run()
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
        tf.profiler.experimental.stop()
        seconds, calls = op_times(logdir)
    print(f"profiled search: {wall:.3f} s")
    for op_type, total in seconds.most_common(args.top):
        print(f"{op_type:48s} {total:8.3f} s {calls[op_type]:7d} calls")


if __name__ == "__main__":
    main()
