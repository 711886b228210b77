"""The problem API: what data a task needs, how it becomes ids, and how it is scored.

A problem is a class registered with ``@register_problem("name")``. It declares the raw
files it needs (``raw_files``), yields aligned (source, target) text per split
(``text_pairs``), owns a shared source/target vocabulary (``VocabSpec``), its datagen
length limit, shard counts, evaluation metrics and decoding defaults. Translation and
parsing problems share this API; only their raw readers, vocabularies and metrics differ.

    problem = get_problem("translate_ende_multi30k")
    summary = problem.generate_data(data_dir, tmp_dir)
    vocab = problem.load_vocab(data_dir)       # a tf.Module: tokenize / detokenize in graph

Importing this module (and so a problem module) does not import TensorFlow: ``datagen``
and ``vocab`` are imported where they are used, so listing the registered problems
stays fast.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import (TYPE_CHECKING, ClassVar, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

from t2t_lite.data.raw import RawFile, TextPair
from t2t_lite.data.tfds_source import TfdsSource
from t2t_lite.errors import UserError
from t2t_lite.registry import PROBLEMS

if TYPE_CHECKING:
    from t2t_lite.data import datagen
    from t2t_lite.data.vocab import Vocabulary

VOCAB_KINDS = ("sentencepiece", "wordpiece")
TRANSLATION_DECODE_DEFAULTS = {"beam_size": 4, "alpha": 0.6, "extra_length": 50}


@dataclasses.dataclass(frozen=True)
class VocabSpec:
    """How a problem's shared vocabulary is built."""

    kind: str = "sentencepiece"      # "sentencepiece" (BPE) or "wordpiece"
    size: int = 8000                 # target size (exact for BPE, an upper bound for word-pieces)
    byte_fallback: bool = True       # BPE only: unseen characters survive as bytes
    max_sentences: int = 2_000_000   # sentences (source and target) sampled for training it

    def __post_init__(self):
        if self.kind not in VOCAB_KINDS:
            raise ValueError(f"VocabSpec.kind must be one of {VOCAB_KINDS}, got {self.kind!r}")
        if self.size <= 3:
            raise ValueError(f"VocabSpec.size must exceed the 3 reserved ids, got {self.size}")


class Problem:
    """Base class of every problem; subclasses set the class attributes and readers."""

    splits: ClassVar[Tuple[str, ...]] = ("train", "dev", "test")
    vocab_spec: ClassVar[VocabSpec] = VocabSpec()
    max_length: ClassVar[int] = 1024          # datagen drops longer examples (tokens + EOS)
    train_shards: ClassVar[int] = 10
    eval_shards: ClassVar[int] = 1
    eval_metrics: ClassVar[Tuple[str, ...]] = ()
    decode_defaults: ClassVar[Mapping[str, float]] = {}
    tfds: ClassVar[Optional[TfdsSource]] = None  # builder for datagen's --data_source=tfds
    # The --data_source values datagen may read this problem from ("raw": raw_files and
    # text_pairs; "tfds": the ``tfds`` builder); another is refused before any work.
    data_sources: ClassVar[Tuple[str, ...]] = ("raw",)

    def __init__(self, vocab_spec: Optional[VocabSpec] = None):
        """``vocab_spec`` replaces the class's (e.g. a small vocabulary for a miniature corpus)."""
        if vocab_spec is not None:
            self.vocab_spec = vocab_spec

    @property
    def name(self) -> str:
        """The name this problem's class was registered under."""
        name = vars(type(self)).get("registered_name")
        if name is not None:
            return name
        raise LookupError(f"{type(self).__name__} is not registered; decorate it with "
                          f"@register_problem('name') in a module of your --t2t_usr_dir")

    @property
    def vocab_size(self) -> int:
        """The configured vocabulary size; ``load_vocab(data_dir).vocab_size`` is the built one."""
        return self.vocab_spec.size

    # Raw data ------------------------------------------------------------------------
    def raw_files(self) -> Tuple[RawFile, ...]:
        """Files needed in ``tmp_dir`` (none for generated problems)."""
        return ()

    def available_splits(self, found: Mapping[str, Path]) -> Tuple[str, ...]:
        """The splits whose raw files are present (``found``: file name -> path)."""
        return self.splits

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        """Aligned (source, target) text of ``split`` read from ``tmp_dir``."""
        raise NotImplementedError

    def split_source(self, split: str, tmp_dir: Path) -> str:
        """Where ``split``'s raw text comes from, for error messages (e.g. the two files)."""
        return f"the raw files of split {split!r} in {tmp_dir}"

    def num_shards(self, split: str) -> int:
        return self.train_shards if split == "train" else self.eval_shards

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise ValueError(f"problem {self.name} has no split {split!r}; "
                             f"its splits: {', '.join(self.splits)}")

    # Vocabulary ----------------------------------------------------------------------
    @property
    def vocab_filename(self) -> str:
        from t2t_lite.data.vocab import SPM_SUFFIX, WORDPIECE_SUFFIX
        suffix = SPM_SUFFIX if self.vocab_spec.kind == "sentencepiece" else WORDPIECE_SUFFIX
        return f"vocab.{self.name}.{self.vocab_spec.size}{suffix}"

    def vocab_path(self, data_dir: Union[str, Path]) -> Path:
        return Path(data_dir) / self.vocab_filename

    def build_vocab(self, texts: Iterable[str], data_dir: Union[str, Path]) -> "Vocabulary":
        """Trains the shared vocabulary on ``texts`` and writes it into ``data_dir``."""
        from t2t_lite.data.vocab import train_sentencepiece, train_wordpiece
        spec = self.vocab_spec
        if spec.kind == "sentencepiece":
            return train_sentencepiece(texts, self.vocab_path(data_dir), spec.size,
                                       byte_fallback=spec.byte_fallback,
                                       max_sentences=spec.max_sentences)
        return train_wordpiece(texts, self.vocab_path(data_dir), spec.size,
                               max_sentences=spec.max_sentences)

    def load_vocab(self, data_dir: Union[str, Path]) -> "Vocabulary":
        """The vocabulary written by datagen into ``data_dir`` (or a run directory)."""
        from t2t_lite.data.vocab import load_vocabulary
        return load_vocabulary(self.vocab_path(data_dir))

    # Generated data ------------------------------------------------------------------
    def generate_data(self, data_dir: Union[str, Path],
                      tmp_dir: Optional[Union[str, Path]] = None, *,
                      download: bool = True) -> "datagen.DatagenSummary":
        """Builds the vocabulary and the TFRecord shards of every split, from raw files in
        ``tmp_dir`` (default ``DATA_DIR/raw``); see ``datagen``."""
        from t2t_lite.data import datagen
        return datagen.generate_problem_data(self, data_dir, tmp_dir, download=download)

    def shard_files(self, data_dir: Union[str, Path], split: str) -> Tuple[Path, ...]:
        from t2t_lite.data import datagen
        self.check_split(split)
        summary = datagen.load_split_summary(data_dir, self.name, split)
        return tuple(Path(data_dir) / shard for shard in summary.shards)

    # Decoding (t2t-lite-decoder) -------------------------------------------------------
    def postprocess_decode(self, source: str, hypothesis: str) -> str:
        """The line the decoder writes for ``hypothesis`` (the raw detokenised model output)
        of ``source``; identity here (parsing repairs it into a tree)."""
        return hypothesis

    def decode_constraint(self, vocabulary: Vocabulary):
        """What the search may emit (a ``SearchConstraint`` over ``vocabulary``'s ids, built
        once per ``Translator``), or None for no restriction (here: none)."""
        return None

    def postprocess_report(self, sources: Sequence[str],
                           hypotheses: Sequence[str]) -> Optional[str]:
        """One line about what ``postprocess_decode`` had to change over a whole decode
        (parsing: ``repaired k of n outputs``), or None when there is nothing to say."""
        return None

    def metric_hypotheses(self, sources: Sequence[str],
                          hypotheses: Sequence[str]) -> List[str]:
        """The raw hypotheses as ``eval_metrics`` read them (parsing with words in the
        target: the ``XX`` linearisation); here unchanged."""
        return list(hypotheses)

    def read_references(self, path: Union[str, Path]) -> List[str]:
        """References for ``--decode_reference``, one per input line, compared with the raw
        hypotheses by ``eval_metrics``; here the UTF-8 lines of ``path``."""
        data = Path(path).read_bytes()
        try:
            text = data.decode("utf-8-sig")   # -sig: a leading byte-order mark goes
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise UserError(f"{path}:{line}: not valid UTF-8 ({error.reason}); fix or "
                            f"re-encode the reference file") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    def eval_references(self, data_dir: Union[str, Path], split: str) -> Tuple[str, ...]:
        """What ``eval_metrics`` compare the decoded sources of ``eval_text(split)`` with
        during training; here the kept target text (parsing: the gold trees)."""
        return eval_text(self, data_dir, split)[1]

    def write_eval_references(self, data_dir: Union[str, Path], tmp_dir: Union[str, Path],
                              split: str, reused: bool) -> None:
        """Datagen's hook after a non-train split is written (``reused``: kept from an
        earlier run): files ``eval_references`` needs besides the kept text; none here."""


class TranslationProblem(Problem):
    """A text-to-text translation problem scored with BLEU."""

    eval_metrics = ("bleu",)
    decode_defaults = TRANSLATION_DECODE_DEFAULTS


def get_problem(name: str) -> Problem:
    """An instance of the registered problem ``name`` (unknown names list the known ones)."""
    return PROBLEMS.get(name)()


def eval_text(problem: Problem, data_dir: Union[str, Path],
              split: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The raw (sources, references) of a non-train split, in corpus order, for BLEU.

    Holds every usable pair of the split, including those dropped from the TFRecords for
    length (a BLEU figure is over the whole test set).
    """
    from t2t_lite.data import datagen
    problem.check_split(split)
    if split == "train":
        raise ValueError("eval_text serves dev/test splits; train text is not kept")
    source_path, target_path = datagen.text_paths(data_dir, problem.name, split)
    if not source_path.exists():
        datagen.load_split_summary(data_dir, problem.name, split)  # raises the clear error
        raise FileNotFoundError(f"{source_path} is missing; re-run t2t-lite-datagen "
                                f"--problem={problem.name} --data_dir={data_dir}")
    read = lambda path: tuple(path.read_bytes().decode("utf-8").split("\n")[:-1])
    return read(source_path), read(target_path)
