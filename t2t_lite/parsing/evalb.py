"""Labeled bracketing scores exactly as EVALB computes them with ``COLLINS.prm``.

EVALB (Sekine and Collins, ``evalb.c``) reads a gold and a test file, one tree a line,
and with its standard parameter file ``COLLINS.prm`` scores each pair of lines so:

* Each file's *own* preterminal tags decide which words are deleted
  (``DELETE_LABEL , : `` '' . -NONE-``): a deleted word never counts for a span.
  Then the test must hold as many words as the gold ("Length unmatch (g|t)") and the
  same words in order ("Words unmatch (g|t)"), else the sentence is an *error* (no
  brackets counted). A test with no word left is *skipped*.
* A bracket is a constituent above the POS level, scored as (label, start, end) over
  the words left. A bracket over no word left is not scored; labels are cut at the
  first ``-`` or ``=`` (``NP-SBJ-1`` -> ``NP``, ``PP=2`` -> ``PP``; not at ``|``:
  ``ADVP|PRT`` stays ``ADVP|PRT``), and a bracket whose cut label is ``TOP`` (the only
  deleted bracket label) is not scored: an unlabeled root ``( (S ...) )`` or ``ROOT``
  is scored as one more bracket. ``EQ_LABEL ADVP PRT`` makes ADVP and PRT equal.
* Brackets are multisets: a unary chain ``(NP (NP ...))`` gives two NP brackets over
  the same span, and each test bracket matches at most one gold bracket.
* Recall = matched / gold brackets, precision = matched / test brackets,
  F1 = 2PR / (P + R), exact match = valid sentences with matched = gold = test, all
  percentages summed over the valid sentences (neither error nor skipped).
* ``CUTOFF_LEN 40`` with ``DELETE_LABEL_FOR_LENGTH -NONE-``: the ``len40`` figures
  cover sentences whose gold tree has at most 40 words besides ``-NONE-``,
  punctuation included.

Model output (a repaired linearisation) carries the dummy tag ``XX``, so EVALB would
not delete its punctuation. ``tags="gold"`` (the default) first puts the gold tree's
tags on the test words, as the EVALB-ready test files of ``evalb_files`` do; the
result is EVALB's on those files. ``tags="own"`` scores the trees as given, exactly as
EVALB scores the two trees. Either way the numbers are EVALB's: ``tests/test_evalb.py``
reproduces EVALB's per-sentence counts, errors and skips on 3,711 reference pairs.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields
from typing import Iterable, List, Optional, Sequence, Tuple

from t2t_lite.errors import UserError
from t2t_lite.parsing.trees import Tree

PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})
NONE_TAG = "-NONE-"
ROOT_LABEL = "TOP"
# COLLINS.prm: DELETE_LABEL (words with these tags, brackets with these cut labels).
DELETE_LABELS = frozenset({ROOT_LABEL, NONE_TAG}) | PUNCTUATION_TAGS
DELETE_LABELS_FOR_LENGTH = frozenset({NONE_TAG})
EQUIVALENT_LABELS = {"PRT": "ADVP"}
CUTOFF_LENGTH = 40
TAG_MODES = ("gold", "own")
ERROR_MODES = ("raise", "count")

Bracket = Tuple[str, int, int]


class EvalbError(UserError):
    """Gold and test sentences cannot be compared (different words or counts)."""


def evalb_label(label: str) -> str:
    """A bracket label as EVALB compares it: cut at the first ``-``/``=`` (so ``-LRB-``
    becomes ``""``; ``|`` is kept), PRT read as ADVP."""
    for position, char in enumerate(label):
        if char in "-=":
            label = label[:position]
            break
    return EQUIVALENT_LABELS.get(label, label)


@dataclass(frozen=True)
class EvalbView:
    """One tree as EVALB sees it: the words left after deleting ``DELETE_LABEL`` tags
    (``words[i]``, ``tags[i]``), its scored brackets (cut label, start, end) over those
    words, and its length for the cutoff (words besides ``-NONE-``)."""

    words: Tuple[str, ...]
    tags: Tuple[str, ...]
    brackets: Tuple[Bracket, ...]
    length: int


def evalb_view(tree: Tree) -> EvalbView:
    """What EVALB reads from the line holding ``tree`` (see the module docstring)."""
    words: List[str] = []
    tags: List[str] = []
    brackets: List[Bracket] = []
    length = 0

    def visit(node: Tree) -> None:
        nonlocal length
        if node.is_preterminal:
            if node.label not in DELETE_LABELS_FOR_LENGTH:
                length += 1
            if node.label not in DELETE_LABELS:
                words.append(node.word)
                tags.append(node.label)
            return
        start = len(words)
        for child in node.children:
            visit(child)
        label = evalb_label(node.label)
        if len(words) > start and label not in DELETE_LABELS:
            brackets.append((label, start, len(words)))

    visit(tree)
    return EvalbView(tuple(words), tuple(tags), tuple(brackets), length)


def with_gold_tags(test: Tree, gold: Tree) -> Tree:
    """``test`` with the tags of ``gold`` on its words, in order (``-NONE-`` words of
    either tree keep theirs and take none); ``test`` unchanged when the two hold a
    different number of such words."""
    gold_tags = [tag for tag in gold.pos_tags() if tag != NONE_TAG]
    if len(gold_tags) != sum(1 for tag in test.pos_tags() if tag != NONE_TAG):
        return test
    tags = iter(gold_tags)
    return _retag(test, lambda leaf: leaf.label if leaf.label == NONE_TAG else next(tags))


def _retag(tree: Tree, tag_of) -> Tree:
    if tree.is_preterminal:
        return Tree(tag_of(tree), word=tree.word)
    return Tree(tree.label, tuple(_retag(child, tag_of) for child in tree.children))


@dataclass(frozen=True)
class SentenceCounts:
    """Bracket counts of one sentence, or sums over several (EVALB's per-line figures).

    ``words``: gold words left after deletion; ``correct_tags``: those whose test tag
    equals the gold one. Error and skipped sentences count only themselves.
    """

    sentences: int = 0
    skipped_sentences: int = 0
    matched_brackets: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    exact_matches: int = 0
    crossing_brackets: int = 0
    words: int = 0
    error_sentences: int = 0
    correct_tags: int = 0

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


@dataclass(frozen=True)
class SentenceScore:
    """EVALB's line for one sentence: ``status`` 0 (scored), 1 (error: ``message`` is
    EVALB's, e.g. ``Length unmatch (10|9)``, and ``explanation`` the ``EvalbError``
    text naming the sentence, the cause and the fix) or 2 (skipped); ``length`` is the
    gold length for the cutoff."""

    number: int
    length: int
    status: int
    counts: SentenceCounts
    message: str = ""
    explanation: str = ""


def _crossing(gold: Sequence[Bracket], test: Sequence[Bracket]) -> int:
    """Test brackets that cross at least one gold bracket."""
    count = 0
    for _, t_start, t_end in test:
        if any((g_start < t_start < g_end < t_end) or (t_start < g_start < t_end < g_end)
               for _, g_start, g_end in gold):
            count += 1
    return count


def score_sentence(gold: Tree, test: Optional[Tree], number: int = 1, *,
                   tags: str = "gold", check_words: bool = True) -> SentenceScore:
    """EVALB's result for one (gold, test) pair; never raises for EVALB's errors.

    ``test=None`` stands for an empty test line (EVALB skips it). ``tags``: see the
    module docstring. ``check_words=False`` drops the word comparison (not EVALB).
    """
    if tags not in TAG_MODES:
        raise ValueError(f"tags must be one of {TAG_MODES}, got {tags!r}")
    g = evalb_view(gold)
    if test is None:
        return SentenceScore(number, g.length, 2, SentenceCounts(skipped_sentences=1))
    t = evalb_view(with_gold_tags(test, gold) if tags == "gold" else test)
    error = SentenceCounts(error_sentences=1)
    if not t.words:
        return SentenceScore(number, g.length, 2, SentenceCounts(skipped_sentences=1))
    fix = "the test file must hold the gold sentences' words, line by line"
    if len(g.words) != len(t.words):
        message = f"Length unmatch ({len(g.words)}|{len(t.words)})"
        return SentenceScore(number, g.length, 1, error, message, (
            f"sentence {number}: gold has {len(g.words)} words, test has {len(t.words)} "
            f"besides punctuation and -NONE- (EVALB: {message}); {fix}"))
    if check_words:
        for position, (gold_word, test_word) in enumerate(zip(g.words, t.words)):
            if gold_word != test_word:
                message = f"Words unmatch ({gold_word}|{test_word})"
                return SentenceScore(number, g.length, 1, error, message, (
                    f"sentence {number}: word {position + 1} differs (gold {gold_word!r}, "
                    f"test {test_word!r}; EVALB: {message}); {fix}"))
    matched = sum((Counter(g.brackets) & Counter(t.brackets)).values())
    exact = matched == len(g.brackets) == len(t.brackets)
    correct = sum(_same_label(a, b) for a, b in zip(g.tags, t.tags))
    return SentenceScore(number, g.length, 0, SentenceCounts(
        sentences=1, matched_brackets=matched, gold_brackets=len(g.brackets),
        test_brackets=len(t.brackets), exact_matches=int(exact),
        crossing_brackets=_crossing(g.brackets, t.brackets), words=len(g.words),
        correct_tags=correct))


def _same_label(a: str, b: str) -> bool:
    """EVALB's ``label_comp`` on uncut labels: equal, or an ``EQ_LABEL`` pair."""
    return EQUIVALENT_LABELS.get(a, a) == EQUIVALENT_LABELS.get(b, b)


def _raise_for(score: SentenceScore) -> None:
    """Raises the ``EvalbError`` of an error sentence (``score.explanation``)."""
    if score.status == 1:
        raise EvalbError(score.explanation)


def evaluate_sentence(gold: Tree, test: Tree, number: int = 1,
                      check_words: bool = True, *, tags: str = "gold") -> SentenceCounts:
    """EVALB's counts for one sentence; ``number`` (1-based) names it in errors.

    Raises ``EvalbError`` where EVALB reports an error ("Length unmatch", "Words
    unmatch").
    """
    score = score_sentence(gold, test, number, tags=tags, check_words=check_words)
    _raise_for(score)
    return score.counts


@dataclass(frozen=True)
class EvalbResult:
    """EVALB's summary: all sentences, and those of at most 40 words (``*_len40``).

    Precision, recall, F1 and exact match are percentages (0-100); ``sentences`` counts
    the valid ones (EVALB's "Number of Valid sentence"), ``error_sentences`` and
    ``skipped_sentences`` the others.
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
    error_sentences: int = 0
    skipped_sentences_len40: int = 0
    error_sentences_len40: int = 0

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
                   sentences_len40=len40.sentences, error_sentences=total.error_sentences,
                   skipped_sentences_len40=len40.skipped_sentences,
                   error_sentences_len40=len40.error_sentences)

    @classmethod
    def from_scores(cls, scores: Iterable[SentenceScore]) -> "EvalbResult":
        """Sums per-sentence results as EVALB's summary does."""
        total = len40 = SentenceCounts()
        for score in scores:
            total = total + score.counts
            if score.length <= CUTOFF_LENGTH:
                len40 = len40 + score.counts
        return cls.from_counts(total, len40)

    def summary(self) -> str:
        """EVALB's summary figures, as ``evalb`` prints them, for all sentences and for
        those of at most ``CUTOFF_LENGTH`` words (what ``t2t-lite-evalb`` prints)."""
        lines = []
        for title, suffix in (("All", ""), (f"len<={CUTOFF_LENGTH}", "_len40")):
            valid = getattr(self, "sentences" + suffix)
            errors = getattr(self, "error_sentences" + suffix)
            skipped = getattr(self, "skipped_sentences" + suffix)
            lines += [f"-- {title} --",
                      f"Number of sentence        = {valid + errors + skipped:6d}",
                      f"Number of Error sentence  = {errors:6d}",
                      f"Number of Skip  sentence  = {skipped:6d}",
                      f"Number of Valid sentence  = {valid:6d}",
                      f"Bracketing Recall         = {getattr(self, 'recall' + suffix):6.2f}",
                      f"Bracketing Precision      = {getattr(self, 'precision' + suffix):6.2f}",
                      f"Bracketing FMeasure       = {getattr(self, 'f1' + suffix):6.2f}",
                      f"Complete match            = "
                      f"{getattr(self, 'exact_match' + suffix):6.2f}",
                      ""]
        return "\n".join(lines).rstrip()


def score_sentences(gold_trees: Iterable[Tree], test_trees: Iterable[Optional[Tree]], *,
                    tags: str = "gold", check_words: bool = True) -> List[SentenceScore]:
    """EVALB's per-sentence results, in order (errors and skips included, as EVALB
    reports them). Raises ``EvalbError`` when the two lists differ in length."""
    gold_trees, test_trees = list(gold_trees), list(test_trees)
    if len(gold_trees) != len(test_trees):
        raise EvalbError(f"{len(gold_trees)} gold trees but {len(test_trees)} test trees")
    return [score_sentence(gold, test, number, tags=tags, check_words=check_words)
            for number, (gold, test) in enumerate(zip(gold_trees, test_trees), start=1)]


def evaluate(gold_trees: Iterable[Tree], test_trees: Iterable[Optional[Tree]],
             check_words: bool = True, *, tags: str = "gold",
             errors: str = "raise") -> EvalbResult:
    """EVALB (COLLINS.prm) scores of ``test_trees`` against ``gold_trees``, in order.

    ``tags="gold"`` scores the test words with the gold tags (EVALB on the files
    ``evalb_files`` writes), ``tags="own"`` with their own (EVALB on the trees as
    given). ``errors="raise"``: a sentence EVALB rejects raises ``EvalbError`` naming
    its 1-based number; ``errors="count"``: it is counted in ``error_sentences``, as
    EVALB does. Lists of different lengths always raise.
    """
    if errors not in ERROR_MODES:
        raise ValueError(f"errors must be one of {ERROR_MODES}, got {errors!r}")
    scores = score_sentences(gold_trees, test_trees, tags=tags, check_words=check_words)
    if errors == "raise":
        for score in scores:
            _raise_for(score)
    return EvalbResult.from_scores(scores)
