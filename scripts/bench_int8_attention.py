"""Benchmark: int8 decoding with the self-attention cache in float32 against bfloat16.

    python scripts/bench_int8_attention.py [--rounds=9]

``t2t_lite.layers.int8.quantize_model`` keeps the self-attention cache (each step's keys
and values) and the two attention products over it in bfloat16 where oneDNN's ops are on
and the CPU has bfloat16 arithmetic. This script times ``scripts/benchmark.py decode``'s
int8 search (base dimensions, V = 37,000, 32 sentences x 24 source tokens, beam 4, 30
forced target tokens, no XLA) built twice on the same random weights, once with each
attention dtype, interleaved ``--rounds`` times after one untimed round, and prints each
one's median wall and process CPU seconds, the speed-up of bfloat16, and the share of
output ids the two searches agree on (bfloat16 rounds the attention differently, so a
random-weight model's near-ties can go either way).
"""
from __future__ import annotations

import copy
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)

DTYPES = ("float32", "bfloat16")


def main(argv=None) -> None:
    import benchmark
    parsed, hparams, args, tf = benchmark.int8_search_ab_setup(__doc__.splitlines()[0], 9,
                                                               argv)
    import keras
    import numpy as np
    print(f"int8 attention dtype A/B: {benchmark.describe(args, tf)}", flush=True)
    runs, ids = {}, {}
    for dtype in DTYPES:
        variant = copy.copy(args)
        variant.int8_attention = dtype
        keras.utils.set_random_seed(0)
        runs[dtype] = benchmark.make_decode(variant, hparams)
        ids[dtype] = runs[dtype]()[0]        # the untimed round: traces it
    median = benchmark.interleaved_wall_and_cpu(runs, parsed.rounds)
    for dtype in DTYPES:
        print(f"{dtype}: {median[dtype][0]:.3f} s wall, {median[dtype][1]:.3f} s CPU "
              f"(median of {parsed.rounds})")
    print(f"bfloat16 speed-up: {median['float32'][0] / median['bfloat16'][0]:.3f}x wall, "
          f"{median['float32'][1] / median['bfloat16'][1]:.3f}x CPU; same ids: "
          f"{float(np.mean(ids['float32'] == ids['bfloat16'])):.3f}")


if __name__ == "__main__":
    main()
