"""Trees as token sequences for a sequence-to-sequence parser, and back.

As in "Grammar as a Foreign Language" (Vinyals, Kaiser et al., 2014), the source is the
sentence's words and the target is the tree in depth-first order, each constituent
written as an opening token ``(LABEL`` and a closing token ``)LABEL``, each word
replaced by the placeholder ``XX`` and POS tags dropped::

    (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))
    source: The dog barks .
    target: (S (NP XX XX )NP (VP XX )VP XX )S

``delinearize`` is the strict inverse (it raises on malformed input); ``repair`` turns
*any* model output into a well-formed tree over exactly the input words and reports,
in a ``RepairReport``, how many repairs of each kind it made. ``repair_to_bracketed``
does that for a decoded line over the words of its source sentence (``escape_word``
writes brackets inside words as the treebank does), ``repair_summary`` sums it over a
corpus.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from t2t_lite.errors import UserError
from t2t_lite.parsing.trees import Tree

PLACEHOLDER = "XX"
_WORD_ESCAPES = (("(", "-LRB-"), (")", "-RRB-"))
DUMMY_POS = "XX"
DEFAULT_ROOT_LABEL = "S"

Tokens = Union[str, Sequence[str]]


class LinearizationError(UserError):
    """A target sequence is not a well-formed linearised tree over the given words."""


def source_text(tree: Tree) -> str:
    """The source side: the sentence's words joined by single spaces."""
    return " ".join(tree.words())


def linearize_tokens(tree: Tree, words: bool = False) -> List[str]:
    """The target side as tokens: ``["(S", "(NP", "XX", "XX", ")NP", ..., ")S"]``, or with
    ``words=True`` the words themselves in place of ``XX`` (``["(S", "(NP", "The", "dog",
    ")NP", ...]``)."""
    if tree.is_preterminal:
        return [tree.word if words else PLACEHOLDER]
    tokens = [f"({tree.label}"]
    for child in tree.children:
        tokens.extend(linearize_tokens(child, words))
    tokens.append(f"){tree.label}")
    return tokens


def linearize(tree: Tree, words: bool = False) -> str:
    """The target side as one space-joined string (``words``: see ``linearize_tokens``)."""
    return " ".join(linearize_tokens(tree, words))


def placeholders_from_words(target: Tokens, words: Sequence[str]) -> List[str]:
    """A words-in-target output as the ``XX`` linearisation over ``words``: each token that
    is the next word of ``words`` becomes ``XX``; other tokens are kept as they are (a
    bracket stays a bracket, a wrong word is left for ``repair`` to drop and count)."""
    tokens, used = [], 0
    for token in _split(target):
        if used < len(words) and token == words[used]:
            tokens.append(PLACEHOLDER)
            used += 1
        else:
            tokens.append(token)
    return tokens


def _split(target: Tokens) -> List[str]:
    return target.split() if isinstance(target, str) else list(target)


def _is_open(token: str) -> bool:
    return len(token) > 1 and token.startswith("(")


def _is_close(token: str) -> bool:
    return token.startswith(")")


def delinearize(target: Tokens, words: Sequence[str],
                pos_tags: Optional[Sequence[str]] = None) -> Tree:
    """The tree that ``target`` encodes, with ``words`` put back in place of ``XX``.

    Each word gets its tag from ``pos_tags`` when given, else the dummy tag ``XX``.
    Raises ``LinearizationError`` (naming the token position) unless ``target`` is a
    single well-formed tree with exactly one placeholder per word.
    """
    tokens = _split(target)
    words = list(words)
    tags = list(pos_tags) if pos_tags is not None else [DUMMY_POS] * len(words)
    if len(tags) != len(words):
        raise LinearizationError(f"{len(words)} words but {len(tags)} POS tags")
    stack: List[Tuple[str, list]] = []
    result: Optional[Tree] = None
    used = 0
    for position, token in enumerate(tokens):
        if result is not None:
            raise LinearizationError(f"token {position} {token!r} follows the end of the tree")
        if _is_open(token):
            stack.append((token[1:], []))
        elif _is_close(token):
            if not stack:
                raise LinearizationError(f"token {position} {token!r} closes no bracket")
            label, children = stack.pop()
            if token[1:] and token[1:] != label:
                raise LinearizationError(f"token {position} {token!r} closes ({label}")
            if not children:
                raise LinearizationError(f"token {position} {token!r} closes an empty ({label}")
            node = Tree(label, tuple(children))
            if stack:
                stack[-1][1].append(node)
            else:
                result = node
        elif token == PLACEHOLDER:
            if not stack:
                raise LinearizationError(f"token {position} {PLACEHOLDER} is outside any bracket")
            if used >= len(words):
                raise LinearizationError(f"token {position}: more placeholders than the "
                                         f"{len(words)} words")
            stack[-1][1].append(Tree(tags[used], word=words[used]))
            used += 1
        else:
            raise LinearizationError(f"token {position} {token!r} is not a bracket or {PLACEHOLDER}")
    if stack:
        raise LinearizationError(f"{len(stack)} bracket(s) left open, innermost ({stack[-1][0]}")
    if result is None:
        raise LinearizationError("no tree in the target sequence")
    if used != len(words):
        raise LinearizationError(f"{used} placeholders for {len(words)} words")
    return result


@dataclass(frozen=True)
class RepairReport:
    """How often ``repair`` had to change a model output, by kind of repair.

    For one sentence ``sentences`` is 1 and ``repaired_sentences`` is 1 when any repair
    was made; ``RepairReport.aggregate`` (or ``+``) sums reports over a corpus.
    """

    unknown_tokens: int = 0        # tokens that are neither brackets nor XX: dropped
    stray_closers: int = 0         # a closer with no bracket open: dropped
    mismatched_closers: int = 0    # a closer whose label is not the innermost open one: dropped
    unclosed_brackets: int = 0     # brackets still open at the end: closed
    extra_placeholders: int = 0    # XX beyond the number of words: dropped
    outside_placeholders: int = 0  # XX outside every bracket: moved into the last one
    missing_placeholders: int = 0  # words without an XX: appended
    empty_constituents: int = 0    # constituents over no word: removed
    wrapped_roots: int = 0         # output that was not one constituent: wrapped in a root
    sentences: int = 1
    repaired_sentences: int = 0

    REPAIR_KINDS = ("unknown_tokens", "stray_closers", "mismatched_closers",
                    "unclosed_brackets", "extra_placeholders", "outside_placeholders",
                    "missing_placeholders",
                    "empty_constituents", "wrapped_roots")

    @property
    def total_repairs(self) -> int:
        return sum(getattr(self, kind) for kind in self.REPAIR_KINDS)

    def __add__(self, other: "RepairReport") -> "RepairReport":
        return RepairReport(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                               for f in fields(self)})

    @classmethod
    def aggregate(cls, reports: Iterable["RepairReport"]) -> "RepairReport":
        """The sum of ``reports`` (zero sentences when there are none)."""
        total = cls(sentences=0)
        for report in reports:
            total = total + report
        return total

    def summary(self) -> str:
        """One line: ``repaired 3 of 100 outputs (unclosed_brackets=2, ...)``."""
        counts = ", ".join(f"{kind}={getattr(self, kind)}" for kind in self.REPAIR_KINDS
                           if getattr(self, kind))
        return (f"repaired {self.repaired_sentences} of {self.sentences} outputs"
                + (f" ({counts})" if counts else ""))


def repair(target: Tokens, words: Sequence[str],
           root_label: str = DEFAULT_ROOT_LABEL) -> Tuple[Tree, RepairReport]:
    """A well-formed tree over exactly ``words`` from any target sequence.

    Scans left to right with a stack of open brackets; the rules, each counted in
    the report:

    1. a token that is neither ``(LABEL``, ``)LABEL``/``)`` nor ``XX`` is dropped;
    2. a closer with no bracket open, or whose label differs from the innermost open
       bracket's, is dropped (a bare ``)`` closes the innermost bracket);
    3. an ``XX`` beyond the number of words is dropped;
    4. an ``XX`` outside every bracket (after the root closed) is appended to the last
       top-level constituent, or kept at top level when there is none yet;
    5. words left without an ``XX`` at the end are appended to the innermost open
       bracket, else to the last top-level constituent;
    6. brackets still open at the end are closed;
    7. constituents over no word are removed;
    8. unless exactly one constituent is left at top level, everything is wrapped in
       a ``root_label`` constituent.

    Words get the dummy POS tag ``XX``. A well-formed target is returned unchanged
    (``delinearize``) with an all-zero report.
    """
    tokens = _split(target)
    words = list(words)
    counts = {kind: 0 for kind in RepairReport.REPAIR_KINDS}
    top: List[Tree] = []
    stack: List[Tuple[str, list]] = []
    used = 0

    def attach(node: Tree) -> None:
        (stack[-1][1] if stack else top).append(node)

    def attach_word(word: str) -> bool:
        """Attaches a word to the innermost open bracket, else to the last top-level
        constituent, else at top level; returns whether no bracket was open."""
        leaf = Tree(DUMMY_POS, word=word)
        if stack:
            stack[-1][1].append(leaf)
            return False
        if top and not top[-1].is_preterminal:
            top[-1] = Tree(top[-1].label, top[-1].children + (leaf,))
        else:
            top.append(leaf)
        return True

    def close() -> None:
        label, children = stack.pop()
        if children:
            attach(Tree(label, tuple(children)))
        else:
            counts["empty_constituents"] += 1

    for token in tokens:
        if _is_open(token):
            stack.append((token[1:], []))
        elif _is_close(token):
            if not stack:
                counts["stray_closers"] += 1
            elif token[1:] and token[1:] != stack[-1][0]:
                counts["mismatched_closers"] += 1
            else:
                close()
        elif token == PLACEHOLDER:
            if used >= len(words):
                counts["extra_placeholders"] += 1
            else:
                if attach_word(words[used]):
                    counts["outside_placeholders"] += 1
                used += 1
        else:
            counts["unknown_tokens"] += 1
    for word in words[used:]:
        counts["missing_placeholders"] += 1
        attach_word(word)
    while stack:
        counts["unclosed_brackets"] += 1
        close()
    if len(top) == 1 and not top[0].is_preterminal:
        tree = top[0]
    else:
        counts["wrapped_roots"] += 1
        tree = Tree(root_label, tuple(top))
    report = RepairReport(**counts, sentences=1,
                          repaired_sentences=int(any(counts.values())))
    return tree, report


def escape_word(word: str) -> str:
    """A word as the treebank writes it: brackets become ``-LRB-`` / ``-RRB-``."""
    for char, escaped in _WORD_ESCAPES:
        word = word.replace(char, escaped)
    return word


def repair_to_bracketed(source: str, hypothesis: str,
                        words_in_target: bool = False) -> Tuple[str, RepairReport]:
    """The one-line bracketed tree that ``hypothesis`` (a linearised output; with
    ``words_in_target`` one that spells the words instead of ``XX``, see
    ``placeholders_from_words``) gives over the words of ``source``, and what had to be
    repaired.

    Always well formed over exactly the source words (split on whitespace; ``(`` and
    ``)`` inside words written ``-LRB-``/``-RRB-``); words get the dummy tag ``XX``. An
    empty source gives ``""``.
    """
    words = source.split()
    if not words:
        return "", RepairReport(sentences=1)
    if words_in_target:
        hypothesis = placeholders_from_words(hypothesis, words)
    tree, report = repair(hypothesis, [escape_word(word) for word in words])
    return tree.to_string(), report


def repair_summary(sources: Sequence[str], hypotheses: Sequence[str],
                   words_in_target: bool = False) -> str:
    """``repaired k of n outputs (kind=count, ...)`` over the non-blank ``sources``
    (``RepairReport.summary`` of their ``repair_to_bracketed`` reports)."""
    return RepairReport.aggregate(
        repair_to_bracketed(source, hypothesis, words_in_target)[1]
        for source, hypothesis in zip(sources, hypotheses) if source.split()).summary()
