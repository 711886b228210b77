"""Constituency trees and the Penn Treebank ``.mrg`` reader.

A ``Tree`` is either a *preterminal* (a POS tag over one word: ``Tree("NN", word="dog")``)
or a *constituent* (a label over child trees). ``.mrg`` files hold several trees, each
wrapped in an unlabeled outer bracket ``( (S ...) )``; ``parse_trees`` keeps that
bracket as a constituent with the empty label, and ``normalize`` applies the standard
clean-up used for parsing experiments:

* ``-NONE-`` preterminals (traces, null elements) are removed, and so is every
  constituent that is left without words;
* function tags and indices are stripped from labels (``NP-SBJ-1`` -> ``NP``,
  ``PP-LOC=2`` -> ``PP``, ``ADVP|PRT`` -> ``ADVP``), but labels that are themselves
  dash-delimited (``-LRB-``, ``-RRB-``, ``-NONE-``) are kept whole;
* the root (the unlabeled outer bracket, or one labeled ``ROOT``/``TOP``) is dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from t2t_lite.errors import UserError

NONE_TAG = "-NONE-"
ROOT_LABELS = ("", "ROOT", "TOP")

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class TreeParseError(UserError):
    """A bracketed tree could not be read; the message names the source and line."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(f"{source}:{line}: {message}")
        self.source = source
        self.line = line


@dataclass(frozen=True)
class Tree:
    """A constituency tree node.

    ``label``: the constituent label or POS tag. ``children``: the child trees of a
    constituent (empty for a preterminal). ``word``: the word of a preterminal
    (``None`` for a constituent).
    """

    label: str
    children: Tuple["Tree", ...] = ()
    word: Optional[str] = None

    def __post_init__(self):
        if self.word is not None and self.children:
            raise ValueError(f"preterminal {self.label!r} over {self.word!r} cannot "
                             f"also have children")
        if not isinstance(self.children, tuple):
            object.__setattr__(self, "children", tuple(self.children))

    @property
    def is_preterminal(self) -> bool:
        return self.word is not None

    def preterminals(self) -> Iterator["Tree"]:
        """The preterminal nodes, left to right."""
        if self.is_preterminal:
            yield self
            return
        for child in self.children:
            yield from child.preterminals()

    def words(self) -> List[str]:
        """The sentence's words, left to right."""
        return [leaf.word for leaf in self.preterminals()]

    def pos_tags(self) -> List[str]:
        """The POS tag of each word, left to right."""
        return [leaf.label for leaf in self.preterminals()]

    def to_string(self, with_root: bool = False) -> str:
        """One-line bracketed form, ``(S (NP (DT the) (NN dog)) (VP (VBZ barks)))``.

        ``with_root=True`` wraps it in the unlabeled outer bracket of ``.mrg`` files
        and EVALB input: ``( (S ...) )``.
        """
        text = self._bracketed()
        return f"( {text} )" if with_root else text

    def _bracketed(self) -> str:
        if self.is_preterminal:
            return f"({self.label} {self.word})"
        inner = " ".join(child._bracketed() for child in self.children)
        return f"({self.label} {inner})" if inner else f"({self.label})"

    def __str__(self) -> str:
        return self.to_string()

    @classmethod
    def from_string(cls, text: str, source: str = "<string>") -> "Tree":
        """Reads exactly one bracketed tree (not normalized)."""
        trees = parse_trees(text, source)
        if len(trees) != 1:
            raise TreeParseError(source, 1, f"expected one tree, found {len(trees)}")
        return trees[0]


def _tokenize(text: str) -> Iterator[Tuple[str, int]]:
    """(token, line number) pairs: ``(``, ``)`` and maximal runs of other characters."""
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _TOKEN.finditer(line):
            yield match.group(0), number


def parse_trees(text: str, source: str = "<string>") -> List[Tree]:
    """Every top-level bracketed tree in ``text``, as written (not normalized).

    An unlabeled bracket gets the label ``""``. Raises ``TreeParseError`` naming
    ``source`` and the line for unbalanced brackets, text outside brackets, and
    brackets that mix a word with other elements.
    """
    trees: List[Tree] = []
    # Each open bracket: [label, children, word, line where it opened]
    stack: List[list] = []
    tokens = list(_tokenize(text))
    i = 0
    while i < len(tokens):
        token, line = tokens[i]
        if token == "(":
            label = ""
            if i + 1 < len(tokens) and tokens[i + 1][0] not in "()":
                label = tokens[i + 1][0]
                i += 1
            stack.append([label, [], None, line])
        elif token == ")":
            if not stack:
                raise TreeParseError(source, line, "')' closes no open bracket")
            label, children, word, _ = stack.pop()
            if word is None and not children:
                raise TreeParseError(source, line, f"empty bracket ({label})")
            node = Tree(label, tuple(children), word)
            if stack:
                stack[-1][1].append(node)
            else:
                trees.append(node)
        else:
            if not stack:
                raise TreeParseError(source, line, f"{token!r} outside any bracket")
            top = stack[-1]
            if top[1] or top[2] is not None:
                raise TreeParseError(source, line, f"bracket ({top[0]} ...) opened on line "
                                     f"{top[3]} mixes the word {token!r} with other elements")
            if top[0] == "":
                raise TreeParseError(source, line, f"word {token!r} has no POS tag")
            top[2] = token
        i += 1
    if stack:
        raise TreeParseError(source, stack[-1][3],
                             f"bracket ({stack[-1][0]} ...) is never closed")
    return trees


def strip_label(label: str) -> str:
    """The bare category: ``NP-SBJ-1`` -> ``NP``, ``PP=2`` -> ``PP``, ``ADVP|PRT`` -> ``ADVP``.

    Labels that begin and end with ``-`` (``-LRB-``, ``-RRB-``, ``-NONE-``) are kept.
    """
    if len(label) > 1 and label.startswith("-") and label.endswith("-"):
        return label
    bare = re.split(r"[-=|]", label, maxsplit=1)[0]
    return bare or label


def _clean(tree: Tree) -> Optional[Tree]:
    """Drops ``-NONE-`` and emptied constituents, strips labels; ``None`` if no words."""
    if tree.is_preterminal:
        if tree.label == NONE_TAG:
            return None
        return Tree(strip_label(tree.label), word=tree.word)
    children = tuple(c for c in (_clean(child) for child in tree.children) if c is not None)
    if not children:
        return None
    label = tree.label if tree.label in ROOT_LABELS else strip_label(tree.label)
    return Tree(label, children)


def normalize(tree: Tree, drop_root: bool = True) -> Optional[Tree]:
    """The tree as parsing experiments use it (see the module docstring).

    Returns ``None`` when no word is left (a tree of traces only). A root with
    several children cannot be dropped without losing a single top node, so it is
    then kept, labeled ``ROOT``.
    """
    cleaned = _clean(tree)
    if cleaned is None or not drop_root or cleaned.label not in ROOT_LABELS:
        return cleaned
    if len(cleaned.children) == 1:
        return cleaned.children[0]
    return Tree("ROOT", cleaned.children)


def read_mrg(path: Union[str, Path], normalized: bool = True) -> List[Tree]:
    """The trees of one ``.mrg`` file, normalized unless ``normalized=False``.

    Raises ``TreeParseError`` naming the file and line for malformed brackets or a
    tree with no words.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig")   # -sig: a leading byte-order mark goes
    trees = parse_trees(text, str(path))
    if not normalized:
        return trees
    result = []
    for index, tree in enumerate(trees):
        clean = normalize(tree)
        if clean is None:
            raise TreeParseError(str(path), _tree_start_line(text, index) or 1,
                                 f"tree {index + 1} has no words after removing -NONE-")
        result.append(clean)
    return result


def _tree_start_line(text: str, index: int) -> Optional[int]:
    """The line where the ``index``-th top-level tree opens."""
    depth, seen = 0, -1
    for token, line in _tokenize(text):
        if token == "(":
            if depth == 0:
                seen += 1
                if seen == index:
                    return line
            depth += 1
        elif token == ")":
            depth -= 1
    return None


def read_mrg_files(paths: Sequence[Union[str, Path]], normalized: bool = True) -> List[Tree]:
    """The trees of several ``.mrg`` files, in the order given."""
    trees: List[Tree] = []
    for path in paths:
        trees.extend(read_mrg(path, normalized))
    return trees
