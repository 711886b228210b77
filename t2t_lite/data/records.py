"""TFRecord shards of id sequences: naming, shuffled atomic writing, parsing.

A record is a ``tf.train.Example`` with int64 lists ``inputs`` and ``targets`` (token ids
without EOS; the input pipeline appends it). Shard files are named
``<problem>-<split>-00003-of-00008.tfrecord`` and only ever appear complete: they are
written under a temporary name and renamed.
"""
from __future__ import annotations

import os
import random
import struct
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple, Union

import tensorflow as tf

FEATURES = ("inputs", "targets")


def shard_paths(data_dir: Union[str, Path], problem_name: str, split: str,
                num_shards: int) -> List[Path]:
    """The shard file paths of one split."""
    return [Path(data_dir) / f"{problem_name}-{split}-{i:05d}-of-{num_shards:05d}.tfrecord"
            for i in range(num_shards)]


def _serialize(inputs: Sequence[int], targets: Sequence[int]) -> bytes:
    feature = {
        "inputs": tf.train.Feature(int64_list=tf.train.Int64List(value=inputs)),
        "targets": tf.train.Feature(int64_list=tf.train.Int64List(value=targets)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


class ShuffledShardWriter:
    """Writes (inputs, targets) id pairs into shuffled shards, atomically.

    Examples go to a random shard (seeded) in a first pass; ``close`` shuffles each shard
    in memory and renames it into place. Use as a context manager; on error nothing is
    renamed and the temporary files are removed.
    """

    def __init__(self, paths: Sequence[Path], seed: int):
        self.paths = list(paths)
        self._rng = random.Random(seed)
        self._unshuffled = [p.with_name(p.name + ".unshuffled") for p in self.paths]
        self._writers = [tf.io.TFRecordWriter(str(p)) for p in self._unshuffled]
        self.count = 0

    def write(self, inputs: Sequence[int], targets: Sequence[int]) -> None:
        self._writers[self._rng.randrange(len(self._writers))].write(_serialize(inputs, targets))
        self.count += 1

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        for unshuffled, path in zip(self._unshuffled, self.paths):
            records = list(_iter_records(unshuffled))
            self._rng.shuffle(records)
            tmp = path.with_name(path.name + ".tmp")
            with tf.io.TFRecordWriter(str(tmp)) as writer:
                for record in records:
                    writer.write(record)
            os.replace(tmp, path)
            unshuffled.unlink()

    def abort(self) -> None:
        for writer in self._writers:
            writer.close()
        for unshuffled in self._unshuffled:
            unshuffled.unlink(missing_ok=True)

    def __enter__(self) -> "ShuffledShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _iter_records(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file we just wrote (length-prefixed frames; the CRCs
    are skipped), without building a tf.data pipeline per shard."""
    with open(path, "rb") as handle:
        while True:
            header = handle.read(12)  # uint64 length, uint32 masked CRC of the length
            if not header:
                return
            (length,) = struct.unpack("<Q", header[:8])
            yield handle.read(length)
            handle.read(4)  # masked CRC of the data


def parse_example(serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    """A serialized record -> ``{"inputs": int32 [s], "targets": int32 [t]}`` (no EOS)."""
    spec = {name: tf.io.RaggedFeature(tf.int64) for name in FEATURES}
    parsed = tf.io.parse_single_example(serialized, spec)
    return {name: tf.cast(parsed[name], tf.int32) for name in FEATURES}


def read_examples(paths: Iterable[Path]) -> List[Tuple[List[int], List[int]]]:
    """All (inputs, targets) id lists of the given shards, in file order (for tests, tools)."""
    dataset = tf.data.TFRecordDataset([str(p) for p in paths]).map(parse_example)
    return [(e["inputs"].tolist(), e["targets"].tolist()) for e in dataset.as_numpy_iterator()]
