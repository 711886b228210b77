"""--mixed_precision=float16: float16 compute, float32 variables, dynamic loss scaling with
Keras' LossScaleOptimizer (an overflowing step is skipped and the scale halved), gradient
accumulation, replicas, exact resume, and decoding a float16-trained run."""
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the exported tokenizer's ops)

from t2t_lite import registry
from t2t_lite.decoding import parse_decode_hparams
from t2t_lite.decoding.translator import Translator
from t2t_lite.runs.export import export_translator
from t2t_lite.runs.loading import load_trained_run
from t2t_lite.training.optimizer import make_optimizer
from t2t_lite.training.train_step import OVERFLOWS, TrainStep
from t2t_lite.training.trainer import Trainer
from test_trainer import make_config, trainer_command


@pytest.fixture(autouse=True)
def float32_afterwards():
    """The trainer sets Keras' global policy: later tests in this process get float32."""
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def float16_policy():
    keras.mixed_precision.set_global_policy("mixed_float16")


def fixed_batches(vocab_size=40, batch=8, length=7):
    rng = np.random.default_rng(3)
    tokens = rng.integers(2, vocab_size, size=(batch, length)).astype(np.int32)
    features = {"inputs": tf.constant(tokens), "targets": tf.constant(tokens[:, ::-1].copy())}
    return iter(tf.data.Dataset.from_tensors(features).repeat())


def test_an_overflow_skips_the_step_keeps_the_weights_and_halves_the_scale(float16_policy):
    keras.utils.set_random_seed(7)
    hparams = registry.hparams("transformer_tiny", "layer_prepostprocess_dropout=0.0")
    model = registry.MODELS.get("transformer")(hparams, 40)
    strategy = tf.distribute.get_strategy()
    optimizer = make_optimizer(hparams, loss_scaling=True)
    model({"inputs": tf.ones([1, 2], tf.int32), "targets": tf.ones([1, 2], tf.int32)})
    optimizer.build(model.trainable_variables)
    assert model.compute_dtype == "float16" and model.trainable_variables[0].dtype == "float32"
    step = TrainStep(model, optimizer, strategy, hparams.label_smoothing,
                     accumulation_steps=2)
    batches = fixed_batches()
    before = [v.numpy().copy() for v in model.trainable_variables]

    optimizer.dynamic_scale.assign(2.0 ** 100)    # float16 gradients overflow at once
    stats = step.step(batches)
    assert float(stats[OVERFLOWS]) == 1.0
    assert float(optimizer.dynamic_scale) == 2.0 ** 99
    assert int(optimizer.iterations) == 1          # the skipped step counts as a step
    for old, variable in zip(before, model.trainable_variables):
        np.testing.assert_array_equal(variable.numpy(), old)

    optimizer.dynamic_scale.assign(1.0)
    stats = step.step(batches)
    assert float(stats[OVERFLOWS]) == 0.0 and float(optimizer.dynamic_scale) == 1.0
    assert int(optimizer.iterations) == 2
    assert any(not np.array_equal(variable.numpy(), old)
               for old, variable in zip(before, model.trainable_variables))


@pytest.mark.slow
def test_float16_loss_decreases_like_float32(numbers_data, tmp_path):
    results = {}
    for precision in ("", "float16"):
        config = make_config(numbers_data, tmp_path / (precision or "float32"), train_steps=30,
                             mixed_precision=precision, eval_steps=4)
        results[precision] = Trainer(config).run()
    float32, float16 = results[""], results["float16"]
    # From about 6.1 (perplexity 450 over the first steps) to about 5.4; the first steps
    # of float16 are skipped while the loss scale comes down from 2^15.
    assert float16["eval_loss"] < 5.7 and float32["eval_loss"] < 5.7
    assert abs(float16["eval_loss"] - float32["eval_loss"]) < 0.2


def checkpoint_values(prefix: str) -> dict:
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(prefix)
            if name.endswith("VARIABLE_VALUE") and not name.startswith("save_counter")}


@pytest.mark.slow
def test_float16_resume_is_exact_and_keeps_the_loss_scale(numbers_data, tmp_path):
    overrides = dict(mixed_precision="float16", gradient_accumulation_steps=2)
    straight = tmp_path / "straight"
    Trainer(make_config(numbers_data, straight, train_steps=10, **overrides)).run()
    resumed = tmp_path / "resumed"
    Trainer(make_config(numbers_data, resumed, train_steps=5, **overrides)).run()
    Trainer(make_config(numbers_data, resumed, train_steps=10, **overrides)).run()
    expected = checkpoint_values(tf.train.latest_checkpoint(str(straight)))
    actual = checkpoint_values(tf.train.latest_checkpoint(str(resumed)))
    assert expected.keys() == actual.keys()
    scale = "loss_scale/dynamic_scale/.ATTRIBUTES/VARIABLE_VALUE"
    assert actual[scale] < 2.0 ** 15                 # lowered by the first steps, then kept
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)


@pytest.mark.slow
def test_a_float16_run_decodes_in_float32_and_float16(numbers_data, tmp_path):
    run = tmp_path / "run"
    Trainer(make_config(numbers_data, run, train_steps=2, mixed_precision="float16")).run()
    outputs = {}
    for policy in ("float32", "mixed_float16"):
        keras.mixed_precision.set_global_policy(policy)
        try:
            loaded = load_trained_run(run)
            assert loaded.model.compute_dtype == policy.replace("mixed_", "")
            translator_hparams = parse_decode_hparams("beam_size=2,extra_length=5",
                                                      loaded.problem.decode_defaults)
            translator = Translator.from_decode_hparams(loaded.model, loaded.vocabulary,
                                                        translator_hparams)
            outputs[policy] = translator.translate(["twenty-one", "one hundred"])
            if policy == "mixed_float16":  # a float16 export (the exporter's is float32)
                export = tmp_path / "export16"
                export_translator(loaded.model, loaded.vocabulary, translator_hparams, export)
                served = tf.saved_model.load(str(export)).signatures["serving_default"]
                result = served(sentences=tf.constant(["twenty-one", "one hundred"]))
                assert result["translations"].shape == [2]
                assert np.all(np.isfinite(result["scores"].numpy()))
        finally:
            keras.mixed_precision.set_global_policy("float32")
    for texts in outputs.values():
        assert len(texts) == 2 and all(isinstance(text, str) for text in texts)


@pytest.mark.slow
def test_float16_on_two_replicas_with_accumulation_and_the_exporter(numbers_data, tmp_path):
    """Two logical CPUs skip the overflowing first steps together (no hang, no NaN), and
    the run exports and decodes with the commands."""
    run = tmp_path / "run"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        trainer_command(numbers_data, run, "--train_steps=8", "--cpu_devices=2",
                        "--mixed_precision=float16", "--gradient_accumulation_steps=2",
                        "--save_checkpoints_secs=3600"),
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "float16 gradients overflowed; update skipped" in result.stdout
    assert "Training done: step=8" in result.stdout
    values = checkpoint_values(tf.train.latest_checkpoint(str(run)))
    assert all(np.all(np.isfinite(value)) for value in values.values()
               if np.issubdtype(value.dtype, np.floating))
    export = tmp_path / "export"
    exported = subprocess.run([sys.executable, "-m", "t2t_lite.commands.exporter",
                               f"--output_dir={run}", f"--export_dir={export}"],
                              capture_output=True, text=True, timeout=300, env=env)
    assert exported.returncode == 0, exported.stderr[-3000:]
    info = json.loads((export / "t2t_lite_export.json").read_text())
    assert info["checkpoint"].endswith("ckpt-8")
