"""The input pipeline: token budget, max_length, EOS, buckets, eval order, replicas, and
its functions traced without AutoGraph."""
import re

import pytest
import tensorflow as tf

from t2t_lite.data.pipeline import (bucket_boundaries, bucket_batch_sizes, make_dataset,
                                    per_replica_budget)
from t2t_lite.data.records import read_examples
from t2t_lite.hparams_lib import HParams
from t2t_lite.problems.translate_numbers import NumbersConfig, TranslateEndeNumbers

CONFIG = NumbersConfig(split_sizes=(("train", 3000), ("dev", 300), ("test", 300)))


@pytest.fixture(scope="module")
def numbers(tmp_path_factory):
    problem = TranslateEndeNumbers()
    problem.config = CONFIG  # a small instance of the same problem
    data_dir = tmp_path_factory.mktemp("numbers")
    problem.generate_data(data_dir, data_dir / "raw")
    return problem, data_dir


def _take(dataset, n):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(n)]


def test_bucket_boundaries_and_batch_sizes():
    boundaries = bucket_boundaries(256)
    assert boundaries[:8] == [8, 16, 24, 32, 40, 48, 56, 64] and boundaries[-1] == 256
    assert all(b % 8 == 0 for b in boundaries) and boundaries == sorted(set(boundaries))
    assert bucket_batch_sizes([8, 64, 256], 4096) == [512, 64, 16]


def test_training_batches_respect_budget_max_length_and_eos(numbers):
    problem, data_dir = numbers
    hparams = HParams(batch_size=512, max_length=24)
    allowed = set(bucket_boundaries(24))
    lengths_seen = 0
    for batch in _take(make_dataset(problem, data_dir, "train", hparams, training=True, seed=3),
                       60):
        inputs, targets = batch["inputs"], batch["targets"]
        assert inputs.dtype == targets.dtype == "int32"
        assert inputs.shape == targets.shape and inputs.shape[1] in allowed
        assert inputs.size <= 512  # padded tokens per side within the budget
        for row in list(inputs) + list(targets):
            length = int((row != 0).sum())
            assert 0 < length <= 24 and row[length - 1] == 1  # ends with EOS, then pad
            assert not (row[:length - 1] == 1).any() and not row[length:].any()
            lengths_seen = max(lengths_seen, length)
    assert lengths_seen > 8  # several buckets were used


def test_max_length_drops_long_training_examples(numbers):
    problem, data_dir = numbers
    hparams = HParams(batch_size=256, max_length=16)
    for batch in _take(make_dataset(problem, data_dir, "train", hparams, training=True), 30):
        assert batch["inputs"].shape[1] <= 16
        assert ((batch["inputs"] != 0).sum(1) <= 16).all()
        assert ((batch["targets"] != 0).sum(1) <= 16).all()


def test_eval_is_one_deterministic_pass_over_every_example(numbers):
    problem, data_dir = numbers
    hparams = HParams(batch_size=300, max_length=8)  # shorter than many examples: all kept
    runs = []
    for _ in range(2):
        rows = []
        for batch in make_dataset(problem, data_dir, "dev", hparams, training=False):
            assert batch["inputs"].shape[0] * batch["inputs"].shape[1] <= 300
            for inputs, targets in zip(batch["inputs"].numpy(), batch["targets"].numpy()):
                rows.append((tuple(inputs[inputs != 0][:-1]), tuple(targets[targets != 0][:-1])))
        runs.append(rows)
    assert runs[0] == runs[1] and len(runs[0]) == 300
    stored = read_examples(problem.shard_files(data_dir, "dev"))
    assert sorted(runs[0]) == sorted((tuple(s), tuple(t)) for s, t in stored)


def test_per_replica_budget_and_input_sharding(numbers):
    problem, data_dir = numbers
    hparams = HParams(batch_size=1024, max_length=24)
    contexts = [tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                           num_replicas_in_sync=2) for i in range(2)]
    assert per_replica_budget(1024, contexts[0]) == 512
    for batch in _take(make_dataset(problem, data_dir, "train", hparams, training=True,
                                    input_context=contexts[0]), 20):
        assert batch["inputs"].size <= 512
    halves = []
    for context in contexts:
        halves.append([tuple(row[row != 0]) for batch in make_dataset(
            problem, data_dir, "dev", hparams, training=False, input_context=context)
            for row in batch["targets"].numpy()])
    assert len(halves[0]) + len(halves[1]) == 300 and abs(len(halves[0]) - len(halves[1])) < 30


def test_budget_too_small_for_max_length_is_a_clear_error(numbers):
    problem, data_dir = numbers
    with pytest.raises(ValueError, match="per-replica token budget 100 .* max_length=256"):
        make_dataset(problem, data_dir, "train", HParams(batch_size=200, max_length=256),
                     training=True, input_context=tf.distribute.InputContext(2, 0, 2))


def test_missing_split_names_the_datagen_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="run t2t-lite-datagen --problem=translate_ende"):
        make_dataset(TranslateEndeNumbers(), tmp_path, "train", HParams(), training=True)


def test_the_pipelines_functions_are_traced_as_written(numbers, capsys):
    """tf.data would otherwise convert each function it is handed with AutoGraph: the
    pipeline's functions have no Python control flow on tensors and are traced as
    written, so AutoGraph logs no conversion of a package function."""
    problem, data_dir = numbers
    hparams = HParams(batch_size=256, max_length=64)
    tf.autograph.set_verbosity(3, alsologtostdout=True)
    try:
        for training in (True, False):
            split = "train" if training else "dev"
            _take(make_dataset(problem, data_dir, split, hparams, training=training, seed=1), 1)
        assert read_examples(sorted(data_dir.glob("*-dev-*.tfrecord")))
    finally:
        tf.autograph.set_verbosity(0)
    log = capsys.readouterr().out
    converted = re.findall(r"Converted call: <function ([\w.<>]+)", log)
    assert converted, "AutoGraph logged no conversion at all (TensorFlow's own readers are)"
    package_functions = {"parse_example", "_add_eos", "_length", "bucket_id", "batch_bucket"}
    assert not [name for name in converted
                if name.split(".")[-1] in package_functions or "make_dataset" in name], converted
