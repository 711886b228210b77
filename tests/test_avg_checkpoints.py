"""t2t-lite-avg-checkpoints: the element-wise mean of known checkpoints, accepted by the
decoder; and every model variable reaches the run's checkpoints."""
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.commands import avg_checkpoints, decoder
from t2t_lite.runs.config import RunConfig
from t2t_lite.runs.loading import (build_model, restore_model, run_checkpoints,
                                  untracked_variables)

from run_dir_helpers import copy_run_dir, tiny_run_dir


def model_keys(path):
    return sorted(name for name, _ in tf.train.list_variables(path)
                  if name.startswith("model/") and name.endswith("VARIABLE_VALUE"))


def test_every_model_variable_reaches_a_checkpoint(tmp_path):
    model = build_model(RunConfig.load(str(tiny_run_dir())))
    assert untracked_variables(model) == []
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "model"))
    keys = model_keys(path)
    assert len(keys) == len(model.trainable_variables)
    assert any("/encoder/layer_0/" in key for key in keys)
    assert any("/decoder/layer_0/" in key for key in keys)


def write_known_checkpoints(run, scales):
    """Trainer-style checkpoints (model + optimizer) whose variable j is scale * (j + 1)."""
    model = build_model(RunConfig.load(str(run)))
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer),
                                         str(run / "known"), max_to_keep=10)
    paths = []
    for scale in scales:
        for j, variable in enumerate(model.trainable_variables):
            variable.assign(np.full(variable.shape, scale * (j + 1), np.float32))
        paths.append(manager.save())
    return paths


def test_average_of_two_checkpoints_is_their_mean(capsys, tmp_path):
    run = copy_run_dir(tmp_path / "run")
    first, second = write_known_checkpoints(run, [1.0, 3.0])
    output = tmp_path / "avg" / "ckpt"
    assert avg_checkpoints.main(["--output_dir", str(run), "--checkpoints",
                                 f"{first},{second}", "--output_path", str(output)]) == 0
    averaged = build_model(RunConfig.load(str(run)))
    restore_model(averaged, str(output))
    for j, variable in enumerate(averaged.trainable_variables):
        np.testing.assert_allclose(variable.numpy(), 2.0 * (j + 1), rtol=1e-6)
    assert len(model_keys(str(output))) == len(averaged.trainable_variables)
    # The run's own state file is untouched.
    assert [Path(path).name for path in run_checkpoints(run)] == ["ckpt-1", "ckpt-2"]

    # The decoder accepts the averaged checkpoint.
    source = tmp_path / "in.txt"
    source.write_text("twenty-one\n\nseven\n", encoding="utf-8")
    capsys.readouterr()
    status = decoder.main(["--output_dir", str(run), "--checkpoint_path", str(output),
                           "--decode_from_file", str(source), "--decode_hparams",
                           "beam_size=1,extra_length=2"])
    out = capsys.readouterr().out
    assert status == 0 and len(out.split("\n")) == 4 and out.split("\n")[1] == ""


def test_average_of_the_runs_checkpoints_is_their_mean(tmp_path):
    """The trainer's checkpoints key most model variables under optimizer/ (the shortest
    object path); restoring through the object graph still finds every one."""
    run = tiny_run_dir()
    first, second = run_checkpoints(run)
    output = tmp_path / "avg"
    assert avg_checkpoints.main(["--output_dir", str(run), "--checkpoints",
                                 f"{first},{second}", "--output_path", str(output)]) == 0
    models = []
    for path in (first, second, str(output)):
        model = build_model(RunConfig.load(str(run)))
        restore_model(model, path)
        models.append(model)
    changed = 0
    for a, b, mean in zip(*(model.trainable_variables for model in models)):
        np.testing.assert_allclose(mean.numpy(), (a.numpy() + b.numpy()) / 2, rtol=1e-5,
                                   atol=1e-7)
        changed += not np.array_equal(a.numpy(), b.numpy())
    assert changed == len(models[0].trainable_variables)


def test_default_count_is_the_runs_average_checkpoints(capsys, tmp_path):
    run = copy_run_dir(tmp_path / "run")
    assert RunConfig.load(str(run)).resolved_hparams().average_checkpoints == 5
    assert avg_checkpoints.main(["--output_dir", str(run)]) == 0
    captured = capsys.readouterr()
    assert "keeps 2 checkpoint(s), fewer than the 5 asked for" in captured.err
    assert (run / "averaged" / "ckpt-avg.index").is_file()
    assert avg_checkpoints.main(["--output_dir", str(run), "--num_last_checkpoints", "1",
                                 "--output_path", str(tmp_path / "last")]) == 0
    last = run_checkpoints(run)[-1]
    for key in model_keys(last):
        np.testing.assert_array_equal(tf.train.load_checkpoint(last).get_tensor(key),
                                      tf.train.load_checkpoint(str(tmp_path / "last"))
                                      .get_tensor(key))


def test_a_relative_output_dir_finds_the_runs_checkpoints(capsys, tmp_path, monkeypatch):
    """As typed on a command line (`--output_dir=RUN`): the state file's entries are
    joined to RUN once, not twice (RUN/RUN/ckpt-N)."""
    run = copy_run_dir(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert run_checkpoints("run") == ["run/ckpt-1", "run/ckpt-2"]
    assert avg_checkpoints.main(["--output_dir", "run", "--num_last_checkpoints", "2"]) == 0
    assert "error" not in capsys.readouterr().err
    assert (run / "averaged" / "ckpt-avg.index").is_file()


def test_missing_checkpoint_is_a_clear_error(capsys, tmp_path):
    status = avg_checkpoints.main(["--output_dir", str(tiny_run_dir()), "--checkpoints",
                                   str(tmp_path / "ckpt-9"), "--output_path",
                                   str(tmp_path / "out")])
    assert status == 2 and "ckpt-9: no checkpoint there" in capsys.readouterr().err


def test_an_empty_checkpoints_flag_is_an_error_not_the_default(capsys, tmp_path):
    """``--checkpoints=$EMPTY`` (an unmatched glob, say) must not average the last N."""
    with pytest.raises(SystemExit) as exit_info:
        avg_checkpoints.main(["--output_dir", str(tiny_run_dir()), "--checkpoints=",
                              "--output_path", str(tmp_path / "out" / "ckpt")])
    assert exit_info.value.code == 2
    assert "--checkpoints='' names no checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_empty_item_in_checkpoints_is_an_error_before_tensorflow(capsys, tmp_path):
    """``A,,B`` is not read as ``A,B``: one line naming the fix, nothing written."""
    run = tiny_run_dir()
    status = avg_checkpoints.main(["--output_dir", str(run), "--checkpoints",
                                   f"{run}/ckpt-1,,{run}/ckpt-2",
                                   "--output_path", str(tmp_path / "out" / "ckpt")])
    err = capsys.readouterr().err
    assert status == 2 and "has an empty item; separate paths by single commas" in err
    assert "devices:" not in err  # refused before TensorFlow started
    assert not (tmp_path / "out").exists()
