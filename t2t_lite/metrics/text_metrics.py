"""Scoring decoded text with a problem's metrics, by name.

``score_texts(("bleu",), hypotheses, references, sources)`` -> ``{"bleu": 27.3}``.
Translation problems name ``"bleu"`` (sacreBLEU, 13a); parsing problems name
``"parse_f1"`` (EVALB/COLLINS.prm labeled bracketing F1 of the repaired output trees);
problems whose outputs are mostly one word (BLEU's 4-grams do not exist there) name
``"exact_match"`` (percentage of hypotheses equal to their reference, outer whitespace
ignored).
"""
from __future__ import annotations

from typing import Callable, Dict, Sequence

from t2t_lite.metrics.bleu import corpus_bleu


def _bleu(hypotheses, references, sources) -> Dict[str, float]:
    return {"bleu": corpus_bleu(hypotheses, references).score}


def _parse_f1(hypotheses, references, sources) -> Dict[str, float]:
    from t2t_lite.parsing.evalb import evaluate
    from t2t_lite.parsing.linearize import delinearize, repair
    from t2t_lite.parsing.linearize import RepairReport
    gold, test, reports = [], [], []
    for hypothesis, reference, source in zip(hypotheses, references, sources):
        words = source.split()
        gold.append(delinearize(reference, words))
        tree, report = repair(hypothesis, words)
        test.append(tree)
        reports.append(report)
    result = evaluate(gold, test)
    repairs = RepairReport.aggregate(reports)
    return {"parse_f1": result.f1, "parse_precision": result.precision,
            "parse_recall": result.recall, "parse_exact_match": result.exact_match,
            "parse_repaired_sentences": float(repairs.repaired_sentences)}


def _exact_match(hypotheses, references, sources) -> Dict[str, float]:
    if not references:
        return {"exact_match": 0.0}
    same = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references))
    return {"exact_match": 100.0 * same / len(references)}


METRICS: Dict[str, Callable[[Sequence[str], Sequence[str], Sequence[str]], Dict[str, float]]] = {
    "bleu": _bleu,
    "parse_f1": _parse_f1,
    "exact_match": _exact_match,
}


def score_texts(metric_names: Sequence[str], hypotheses: Sequence[str],
                references: Sequence[str], sources: Sequence[str]) -> Dict[str, float]:
    """Every named metric of ``hypotheses`` against ``references`` (``sources`` aligned)."""
    scores: Dict[str, float] = {}
    for name in metric_names:
        if name not in METRICS:
            raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}")
        scores.update(METRICS[name](hypotheses, references, sources))
    return scores
