"""Data generation: raw text pairs -> vocabulary + shuffled TFRecord shards + a summary.

``generate(problem_name, data_dir, tmp_dir)`` is what ``t2t-lite-datagen`` and the
trainer's ``--generate_data`` call. Per split it writes the shards, a stats file
``<problem>-<split>.json`` (written last: its presence marks the split complete, so a
re-run reuses it) and, for every split except ``train``, the kept raw text
``<problem>-<split>.source.txt`` / ``.target.txt`` for BLEU. Examples that cannot be used
are dropped and counted by reason, with the file and line of the first occurrence. A split
left with no usable example is refused (``RawDataError`` naming its raw files), and an
error leaves no ``*.txt.tmp`` file behind. After each non-train split,
``problem.write_eval_references`` writes what the problem's metrics need besides that
text (parsing: ``<problem>-<split>.gold.txt``, the gold trees).

A run that completes writes ``<problem>-datagen.json`` (the splits it skipped, e.g. an
optional test set whose raw files are absent). A re-run whose vocabulary and splits are
all complete reuses them before looking at the source: no raw file is read or fetched,
so it succeeds offline even after the raw files were removed. ``tmp_dir`` defaults to
``DATA_DIR/raw`` (``raw.default_tmp_dir``), for the datagen command and the trainer alike.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple, Union

from tqdm import tqdm

from t2t_lite.data.encoding import default_workers, encode_batches
from t2t_lite.data.raw import RawDataError, TextPair, default_tmp_dir, fetch_raw_files  # noqa: F401
from t2t_lite.data.tfds_source import DATA_SOURCES
from t2t_lite.data.vocab import reservoir_sample
from t2t_lite.directory_lock import DirectoryLock
from t2t_lite.data.records import ShuffledShardWriter, shard_paths
from t2t_lite.errors import UserError
from t2t_lite.registry import PROBLEMS
from t2t_lite.user_paths import atomic_path, write_atomically

if TYPE_CHECKING:
    from t2t_lite.data.problem import Problem

DROP_EMPTY = "empty line"
DROP_UTF8 = "invalid UTF-8"
DROP_LONG = "longer than max_length"
_ENCODE_BATCH = 4096
DATAGEN_LOCK = "datagen.lock"  # held by generate_problem_data (DirectoryLock)
MAX_SHARD_EXAMPLES = 100_000  # more in one shard: datagen writes more shards (memory bound)


@dataclasses.dataclass
class DropCount:
    """How many examples were dropped for one reason, and where the first one was."""

    count: int
    first: str  # "train.en.gz line 17"


@dataclasses.dataclass
class SplitSummary:
    """The result of generating one split."""

    split: str
    examples: int
    shards: List[str]
    dropped: Dict[str, DropCount] = dataclasses.field(default_factory=dict)
    max_input_length: int = 0   # longest kept sequence, tokens without EOS
    max_target_length: int = 0
    reused: bool = False

    def to_json(self) -> str:
        values = dataclasses.asdict(self)
        values.pop("reused")
        return json.dumps(values, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "SplitSummary":
        values = json.loads(text)
        values["dropped"] = {k: DropCount(**v) for k, v in values["dropped"].items()}
        return cls(**values)


@dataclasses.dataclass
class DatagenSummary:
    """The result of ``generate``: vocabulary and per-split counts."""

    problem: str
    data_dir: str
    vocab_file: str
    vocab_size: int
    vocab_reused: bool
    splits: Dict[str, SplitSummary]
    skipped_splits: Dict[str, str] = dataclasses.field(default_factory=dict)

    def format(self) -> str:
        """A human-readable report."""
        lines = [f"problem {self.problem} -> {self.data_dir}",
                 f"vocabulary: {self.vocab_size} tokens in {self.vocab_file}"
                 + (" (reused)" if self.vocab_reused else "")]
        for summary in self.splits.values():
            dropped = sum(d.count for d in summary.dropped.values())
            lines.append(f"{summary.split}: {summary.examples:,} examples in "
                         f"{len(summary.shards)} shard(s), {dropped:,} dropped"
                         + (" (reused)" if summary.reused else ""))
            for reason, drop in summary.dropped.items():
                lines.append(f"    {reason}: {drop.count:,} (first: {drop.first})")
        for split, why in self.skipped_splits.items():
            lines.append(f"{split}: skipped ({why})")
        return "\n".join(lines)


def generate(problem_name: str, data_dir: Union[str, Path],
             tmp_dir: Optional[Union[str, Path]] = None, *, download: bool = True,
             data_source: str = "raw", tfds_data_dir: Optional[str] = None,
             workers: Optional[int] = None, wait: bool = False) -> DatagenSummary:
    """Generates the data of the registered problem ``problem_name``; see the module doc.
    (The problem comes from the registry: ``t2t_lite.data.problem`` calls this module, so
    this module does not import it.)"""
    problem = PROBLEMS.get(problem_name)()
    return generate_problem_data(problem, data_dir, tmp_dir, download=download,
                                 data_source=data_source, tfds_data_dir=tfds_data_dir,
                                 workers=workers, wait=wait)


class _RawReader:
    """Where datagen reads a split's text pairs: the problem's raw files in ``tmp_dir``."""

    def __init__(self, problem: "Problem", tmp_dir: Path):
        self.problem, self.tmp_dir = problem, tmp_dir

    def text_pairs(self, split: str) -> Iterator[TextPair]:
        return self.problem.text_pairs(split, self.tmp_dir)

    def split_source(self, split: str) -> str:
        return self.problem.split_source(split, self.tmp_dir)

    # What an empty split means here, and its fix (``_empty_split_error``).
    EMPTY = "its raw files hold no lines, or only empty or non-UTF-8 ones"
    FIX = "replace them with the real files"


class _TfdsReader:
    """Where datagen reads a split's text pairs: the problem's TFDS builder."""

    def __init__(self, source):
        self.source = source

    def text_pairs(self, split: str) -> Iterator[TextPair]:
        return self.source.text_pairs(split)

    def split_source(self, split: str) -> str:
        return f"{self.source.split_name(split)} ({self.source.describe()})"

    EMPTY = "the TFDS split holds no examples, or only empty or non-UTF-8 ones"

    @property
    def FIX(self) -> str:
        return (f"rebuild the dataset (tfds build {self.source.name}) or point "
                f"--tfds_data_dir at a complete copy")


def check_data_source(problem: "Problem", data_source: str) -> None:
    """Refuses a ``--data_source`` that ``problem.data_sources`` does not declare, with one
    ``UserError`` naming the valid ones (checked before any work)."""
    if data_source not in DATA_SOURCES:
        raise UserError(f"--data_source={data_source} is not one of {', '.join(DATA_SOURCES)}")
    if data_source in problem.data_sources:
        return
    valid = " or ".join(f"--data_source={source}" for source in problem.data_sources)
    if data_source == "tfds":
        raise UserError(f"problem {problem.name} has no TFDS builder; --data_source=tfds "
                        f"works for problems that name one (see docs/data.md), use "
                        f"{valid} for this one")
    where = f" ({problem.tfds.name})" if problem.tfds is not None else ""
    raise UserError(f"problem {problem.name} is read from TFDS{where} only, not from raw "
                    f"files; use {valid}")


def clean_pairs(pairs: Iterator[TextPair], dropped: Dict[str, DropCount]
                ) -> Iterator[Tuple[str, str, TextPair]]:
    """Decoded (source, target) of usable pairs; counts the dropped ones in ``dropped``."""
    for pair in pairs:
        texts = []
        for text, file in ((pair.source, pair.source_file), (pair.target, pair.target_file)):
            if isinstance(text, bytes):
                try:
                    text = text.decode("utf-8")
                except UnicodeDecodeError:
                    _count(dropped, DROP_UTF8, f"{file} line {pair.line}")
                    break
            if not text.strip():
                _count(dropped, DROP_EMPTY, f"{file} line {pair.line}")
                break
            texts.append(text)
        else:
            yield texts[0], texts[1], pair


def _count(dropped: Dict[str, DropCount], reason: str, where: str) -> None:
    if reason in dropped:
        dropped[reason].count += 1
    else:
        dropped[reason] = DropCount(1, where)


def generate_problem_data(problem: "Problem", data_dir: Union[str, Path],
                          tmp_dir: Optional[Union[str, Path]] = None, *, download: bool = True,
                          data_source: str = "raw", tfds_data_dir: Optional[str] = None,
                          workers: Optional[int] = None, wait: bool = False) -> DatagenSummary:
    """Fetches/locates raw files in ``tmp_dir`` (``data_source="raw"``; default
    ``default_tmp_dir``: ``DATA_DIR/raw``) or the problem's TFDS dataset (``"tfds"``, in
    ``tfds_data_dir``), builds or reuses the vocabulary, writes every split, encoding on
    ``workers`` processes (default: one per usable CPU core). When the vocabulary and
    every split are complete already, they are reused without looking at the source
    (no raw file, no network). Holds ``DATA_DIR/datagen.lock`` throughout: a second
    datagen into the same directory at once is refused (``DirectoryBusy``) naming the
    first or, with ``wait`` (the trainer's workers sharing one ``--data_dir``), waits for
    it and then reuses what it wrote."""
    data_dir = Path(data_dir)
    check_data_source(problem, data_source)
    lock = DirectoryLock(data_dir, DATAGEN_LOCK, "datagen (t2t-lite-datagen, or "
                         "t2t-lite-trainer --generate_data)", "--data_dir").acquire(wait)
    try:
        return _generate_locked(problem, data_dir, tmp_dir, download, data_source,
                                tfds_data_dir, workers)
    finally:
        lock.release(discard_unused=True)   # a failed first datagen leaves no directory


def _generate_locked(problem: "Problem", data_dir: Path, tmp_dir, download: bool,
                     data_source: str, tfds_data_dir: Optional[str],
                     workers: Optional[int]) -> DatagenSummary:
    """``generate_problem_data``'s work, under its lock."""
    tmp_dir = Path(tmp_dir) if tmp_dir is not None else default_tmp_dir(problem, data_dir)
    reused = _reuse_complete(problem, data_dir, tmp_dir if data_source == "raw" else None)
    if reused is not None:
        for split, summary in reused.splits.items():
            if split != "train":
                problem.write_eval_references(data_dir, tmp_dir, split, True)
        return reused
    workers = default_workers() if workers is None else workers
    if data_source == "tfds":
        source = problem.tfds.with_data_dir(tfds_data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        source.prepare(download)
        reader = _TfdsReader(source)
        splits = tuple(split for split in problem.splits if split in source.splits)
        skipped = {split: f"{source.name} has no such split" for split in problem.splits
                   if split not in splits}
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        reader = _RawReader(problem, tmp_dir)
        found = fetch_raw_files(problem.raw_files(), tmp_dir, download=download)
        splits = problem.available_splits(found)
        skipped = {split: "its raw files are absent" for split in problem.splits
                   if split not in splits}

    vocab_path = problem.vocab_path(data_dir)
    vocab_reused = vocab_path.exists()
    if vocab_reused:
        vocab = problem.load_vocab(data_dir)
    else:
        vocab = _build_vocab(problem, data_dir, reader)

    summaries = {}
    for split in splits:
        previous = _load_complete(problem, data_dir, split)
        if previous is not None and vocab_reused:
            previous.reused = True
            summaries[split] = previous
        else:
            summaries[split] = _write_split(problem, vocab, data_dir, reader, split, workers)
        if split != "train":
            problem.write_eval_references(data_dir, tmp_dir, split, summaries[split].reused)
    _write_manifest(problem, data_dir, skipped,
                    _raw_fingerprint(problem, tmp_dir) if data_source == "raw" else {})
    return DatagenSummary(problem.name, str(data_dir), str(vocab_path), vocab.vocab_size,
                          vocab_reused, summaries, skipped)


def manifest_path(data_dir: Union[str, Path], problem_name: str) -> Path:
    """``<problem>-datagen.json``: the splits a complete datagen run skipped, and why."""
    return Path(data_dir) / f"{problem_name}-datagen.json"


def _write_manifest(problem: "Problem", data_dir: Path, skipped: Dict[str, str],
                    raw_files: Dict[str, List[int]]) -> None:
    write_atomically(manifest_path(data_dir, problem.name),
                     json.dumps({"skipped_splits": skipped, "raw_files": raw_files}, indent=2))


def _raw_paths(problem: "Problem", tmp_dir: Path) -> List[Path]:
    """The raw files the data is made from that are present in ``tmp_dir``: the
    problem's ``raw_files``, or the ``split_files`` of a problem that names its files so."""
    paths = [tmp_dir / raw.name for raw in problem.raw_files()]
    split_files = getattr(problem, "split_files", None)
    if split_files is not None:
        for split in problem.splits:
            try:
                paths.extend(split_files(split, tmp_dir))
            except (RawDataError, ValueError):
                pass
    return [path for path in dict.fromkeys(paths) if path.is_file()]


def _raw_fingerprint(problem: "Problem", tmp_dir: Path) -> Dict[str, List[int]]:
    """{path: [size, modification time in ns]} of ``_raw_paths``."""
    fingerprint = {}
    for path in _raw_paths(problem, tmp_dir):
        stat = path.stat()
        fingerprint[str(path.resolve())] = [stat.st_size, stat.st_mtime_ns]
    return fingerprint


def _check_raw_unchanged(problem: "Problem", data_dir: Path, recorded: Dict[str, List[int]]
                         ) -> None:
    """Raises ``UserError`` naming the first raw file that the data in ``data_dir`` was
    made from and that has changed since (size or modification time); a raw file that
    is gone is no change (the data is reused offline)."""
    for name, (size, mtime_ns) in recorded.items():
        try:
            stat = Path(name).stat()
        except OSError:
            continue
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
            raise UserError(
                f"--data_dir={data_dir} holds {problem.name} data made from {name}, which "
                f"has changed since (size or modification time). To make the data again "
                f"from it, delete the {problem.name} files of --data_dir (or give a new "
                f"--data_dir); to keep the old data, restore the old file")


def _reuse_complete(problem: "Problem", data_dir: Path,
                    tmp_dir: Optional[Path]) -> Optional[DatagenSummary]:
    """The summary of a complete earlier run in ``data_dir``, or None when anything must
    be (re)generated. Complete: the vocabulary and every split are there, less the splits
    the earlier run skipped (``manifest_path``) whose raw files are still absent from
    ``tmp_dir`` (``None``: a TFDS source, whose splits do not change). A raw file of
    ``tmp_dir`` that changed since the data was made is refused (``_check_raw_unchanged``).
    """
    vocab_path = problem.vocab_path(data_dir)
    if not vocab_path.exists():
        return None
    manifest = manifest_path(data_dir, problem.name)
    skipped = (json.loads(manifest.read_text(encoding="utf-8"))["skipped_splits"]
               if manifest.exists() else {})
    if tmp_dir is not None and manifest.exists():
        _check_raw_unchanged(problem, data_dir,
                             json.loads(manifest.read_text(encoding="utf-8")).get("raw_files", {}))
    if tmp_dir is not None and skipped:
        present = {raw.name: tmp_dir / raw.name for raw in problem.raw_files()
                   if (tmp_dir / raw.name).exists()}
        if set(problem.available_splits(present)) & set(skipped):
            return None  # a skipped split's raw files have arrived since
    summaries = {split: _load_complete(problem, data_dir, split) for split in problem.splits
                 if split not in skipped}
    if any(summary is None for summary in summaries.values()):
        return None
    for summary in summaries.values():
        summary.reused = True
    vocab = problem.load_vocab(data_dir)
    return DatagenSummary(problem.name, str(data_dir), str(vocab_path), vocab.vocab_size,
                          True, summaries, skipped)


def _vocab_texts(reader) -> Iterator[str]:
    pairs = tqdm(reader.text_pairs("train"), desc="vocabulary: reading train",
                 unit=" pairs", mininterval=2.0)
    for source, target, _ in clean_pairs(pairs, {}):
        yield source
        yield target


class _RecordingTexts:
    """Iterates ``texts`` for a vocabulary trainer, remembering how many it gave and the
    exception that ended them: SentencePiece's C++ trainer wraps an exception raised by
    its sentence iterator into a ``RuntimeError`` text, losing its type."""

    def __init__(self, texts: Iterator[str]):
        self.texts, self.count, self.error = texts, 0, None

    def __iter__(self) -> Iterator[str]:
        try:
            for text in self.texts:
                self.count += 1
                yield text
        except Exception as error:
            self.error = error
            raise


def _build_vocab(problem: "Problem", data_dir: Path, reader):
    """Trains the vocabulary on a bounded sample of train (``VocabSpec.max_sentences``
    sentences, reservoir-sampled over the whole split); an error reading train (unaligned
    files, corrupt archives) keeps its own type and message, and an empty train split is
    refused."""
    texts = _RecordingTexts(reservoir_sample(_vocab_texts(reader),
                                             problem.vocab_spec.max_sentences))
    try:
        vocab = problem.build_vocab(texts, data_dir)
    except Exception:
        if texts.error is not None:
            raise texts.error from None
        if texts.count == 0:
            raise _empty_split_error(problem, "train", reader) from None
        raise
    if texts.count == 0:
        raise _empty_split_error(problem, "train", reader)
    return vocab


def _empty_split_error(problem: "Problem", split: str, reader,
                       dropped: Optional[Dict[str, DropCount]] = None) -> RawDataError:
    why = ("every pair was dropped: " + ", ".join(f"{reason}: {drop.count:,} (first: "
                                                 f"{drop.first})"
                                                 for reason, drop in dropped.items())
           if dropped else reader.EMPTY)
    return RawDataError(f"split {split!r} of {problem.name} has no usable examples ({why}): "
                        f"{reader.split_source(split)}; {reader.FIX}")


def stats_path(data_dir: Union[str, Path], problem_name: str, split: str) -> Path:
    return Path(data_dir) / f"{problem_name}-{split}.json"


def text_paths(data_dir: Union[str, Path], problem_name: str, split: str) -> Tuple[Path, Path]:
    """Where the kept raw (source, target) text of a non-train split is stored."""
    base = Path(data_dir) / f"{problem_name}-{split}"
    return base.with_name(base.name + ".source.txt"), base.with_name(base.name + ".target.txt")


def load_split_summary(data_dir: Union[str, Path], problem_name: str,
                       split: str) -> SplitSummary:
    """The stats of a generated split; a clear error when datagen has not produced it."""
    path = stats_path(data_dir, problem_name, split)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: split {split!r} of {problem_name} has not been generated "
            f"in {data_dir}; run t2t-lite-datagen --problem={problem_name} --data_dir={data_dir}")
    return SplitSummary.from_json(path.read_text(encoding="utf-8"))


def _load_complete(problem: "Problem", data_dir: Path, split: str) -> Optional[SplitSummary]:
    path = stats_path(data_dir, problem.name, split)
    if not path.exists():
        return None
    summary = SplitSummary.from_json(path.read_text(encoding="utf-8"))
    if all((data_dir / shard).exists() for shard in summary.shards):
        return summary
    return None


def _write_split(problem: "Problem", vocab, data_dir: Path, reader, split: str,
                 workers: int) -> SplitSummary:
    stats_path(data_dir, problem.name, split).unlink(missing_ok=True)
    dropped: Dict[str, DropCount] = {}
    summary = SplitSummary(split, 0, [], dropped)
    text_files = text_paths(data_dir, problem.name, split) if split != "train" else ()
    # The text files appear (renamed from their temporaries, handles closed first) only
    # when the split was written whole; any exception removes the temporaries.
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(stack.enter_context(atomic_path(path)), "w",
                                            encoding="utf-8"))
                   for path in text_files]
        _write_examples(problem, vocab, reader, split, data_dir, summary, handles, workers)
        if summary.examples == 0:
            raise _empty_split_error(problem, split, reader, summary.dropped)
    write_atomically(stats_path(data_dir, problem.name, split), summary.to_json())
    return summary


def _batches(items: Iterator[Tuple[str, str, TextPair]], origins: "collections.deque",
             handles) -> Iterator[List[Tuple[str, str]]]:
    """Groups cleaned pairs into batches of texts to encode; each batch's ``TextPair``s
    go to ``origins`` (for drop reports) and the kept text to ``handles``."""
    batch: List[Tuple[str, str]] = []
    origin: List[TextPair] = []
    for source, target, pair in items:
        batch.append((source, target))
        origin.append(pair)
        if handles:
            handles[0].write(source + "\n")
            handles[1].write(target + "\n")
        if len(batch) == _ENCODE_BATCH:
            origins.append(origin)
            yield batch
            batch, origin = [], []
    if batch:
        origins.append(origin)
        yield batch


def _write_examples(problem: "Problem", vocab, reader, split: str, data_dir: Path,
                    summary: SplitSummary, handles, workers: int) -> None:
    """Encodes the usable pairs of ``split`` into shuffled shards (``workers`` processes;
    the output does not depend on their number) and the kept text into ``handles``
    (closed here), counting them in ``summary``. The shard count is the problem's, or
    more when a shard would hold over ``MAX_SHARD_EXAMPLES`` examples."""
    pairs = tqdm(reader.text_pairs(split), desc=f"{split}: encoding", unit=" pairs",
                 mininterval=2.0)
    paths = shard_paths(data_dir, problem.name, split, problem.num_shards(split))
    name_shard = lambda index, total: shard_paths(data_dir, problem.name, split, total)[index]
    origins: "collections.deque" = collections.deque()
    too_long = f"{DROP_LONG} ({problem.max_length} tokens with EOS)"
    try:
        with ShuffledShardWriter(paths, seed=zlib.crc32(f"{problem.name}/{split}".encode()),
                                 max_shard_examples=MAX_SHARD_EXAMPLES,
                                 shard_path=name_shard) as writer:
            batches = _batches(clean_pairs(pairs, summary.dropped), origins, handles)
            for encoded in encode_batches(batches, vocab, problem.max_length, workers):
                for pair, (record, source_length, target_length) in zip(origins.popleft(),
                                                                        encoded):
                    if record is None:
                        file = (pair.source_file if source_length >= problem.max_length
                                else pair.target_file)
                        _count(summary.dropped, too_long, f"{file} line {pair.line}")
                        continue
                    writer.write_serialized(record)
                    summary.examples += 1
                    summary.max_input_length = max(summary.max_input_length, source_length)
                    summary.max_target_length = max(summary.max_target_length, target_length)
    finally:
        for handle in handles:
            handle.close()
    summary.shards = [path.name for path in writer.paths]
