r"""t2t-lite-trainer: train a registered model on a registered problem.

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
import sys
from typing import List, Optional, Union

from t2t_lite.commands import common
from t2t_lite.flag_fields import add_flags, config_from_args, required_flags
from t2t_lite.training.config import TrainerConfig
from t2t_lite.usr_dir import import_usr_dir


def build_parser() -> argparse.ArgumentParser:
    """The trainer's flags: the shared ones, then one per ``TrainerConfig`` field."""
    parser = common.command_parser("t2t-lite-trainer", __doc__)
    add_flags(parser, TrainerConfig)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    return common.run_command(build_parser(), argv, run, required=required_flags(TrainerConfig),
                              failure_types=failure_types,
                              before_tensorflow=check_before_tensorflow)


def check_before_tensorflow(args: argparse.Namespace) -> None:
    """Before TensorFlow starts, creating nothing: ``TF_CONFIG`` (when set) names this
    task in its cluster, the ``--t2t_usr_dir`` a run being resumed recorded is still
    there, and ``check_directories``."""
    from t2t_lite.training.tf_config import read_tf_config
    from t2t_lite.usr_dir import check_run_usr_dir
    read_tf_config()
    check_run_usr_dir(args.output_dir, args.t2t_usr_dir)
    check_directories(args)


def failure_types() -> tuple:
    """Runs that failed for a reason they explain: one ``error:`` line, exit status 1."""
    from t2t_lite.training.checkpointing import CheckpointSaveError
    from t2t_lite.training.rendezvous import WorkersMissingError
    from t2t_lite.training.resume import WorkerLostError
    from t2t_lite.training.trainer import NonFiniteLossError
    return (NonFiniteLossError, CheckpointSaveError, WorkerLostError, WorkersMissingError)


@common.prints_devices
def run(args: argparse.Namespace) -> int:
    """Imports ``--t2t_usr_dir`` (or the one the run being resumed recorded), checks the
    user's paths and data source, then trains; returns the exit status."""
    usr_dir = import_usr_dir(args.t2t_usr_dir) or recorded_usr_dir(args.output_dir)
    config = config_from_args(TrainerConfig, args, usr_dir=usr_dir)
    check_paths(config)
    return train(config)


def recorded_usr_dir(output_dir: str) -> str:
    """The ``--t2t_usr_dir`` a run being resumed was started with, imported (``""``: none)."""
    from t2t_lite.usr_dir import import_run_usr_dir
    return import_run_usr_dir(output_dir) or ""


def check_directories(flags: Union[argparse.Namespace, TrainerConfig],
                      create: bool = False) -> None:
    """``--output_dir`` (a directory files can be made in, or can be created), ``--data_dir``
    and ``--tmp_dir`` (one clear error naming the flag): no file in the way, and with ``--generate_data`` a data directory files can be made in (created when
    ``create``). Run before TensorFlow starts, creating nothing, and again by ``run``."""
    from t2t_lite.user_paths import creatable_dir, existing_or_new_dir, writable_dir
    creatable_dir(flags.output_dir, "--output_dir")
    if flags.generate_data:
        (writable_dir if create else creatable_dir)(flags.data_dir, "--data_dir")
    else:
        existing_or_new_dir(flags.data_dir, "--data_dir")
    if flags.tmp_dir:
        existing_or_new_dir(flags.tmp_dir, "--tmp_dir")


def check_paths(config: TrainerConfig) -> None:
    """Checks ``--data_source`` and the user's directories (``check_directories``,
    creating the data directory for ``--generate_data``); with ``--generate_data
    --data_source=tfds``, generates the data from TFDS."""
    from t2t_lite.data.datagen import check_data_source
    from t2t_lite.registry import PROBLEMS
    if config.generate_data:
        check_data_source(PROBLEMS.get(config.problem)(), config.data_source)
    check_directories(config, create=True)
    if config.generate_data and config.data_source != "raw":
        # The trainer's own datagen reads raw files; generate from the source first (a
        # no-op for complete data) and it finds the data in place.
        from t2t_lite.data.datagen import generate
        print(generate(config.problem, config.data_dir, config.tmp_dir or None,
                       data_source=config.data_source,
                       tfds_data_dir=config.tfds_data_dir, wait=True).format(), flush=True)


def train(config: TrainerConfig) -> int:
    """Prints the ``devices:`` line of the distribution strategy and trains; returns the
    exit status (143 after SIGTERM: not a failure, the run resumes from its checkpoint)."""
    from t2t_lite.commands.startup import devices_line
    from t2t_lite.training.preemption import TrainingPreempted
    from t2t_lite.training.rendezvous import SetupInterrupted
    from t2t_lite.training.trainer import Trainer
    try:
        trainer = Trainer(config)
    except SetupInterrupted as stopped:
        print(f"t2t-lite-trainer: {stopped}", file=sys.stderr, flush=True)
        return stopped.exit_status
    print(devices_line(strategy_devices(trainer.strategy)), file=sys.stderr, flush=True)
    try:
        trainer.run()
    except TrainingPreempted as stopped:
        print(f"t2t-lite-trainer: {stopped}", file=sys.stderr, flush=True)
        return stopped.exit_status
    return 0


def strategy_devices(strategy) -> List[str]:
    """The devices this worker trains on (the default strategy: CPU:0, none named)."""
    try:
        return list(strategy.extended.worker_devices)
    except RuntimeError:  # tf.distribute's default strategy: one device, placed by TF
        return []


if __name__ == "__main__":
    sys.exit(main())
