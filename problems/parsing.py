"""English constituency parsing problems on the Penn Treebank (paper section 6.3).

Source = the sentence's words, target = the linearised tree (``t2t_lite.parsing.linearize``:
``(S (NP XX XX )NP (VP XX )VP XX )S``, or with ``words_in_target``
``(S (NP The dog )NP (VP barks )VP . )S``). The treebank is licensed, so nothing is downloaded:
``--tmp_dir`` names a folder the user already has.

| problem | ``--tmp_dir`` | splits | vocabulary |
| --- | --- | --- | --- |
| ``parsing_english_ptb16k`` | WSJ root (or a folder with ``wsj/``) | 02-21 / 22 / 23 | 16K |
| ``parsing_english_ptb32k`` | a folder with ``wsj/`` and ``extra/`` | same, train + extra | 32K |
| ``parsing_english_ptb_sample`` | the WSJ sample (``wsj_0001.mrg`` ...) | 0001-0159 / 0160-0169 / 0170-0179 | 4K |
| ``parsing_english_ptb_sample_words`` | the same | the same, words in the target | 4K |

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

Tree files (``t2t_lite.parsing.treebank.read_tree_file`` reads each):

* ``find_wsj_files(root)`` maps file numbers to ``.mrg`` paths in the standard layout
  ``WSJ_ROOT/NN/wsj_NNxx.mrg`` (``NN`` the two-digit section) or in one flat folder of
  ``wsj_NNxx.mrg`` files (both may be mixed; a number found twice is an error).
* ``tree_pairs(paths)`` turns their trees into ``TextPair(words, linearised tree)``; a
  tree without words becomes an empty pair, which datagen counts as dropped with its
  file and line.

The library side (vocabulary, repair, EVALB) is in ``t2t_lite.parsing``:
``train_parsing_vocab`` (``parsing.vocab``), ``repair_to_bracketed``, ``repair_summary``
and ``escape_word`` (``parsing.linearize``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from t2t_lite.data.problem import Problem, VocabSpec, eval_text
from t2t_lite.data.raw import RawDataError, TextPair
from t2t_lite.errors import UserError
from t2t_lite.parsing.evalb_files import GOLD_SUFFIX, evalb_gold_tree, read_gold_trees
from t2t_lite.parsing.linearize import (linearize, placeholders_from_words, repair_summary,
                                        repair_to_bracketed, source_text)
from t2t_lite.parsing.treebank import read_tree_file
from t2t_lite.parsing.trees import normalize
from t2t_lite.parsing.vocab import train_parsing_vocab
from t2t_lite.registry import register_problem
from t2t_lite.user_paths import write_atomically

if TYPE_CHECKING:
    from t2t_lite.parsing.constraint import TreeConstraint
    from t2t_lite.data.vocab import SentencePieceVocab

PARSING_DECODE_DEFAULTS = {"beam_size": 21, "alpha": 0.3, "extra_length": 300}
EXTRA_SUFFIXES = (".mrg", ".txt", ".trees", ".tree")


# Treebank files: the WSJ layouts and the datagen pairs of their trees -------------------
WSJ_FILE = re.compile(r"^wsj_(\d{4})\.mrg$")
SECTION_DIR = re.compile(r"^\d{2}$")
WSJ_LAYOUT = ("the standard layout WSJ_ROOT/NN/wsj_NNxx.mrg (NN = two-digit section, e.g. "
              "WSJ_ROOT/02/wsj_0200.mrg, as in LDC99T42 treebank_3/parsed/mrg/wsj), or every "
              "wsj_NNxx.mrg file in one flat folder")


def find_wsj_files(root: Union[str, Path]) -> Dict[int, Path]:
    """``{file number: path}`` of every ``wsj_NNNN.mrg`` under ``root`` (see module doc).

    Raises ``RawDataError`` when ``root`` is not a directory or a file number appears
    twice. Returns an empty dict when the directory holds no WSJ file.
    """
    root = Path(root)
    if not root.is_dir():
        where = "" if root.is_absolute() else f" (that is {root.absolute()})"
        raise RawDataError(f"WSJ directory {root}: no such directory{where}; expected "
                           f"{WSJ_LAYOUT}")
    found: Dict[int, Path] = {}
    candidates = list(root.iterdir())
    for sub in sorted(p for p in candidates if p.is_dir() and SECTION_DIR.match(p.name)):
        candidates.extend(sub.iterdir())
    for path in sorted(candidates):
        match = WSJ_FILE.match(path.name)
        if not match or not path.is_file():
            continue
        number = int(match.group(1))
        if number in found:
            raise RawDataError(f"{found[number]} and {path} are both WSJ file {number:04d}; "
                               f"keep one of them")
        found[number] = path
    return found


def format_numbers(numbers: Iterable[int], width: int) -> str:
    """``[2, 3, 4, 7]`` -> ``"02-04, 07"``: compact ranges for error messages."""
    numbers = sorted(set(numbers))
    ranges: List[Tuple[int, int]] = []
    for n in numbers:
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], n)
        else:
            ranges.append((n, n))
    return ", ".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}"
                     for a, b in ranges)


def tree_pairs(paths: Iterable[Union[str, Path]], words_in_target: bool = False
               ) -> Iterator[TextPair]:
    """``TextPair(words, linearised tree)`` for each tree of ``paths`` in order (the tree
    with its words in place of ``XX`` when ``words_in_target``).

    A tree without words gives an empty pair (datagen counts it as dropped, naming its
    file and line).
    """
    for path in paths:
        name = str(path)
        for tree, line in read_tree_file(path):
            if tree is None:
                yield TextPair("", "", name, name, line)
            else:
                yield TextPair(source_text(tree), linearize(tree, words=words_in_target),
                               name, name, line)


class ParsingProblem(Problem):
    """Words -> linearised tree, scored with EVALB F1; subclasses say which tree files
    make each split (``split_files``). ``words_in_target``: the target spells each word
    where the paper's linearisation writes ``XX`` (``(S (NP The dog )NP ...``), and search
    copies the source's pieces into those places."""

    words_in_target: ClassVar[bool] = False
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
        return tree_pairs(self.split_files(split, Path(tmp_dir)),  # checks files eagerly
                          words_in_target=self.words_in_target)

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
        return repair_to_bracketed(source, hypothesis, self.words_in_target)[0]

    def decode_constraint(self, vocabulary) -> "TreeConstraint":
        """Beam and greedy search emit only well-formed trees over the input's words
        (``t2t_lite.parsing.constraint``)."""
        from t2t_lite.parsing.constraint import TreeConstraint  # TensorFlow: only when decoding
        return TreeConstraint.from_vocabulary(vocabulary, words_in_target=self.words_in_target)

    def metric_hypotheses(self, sources, hypotheses) -> List[str]:
        """With words in the target, each hypothesis in the ``XX`` linearisation that
        ``parse_f1`` reads (``placeholders_from_words``)."""
        if not self.words_in_target:
            return list(hypotheses)
        return [" ".join(placeholders_from_words(hypothesis, source.split()))
                for source, hypothesis in zip(sources, hypotheses)]

    def postprocess_report(self, sources, hypotheses) -> str:
        """``repaired k of n outputs`` (and the repairs by kind): outputs that were not
        already a well-formed tree over their input words (blank inputs not counted)."""
        return repair_summary(sources, hypotheses, self.words_in_target)

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
        write_atomically(path, "".join(line + "\n" for line in lines))


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


@register_problem("parsing_english_ptb_sample_words")
class ParsingEnglishPtbSampleWords(ParsingEnglishPtbSample):
    """``parsing_english_ptb_sample`` with the words in the target:
    ``(S (NP The dog )NP (VP barks )VP . )S``. The decoder sees the word it has just
    placed, so it need not count ``XX`` tokens to know where in the sentence it is."""

    words_in_target = True
