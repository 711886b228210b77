"""``t2t-lite-exporter``: a SavedModel that translates raw strings, decode hparams baked in.

    t2t-lite-exporter --output_dir=runs/numbers_tiny --export_dir=exports/numbers_tiny
    t2t-lite-exporter --output_dir=RUN --checkpoint_path=RUN/averaged/ckpt-avg \\
        --export_dir=DIR --decode_hparams="beam_size=4,alpha=0.6,extra_length=50"

The ``serving_default`` signature takes ``sentences`` (``tf.string [n]``) and returns
``translations`` (``tf.string [n]``) and ``scores`` (``float32 [n]``); see
``t2t_lite.runs.export``. Without ``--checkpoint_path`` it exports the run's latest
checkpoint or, when that is damaged, the newest readable one, with a warning (as
``t2t-lite-decoder`` does). Decode hparams start from the problem's defaults, as in
``t2t-lite-decoder`` (``batch_size`` does not apply: a caller's batch is decoded whole).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from t2t_lite.commands.common import add_usr_dir_flag, run_reporting_errors


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="t2t-lite-exporter",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True,
                        help="run directory written by t2t-lite-trainer")
    parser.add_argument("--export_dir", required=True,
                        help="new (or empty) directory for the SavedModel")
    parser.add_argument("--checkpoint_path", default="",
                        help="checkpoint prefix (e.g. one written by "
                             "t2t-lite-avg-checkpoints); default: the run's latest")
    parser.add_argument("--decode_hparams", default="",
                        help="e.g. 'beam_size=4,alpha=0.6,extra_length=50,"
                             "max_input_length=0,return_beams=false'")
    add_usr_dir_flag(parser, run_dir=True)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    return run_reporting_errors(lambda: run(args))


def run(args: argparse.Namespace):
    from t2t_lite.decoding import parse
    from t2t_lite.runs.export import export_translator
    from t2t_lite.runs.loading import load_trained_run

    from t2t_lite.user_paths import new_output_dir
    from t2t_lite.usr_dir import import_run_usr_dir

    created = not os.path.exists(args.export_dir)
    new_output_dir(args.export_dir, "--export_dir")  # before the long work
    try:
        import_run_usr_dir(args.output_dir, args.t2t_usr_dir)
        # The checkpoint is resolved once, as the decoder does: a named one must be
        # readable; the default (the latest) falls back past damaged ones with a warning.
        run = load_trained_run(args.output_dir, args.checkpoint_path or None)
        hp = parse(args.decode_hparams, run.problem.decode_defaults)
        path = export_translator(run.model, run.vocabulary, hp, args.export_dir,
                                 info={"problem": run.run_config.problem,
                                       "model": run.run_config.model,
                                       "hparams_set": run.run_config.hparams_set,
                                       "checkpoint": run.checkpoint},
                                 constraint=run.problem.decode_constraint(run.vocabulary))
    except BaseException:
        if created and os.path.isdir(args.export_dir) and not os.listdir(args.export_dir):
            os.rmdir(args.export_dir)  # the check above made it; a failure leaves nothing
        raise
    print(f"exported {run.checkpoint} to {path} [{hp.to_string()}]")
    return path


if __name__ == "__main__":
    sys.exit(main())
