"""The commands' flags: the trainer's names, defaults and types pinned against the list
users rely on (the parser is built from ``TrainerConfig``), the config built
from them, and the one parser pattern every command shares."""
import argparse
import importlib

import pytest

from t2t_lite.commands import trainer
from t2t_lite.flag_fields import config_from_args
from t2t_lite.training.config import TrainerConfig

# (flag, default, type) of every trainer flag, in --help order; --eval_bleu_sentences, an
# older name of --eval_decode_sentences, is still accepted.
TRAINER_FLAGS = [
    ("--registry_help", False, "flag"),
    ("--t2t_usr_dir", "", "str"),
    ("--verbosity", None, "verbosity"),
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
    ("--eval_decode_sentences", 100, "non_negative_int"),
    ("--eval_beam_size", 1, "positive_int"),
    ("--save_checkpoints_secs", 600, "non_negative_int"),
    ("--save_checkpoints_steps", 0, "non_negative_int"),
    ("--keep_checkpoint_max", None, "positive_int"),
    ("--best_checkpoint_metric", "", "str"),
    ("--early_stopping_patience", 0, "non_negative_int"),
    ("--warm_start_from", "", "str"),
    ("--log_step_count_steps", 100, "positive_int"),
    ("--random_seed", 1, "seed_int"),
    ("--worker_gpu", None, "positive_int"),
    ("--cpu_devices", 1, "positive_int"),
    ("--jit_compile", False, "flag"),
    ("--mixed_precision", "", "precision"),
    ("--gradient_accumulation_steps", 1, "positive_int"),
    ("--attention_summary_steps", 0, "non_negative_int"),
    ("--attention_probes", 3, "non_negative_int"),
    ("--worker_timeout_secs", 0, "non_negative_int"),
]


def _flags(parser: argparse.ArgumentParser):
    return [action for action in parser._actions if action.dest != "help"]


def test_trainer_flag_names_and_defaults_are_pinned():
    parser = trainer.build_parser()
    names = [action.option_strings[0] for action in _flags(parser)]
    assert names == [flag for flag, _, _ in TRAINER_FLAGS]
    aliases = {action.option_strings[0]: action.option_strings[1:] for action in _flags(parser)}
    assert {flag: more for flag, more in aliases.items() if more} == {
        "--eval_decode_sentences": ["--eval_bleu_sentences"]}
    args = vars(parser.parse_args([]))
    for flag, default, _ in TRAINER_FLAGS:
        assert args[flag[2:]] == default, flag


@pytest.mark.parametrize("flag,default,kind", TRAINER_FLAGS)
def test_trainer_flag_types_are_pinned(flag, default, kind, capsys):
    parser = trainer.build_parser()
    if kind == "flag":
        assert vars(parser.parse_args([flag]))[flag[2:]] is True
        return
    if kind == "precision":  # the bare flag keeps meaning bfloat16
        assert vars(parser.parse_args([flag]))[flag[2:]] == "bfloat16"
        assert vars(parser.parse_args([f"{flag}=float16"]))[flag[2:]] == "float16"
        with pytest.raises(SystemExit):
            parser.parse_args([f"{flag}=float8"])
        assert flag in capsys.readouterr().err
        return
    accepted = {"str": "raw", "seed_int": "4294967295", "positive_int": "7", "non_negative_int": "0",
                "verbosity": "2"}[kind]
    value = vars(parser.parse_args([f"{flag}={accepted}"]))[flag[2:]]
    assert value == (accepted if kind == "str" else int(accepted))
    refused = {"positive_int": "0", "non_negative_int": "-1", "seed_int": "-1",
               "verbosity": "3"}.get(kind)
    if refused is not None:
        with pytest.raises(SystemExit):
            parser.parse_args([f"{flag}={refused}"])
        assert flag in capsys.readouterr().err


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_a_random_seed_numpy_cannot_take_is_a_usage_error(seed, capsys):
    """Keras seeds NumPy, which takes [0, 2**32): outside it, one usage line, not a
    traceback after TensorFlow's start."""
    with pytest.raises(SystemExit) as stopped:
        trainer.build_parser().parse_args([f"--random_seed={seed}"])
    assert stopped.value.code == 2
    assert "--random_seed: must be in [0, 2**32)" in capsys.readouterr().err


def test_eval_decode_sentences_and_its_old_name_set_the_same_field():
    parser = trainer.build_parser()
    required = ["--problem=p", "--hparams_set=h", "--data_dir=d", "--output_dir=o"]
    for flag in ("--eval_decode_sentences", "--eval_bleu_sentences"):
        config = config_from_args(TrainerConfig, parser.parse_args([*required, f"{flag}=7"]))
        assert config.eval_decode_sentences == 7, flag
    default = config_from_args(TrainerConfig, parser.parse_args(required))
    assert default.eval_decode_sentences == 100


def test_trainer_config_is_built_from_every_flag():
    argv = ["--problem=translate_ende_numbers", "--model=transformer", "--hparams_set=tiny",
            "--hparams=num_heads=2", "--data_dir=D", "--tmp_dir=R", "--output_dir=O",
            "--generate_data", "--data_source=tfds", "--tfds_data_dir=T", "--train_steps=5",
            "--eval_steps=2", "--local_eval_frequency=3", "--eval_decode_sentences=4",
            "--eval_beam_size=2", "--save_checkpoints_secs=9", "--save_checkpoints_steps=7",
            "--keep_checkpoint_max=6",
            "--best_checkpoint_metric=loss", "--early_stopping_patience=3",
            "--warm_start_from=W",
            "--log_step_count_steps=8", "--random_seed=7", "--worker_gpu=2",
            "--cpu_devices=3", "--jit_compile", "--mixed_precision",
            "--gradient_accumulation_steps=4", "--attention_summary_steps=11",
            "--attention_probes=0", "--worker_timeout_secs=30"]
    config = config_from_args(TrainerConfig, trainer.build_parser().parse_args(argv),
                              usr_dir="/u")
    assert config == TrainerConfig(
        problem="translate_ende_numbers", model="transformer", hparams_set="tiny",
        hparams_overrides="num_heads=2", data_dir="D", tmp_dir="R", output_dir="O",
        generate_data=True, data_source="tfds", tfds_data_dir="T", train_steps=5,
        eval_steps=2, local_eval_frequency=3, eval_decode_sentences=4, eval_beam_size=2,
        save_checkpoints_secs=9, save_checkpoints_steps=7, keep_checkpoint_max=6,
        best_checkpoint_metric="loss",
        early_stopping_patience=3, warm_start_from="W", log_step_count_steps=8,
        random_seed=7, worker_gpu=2, cpu_devices=3, jit_compile=True,
        mixed_precision="bfloat16",
        gradient_accumulation_steps=4, attention_summary_steps=11, attention_probes=0,
        worker_timeout_secs=30, usr_dir="/u")


COMMAND_MODULES = ("info", "datagen", "trainer", "decoder", "exporter", "avg_checkpoints",
                   "evalb")


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_every_command_shares_the_common_flags(name):
    parser = importlib.import_module(f"t2t_lite.commands.{name}").build_parser()
    options = {option for action in parser._actions for option in action.option_strings}
    assert {"--registry_help", "--t2t_usr_dir"} <= options
    assert ("--verbosity" in options) == (name != "evalb")  # evalb runs no TensorFlow


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_every_flag_of_every_command_says_what_it_does_in_help(name):
    parser = importlib.import_module(f"t2t_lite.commands.{name}").build_parser()
    silent = [action.option_strings[0] for action in _flags(parser) if not action.help]
    assert silent == []


@pytest.mark.parametrize("name,flags", [
    ("datagen", "--problem, --data_dir"), ("decoder", "--output_dir"),
    ("exporter", "--output_dir, --export_dir"), ("avg_checkpoints", "--output_dir"),
    ("evalb", "--reference, --parsed"),
    ("trainer", "--problem, --hparams_set, --data_dir, --output_dir")])
def test_missing_required_flags_are_one_usage_error(name, flags, capsys):
    module = importlib.import_module(f"t2t_lite.commands.{name}")
    with pytest.raises(SystemExit) as stopped:
        module.main([])
    assert stopped.value.code == 2
    assert f"error: missing required flag(s): {flags}" in capsys.readouterr().err


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_every_command_lists_the_registries(name, capsys):
    module = importlib.import_module(f"t2t_lite.commands.{name}")
    assert module.main(["--registry_help"]) == 0
    out = capsys.readouterr().out
    assert "  translate_ende_numbers" in out and "  transformer_tiny" in out
