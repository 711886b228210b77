"""The commands' flags: the trainer's names, defaults and types pinned against the list
they had before the parser was built from ``TrainerConfig`` (issue #14)."""
import argparse

import pytest

from t2t_lite.commands import trainer

# (flag, default, type) of every trainer flag, in --help order, as before the refactor.
TRAINER_FLAGS = [
    ("--registry_help", False, "flag"),
    ("--t2t_usr_dir", "", "str"),
    ("--problem", None, "str"),
    ("--model", "transformer", "str"),
    ("--hparams_set", None, "str"),
    ("--hparams", "", "str"),
    ("--data_dir", None, "str"),
    ("--tmp_dir", "", "str"),
    ("--output_dir", None, "str"),
    ("--generate_data", False, "flag"),
    ("--data_source", "raw", "str"),
    ("--tfds_data_dir", None, "str"),
    ("--train_steps", None, "positive_int"),
    ("--eval_steps", 0, "non_negative_int"),
    ("--local_eval_frequency", 1000, "non_negative_int"),
    ("--eval_bleu_sentences", 100, "non_negative_int"),
    ("--eval_beam_size", 1, "positive_int"),
    ("--save_checkpoints_secs", 600, "non_negative_int"),
    ("--keep_checkpoint_max", 20, "positive_int"),
    ("--log_step_count_steps", 100, "positive_int"),
    ("--random_seed", 1, "int"),
    ("--worker_gpu", None, "positive_int"),
    ("--cpu_devices", 1, "positive_int"),
    ("--jit_compile", False, "flag"),
    ("--mixed_precision", False, "flag"),
    ("--gradient_accumulation_steps", 1, "positive_int"),
    ("--attention_summary_steps", 0, "non_negative_int"),
    ("--attention_probes", 3, "non_negative_int"),
    ("--worker_timeout_secs", 0, "non_negative_int"),
]


def _flags(parser: argparse.ArgumentParser):
    return [action for action in parser._actions if action.dest != "help"]


def test_trainer_flag_names_and_defaults_are_pinned():
    parser = trainer.build_parser()
    names = [option for action in _flags(parser) for option in action.option_strings]
    assert names == [flag for flag, _, _ in TRAINER_FLAGS]
    args = vars(parser.parse_args([]))
    for flag, default, _ in TRAINER_FLAGS:
        assert args[flag[2:]] == default, flag


@pytest.mark.parametrize("flag,default,kind", TRAINER_FLAGS)
def test_trainer_flag_types_are_pinned(flag, default, kind, capsys):
    parser = trainer.build_parser()
    if kind == "flag":
        assert vars(parser.parse_args([flag]))[flag[2:]] is True
        return
    accepted = {"str": "raw", "int": "-3", "positive_int": "7", "non_negative_int": "0"}[kind]
    value = vars(parser.parse_args([f"{flag}={accepted}"]))[flag[2:]]
    assert value == (accepted if kind == "str" else int(accepted))
    refused = {"positive_int": "0", "non_negative_int": "-1", "int": "x"}.get(kind)
    if refused is not None:
        with pytest.raises(SystemExit):
            parser.parse_args([f"{flag}={refused}"])
        assert flag in capsys.readouterr().err
