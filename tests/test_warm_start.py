"""--warm_start_from: a new run starts from another run's model weights (not its optimizer
state or step), only with the same vocabulary; resuming it resumes it."""
import shutil

import numpy as np
import pytest
import tensorflow as tf

from run_dir_helpers import copy_run_dir, tiny_run_dir
from t2t_lite.errors import UserError
from t2t_lite.runs.config import RunConfig
from t2t_lite.training.trainer import Trainer
from t2t_lite.training.warm_start import check_same_vocabulary, resolve_warm_start
from t2t_lite.commands import trainer
from test_trainer import TINY, make_config, trainer_command


def model_values(prefix: str) -> dict:
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(prefix)
            if name.startswith("model/") and name.endswith("VARIABLE_VALUE")}


def test_a_run_a_checkpoint_directory_or_a_prefix_resolve(tmp_path):
    run = copy_run_dir(tmp_path / "run")
    latest = tf.train.latest_checkpoint(str(run))
    assert resolve_warm_start(run).checkpoint == latest
    older = resolve_warm_start(str(run / "ckpt-1"))
    assert (older.checkpoint, older.run_dir) == (str(run / "ckpt-1"), run)
    (run / "averaged").mkdir()
    for path in run.glob("ckpt-1.*"):
        shutil.copy(path, run / "averaged" / path.name)
    (run / "averaged" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    inside = resolve_warm_start(run / "averaged")
    assert (inside.checkpoint, inside.run_dir) == (str(run / "averaged" / "ckpt-1"), run)
    with pytest.raises(UserError, match="neither a run directory nor a checkpoint prefix"):
        resolve_warm_start(run / "ckpt-9")
    (tmp_path / "lonely").mkdir()
    with pytest.raises(UserError, match="no run_config.json"):
        resolve_warm_start(tmp_path / "lonely")


def test_another_vocabulary_is_refused_naming_both_files(tmp_path):
    warm = resolve_warm_start(tiny_run_dir())
    same = tmp_path / "same.vocab"
    same.write_bytes(warm.vocab_path.read_bytes())
    check_same_vocabulary(warm, same, "RUN")
    other = tmp_path / "other.vocab"
    other.write_bytes(warm.vocab_path.read_bytes() + b"extra\n")
    with pytest.raises(UserError) as error:
        check_same_vocabulary(warm, other, "RUN")
    message = str(error.value)
    assert str(warm.vocab_path) in message and str(other) in message
    assert "fine-tuning needs the same vocabulary" in message and "\n" not in message


@pytest.mark.slow
def test_a_warm_start_takes_the_weights_not_the_step_and_resumes_itself(numbers_data,
                                                                        tmp_path):
    source = tmp_path / "source"
    Trainer(make_config(numbers_data, source, train_steps=6)).run()
    source_checkpoint = tf.train.latest_checkpoint(str(source))

    # A learning rate too small to move a weight: the fine-tuned run's model is the
    # source's, its step counts from 0 and Adam's moments are its own.
    frozen = tmp_path / "frozen"
    tiny_lr = TINY + ",learning_rate_constant=1e-30"
    summary = Trainer(make_config(numbers_data, frozen, train_steps=2, warm_start_from=str(source),
                                  hparams_overrides=tiny_lr)).run()
    assert summary["step"] == 2
    frozen_checkpoint = tf.train.latest_checkpoint(str(frozen))
    assert frozen_checkpoint.endswith("ckpt-2")
    expected, actual = model_values(source_checkpoint), model_values(frozen_checkpoint)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=0, atol=1e-20,
                                   err_msg=name)
    assert RunConfig.load(frozen).warm_start_from == source_checkpoint

    # Fine-tuning for real, interrupted after 2 steps and resumed (without the flag) to
    # 4, ends where 4 steps in one go end: the resume takes the new run's checkpoint.
    straight = tmp_path / "straight"
    Trainer(make_config(numbers_data, straight, train_steps=4,
                        warm_start_from=source_checkpoint)).run()
    resumed = tmp_path / "resumed"
    Trainer(make_config(numbers_data, resumed, train_steps=2, warm_start_from=str(source))).run()
    Trainer(make_config(numbers_data, resumed, train_steps=4)).run()
    assert RunConfig.load(resumed).warm_start_from == source_checkpoint
    expected = model_values(tf.train.latest_checkpoint(str(straight)))
    actual = model_values(tf.train.latest_checkpoint(str(resumed)))
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)
    assert not np.allclose(expected[sorted(expected)[0]],
                           model_values(source_checkpoint)[sorted(expected)[0]])


def test_the_trainer_command_refuses_another_vocabulary_in_one_line(numbers_data, tmp_path,
                                                                    capsys):
    """Checked before any model is built: nothing is written into the new run."""
    source = copy_run_dir(tmp_path / "source")   # a run whose vocabulary is another one
    source_vocab = source / RunConfig.load(source).vocab_file
    source_vocab.write_bytes(source_vocab.read_bytes() + b"another vocabulary")
    status = trainer.main(trainer_command(numbers_data, tmp_path / "run", "--train_steps=1",
                                          f"--warm_start_from={source}")[3:])
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and err[-1].startswith("error: --warm_start_from=")
    assert "fine-tuning needs the same vocabulary" in err[-1] and str(source_vocab) in err[-1]
    assert not (tmp_path / "run" / "run_config.json").exists()


def test_a_model_of_another_shape_is_refused(numbers_data, tmp_path):
    source = tmp_path / "source"
    Trainer(make_config(numbers_data, source, train_steps=1)).run()
    wider = TINY.replace("filter_size=64", "filter_size=96")
    with pytest.raises(UserError, match="does not fit this run's model"):
        Trainer(make_config(numbers_data, tmp_path / "new", train_steps=1,
                            warm_start_from=str(source), hparams_overrides=wider)).run()
