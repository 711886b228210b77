"""Profile: where one search of ``scripts/benchmark.py decode`` spends its time, by op type.

    python scripts/profile_decode.py [--quantize=int8] [--jit_compile] [--top=30]

Builds the benchmark's search (base dimensions, V = 37,000, 32 sentences x 24 source
tokens, beam 4, every hypothesis forced to 30 tokens; oneDNN's ops on, as in the decoder),
runs it twice, then once under the TensorFlow profiler, and prints the profiled search's
wall time and the ``--top`` op types by summed duration on the host, with their call counts.
The sums can exceed the wall time: TensorFlow runs independent ops side by side. Under
``--jit_compile`` the whole search is one XLA cluster, so only the no-XLA profile breaks
down by op. ``ONEDNN_VERBOSE=1`` in the environment also prints each oneDNN primitive
(its implementation, e.g. ``gemm_s8u8s32:jit``, and any weight reorder).
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)

from t2t_lite.flag_fields import positive_int  # noqa: E402  (no TensorFlow)


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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=positive_int, default=30)
    import benchmark
    benchmark.add_search_variant_flags(parser)
    parsed = parser.parse_args(argv)
    hparams, args, tf = benchmark.setup_search(parser, parsed)
    print(f"profile: quantize={parsed.quantize} {benchmark.describe(args, tf)}", flush=True)
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
    for op_type, total in seconds.most_common(parsed.top):
        print(f"{op_type:48s} {total:8.3f} s {calls[op_type]:7d} calls")


if __name__ == "__main__":
    main()
