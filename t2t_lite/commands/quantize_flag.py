"""``--quantize``: int8 inference for the decoder, the exporter and the benchmark.

``--quantize=int8`` stores the model's matmul weights as int8 and quantizes activations at
run time, each row alone (``t2t_lite.layers.int8``), so a sentence translates the same
whatever else is in its batch; ``none`` (the default) decodes in float32. Nothing here
imports TensorFlow: ``prepare_quantize`` and ``prepare_decoder_command`` must run before it
is imported, because they turn on oneDNN's ops (``TF_ENABLE_ONEDNN_OPTS=1``, unless the
environment already sets it), which hold the fast int8 matmul and, for the decoder, a
faster float32 matmul than TensorFlow's default on CPUs where TensorFlow leaves oneDNN off."""
from __future__ import annotations

import argparse
import os
import sys

QUANTIZE_CHOICES = ("none", "int8")


def add_quantize_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quantize", default="none", metavar="|".join(QUANTIZE_CHOICES),
                        help="int8: int8 weights and activations (quantized per row) in "
                             "every matmul, faster on CPUs; none: float32")


def check_quantize(value: str) -> str:
    """The ``--quantize`` value, or a ``UserError`` naming the valid ones."""
    if value not in QUANTIZE_CHOICES:
        from t2t_lite.errors import UserError
        raise UserError(f"--quantize={value} is not supported; use --quantize=int8 or "
                        f"--quantize=none")
    return value


def prepare_quantize(value: str) -> str:
    """Checks ``value``; for int8, turns on oneDNN's ops if TensorFlow is not imported yet
    and ``TF_ENABLE_ONEDNN_OPTS`` is unset. Returns the value."""
    check_quantize(value)
    if value == "int8":
        use_onednn_ops()
    return value


def use_onednn_ops() -> None:
    """``TF_ENABLE_ONEDNN_OPTS=1`` unless the environment sets it (``0`` opts out) or
    TensorFlow is already imported (then it is too late to change)."""
    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def prepare_run_dir_command(args: argparse.Namespace) -> None:
    """What the decoder and the exporter check before TensorFlow is imported (their
    ``run_command(before_tensorflow=)``): that ``--output_dir`` is a run directory whose
    recorded ``--t2t_usr_dir`` (if any) is still there, ``--quantize``, and the names and
    values of ``--decode_hparams`` (against the generic defaults; the problem's come with
    the run). A mistake is one ``error:`` line at once, not after TensorFlow's start-up."""
    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.runs.config import RunConfig
    from t2t_lite.usr_dir import check_run_usr_dir
    RunConfig.load(args.output_dir)
    check_run_usr_dir(args.output_dir, args.t2t_usr_dir)
    prepare_quantize(args.quantize)
    parse_decode_hparams(args.decode_hparams)


def prepare_decoder_command(args: argparse.Namespace) -> None:
    """``prepare_run_dir_command``, and oneDNN's ops for float32 decoding too (its faster
    float32 matmul); ``TF_ENABLE_ONEDNN_OPTS=0`` in the environment keeps them off."""
    prepare_run_dir_command(args)
    use_onednn_ops()
