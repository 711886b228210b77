"""Parsing run: unconstrained vs constrained search on one source file, side by side.

    python scripts/compare_constrained_parsing.py --output_dir=runs/parsing_tiny \
        --source=data/ptb_sample/parsing_english_ptb_sample-test.source.txt \
        --reference=sample_test.gold.mrg --beam_size=21

For each search (the problem's decode defaults for alpha and extra length): decoding time,
``repaired K of N outputs`` and EVALB F1/P/R against the gold trees; then how many
unconstrained outputs were already well-formed trees over their words and on how many of
those the constrained output is the same.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True, help="a parsing run directory")
    parser.add_argument("--source", required=True, help="one sentence per line")
    parser.add_argument("--reference", required=True, help="gold .mrg trees, in order")
    parser.add_argument("--beam_size", type=int, default=21)
    args = parser.parse_args()

    from t2t_lite.decoding.translator import Translator
    from t2t_lite.metrics.text_metrics import score_texts
    from t2t_lite.parsing.linearize import LinearizationError, delinearize
    from t2t_lite.parsing.linearize import repair_summary
    from t2t_lite.runs.loading import load_trained_model

    _, problem, model, vocabulary = load_trained_model(args.output_dir)
    with open(args.source, encoding="utf-8") as f:
        sources = f.read().splitlines()
    references = problem.read_references(args.reference)
    defaults = problem.decode_defaults
    outputs = {}
    for name, constraint in (("unconstrained", None),
                             ("constrained", problem.decode_constraint(vocabulary))):
        translator = Translator(model, vocabulary, beam_size=args.beam_size,
                                alpha=defaults.get("alpha", 0.3),
                                extra_length=defaults.get("extra_length", 300),
                                constraint=constraint)
        start = time.perf_counter()
        outputs[name] = translator.translate(sources)
        seconds = time.perf_counter() - start
        scores = score_texts(("parse_f1",), outputs[name], references, sources)
        print(f"beam {args.beam_size} {name}: {seconds:.1f} s, "
              f"{repair_summary(sources, outputs[name])}, F1 {scores['parse_f1']:.2f} "
              f"P {scores['parse_precision']:.2f} R {scores['parse_recall']:.2f}", flush=True)

    def is_tree(output, source):
        try:
            delinearize(output.split(), source.split())
        except LinearizationError:
            return False
        return True

    valid = [(free, mine) for free, mine, source in
             zip(outputs["unconstrained"], outputs["constrained"], sources)
             if is_tree(free, source)]
    print(f"unconstrained outputs already valid: {len(valid)}; constrained output the same "
          f"on {sum(free == mine for free, mine in valid)} of them")


if __name__ == "__main__":
    main()
