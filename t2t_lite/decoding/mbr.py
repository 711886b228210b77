"""Minimum Bayes risk (MBR) reranking of a sentence's N-best list.

Each hypothesis ``h`` of the list is scored by its expected sentence BLEU against the
list itself, ``sum_j p_j * BLEU(h, y_j)`` (sacreBLEU's 13a tokenisation with effective
n-gram order; ``BLEU(h, h)`` = 100), where ``p`` is the softmax of the hypotheses' search
scores (``log P / lp``). The list is returned in that order, best first: the hypothesis the
others agree with most, rather than the single most probable one. This module does not
import TensorFlow.
"""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

Hypotheses = List[Tuple[str, float]]


def expected_bleu(hypotheses: Sequence[Tuple[str, float]]) -> List[float]:
    """Each hypothesis's expected sentence BLEU against the list, weighted by the softmax
    of the scores ([(text, score)] -> [float], in the same order)."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU(effective_order=True)
    texts = [text for text, _ in hypotheses]
    top = max(score for _, score in hypotheses)
    weights = [math.exp(score - top) for _, score in hypotheses]
    total = sum(weights)
    return [sum(weight / total * (100.0 if j == i else bleu.sentence_score(text, [other]).score)
                for j, (other, weight) in enumerate(zip(texts, weights)))
            for i, text in enumerate(texts)]


def mbr_order(hypotheses: Sequence[Tuple[str, float]]) -> Hypotheses:
    """``hypotheses`` ([(text, score)], the search's order) sorted by ``expected_bleu``,
    highest first (ties keep the search's order); each keeps its own score."""
    if len(hypotheses) < 2:
        return list(hypotheses)
    utilities = expected_bleu(hypotheses)
    order = sorted(range(len(hypotheses)), key=lambda index: -utilities[index])
    return [hypotheses[index] for index in order]
