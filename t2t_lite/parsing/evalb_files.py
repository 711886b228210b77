"""Gold and test trees as EVALB reads them, and the files to run EVALB itself on.

EVALB (``evalb -p COLLINS.prm GOLD TEST``) reads one tree a line in each file and deletes
only a ``TOP`` root. So that its numbers and ``evalb.evaluate``'s are the same:

* ``read_gold_trees(path)`` reads reference trees as written (function tags, ``-NONE-``
  elements, ``ADVP|PRT`` kept: EVALB's own rules apply to them), with the root as
  ``TOP``: the unlabeled outer bracket of ``.mrg`` files ``( (S ...) )`` and a ``ROOT``
  root are relabeled ``TOP``, a tree without such a root is put under one
  (``evalb_gold_tree``).
* ``evalb_test_tree(test, gold)`` is a decoded tree (dummy tags ``XX``) with the gold
  tags put back on its words and a ``TOP`` root, so that EVALB deletes the same
  punctuation on both sides.
* ``evalb_trees(gold, test)`` gives both per line, ``write_evalb_files(gold, test,
  gold_path, test_path)`` writes them, one tree a line (an empty test line where there
  is no test tree: EVALB skips the sentence), and returns them.

A reference file is a ``.mrg`` file (trees over several lines), any other file with one
bracketed tree per line (``.gz`` read transparently; blank lines skipped), e.g. the
``<problem>-<split>.gold.txt`` that datagen writes, or a folder of ``.mrg`` files (read
in name order).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from t2t_lite.data.raw import read_text
from t2t_lite.errors import UserError
from t2t_lite.parsing.evalb import NONE_TAG, ROOT_LABEL, with_gold_tags
from t2t_lite.parsing.treebank import read_tree_file
from t2t_lite.parsing.trees import Tree, parse_trees
from t2t_lite.user_paths import write_atomically

ROOT_LABELS = ("", "ROOT", ROOT_LABEL)
GOLD_SUFFIX = ".gold.txt"
_LINEARIZED_CLOSER = re.compile(r"(^|\s)\)[^\s()]")


def is_linearized(text: str) -> bool:
    """Whether ``text`` is a linearised tree (``(S (NP XX )NP )S``), not a bracketed one."""
    return bool(_LINEARIZED_CLOSER.search(text))


def evalb_gold_tree(tree: Tree) -> Tree:
    """``tree`` under a ``TOP`` root: a root labeled ``""``, ``ROOT`` or ``TOP`` becomes
    ``TOP`` (children kept), any other top node is put under a new ``TOP``."""
    if tree.is_preterminal or tree.label not in ROOT_LABELS:
        return Tree(ROOT_LABEL, (tree,))
    return Tree(ROOT_LABEL, tree.children)


def evalb_test_tree(test: Tree, gold: Tree) -> Tree:
    """``test`` (e.g. a decoded tree with dummy tags) with the tags of ``gold`` on its
    words and a ``TOP`` root: what EVALB should read for it. When the two hold a
    different number of words (besides ``-NONE-``) the tags are left as they are."""
    return evalb_gold_tree(with_gold_tags(test, gold))


def _has_words(tree: Tree) -> bool:
    return any(tag != NONE_TAG for tag in tree.pos_tags())


def read_gold_trees(path: Union[str, Path]) -> List[Tree]:
    """The reference trees of ``path`` (file or folder, see the module docstring), in
    order, each under a ``TOP`` root.

    Raises ``UserError`` naming the file and line for malformed brackets, a tree with
    no word besides ``-NONE-``, or a linearised tree (a datagen ``.target.txt``): the
    references must be trees with their POS tags.
    """
    path = Path(path)
    if path.is_dir():
        paths = sorted(p for p in path.rglob("*.mrg") if p.is_file())
        if not paths:
            raise FileNotFoundError(f"{path} holds no .mrg file; pass a gold .mrg file, a file "
                                    f"of one tree a line, or a folder of .mrg files")
    elif path.is_file():
        paths = [path]
    else:
        raise FileNotFoundError(f"reference {path} does not exist; pass a gold .mrg file "
                                f"(e.g. WSJ section 23 concatenated), a file of one tree a "
                                f"line (DATA_DIR/<problem>-test{GOLD_SUFFIX}) or a folder of "
                                f".mrg files")
    trees: List[Tree] = []
    for file in paths:
        _refuse_linearized(file)
        for tree, line in read_tree_file(file, normalized=False):
            if not _has_words(tree):
                raise UserError(f"{file}:{line}: the tree has no word besides -NONE- "
                                f"elements; remove it (references align with input lines)")
            trees.append(evalb_gold_tree(tree))
    return trees


def _refuse_linearized(path: Path) -> None:
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        if is_linearized(line):
            raise UserError(
                f"{path}:{number}: a linearised tree ({line[:40]}...), as in a datagen "
                f".target.txt; parse scores need the gold trees with their POS tags: pass "
                f"the .mrg files or DATA_DIR/<problem>-<split>{GOLD_SUFFIX}")
        return


def parse_test_line(line: str, source: str = "<test>", number: int = 1) -> Optional[Tree]:
    """The tree of one decoded line (``None`` for an empty line, which EVALB skips)."""
    if not line.strip():
        return None
    trees = parse_trees(line, f"{source}:{number}")
    if len(trees) != 1:
        raise UserError(f"{source}:{number}: {len(trees)} trees on one line; a parsed file "
                        f"holds one bracketed tree a line")
    return trees[0]


def read_test_trees(path: Union[str, Path]) -> List[Optional[Tree]]:
    """The trees of a decoded file (``t2t-lite-decoder``'s output), one a line; an
    empty line gives ``None``."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"parsed file {path} is a directory; pass the decoder's output file")
    if not path.is_file():
        raise FileNotFoundError(f"parsed file {path} does not exist")
    text = path.read_text(encoding="utf-8-sig")   # -sig: a leading byte-order mark goes
    return [parse_test_line(line, str(path), number)
            for number, line in enumerate(text.splitlines(), start=1)]


def evalb_trees(gold_trees: Sequence[Tree], test_trees: Iterable[Optional[Tree]]
                ) -> Tuple[List[Tree], List[Optional[Tree]]]:
    """What EVALB reads, line by line: each gold tree under a ``TOP`` root
    (``evalb_gold_tree``), each test tree with the gold tags on its words under a ``TOP``
    root (``evalb_test_tree``; ``None``, an empty line, stays ``None``). Scoring them with
    ``evalb.score_sentences(..., tags="own")`` gives EVALB's numbers on the files
    ``write_evalb_files`` writes. Raises ``UserError`` when the two lists differ in
    length."""
    gold_trees, test_trees = list(gold_trees), list(test_trees)
    if len(gold_trees) != len(test_trees):
        raise UserError(f"{len(gold_trees)} gold trees but {len(test_trees)} test trees; "
                        f"they must align line by line")
    return ([evalb_gold_tree(g) for g in gold_trees],
            [None if t is None else evalb_test_tree(t, g)
             for g, t in zip(gold_trees, test_trees)])


def write_evalb_files(gold_trees: Sequence[Tree], test_trees: Iterable[Optional[Tree]],
                      gold_path: Union[str, Path], test_path: Union[str, Path]
                      ) -> Tuple[List[Tree], List[Optional[Tree]]]:
    """Writes EVALB's gold and test files, each atomically: the ``evalb_trees`` one a
    line (an empty test line for ``None``). Returns those trees, so a caller scores
    exactly what was written."""
    gold_lines, test_lines = evalb_trees(gold_trees, test_trees)
    _write(gold_path, (tree.to_string() for tree in gold_lines))
    _write(test_path, ("" if tree is None else tree.to_string() for tree in test_lines))
    return gold_lines, test_lines


def _write(path: Union[str, Path], lines: Iterable[str]) -> None:
    write_atomically(path, "".join(line + "\n" for line in lines))
