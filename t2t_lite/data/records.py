"""TFRecord shards of id sequences: naming, shuffled atomic writing, parsing.

A record is a ``tf.train.Example`` with int64 lists ``inputs`` and ``targets`` (token ids
without EOS; the input pipeline appends it). Shard files are named
``<problem>-<split>-00003-of-00008.tfrecord`` and only ever appear complete: they are
written under a temporary name and renamed.
"""
from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from t2t_lite.user_paths import atomic_path

FEATURES = ("inputs", "targets")


def shard_paths(data_dir: Union[str, Path], problem_name: str, split: str,
                num_shards: int) -> List[Path]:
    """The shard file paths of one split."""
    return [Path(data_dir) / f"{problem_name}-{split}-{i:05d}-of-{num_shards:05d}.tfrecord"
            for i in range(num_shards)]


def serialize_pair(inputs: Sequence[int], targets: Sequence[int]) -> bytes:
    """One record: a ``tf.train.Example`` with int64 lists ``inputs`` and ``targets``,
    the same bytes in every process."""
    feature = {
        "inputs": tf.train.Feature(int64_list=tf.train.Int64List(value=inputs)),
        "targets": tf.train.Feature(int64_list=tf.train.Int64List(value=targets)),
    }
    # deterministic: map entries sorted by key ("inputs", "targets"); otherwise their order
    # may differ between processes (encoding workers) and so would the bytes.
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString(deterministic=True)


class ShuffledShardWriter:
    """Writes (inputs, targets) id pairs into shuffled shards, atomically.

    Examples go to a random shard (seeded) in a first pass; ``close`` shuffles each shard
    in memory and renames it into place. Use as a context manager; on error nothing is
    renamed and the temporary files are removed.

    With ``max_shard_examples``, memory stays bounded and the shard count grows with the
    corpus: at ``close``, a first-pass shard holding more examples is scattered (seeded)
    into ``ceil(count / max_shard_examples)`` output shards, each then shuffled in memory;
    ``shard_path(index, total)`` names the outputs and ``paths`` lists them after
    ``close``. Without splitting, the output is the same as without the limit.
    """

    def __init__(self, paths: Sequence[Path], seed: int, *,
                 max_shard_examples: Optional[int] = None,
                 shard_path: Optional[Callable[[int, int], Path]] = None):
        self.paths = list(paths)
        self._rng = random.Random(seed)
        self._unshuffled = [p.with_name(p.name + ".unshuffled") for p in self.paths]
        self._writers = [tf.io.TFRecordWriter(str(p)) for p in self._unshuffled]
        self._counts = [0] * len(self.paths)
        self._max = max_shard_examples
        self._shard_path = shard_path
        if max_shard_examples is not None and shard_path is None:
            raise ValueError("max_shard_examples needs shard_path to name the extra shards")
        self.count = 0

    def write(self, inputs: Sequence[int], targets: Sequence[int]) -> None:
        self.write_serialized(serialize_pair(inputs, targets))

    def write_serialized(self, record: bytes) -> None:
        """Writes one record made by ``serialize_pair`` (e.g. in another process)."""
        index = self._rng.randrange(len(self._writers))
        self._writers[index].write(record)
        self._counts[index] += 1
        self.count += 1

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        parts = [1 if self._max is None else max(1, -(-count // self._max))
                 for count in self._counts]
        if sum(parts) != len(self.paths):
            total = sum(parts)
            self.paths = [self._shard_path(i, total) for i in range(total)]
        outputs = iter(self.paths)
        for unshuffled, part in zip(self._unshuffled, parts):
            pieces = [next(outputs) for _ in range(part)]
            if part == 1:
                self._shuffle_into(list(_iter_records(unshuffled)), pieces[0])
            else:
                self._scatter(unshuffled, pieces)
            unshuffled.unlink()

    def _shuffle_into(self, records: List[bytes], path: Path) -> None:
        self._rng.shuffle(records)
        with atomic_path(path) as tmp, tf.io.TFRecordWriter(str(tmp)) as writer:
            for record in records:
                writer.write(record)

    def _scatter(self, unshuffled: Path, paths: List[Path]) -> None:
        """Scatters one over-full first-pass shard into ``paths`` (random, seeded), then
        shuffles each of them in memory."""
        scattered = [p.with_name(p.name + ".scattered") for p in paths]
        writers = [tf.io.TFRecordWriter(str(p)) for p in scattered]
        for record in _iter_records(unshuffled):
            writers[self._rng.randrange(len(writers))].write(record)
        for writer in writers:
            writer.close()
        for part, path in zip(scattered, paths):
            self._shuffle_into(list(_iter_records(part)), path)
            part.unlink()

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


@tf.autograph.experimental.do_not_convert  # tf.data would convert it: nothing to convert
def parse_example(serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    """A serialized record -> ``{"inputs": int32 [s], "targets": int32 [t]}`` (no EOS)."""
    spec = {name: tf.io.RaggedFeature(tf.int64) for name in FEATURES}
    parsed = tf.io.parse_single_example(serialized, spec)
    return {name: tf.cast(parsed[name], tf.int32) for name in FEATURES}


def read_examples(paths: Iterable[Path]) -> List[Tuple[List[int], List[int]]]:
    """All (inputs, targets) id lists of the given shards, in file order (for tests, tools)."""
    dataset = tf.data.TFRecordDataset([str(p) for p in paths]).map(parse_example)
    return [(e["inputs"].tolist(), e["targets"].tolist()) for e in dataset.as_numpy_iterator()]
