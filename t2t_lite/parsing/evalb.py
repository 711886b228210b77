"""Labeled bracketing scores computed as EVALB does with its standard ``COLLINS.prm``.

The rules (EVALB by Sekine and Collins, parameter file ``COLLINS.prm``):

* A bracket is a constituent above the POS level, scored as (label, start, end) over
  word positions. Preterminals (POS tags) are not brackets.
* ``DELETE_LABEL , : `` '' .``: words whose POS tag is punctuation are removed before
  spans are computed, so they never count for a span; a bracket whose span becomes
  empty is not scored. Model output from a linearised tree has no POS tags, so the
  punctuation positions are taken from the *gold* tree (EVALB aligns words by position;
  the result equals EVALB's on a test file carrying the gold tags).
* ``DELETE_LABEL TOP``: the root is not scored (trees here come without it; a root
  labeled ``""``, ``TOP`` or ``ROOT`` is skipped too).
* Labels are cut at the first ``-`` or ``=`` (``NP-SBJ`` -> ``NP``), and
  ``EQ_LABEL ADVP PRT`` makes ADVP and PRT the same label.
* Brackets are multisets: a unary chain ``(NP (NP ...))`` gives two NP brackets over
  the same span, and each test bracket matches at most one gold bracket.
* Recall = matched / gold brackets, precision = matched / test brackets,
  F1 = 2PR / (P + R), exact match = sentences with matched = gold = test brackets, all
  as percentages over the valid sentences; a sentence with no word left after
  deletion is skipped, as EVALB does.
* ``CUTOFF_LEN 40`` with ``DELETE_LABEL_FOR_LENGTH -NONE-``: the ``len40`` figures
  cover sentences of at most 40 words, punctuation included.
* Gold and test must have the same words; a difference is an ``EvalbError`` naming
  the sentence number (EVALB's "Length unmatch" / "Words unmatch").
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields
from typing import Iterable, List, Sequence, Tuple

from t2t_lite.errors import UserError
from t2t_lite.parsing.trees import Tree

PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})
NONE_TAG = "-NONE-"
ROOT_LABELS = frozenset({"", "TOP", "ROOT"})
EQUIVALENT_LABELS = {"PRT": "ADVP"}
CUTOFF_LENGTH = 40

Bracket = Tuple[str, int, int]


class EvalbError(UserError):
    """Gold and test sentences cannot be compared (different words)."""


def evalb_label(label: str) -> str:
    """A bracket label as EVALB compares it: cut at ``-``/``=``, PRT read as ADVP."""
    for position, char in enumerate(label):
        if char in "-=":
            label = label[:position]
            break
    return EQUIVALENT_LABELS.get(label, label)


def sentence_brackets(tree: Tree, deleted: Sequence[bool]) -> List[Bracket]:
    """The scored brackets of ``tree``; ``deleted[i]`` removes word ``i`` from spans."""
    brackets: List[Bracket] = []

    def visit(node: Tree, position: int, kept_before: int) -> Tuple[int, int]:
        """Returns (words, kept words) under ``node``; appends its brackets."""
        if node.is_preterminal:
            return 1, 0 if deleted[position] else 1
        words = kept = 0
        for child in node.children:
            child_words, child_kept = visit(child, position + words, kept_before + kept)
            words += child_words
            kept += child_kept
        if kept and node.label not in ROOT_LABELS:
            brackets.append((evalb_label(node.label), kept_before, kept_before + kept))
        return words, kept

    visit(tree, 0, 0)
    return brackets


@dataclass(frozen=True)
class SentenceCounts:
    """Bracket counts of one sentence, or sums over several (EVALB's per-line figures)."""

    sentences: int = 0
    skipped_sentences: int = 0
    matched_brackets: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    exact_matches: int = 0
    crossing_brackets: int = 0
    words: int = 0

    def __add__(self, other: "SentenceCounts") -> "SentenceCounts":
        return SentenceCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                                 for f in fields(self)})

    @property
    def recall(self) -> float:
        return 100.0 * self.matched_brackets / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched_brackets / self.test_brackets if self.test_brackets else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def exact_match(self) -> float:
        return 100.0 * self.exact_matches / self.sentences if self.sentences else 0.0


def _crossing(gold: Sequence[Bracket], test: Sequence[Bracket]) -> int:
    """Test brackets that cross at least one gold bracket."""
    count = 0
    for _, t_start, t_end in test:
        if any((g_start < t_start < g_end < t_end) or (t_start < g_start < t_end < g_end)
               for _, g_start, g_end in gold):
            count += 1
    return count


def evaluate_sentence(gold: Tree, test: Tree, number: int = 1,
                      check_words: bool = True) -> SentenceCounts:
    """EVALB's counts for one sentence; ``number`` (1-based) names it in errors."""
    gold_leaves = list(gold.preterminals())
    test_words = test.words()
    if len(gold_leaves) != len(test_words):
        raise EvalbError(f"sentence {number}: gold has {len(gold_leaves)} words, "
                         f"test has {len(test_words)}")
    if check_words:
        for position, (leaf, word) in enumerate(zip(gold_leaves, test_words)):
            if leaf.word != word:
                raise EvalbError(f"sentence {number}: word {position + 1} differs "
                                 f"(gold {leaf.word!r}, test {word!r})")
    deleted = [leaf.label in PUNCTUATION_TAGS or leaf.label == NONE_TAG
               for leaf in gold_leaves]
    kept_words = deleted.count(False)
    if kept_words == 0:
        return SentenceCounts(skipped_sentences=1)
    gold_brackets = sentence_brackets(gold, deleted)
    test_brackets = sentence_brackets(test, deleted)
    matched = sum((Counter(gold_brackets) & Counter(test_brackets)).values())
    exact = matched == len(gold_brackets) == len(test_brackets)
    return SentenceCounts(sentences=1, matched_brackets=matched,
                          gold_brackets=len(gold_brackets), test_brackets=len(test_brackets),
                          exact_matches=int(exact),
                          crossing_brackets=_crossing(gold_brackets, test_brackets),
                          words=kept_words)


@dataclass(frozen=True)
class EvalbResult:
    """EVALB's summary: all sentences, and those of at most 40 words (``*_len40``).

    Precision, recall, F1 and exact match are percentages (0-100).
    """

    precision: float
    recall: float
    f1: float
    exact_match: float
    sentences: int
    skipped_sentences: int
    matched_brackets: int
    gold_brackets: int
    test_brackets: int
    crossing_brackets: int
    precision_len40: float
    recall_len40: float
    f1_len40: float
    exact_match_len40: float
    sentences_len40: int

    @classmethod
    def from_counts(cls, total: SentenceCounts, len40: SentenceCounts) -> "EvalbResult":
        return cls(precision=total.precision, recall=total.recall, f1=total.f1,
                   exact_match=total.exact_match, sentences=total.sentences,
                   skipped_sentences=total.skipped_sentences,
                   matched_brackets=total.matched_brackets,
                   gold_brackets=total.gold_brackets, test_brackets=total.test_brackets,
                   crossing_brackets=total.crossing_brackets,
                   precision_len40=len40.precision, recall_len40=len40.recall,
                   f1_len40=len40.f1, exact_match_len40=len40.exact_match,
                   sentences_len40=len40.sentences)

    def summary(self) -> str:
        """EVALB-style summary lines."""
        return "\n".join([
            f"-- All ({self.sentences} sentences) --",
            f"Bracketing Recall    = {self.recall:6.2f}",
            f"Bracketing Precision = {self.precision:6.2f}",
            f"Bracketing FMeasure  = {self.f1:6.2f}",
            f"Complete match       = {self.exact_match:6.2f}",
            f"-- len<={CUTOFF_LENGTH} ({self.sentences_len40} sentences) --",
            f"Bracketing Recall    = {self.recall_len40:6.2f}",
            f"Bracketing Precision = {self.precision_len40:6.2f}",
            f"Bracketing FMeasure  = {self.f1_len40:6.2f}",
            f"Complete match       = {self.exact_match_len40:6.2f}",
        ])


def evaluate(gold_trees: Iterable[Tree], test_trees: Iterable[Tree],
             check_words: bool = True) -> EvalbResult:
    """EVALB (COLLINS.prm) scores of ``test_trees`` against ``gold_trees``, in order.

    Raises ``EvalbError`` when the two lists differ in length or a sentence's words
    differ (naming the 1-based sentence number).
    """
    gold_trees, test_trees = list(gold_trees), list(test_trees)
    if len(gold_trees) != len(test_trees):
        raise EvalbError(f"{len(gold_trees)} gold trees but {len(test_trees)} test trees")
    total = len40 = SentenceCounts()
    for number, (gold, test) in enumerate(zip(gold_trees, test_trees), start=1):
        counts = evaluate_sentence(gold, test, number, check_words)
        total = total + counts
        length = sum(1 for tag in gold.pos_tags() if tag != NONE_TAG)
        if length <= CUTOFF_LENGTH:
            len40 = len40 + counts
    return EvalbResult.from_counts(total, len40)
