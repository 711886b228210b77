"""Tree files: the trees of a treebank file with the line where each starts.

* ``read_tree_file(path)`` yields ``(tree, line)`` for every tree of a file: ``.mrg``
  files hold multi-line trees; any other file holds one bracketed tree per line (blank
  lines skipped). ``.gz`` is read transparently (``data.raw.read_text``). Trees are
  normalised (``trees.normalize``); a tree left without words yields ``None`` so the
  caller can count it.

Which files make a problem's splits (the WSJ layouts) and the datagen pairs they give
belong to the problems (``t2t_lite.problems.parsing``). Malformed brackets raise
``RawDataError`` (a ``ValueError``) whose message starts with ``file:line:``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, Optional, Tuple, Union

from t2t_lite.data.raw import RawDataError, read_text
from t2t_lite.parsing.trees import Tree, TreeParseError, normalize, parse_trees

def is_multiline_tree_file(path: Path) -> bool:
    """``.mrg`` (or ``.mrg.gz``) files hold trees spread over several lines."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(".mrg")


def _tree_start_lines(text: str) -> List[int]:
    """The 1-based line where each top-level bracket opens (words hold no brackets)."""
    lines, depth, line = [], 0, 1
    for char in text:
        if char == "\n":
            line += 1
        elif char == "(":
            if depth == 0:
                lines.append(line)
            depth += 1
        elif char == ")":
            depth -= 1
    return lines


def read_tree_file(path: Union[str, Path],
                   normalized: bool = True) -> Iterator[Tuple[Optional[Tree], int]]:
    """``(normalised tree or None, line)`` for each tree of ``path`` (see module doc);
    ``normalized=False`` yields each tree as written instead."""
    clean = normalize if normalized else (lambda tree: tree)
    path = Path(path)
    text = read_text(path)
    if is_multiline_tree_file(path):
        try:
            trees = parse_trees(text, str(path))
        except TreeParseError as error:
            raise RawDataError(f"{error}; fix the bracketing or remove the file") from None
        for tree, line in zip(trees, _tree_start_lines(text)):
            yield clean(tree), line
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            trees = parse_trees(line, str(path))
        except TreeParseError as error:
            message = str(error).split(": ", 1)[1]
            raise RawDataError(f"{path}:{number}: {message}; files not ending in .mrg must "
                               f"hold one bracketed tree per line") from None
        if len(trees) != 1:
            raise RawDataError(f"{path}:{number}: {len(trees)} trees on one line; files not "
                               f"ending in .mrg must hold one bracketed tree per line")
        yield clean(trees[0]), number
