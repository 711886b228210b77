"""Trees as labeled spans, and the best tree of a chart of span scores (CKY).

A span-based (chart) parser scores every span ``(i, j)`` of an ``n``-word sentence
(words ``i`` ... ``j - 1``, ``0 <= i < j <= n``) with every label, and outputs the
best-scoring tree. Here:

* ``labeled_spans(tree)``: ``{(i, j): label}`` for every constituent of ``tree``. A
  unary chain (``(S (VP ...))`` over one span) is one label joined outermost first
  (``"S+VP"``); preterminals (POS tags) are left out.
* ``best_bracketing(scores)``: the binary bracketing, and each of its spans' label, that
  maximises the sum of the spans' scores, by CKY in O(n^3).
* ``tree_from_spans(words, spans, labels)``: the ``Tree`` of a bracketing, its
  binarising spans (label 0) dissolved and its unary chains unfolded.

Label index 0 always means "no constituent"; ``labeled_spans`` and ``tree_from_spans``
turn label strings into indices and back through the caller's ``labels`` list.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from t2t_lite.parsing.trees import Tree

Span = Tuple[int, int]
CHAIN_SEPARATOR = "+"
NO_LABEL = 0


def labeled_spans(tree: Tree) -> Dict[Span, str]:
    """``{(i, j): label}`` for every constituent of ``tree`` (its root included), with
    the labels of a unary chain joined outermost first by ``CHAIN_SEPARATOR``."""
    spans: Dict[Span, str] = {}

    def visit(node: Tree, start: int) -> int:
        if node.is_preterminal:
            return start + 1
        end = start + len(node.words())
        key = (start, end)
        spans[key] = spans[key] + CHAIN_SEPARATOR + node.label if key in spans else node.label
        position = start
        for child in node.children:
            position = visit(child, position)
        return end

    visit(tree, 0)
    return spans


def best_bracketing(scores: np.ndarray) -> Dict[Span, Tuple[int, int]]:
    """The best binary bracketing of a sentence and each of its spans' label.

    ``scores``: ``(n + 1, n + 1, num_labels)``; ``scores[i, j, l]`` is what labeling span
    ``(i, j)`` with ``l`` adds to a tree's score (only ``i < j`` is read). Label 0 means
    "no constituent"; a caller scoring with log-probabilities passes each span's
    log-probabilities minus that of label 0, so that a tree's score is the log-probability
    of the whole chart.

    Returns ``{(i, j): (label, split)}`` for the ``2n - 1`` spans of the best binary tree:
    every span takes its best label, except the whole sentence, which takes its best
    label other than 0 (a tree has a root). ``split`` is ``k`` for a span made of
    ``(i, k)`` and ``(k, j)``, and 0 for one word.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 3 or scores.shape[0] != scores.shape[1] or scores.shape[0] < 2:
        raise ValueError(f"scores must be (n + 1, n + 1, labels) with n >= 1, "
                         f"got {scores.shape}")
    if scores.shape[2] < 2:
        raise ValueError(f"scores need label 0 and at least one other, got "
                         f"{scores.shape[2]} label(s)")
    n = scores.shape[0] - 1
    best_label = scores.argmax(-1)
    best_score = scores.max(-1)
    root_label = int(scores[0, n, 1:].argmax()) + 1
    best_score[0, n] = scores[0, n, root_label]
    best_label[0, n] = root_label
    chart = np.zeros((n + 1, n + 1))
    splits = np.zeros((n + 1, n + 1), dtype=np.int64)
    for i in range(n):
        chart[i, i + 1] = best_score[i, i + 1]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            candidates = chart[i, i + 1:j] + chart[i + 1:j, j]
            best = int(candidates.argmax())
            splits[i, j] = i + 1 + best
            chart[i, j] = best_score[i, j] + candidates[best]
    result: Dict[Span, Tuple[int, int]] = {}
    stack = [(0, n)]
    while stack:
        i, j = stack.pop()
        split = int(splits[i, j]) if j - i > 1 else 0
        result[(i, j)] = (int(best_label[i, j]), split)
        if split:
            stack += [(i, split), (split, j)]
    return result


def tree_from_spans(words: Sequence[str], bracketing: Dict[Span, Tuple[int, int]],
                    labels: Sequence[str], tag: str = "XX") -> Tree:
    """The tree of a ``best_bracketing`` result over ``words``, each word under the
    preterminal ``tag``. ``labels[l]`` is label ``l``'s string (``labels[0]`` unused);
    spans labeled 0 are dissolved into their parent."""
    def build(i: int, j: int) -> List[Tree]:
        label, split = bracketing[(i, j)]
        if j - i == 1:
            children = [Tree(tag, word=words[i])]
        else:
            children = build(i, split) + build(split, j)
        if label != NO_LABEL:
            for part in reversed(labels[label].split(CHAIN_SEPARATOR)):
                children = [Tree(part, tuple(children))]
        return children

    if (0, len(words)) not in bracketing:
        raise ValueError(f"the bracketing does not span the sentence's {len(words)} words")
    (root,) = build(0, len(words))
    return root
