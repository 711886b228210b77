"""``t2t-lite-evalb``: EVALB's scores of a decoded parse file, and EVALB's input files.

    t2t-lite-evalb --reference=wsj23.gold.mrg --parsed=wsj23.parsed \\
        --write_gold=wsj23.evalb.gold --write_test=wsj23.evalb.test
    evalb -p COLLINS.prm wsj23.evalb.gold wsj23.evalb.test      # EVALB itself agrees

``--reference``: the gold trees (a ``.mrg`` file, a file of one tree a line such as the
``DATA_DIR/<problem>-test.gold.txt`` that datagen writes, or a folder of ``.mrg``
files). ``--parsed``: one tree a line, as ``t2t-lite-decoder`` writes them for a parsing
problem (dummy tags ``XX``; an empty line is skipped, as EVALB skips it). The gold file
is the reference trees under a ``TOP`` root; the test file is each parsed tree with the
gold tags put back on its words, under a ``TOP`` root. The scores printed are those of
``evalb -p COLLINS.prm`` on these two files: sentences EVALB rejects ("Length
unmatch", "Words unmatch") are printed as EVALB prints them and counted as errors.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from t2t_lite.commands.common import command_parser, run_command
from t2t_lite.usr_dir import import_usr_dir


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("t2t-lite-evalb", __doc__, tensorflow=False)
    parser.add_argument("--reference",
                        help="gold trees: a .mrg file, a file of one tree a line, or a "
                             "folder of .mrg files")
    parser.add_argument("--parsed",
                        help="decoded trees, one a line (t2t-lite-decoder's output)")
    parser.add_argument("--write_gold", default="",
                        help="write EVALB's gold file here (one (TOP ...) tree a line)")
    parser.add_argument("--write_test", default="",
                        help="write EVALB's test file here (gold tags on the parsed words)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(build_parser(), argv, run, required=("reference", "parsed"),
                       tensorflow=False)


def run(args: argparse.Namespace) -> None:
    """Scores (and writes) for parsed flags; user errors raise."""
    from t2t_lite.errors import UserError
    from t2t_lite.parsing.evalb import EvalbResult, score_sentences
    from t2t_lite.parsing.evalb_files import (evalb_trees, read_gold_trees, read_test_trees,
                                              write_evalb_files)

    import_usr_dir(args.t2t_usr_dir)  # accepted on every command; evalb uses no registry
    if bool(args.write_gold) != bool(args.write_test):
        raise UserError("--write_gold and --write_test go together (EVALB reads both)")
    gold = read_gold_trees(args.reference)
    parsed = read_test_trees(args.parsed)
    if len(gold) != len(parsed):
        raise UserError(f"--reference={args.reference} holds {len(gold)} trees but "
                        f"--parsed={args.parsed} has {len(parsed)} lines; they must align "
                        f"line by line")
    if args.write_gold:
        gold_lines, test_lines = write_evalb_files(gold, parsed, args.write_gold,
                                                   args.write_test)
    else:
        gold_lines, test_lines = evalb_trees(gold, parsed)
    scores = score_sentences(gold_lines, test_lines, tags="own")
    for score in scores:
        if score.status == 1:
            print(f"{score.number} : {score.message}", file=sys.stderr)
    print(EvalbResult.from_scores(scores).summary())


if __name__ == "__main__":
    sys.exit(main())
