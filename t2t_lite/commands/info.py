"""``t2t-lite-info``: the resolved hparams and the parameter counts of a model.

    t2t-lite-info --hparams_set=transformer_base --hparams='num_heads=4' --vocab_size=37000
    t2t-lite-info --registry_help

Prints the hparams as JSON, a table of parameter counts (embedding, encoder, decoder,
total; tied embeddings counted once) and, last, ``total_params: N``. An unknown name or a
bad override prints the message and exits with status 2.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from t2t_lite import registry
from t2t_lite.commands.common import command_parser, run_command
from t2t_lite.errors import UserError
from t2t_lite.usr_dir import import_usr_dir


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("t2t-lite-info", __doc__)
    parser.add_argument("--hparams_set", default="transformer_base",
                        help="registered hparams set (see --registry_help)")
    parser.add_argument("--hparams", default="",
                        help="overrides, e.g. 'num_heads=4,label_smoothing=0.2'")
    parser.add_argument("--vocab_size", type=int, default=37000,
                        help="vocabulary size (the paper's EN-DE shared BPE: 37000)")
    parser.add_argument("--model", default="transformer", help="registered model")
    return parser


def format_counts(counts) -> str:
    width = max(len(f"{value:,}") for value in counts.values())
    lines = [f"{'part':<10} {'params':>{width}}"]
    lines += [f"{name:<10} {value:>{width},}" for name, value in counts.items()]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(build_parser(), argv, show)


def show(args: argparse.Namespace) -> None:
    """Prints the resolved hparams and the parameter counts; user errors raise."""
    import_usr_dir(args.t2t_usr_dir)
    if args.vocab_size < 2:
        raise UserError(f"--vocab_size must be >= 2, got {args.vocab_size}")
    hparams = registry.hparams(args.hparams_set, args.hparams)
    registry.MODELS.get(args.model)
    from t2t_lite.models.parameters import build_shapes_only, parameter_counts
    model = build_shapes_only(hparams, args.vocab_size, args.model)
    counts = parameter_counts(model)
    print(hparams.to_json())
    print(f"model: {args.model}  hparams_set: {args.hparams_set}  vocab_size: {args.vocab_size}")
    print(format_counts(counts))
    print(f"total_params: {counts['total']}")


if __name__ == "__main__":
    sys.exit(main())
