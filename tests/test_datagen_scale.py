"""Datagen at scale: parallel encoding, shard counts that grow with the corpus, and the
bounded vocabulary sample (``python scripts/benchmark.py datagen`` times it at scale)."""
import collections

import pytest

from t2t_lite.data import datagen, encoding
from t2t_lite.data.datagen import generate_problem_data
from t2t_lite.data.vocab import reservoir_sample
from t2t_lite.data.problem import VocabSpec
from t2t_lite.data.records import ShuffledShardWriter, read_examples, shard_paths
from t2t_lite.problems.translate_multi30k import TranslateEndeMulti30k

import corpus_helpers


@pytest.fixture
def raw_400(tmp_path, multi30k_dir):
    """tmp_dir with the first 400 train and 40 val/test lines of Multi30k."""
    return corpus_helpers.mini_multi30k(multi30k_dir, tmp_path / "raw",
                                        {"train": 400, "val": 40, "test_2016_flickr": 40})


def _problem():
    return TranslateEndeMulti30k(vocab_spec=VocabSpec(size=400))


def test_reservoir_sample_is_bounded_uniform_and_keeps_small_inputs_whole():
    assert list(reservoir_sample(iter(["a", "b", "c"]), 5)) == ["a", "b", "c"]
    sample = list(reservoir_sample(iter(range(100_000)), 1000, seed=3))
    assert len(sample) == 1000 and len(set(sample)) == 1000
    assert 40_000 < sum(sample) / len(sample) < 60_000  # not the first 1,000
    assert sample == list(reservoir_sample(iter(range(100_000)), 1000, seed=3))


def test_full_shards_are_split_so_shard_count_grows_with_the_corpus(tmp_path):
    name = lambda i, n: shard_paths(tmp_path, "p", "train", n)[i]
    records = [(list(range(i % 7 + 1)), [i]) for i in range(500)]
    with ShuffledShardWriter(shard_paths(tmp_path, "p", "train", 2), seed=5,
                             max_shard_examples=100, shard_path=name) as writer:
        for inputs, targets in records:
            writer.write(inputs, targets)
    assert len(writer.paths) == 6  # ~250 a first-pass shard -> 3 of ~83 each
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"p-train-{i:05d}-of-00006.tfrecord" for i in range(6)]
    assert all(40 < len(read_examples([p])) < 130 for p in writer.paths)
    assert sorted(read_examples(writer.paths)) == sorted(records)


def test_under_the_limit_the_shards_are_those_written_without_it(tmp_path):
    outputs = []
    for limit, folder in ((None, tmp_path / "a"), (1000, tmp_path / "b")):
        folder.mkdir()
        paths = shard_paths(folder, "p", "train", 3)
        with ShuffledShardWriter(paths, seed=5, max_shard_examples=limit,
                                 shard_path=lambda i, n, f=folder: shard_paths(f, "p", "train", n)[i]
                                 ) as writer:
            for i in range(300):
                writer.write([i, i + 1], [i])
        outputs.append([p.read_bytes() for p in writer.paths])
    assert outputs[0] == outputs[1]


def test_datagen_writes_more_shards_for_a_larger_corpus(tmp_path, raw_400, monkeypatch):
    monkeypatch.setattr(datagen, "MAX_SHARD_EXAMPLES", 60)
    problem = _problem()
    summary = generate_problem_data(problem, tmp_path / "data", raw_400, workers=1)
    assert len(summary.splits["train"].shards) > problem.train_shards == 4
    assert summary.splits["train"].shards[0].endswith(
        f"-of-{len(summary.splits['train'].shards):05d}.tfrecord")
    assert len(read_examples(problem.shard_files(tmp_path / "data", "train"))) == 400


def test_the_vocabulary_is_learned_from_a_bounded_sample(tmp_path, raw_400, monkeypatch):
    seen = []
    build = TranslateEndeMulti30k.build_vocab

    def recording_build(self, texts, data_dir):
        texts = list(texts)
        seen.append(len(texts))
        return build(self, texts, data_dir)

    monkeypatch.setattr(TranslateEndeMulti30k, "build_vocab", recording_build)
    problem = TranslateEndeMulti30k(vocab_spec=VocabSpec(size=400, max_sentences=500))
    generate_problem_data(problem, tmp_path / "data", raw_400, workers=1)
    assert seen == [500]  # of 800 train sentences


@pytest.mark.slow
def test_two_encoding_workers_write_the_same_bytes_as_one(tmp_path, raw_400, monkeypatch):
    monkeypatch.setattr(datagen, "_ENCODE_BATCH", 40)  # 10 batches
    started = []
    get_context = encoding.multiprocessing.get_context
    monkeypatch.setattr(encoding.multiprocessing, "get_context",
                        lambda method: started.append(method) or get_context(method))
    # 400 train pairs are far too few to pay for starting processes: none is started.
    generate_problem_data(_problem(), tmp_path / "small", raw_400, workers=2)
    assert started == []
    monkeypatch.setattr(encoding, "MIN_PAIRS_FOR_WORKERS", 100)  # now the processes start
    outputs = {}
    for workers in (1, 2):
        data_dir = tmp_path / f"w{workers}"
        generate_problem_data(_problem(), data_dir, raw_400, workers=workers)
        outputs[workers] = {p.name: p.read_bytes() for p in data_dir.iterdir()
                            if p.name != datagen.DATAGEN_LOCK}  # the holder's pid and time
    assert started == ["spawn"]  # only the 2-worker run started processes
    assert outputs[1] == outputs[2]
    assert collections.Counter(name.split("-")[1] for name in outputs[2]
                               if name.endswith(".tfrecord")) == {"train": 4, "dev": 1,
                                                                  "test": 1}
