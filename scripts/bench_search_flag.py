"""Benchmark: the search with one of its options on and off, A/B on the same weights.

    python scripts/bench_search_flag.py --option=expand_after_first_step [--quantize=int8]
        [--jit_compile] [--rounds=9]

Times ``scripts/benchmark.py decode``'s search (its work by default: base dimensions,
V = 37,000, 32 sentences x 24 source tokens, beam 4, 30 forced target tokens,
encoder-decoder keys and values once per sentence) built twice on the same random
weights, once with ``--option`` off and once on, interleaved ``--rounds`` times after
one untimed round, and prints each one's median wall and process CPU seconds, the
speed-up of ``on``, and whether the two searches returned the same ids and scores.

Options: ``expand_after_first_step`` (step 0 on one row per sentence, the beams tiled
after it), ``memory_per_sentence`` (encoder-decoder keys and values once per sentence
instead of tiled to the beams and reordered), ``log_probs_from_softmax`` (each
hypothesis's best tokens from the softmax, the log of those alone, instead of
``log_softmax`` over the vocabulary) and, with ``--quantize=int8``, ``activation_scales``
(on: the sublayers' inputs quantized per tensor, oneDNN rescaling inside the product;
off: every input per row) and ``activation_scales_tensor`` (on: every input per tensor;
off: the sublayers' inputs alone, the default).
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)

# --option -> (the make_decode argument it sets, its value off, its value on).
OPTIONS = {"expand_after_first_step": ("expand_after_first_step", False, True),
           "memory_per_sentence": ("memory_per_sentence", False, True),
           "log_probs_from_softmax": ("log_probs_from_softmax", False, True),
           "activation_scales": ("int8_activation_scales", "row", "mixed"),
           "activation_scales_tensor": ("int8_activation_scales", "mixed", "tensor")}


def main(argv=None) -> None:
    import benchmark
    from t2t_lite.flag_fields import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--option", required=True, choices=sorted(OPTIONS))
    parser.add_argument("--rounds", type=positive_int, default=9)
    benchmark.add_search_variant_flags(parser)
    parsed = parser.parse_args(argv)
    if parsed.option.startswith("activation_scales") and parsed.quantize != "int8":
        parser.error(f"--option={parsed.option} compares int8 activations; add "
                     "--quantize=int8")
    hparams, args, tf = benchmark.setup_search(parser, parsed)
    import keras
    import numpy as np
    print(f"{parsed.option} A/B: quantize={parsed.quantize} {benchmark.describe(args, tf)}",
          flush=True)
    runs, outputs = {}, {}
    for state in ("off", "on"):
        variant = copy.copy(args)
        attribute, off, on = OPTIONS[parsed.option]
        setattr(variant, attribute, on if state == "on" else off)
        keras.utils.set_random_seed(0)
        runs[state] = benchmark.make_decode(variant, hparams)
        outputs[state] = runs[state]()            # the untimed round: traces it
    median = benchmark.interleaved_wall_and_cpu(runs, parsed.rounds)
    for state in ("off", "on"):
        print(f"{parsed.option} {state}: {median[state][0]:.3f} s wall, "
              f"{median[state][1]:.3f} s CPU (median of {parsed.rounds})")
    same_ids = np.array_equal(outputs["off"][0], outputs["on"][0])
    score_diff = float(np.max(np.abs(outputs["off"][1] - outputs["on"][1])))
    print(f"speed-up of {parsed.option}: {median['off'][0] / median['on'][0]:.3f}x wall, "
          f"{median['off'][1] / median['on'][1]:.3f}x CPU; same ids: {same_ids}, "
          f"largest score difference: {score_diff:.3g}")


if __name__ == "__main__":
    main()
