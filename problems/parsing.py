"""English constituency parsing problems on the Penn Treebank (paper section 6.3).

Source = the sentence's words, target = the linearised tree (``t2t_lite.parsing.linearize``:
``(S (NP XX XX )NP (VP XX )VP XX )S``). The treebank is licensed, so nothing is downloaded:
``--tmp_dir`` names a folder the user already has.

| problem | ``--tmp_dir`` | splits | vocabulary |
| --- | --- | --- | --- |
| ``parsing_english_ptb16k`` | WSJ root (or a folder with ``wsj/``) | 02-21 / 22 / 23 | 16K |
| ``parsing_english_ptb32k`` | a folder with ``wsj/`` and ``extra/`` | same, train + extra | 32K |
| ``parsing_english_ptb_sample`` | the WSJ sample (``wsj_0001.mrg`` ...) | 0001-0159 / 0160-0169 / 0170-0179 | 4K |

The shared vocabulary is SentencePiece BPE in which every bracket token of the training
targets (``(NP``, ``)NP``, ...) and the placeholder ``XX`` is a user-defined symbol, so a
target is exactly one id per linearised token and ``detokenize(tokenize(target)) ==
target``. Beam and greedy search emit only well-formed trees over the input words
(``decode_constraint``); repair into a bracketed tree over the input words stays as a
counted fallback (``postprocess_decode``, ``postprocess_report``). Scores are EVALB's
(``COLLINS.prm``) against gold trees with their POS tags: ``--decode_reference`` reads
``.mrg`` files or one-tree-a-line files (``read_references``), and datagen writes each
dev/test split's gold trees to ``<problem>-<split>.gold.txt`` for the trainer's
evaluation (``eval_references``).
"""
from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import (TYPE_CHECKING, ClassVar, Dict, Iterable, Iterator, List, Optional, Sequence,
                    Tuple, Union)

import sentencepiece as spm

from t2t_lite.data.problem import Problem, VocabSpec, eval_text
from t2t_lite.data.raw import RawDataError, TextPair
from t2t_lite.errors import UserError
from t2t_lite.parsing.evalb_files import GOLD_SUFFIX, evalb_gold_tree, read_gold_trees
from t2t_lite.parsing.linearize import PLACEHOLDER, RepairReport, repair
from t2t_lite.parsing.treebank import (WSJ_LAYOUT, find_wsj_files, format_numbers,
                                       read_tree_file, tree_pairs)
from t2t_lite.parsing.trees import normalize
from t2t_lite.registry import register_problem

if TYPE_CHECKING:
    from t2t_lite.parsing.constraint import TreeConstraint
    from t2t_lite.data.vocab import SentencePieceVocab

PARSING_DECODE_DEFAULTS = {"beam_size": 21, "alpha": 0.3, "extra_length": 300}
EXTRA_SUFFIXES = (".mrg", ".txt", ".trees", ".tree")
_WORD_ESCAPES = (("(", "-LRB-"), (")", "-RRB-"))
_SPACE = "\u2581"  # SentencePiece's word-boundary mark
# The Penn Treebank's constituent labels: always whole symbols, seen in training or not.
PTB_LABELS = ("ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP", "PRN",
              "PRT", "QP", "RRC", "S", "SBAR", "SBARQ", "SINV", "SQ", "UCP", "VP", "WHADJP",
              "WHADVP", "WHNP", "WHPP", "X")


def escape_word(word: str) -> str:
    """A word as the treebank writes it: brackets become ``-LRB-`` / ``-RRB-``."""
    for char, escaped in _WORD_ESCAPES:
        word = word.replace(char, escaped)
    return word


def repair_to_bracketed(source: str, hypothesis: str) -> Tuple[str, RepairReport]:
    """The one-line bracketed tree that ``hypothesis`` (a linearised output) gives over
    the words of ``source``, and what had to be repaired.

    Always well formed over exactly the source words (split on whitespace; ``(`` and
    ``)`` inside words written ``-LRB-``/``-RRB-``); words get the dummy tag ``XX``. An
    empty source gives ``""``.
    """
    words = [escape_word(word) for word in source.split()]
    if not words:
        return "", RepairReport(sentences=1)
    tree, report = repair(hypothesis, words)
    return tree.to_string(), report


def repair_summary(sources: Sequence[str], hypotheses: Sequence[str]) -> str:
    """``repaired k of n outputs (kind=count, ...)`` over the non-blank ``sources``."""
    reports = [repair_to_bracketed(source, hypothesis)[1]
               for source, hypothesis in zip(sources, hypotheses) if source.split()]
    total = RepairReport.aggregate(reports)
    counts = ", ".join(f"{kind}={getattr(total, kind)}" for kind in RepairReport.REPAIR_KINDS
                       if getattr(total, kind))
    return (f"repaired {total.repaired_sentences} of {total.sentences} outputs"
            + (f" ({counts})" if counts else ""))


def _bracket_symbols(text: str) -> Iterator[str]:
    for token in text.split(" "):
        if len(token) > 1 and token[0] in "()" and "(" not in token[1:] and ")" not in token[1:]:
            yield token


def train_parsing_vocab(texts: Iterable[str], path: Union[str, Path], vocab_size: int, *,
                        max_sentences: int = 2_000_000, seed: int = 1) -> SentencePieceVocab:
    """Trains SentencePiece BPE on ``texts`` with the bracket tokens (``(L``, ``)L``) of every
    label seen in them or in ``PTB_LABELS``, and ``XX``, as whole user-defined symbols;
    writes it to ``path`` atomically.

    Texts are sampled (reservoir, seeded) down to ``max_sentences``; symbols are
    collected from all of them. Settings otherwise as ``vocab.train_sentencepiece``
    (identity normalisation, whitespace kept, byte fallback), so detokenisation gives
    back the text exactly.
    """
    from t2t_lite.data.vocab import EOS_ID, PAD_ID, UNK_ID, SentencePieceVocab  # imports TF
    rng = random.Random(seed)
    sample: List[str] = []
    symbols = {PLACEHOLDER} | {f"{side}{label}" for label in PTB_LABELS for side in "()"}
    for index, text in enumerate(texts):
        symbols.update(_bracket_symbols(text))
        if len(sample) < max_sentences:
            sample.append(text)
        else:
            slot = rng.randrange(index + 1)
            if slot < max_sentences:
                sample[slot] = text
    if not sample:
        raise RawDataError(f"no training text to learn the vocabulary {path} from; the train "
                           f"split's tree files hold no tree")
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample), model_writer=model, vocab_size=vocab_size,
        model_type="bpe", pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
        user_defined_symbols=[_SPACE + symbol for symbol in sorted(symbols)],
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, input_sentence_size=len(sample),
        hard_vocab_limit=False, minloglevel=2, num_threads=2)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(model.getvalue())
    os.replace(tmp, path)
    return SentencePieceVocab(path)


class ParsingProblem(Problem):
    """Words -> linearised tree, scored with EVALB F1; subclasses say which tree files
    make each split (``split_files``)."""

    eval_metrics = ("parse_f1",)
    decode_defaults = PARSING_DECODE_DEFAULTS
    max_length = 1024        # datagen keeps every WSJ tree (the longest is ~400 tokens)
    train_shards = 4

    def split_files(self, split: str, tmp_dir: Path) -> List[Path]:
        """The tree files of ``split``, in corpus order; raises ``RawDataError`` naming the
        expected layout when they are missing."""
        raise NotImplementedError

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        self.check_split(split)
        return tree_pairs(self.split_files(split, Path(tmp_dir)))  # checks files eagerly

    def build_vocab(self, texts: Iterable[str], data_dir: Union[str, Path]) -> SentencePieceVocab:
        spec = self.vocab_spec
        if spec.kind != "sentencepiece":
            raise ValueError(f"{self.name} builds a SentencePiece vocabulary with bracket "
                             f"symbols; VocabSpec.kind must be 'sentencepiece', got {spec.kind!r}")
        return train_parsing_vocab(texts, self.vocab_path(data_dir), spec.size,
                                   max_sentences=spec.max_sentences)

    def postprocess_decode(self, source: str, hypothesis: str) -> str:
        """The decoded linearisation repaired into a one-line bracketed tree over exactly
        the words of ``source`` (see ``repair_to_bracketed``)."""
        return repair_to_bracketed(source, hypothesis)[0]

    def decode_constraint(self, vocabulary) -> "TreeConstraint":
        """Beam and greedy search emit only well-formed trees over the input's words
        (``t2t_lite.parsing.constraint``)."""
        from t2t_lite.parsing.constraint import TreeConstraint  # TensorFlow: only when decoding
        return TreeConstraint.from_vocabulary(vocabulary)

    def postprocess_report(self, sources, hypotheses) -> str:
        """``repaired k of n outputs`` (and the repairs by kind): outputs that were not
        already a well-formed tree over their input words (blank inputs not counted)."""
        return repair_summary(sources, hypotheses)

    def read_references(self, path) -> List[str]:
        """Gold trees for ``--decode_reference``, in order, one line each under a ``TOP``
        root, as EVALB's gold file holds them (``evalb_files.read_gold_trees``): from a
        ``.mrg`` file, a file of one bracketed tree per line (e.g. the
        ``<problem>-test.gold.txt`` datagen writes), or a folder of ``.mrg`` files (read
        in name order). Linearised trees are refused: scores need the gold POS tags."""
        return [tree.to_string() for tree in read_gold_trees(path)]

    def gold_path(self, data_dir: Union[str, Path], split: str) -> Path:
        """Where datagen writes the gold trees of a dev/test split (EVALB's gold file)."""
        return Path(data_dir) / f"{self.name}-{split}{GOLD_SUFFIX}"

    def eval_references(self, data_dir: Union[str, Path], split: str) -> Tuple[str, ...]:
        """The gold trees of ``split`` (``gold_path``), aligned with ``eval_text``."""
        path = self.gold_path(data_dir, split)
        if not path.is_file():
            raise UserError(f"{path} does not exist: parse scores need the gold {split} trees "
                            f"with their POS tags; re-run t2t-lite-datagen --problem={self.name} "
                            f"--data_dir={data_dir} --tmp_dir=TREEBANK (it writes them)")
        return tuple(path.read_text(encoding="utf-8").splitlines())

    def write_eval_references(self, data_dir: Union[str, Path], tmp_dir: Union[str, Path],
                              split: str, reused: bool) -> None:
        """Writes ``gold_path``: every tree of the split that has words, as written with a
        ``TOP`` root, in corpus order, so line i is the gold tree of the kept source line
        i. Kept when the split was reused and the file exists."""
        path = self.gold_path(data_dir, split)
        if reused and path.is_file():
            return
        lines = []
        for file in self.split_files(split, Path(tmp_dir)):
            for tree, _ in read_tree_file(file, normalized=False):
                if normalize(tree) is not None:
                    lines.append(evalb_gold_tree(tree).to_string())
        sources = eval_text(self, data_dir, split)[0]
        if len(sources) != len(lines):
            raise RawDataError(f"{split} of {self.name}: {len(lines)} gold trees in {tmp_dir} "
                               f"but {len(sources)} kept sentences in {data_dir}; the tree "
                               f"files changed since datagen: re-run it in an empty --data_dir")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, path)


class WsjSectionsProblem(ParsingProblem):
    """The WSJ split by section: 02-21 train, 22 dev, 23 test (all required).

    The WSJ root is ``wsj_dir`` when given, else ``TMP_DIR/wsj`` when that folder exists,
    else ``TMP_DIR`` itself.
    """

    SECTIONS: ClassVar[Dict[str, Tuple[int, ...]]] = {
        "train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}

    def __init__(self, vocab_spec: Optional[VocabSpec] = None,
                 wsj_dir: Optional[Union[str, Path]] = None):
        super().__init__(vocab_spec)
        self.wsj_dir = Path(wsj_dir) if wsj_dir is not None else None

    def wsj_root(self, tmp_dir: Path) -> Path:
        if self.wsj_dir is not None:
            return self.wsj_dir
        return tmp_dir / "wsj" if (tmp_dir / "wsj").is_dir() else tmp_dir

    def split_files(self, split: str, tmp_dir: Path) -> List[Path]:
        self.check_split(split)
        root = self.wsj_root(Path(tmp_dir))
        where = (f"Pass the WSJ root as --tmp_dir (or link it as TMP_DIR/wsj); the treebank "
                 f"is licensed (LDC99T42) and never downloaded")
        try:
            files = find_wsj_files(root)
        except RawDataError as error:
            raise RawDataError(f"{self.name}: {error}. {where}") from None
        needed = sorted(s for sections in self.SECTIONS.values() for s in sections)
        present = {number // 100 for number in files}
        missing = [s for s in needed if s not in present]
        if missing:
            raise RawDataError(
                f"{self.name}: {root} lacks WSJ section(s) {format_numbers(missing, 2)}. It "
                f"reads sections 02-21 (train), 22 (dev) and 23 (test) as .mrg files in "
                f"{WSJ_LAYOUT}. {where}")
        sections = self.SECTIONS[split]
        return [path for number, path in sorted(files.items()) if number // 100 in sections]


@register_problem("parsing_english_ptb16k")
class ParsingEnglishPtb16k(WsjSectionsProblem):
    """WSJ only (the paper's 91.3 F1 setting); shared 16K vocabulary."""

    vocab_spec = VocabSpec(kind="sentencepiece", size=16000)


@register_problem("parsing_english_ptb32k")
class ParsingEnglishPtb32k(WsjSectionsProblem):
    """Semi-supervised (the paper's 92.7 F1 setting): WSJ 02-21 plus the extra parsed
    sentences of ``extra_dir`` (default ``TMP_DIR/extra``) in train; 32K vocabulary.

    Extra files (searched recursively, read in path order): ``.mrg`` treebank files, or
    ``.txt``/``.trees``/``.tree`` files with one bracketed tree per line; each may be
    gzipped (``.gz``). Other files are ignored.
    """

    vocab_spec = VocabSpec(kind="sentencepiece", size=32000)

    def __init__(self, vocab_spec: Optional[VocabSpec] = None,
                 wsj_dir: Optional[Union[str, Path]] = None,
                 extra_dir: Optional[Union[str, Path]] = None):
        super().__init__(vocab_spec, wsj_dir)
        self.extra_dir = Path(extra_dir) if extra_dir is not None else None

    def extra_files(self, tmp_dir: Path) -> List[Path]:
        """The extra tree files; raises ``RawDataError`` when there are none."""
        root = self.extra_dir if self.extra_dir is not None else Path(tmp_dir) / "extra"
        expected = (f"{self.name} adds extra parsed sentences from {root}: .mrg files, or "
                    f"{'/'.join(EXTRA_SUFFIXES[1:])} files with one bracketed tree per line "
                    f"(optionally .gz). Put or link them there (TMP_DIR/extra), next to the "
                    f"WSJ root at TMP_DIR/wsj")
        if not root.is_dir():
            raise RawDataError(f"{root} does not exist. {expected}")
        files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")
                       and p.name.removesuffix(".gz").endswith(EXTRA_SUFFIXES))
        if not files:
            raise RawDataError(f"{root} holds no tree file. {expected}")
        return files

    def split_files(self, split: str, tmp_dir: Path) -> List[Path]:
        files = super().split_files(split, tmp_dir)
        return files + self.extra_files(tmp_dir) if split == "train" else files


@register_problem("parsing_english_ptb_sample")
class ParsingEnglishPtbSample(ParsingProblem):
    """The WSJ sample (``wsj_0001.mrg`` ... ``wsj_0179.mrg``, 3,669 trees) split by file
    number: 0001-0159 train (3,396 trees), 0160-0169 dev (105), 0170-0179 test (168).
    ``--tmp_dir`` is the sample folder (flat, or in the standard layout). 4K vocabulary."""

    vocab_spec = VocabSpec(kind="sentencepiece", size=4000)
    train_shards = 2
    FILE_RANGES: ClassVar[Dict[str, Tuple[int, int]]] = {
        "train": (1, 159), "dev": (160, 169), "test": (170, 179)}

    def split_files(self, split: str, tmp_dir: Path) -> List[Path]:
        self.check_split(split)
        try:
            files = find_wsj_files(tmp_dir)
        except RawDataError as error:
            raise RawDataError(f"{self.name}: {error}") from None
        missing = [n for n in range(1, 180) if n not in files]
        if missing:
            raise RawDataError(
                f"{self.name}: {tmp_dir} lacks wsj_{format_numbers(missing, 4)}.mrg; it needs "
                f"the Penn Treebank WSJ sample files wsj_0001.mrg ... wsj_0179.mrg (as NLTK's "
                f"'treebank' corpus ships them) in one folder, passed as --tmp_dir")
        low, high = self.FILE_RANGES[split]
        return [files[n] for n in range(low, high + 1)]
