"""``--quantize``: int8 inference for the decoder, the exporter and the benchmark.

``--quantize=int8`` stores the model's matmul weights as int8 and quantizes activations at
run time (``t2t_lite.layers.int8``), with the scales ``--int8_activation_scales`` names;
``none`` (the default) decodes in float32. Nothing here
imports TensorFlow: ``prepare_quantize`` and ``prepare_decoder_command`` must run before it
is imported, because they turn on oneDNN's ops (``TF_ENABLE_ONEDNN_OPTS=1``, unless the
environment already sets it), which hold the fast int8 matmul and, for the decoder, a
faster float32 matmul than TensorFlow's default on CPUs where TensorFlow leaves oneDNN off
(docs/performance.md)."""
from __future__ import annotations

import argparse
import os
import sys

from t2t_lite.layers.int8_scales import ACTIVATION_SCALES, DEFAULT_ACTIVATION_SCALES  # no TF

QUANTIZE_CHOICES = ("none", "int8")


def add_quantize_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quantize", default="none", metavar="|".join(QUANTIZE_CHOICES),
                        help="int8: int8 weights and activations in every matmul (faster "
                             "on CPUs, see docs/decoding.md); none: float32")
    parser.add_argument("--int8_activation_scales", default=None,
                        metavar="|".join(ACTIVATION_SCALES),
                        help="with --quantize=int8: mixed (the default: the sublayers' "
                             "inputs per tensor, the rest per row), row (every input per "
                             "row: a sentence translates the same whatever is batched "
                             "with it, as in float32; measured 2.5%% slower) or tensor "
                             "(every input per tensor: measured 3%% faster, translations "
                             "depend on the batch most); see docs/decoding.md")


def check_quantize(value: str) -> str:
    """The ``--quantize`` value, or a ``UserError`` naming the valid ones."""
    if value not in QUANTIZE_CHOICES:
        from t2t_lite.errors import UserError
        raise UserError(f"--quantize={value} is not supported; use --quantize=int8 or "
                        f"--quantize=none")
    return value


def resolve_activation_scales(args: argparse.Namespace) -> None:
    """Sets ``args.int8_activation_scales`` to the ``--int8_activation_scales`` given, one
    of ``ACTIVATION_SCALES``, or to ``DEFAULT_ACTIVATION_SCALES`` where none was given. A
    value outside them, or any value without ``--quantize=int8`` (it would be ignored), is
    a ``UserError`` naming the fix."""
    from t2t_lite.errors import UserError
    value = args.int8_activation_scales
    if value is None:
        args.int8_activation_scales = DEFAULT_ACTIVATION_SCALES
        return
    if value not in ACTIVATION_SCALES:
        raise UserError(f"--int8_activation_scales={value} is not supported; use one of "
                        f"{', '.join(ACTIVATION_SCALES)}")
    if args.quantize != "int8":
        raise UserError(f"--int8_activation_scales={value} sets int8 decoding's "
                        f"activations; add --quantize=int8 or drop it")


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
    recorded ``--t2t_usr_dir`` (if any) is still there, ``--quantize`` and
    ``--int8_activation_scales`` (``resolve_activation_scales`` fills in its default),
    and the names and
    values of ``--decode_hparams`` (against the generic defaults; the problem's come with
    the run). A mistake is one ``error:`` line at once, not after TensorFlow's start-up."""
    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.runs.config import RunConfig
    from t2t_lite.usr_dir import check_run_usr_dir
    RunConfig.load(args.output_dir)
    check_run_usr_dir(args.output_dir, args.t2t_usr_dir)
    prepare_quantize(args.quantize)
    resolve_activation_scales(args)
    parse_decode_hparams(args.decode_hparams)


def prepare_decoder_command(args: argparse.Namespace) -> None:
    """``prepare_run_dir_command``, and oneDNN's ops for float32 decoding too (its float32
    matmuls, faster without XLA than TensorFlow's default; docs/performance.md);
    ``TF_ENABLE_ONEDNN_OPTS=0`` turns them off."""
    prepare_run_dir_command(args)
    use_onednn_ops()
