"""t2t-lite-trainer: train a registered model on a registered problem.

    t2t-lite-trainer --generate_data --problem=translate_ende_numbers \
        --hparams_set=transformer_tiny --data_dir=DATA --output_dir=RUN

Flags follow tensor2tensor's names. Multi-GPU: all visible GPUs (or --worker_gpu of
them) with MirroredStrategy; several machines: MultiWorkerMirroredStrategy from
TF_CONFIG; --cpu_devices=N splits the CPU into N logical devices for the same path.
Re-running the same command resumes; on SIGTERM it saves a checkpoint after the current
step and exits with status 143.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import List, Optional

from t2t_lite.commands import common
from t2t_lite.commands import datagen as datagen_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t2t-lite-trainer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_registry_help(parser)
    common.add_usr_dir_flag(parser)
    parser.add_argument("--problem", help="registered problem name")
    parser.add_argument("--model", default="transformer", help="registered model name")
    parser.add_argument("--hparams_set", help="registered hparams set, e.g. transformer_base")
    parser.add_argument("--hparams", default="", help='overrides, e.g. "num_heads=4,label_smoothing=0.2"')
    parser.add_argument("--data_dir", help="datagen output (vocabulary + TFRecords)")
    parser.add_argument("--tmp_dir", default="", help="raw corpora (downloaded or local); default: data_dir")
    parser.add_argument("--output_dir", help="run directory: config, checkpoints, TensorBoard logs")
    parser.add_argument("--generate_data", action="store_true", help="run datagen first when data is missing")
    datagen_command.add_source_flags(parser)
    parser.add_argument("--train_steps", type=common.positive_int, default=None,
                        help="stop at this global step (default: the hparams set's train_steps)")
    parser.add_argument("--eval_steps", type=common.non_negative_int, default=0,
                        help="dev batches per evaluation (0: the whole dev set)")
    parser.add_argument("--local_eval_frequency", type=common.non_negative_int, default=1000,
                        help="evaluate every N steps (0: only at the end)")
    parser.add_argument("--eval_bleu_sentences", type=common.non_negative_int, default=100,
                        help="dev sentences decoded and scored with the problem's metrics "
                             "(BLEU, exact match, parse F1) at each evaluation (0: none)")
    parser.add_argument("--eval_beam_size", type=common.positive_int, default=1,
                        help="beam size for evaluation decoding (1: greedy)")
    parser.add_argument("--save_checkpoints_secs", type=common.non_negative_int, default=600,
                        help="seconds between checkpoints (the paper: 10 minutes); a final one is always written")
    parser.add_argument("--keep_checkpoint_max", type=common.positive_int, default=20)
    parser.add_argument("--log_step_count_steps", type=common.positive_int, default=100,
                        help="steps between progress lines and TensorBoard training scalars")
    parser.add_argument("--random_seed", type=int, default=1)
    parser.add_argument("--worker_gpu", type=common.positive_int, default=None,
                        help="GPUs to use (default: all visible)")
    parser.add_argument("--cpu_devices", type=common.positive_int, default=1,
                        help="split the CPU into N logical devices (multi-replica path without GPUs)")
    parser.add_argument("--jit_compile", action="store_true", help="compile each replica's step with XLA")
    parser.add_argument("--mixed_precision", action="store_true",
                        help="bfloat16 compute with float32 variables")
    parser.add_argument("--gradient_accumulation_steps", type=common.positive_int, default=1,
                        help="micro-batches per update, to reach the paper's ~25k+25k tokens on fewer devices")
    parser.add_argument("--attention_summary_steps", type=common.non_negative_int, default=0,
                        help="write attention images, entropy scalars and probe translations to "
                             "OUTPUT_DIR/attention every N steps (0: with each evaluation)")
    parser.add_argument("--attention_probes", type=common.non_negative_int, default=3,
                        help="dev sentences followed in the attention summaries (0: none)")
    parser.add_argument("--worker_timeout_secs", type=common.non_negative_int, default=0,
                        help="several workers (TF_CONFIG): stop with an error when another worker "
                             "has not answered (collective or heartbeat) for N seconds "
                             "(0: TensorFlow's defaults, a 10 s heartbeat timeout)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.registry_help:
        return common.print_registry_help(args.t2t_usr_dir)
    common.require(parser, args, "problem", "hparams_set", "data_dir", "output_dir")
    from t2t_lite.training.checkpointing import CheckpointSaveError
    from t2t_lite.training.preemption import TrainingPreempted
    from t2t_lite.training.resume import WorkerLostError
    from t2t_lite.training.trainer import NonFiniteLossError, Trainer, TrainerConfig
    config = TrainerConfig(
        problem=args.problem, model=args.model, hparams_set=args.hparams_set,
        hparams_overrides=args.hparams, data_dir=args.data_dir, tmp_dir=args.tmp_dir,
        output_dir=args.output_dir, generate_data=args.generate_data,
        train_steps=args.train_steps, eval_steps=args.eval_steps,
        local_eval_frequency=args.local_eval_frequency,
        eval_bleu_sentences=args.eval_bleu_sentences, eval_beam_size=args.eval_beam_size,
        save_checkpoints_secs=args.save_checkpoints_secs,
        keep_checkpoint_max=args.keep_checkpoint_max,
        log_step_count_steps=args.log_step_count_steps, random_seed=args.random_seed,
        worker_gpu=args.worker_gpu, cpu_devices=args.cpu_devices,
        jit_compile=args.jit_compile, mixed_precision=args.mixed_precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        attention_summary_steps=args.attention_summary_steps,
        attention_probes=args.attention_probes, worker_timeout_secs=args.worker_timeout_secs)

    def train() -> None:
        usr_dir = common.import_usr_dir(args.t2t_usr_dir) or recorded_usr_dir(args.output_dir)
        Trainer(dataclasses.replace(config, usr_dir=usr_dir)).run()
    try:
        return common.run_reporting_errors(
            lambda: check_paths_and_run(train, args),
            failure_types=(NonFiniteLossError, CheckpointSaveError, WorkerLostError))
    except TrainingPreempted as stopped:  # not a failure: the run resumes from its checkpoint
        print(f"t2t-lite-trainer: {stopped}", file=sys.stderr, flush=True)
        return stopped.exit_status


def recorded_usr_dir(output_dir: str) -> str:
    """The ``--t2t_usr_dir`` a run being resumed was started with, imported (``""``: none)."""
    from t2t_lite.usr_dir import import_run_usr_dir
    return import_run_usr_dir(output_dir) or ""


def check_paths_and_run(train, args: argparse.Namespace) -> None:
    """Checks the user's directories (one clear error naming the flag), then trains."""
    from t2t_lite.user_paths import existing_or_new_dir, writable_dir
    if args.generate_data:
        writable_dir(args.data_dir, "--data_dir")
    else:
        existing_or_new_dir(args.data_dir, "--data_dir")
    if args.tmp_dir:
        existing_or_new_dir(args.tmp_dir, "--tmp_dir")
    if args.generate_data and args.data_source != "raw":
        # The trainer's own datagen reads raw files; generate from the source first (a
        # no-op for complete data) and it finds the data in place.
        from t2t_lite.data.datagen import generate
        print(generate(args.problem, args.data_dir, args.tmp_dir or args.data_dir,
                       data_source=args.data_source,
                       tfds_data_dir=args.tfds_data_dir).format(), flush=True)
    train()


if __name__ == "__main__":
    sys.exit(main())
