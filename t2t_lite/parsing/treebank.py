"""Treebank files on disk: the WSJ directory layouts, tree files, and their (source,
target) pairs for datagen.

* ``find_wsj_files(root)`` maps file numbers to ``.mrg`` paths in the standard layout
  ``WSJ_ROOT/NN/wsj_NNxx.mrg`` (``NN`` the two-digit section) or in one flat folder of
  ``wsj_NNxx.mrg`` files (both may be mixed; a number found twice is an error).
* ``read_tree_file(path)`` yields ``(tree, line)`` for every tree of a file: ``.mrg``
  files hold multi-line trees; any other file holds one bracketed tree per line (blank
  lines skipped). ``.gz`` is read transparently. Trees are normalised
  (``trees.normalize``); a tree left without words yields ``None`` so the caller can
  count it.
* ``tree_pairs(paths)`` turns those trees into ``TextPair(words, linearised tree)``; a
  tree without words becomes an empty pair, which datagen counts as dropped with its
  file and line.

Malformed brackets raise ``RawDataError`` (a ``ValueError``) whose message starts with
``file:line:``.
"""
from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple, Union

from t2t_lite.data.raw import RawDataError, TextPair
from t2t_lite.parsing.linearize import linearize, source_text
from t2t_lite.parsing.trees import Tree, TreeParseError, normalize, parse_trees

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


def _read_text(path: Path) -> str:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise RawDataError(f"{path}: cannot read it ({error}); replace it with a readable "
                           f"UTF-8 copy") from None


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
    text = _read_text(path)
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


def read_trees(paths: Iterable[Union[str, Path]]) -> List[Tree]:
    """Every normalised tree of ``paths`` in order; a tree without words is an error
    (references must stay aligned with their sentences)."""
    result = []
    for path in paths:
        for tree, line in read_tree_file(path):
            if tree is None:
                raise RawDataError(f"{path}:{line}: the tree has no words after removing "
                                   f"-NONE- elements; remove it")
            result.append(tree)
    return result


def tree_pairs(paths: Iterable[Union[str, Path]]) -> Iterator[TextPair]:
    """``TextPair(words, linearised tree)`` for each tree of ``paths`` in order.

    A tree without words gives an empty pair (datagen counts it as dropped, naming its
    file and line).
    """
    for path in paths:
        name = str(path)
        for tree, line in read_tree_file(path):
            if tree is None:
                yield TextPair("", "", name, name, line)
            else:
                yield TextPair(source_text(tree), linearize(tree), name, name, line)
