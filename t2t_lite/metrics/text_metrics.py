"""Scoring decoded text with a problem's metrics, by name.

``score_texts(("bleu",), hypotheses, references, sources)`` ->
``{"bleu": 27.3, "bleu_lowercase": 28.1}``.
Translation problems name ``"bleu"`` (sacreBLEU, 13a: mixed case, and lowercased as
``bleu_lowercase``); parsing problems name
``"parse_f1"`` (EVALB/COLLINS.prm labeled bracketing F1 of the repaired output trees
against gold trees with their POS tags);
problems whose outputs are mostly one word (BLEU's 4-grams do not exist there) name
``"exact_match"`` (percentage of hypotheses equal to their reference, outer whitespace
ignored).
"""
from __future__ import annotations

from typing import Callable, Dict, Sequence

from t2t_lite.metrics.bleu import corpus_bleu


def _bleu(hypotheses, references, sources) -> Dict[str, float]:
    return {"bleu": corpus_bleu(hypotheses, references).score,
            "bleu_lowercase": corpus_bleu(hypotheses, references, lowercase=True).score}


def _parse_f1(hypotheses, references, sources) -> Dict[str, float]:
    """EVALB (COLLINS.prm) scores of the repaired hypotheses against gold trees.

    ``references`` are bracketed gold trees with their POS tags, one a string (as
    ``ParsingProblem.read_references`` / ``eval_references`` give them); the gold tags
    are put back on the hypothesis words, so the figures are EVALB's on the files
    ``t2t_lite.parsing.evalb_files.write_evalb_files`` writes. A linearised reference
    (no tags: EVALB's punctuation rule cannot be applied) is refused.
    """
    from t2t_lite.errors import UserError
    from t2t_lite.parsing.evalb import evaluate
    from t2t_lite.parsing.evalb_files import is_linearized
    from t2t_lite.parsing.linearize import RepairReport, repair
    from t2t_lite.parsing.trees import Tree
    gold, test, reports = [], [], []
    for number, (hypothesis, reference, source) in enumerate(
            zip(hypotheses, references, sources), start=1):
        if is_linearized(reference):
            raise UserError(f"parse_f1: reference {number} is a linearised tree; EVALB's "
                            f"scores need the gold trees with their POS tags (re-run "
                            f"t2t-lite-datagen to write <problem>-<split>.gold.txt, or pass "
                            f"the gold .mrg trees)")
        gold.append(Tree.from_string(reference, f"reference {number}"))
        tree, report = repair(hypothesis, source.split())
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
