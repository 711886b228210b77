"""``t2t-lite-exporter``: a SavedModel that translates raw strings, decode hparams baked in.

    t2t-lite-exporter --output_dir=runs/numbers_tiny --export_dir=exports/numbers_tiny
    t2t-lite-exporter --output_dir=RUN --checkpoint_path=RUN/averaged/ckpt-avg \\
        --export_dir=DIR --decode_hparams="beam_size=4,alpha=0.6,extra_length=50"

The ``serving_default`` signature takes ``sentences`` (``tf.string [n]``) and returns
``translations`` (``tf.string [n]``) and ``scores`` (``float32 [n]``); with
``sampling_method=random`` it samples, with an optional per-sentence ``seed`` input
(``int64 [n]``). The ``score`` signature takes aligned ``sources`` and ``targets``
(``tf.string [n]``) and returns ``log_probs`` and ``scores`` as ``t2t-lite-decoder
--score_file`` computes them; see ``t2t_lite.runs.export``. Without ``--checkpoint_path`` it exports the run's latest
checkpoint or, when that is damaged, the newest readable one, with a warning (as
``t2t-lite-decoder`` does). Decode hparams start from the problem's defaults, as in
``t2t-lite-decoder`` (``batch_size`` does not apply: a caller's batch is decoded whole).

``--quantize=int8`` exports int8 matmuls (activations quantized per row, so a sentence's
translation does not depend on the other sentences of a call) with float32
self-attention: an export loads and translates the same with ``TF_ENABLE_ONEDNN_OPTS`` set
to 0 or 1 (``t2t_lite.layers.int8``).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from t2t_lite.commands.common import command_parser, run_command
from t2t_lite.commands.quantize_flag import add_quantize_flag, prepare_run_dir_command
from t2t_lite.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("t2t-lite-exporter", __doc__, run_dir=True)
    parser.add_argument("--output_dir", help="run directory written by t2t-lite-trainer")
    parser.add_argument("--export_dir", help="new (or empty) directory for the SavedModel")
    parser.add_argument("--checkpoint_path", default="",
                        help="checkpoint prefix (e.g. one written by "
                             "t2t-lite-avg-checkpoints) or RUN/best (the best dev score's "
                             "model the trainer kept); default: the run's latest")
    parser.add_argument("--decode_hparams", default="",
                        help="over the run's defaults (the problem's, then its hparams "
                             "set's decode_beam_size and decode_alpha), e.g. "
                             "'beam_size=4,alpha=0.6,extra_length=50,"
                             "max_input_length=0,return_beams=false'")
    add_quantize_flag(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(build_parser(), argv, run, required=("output_dir", "export_dir"),
                       before_tensorflow=check_before_tensorflow)


def check_before_tensorflow(args: argparse.Namespace) -> None:
    """What needs no TensorFlow, checked before it starts (one error line at once):
    ``prepare_run_dir_command`` (run directory, ``--quantize``, ``--decode_hparams``) and
    that ``--export_dir`` can be made (new or empty, no file in the way, writable).
    Creates nothing."""
    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.user_paths import creatable_new_dir
    prepare_run_dir_command(args)
    if parse_decode_hparams(args.decode_hparams).mbr:
        raise UserError("--decode_hparams=mbr=true reranks with sacreBLEU in Python, which a "
                        "SavedModel cannot run: drop mbr, or export with return_beams=true "
                        "and rerank the beams outside")
    creatable_new_dir(args.export_dir, "--export_dir")


def run(args: argparse.Namespace):
    from t2t_lite.decoding import parse_decode_hparams
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
        hp = parse_decode_hparams(args.decode_hparams, run.problem.decode_defaults,
                                  run.run_config.resolved_hparams())
        info = {"problem": run.run_config.problem, "model": run.run_config.model,
                "hparams_set": run.run_config.hparams_set, "checkpoint": run.checkpoint}
        if args.quantize == "int8":
            from t2t_lite.layers.quantization import quantize_model, quantize_record
            # float32 self-attention: a bfloat16 attention product would round differently
            # with and without oneDNN's ops in the loading process.
            info.update(quantize_record(quantize_model(run.model, attention_dtype="float32")))
        path = export_translator(run.model, run.vocabulary, hp, args.export_dir, info=info,
                                 constraint=run.problem.decode_constraint(run.vocabulary))
    except BaseException:
        if created and os.path.isdir(args.export_dir) and not os.listdir(args.export_dir):
            os.rmdir(args.export_dir)  # the check above made it; a failure leaves nothing
        raise
    print(f"exported {run.checkpoint} to {path} [{hp.to_string()}]")
    return path


if __name__ == "__main__":
    sys.exit(main())
