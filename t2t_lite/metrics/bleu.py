"""Corpus BLEU as sacreBLEU computes it.

BLEU itself is never reimplemented here: ``corpus_bleu`` calls sacreBLEU with its
defaults (13a tokenization, mixed case, exponential smoothing, one reference), which
reproduces mteval-v13a.pl, and returns the score together with sacreBLEU's signature so
that every figure the project reports says how it was computed. ``lowercase=True`` is
sacreBLEU's ``-lc`` (signature ``case:lc``), the figure papers that score lowercased text
report. WMT SGML files are read
by the data side's one reader (``t2t_lite.data.raw.read_sgm_text``), as sacreBLEU reads
them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

from sacrebleu.metrics import BLEU

from t2t_lite.errors import UserError


@dataclass(frozen=True)
class BleuResult:
    """One corpus BLEU figure.

    ``score`` is on sacreBLEU's 0-100 scale; ``signature`` is sacreBLEU's signature
    (``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...``).
    """

    score: float
    signature: str
    precisions: Tuple[float, ...]
    brevity_penalty: float
    hypothesis_length: int
    reference_length: int

    def __str__(self) -> str:
        return (f"BLEU = {self.score:.2f} "
                f"{'/'.join(f'{p:.1f}' for p in self.precisions)} "
                f"(BP = {self.brevity_penalty:.3f}, hyp_len = {self.hypothesis_length}, "
                f"ref_len = {self.reference_length}) {self.signature}")


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str],
                tokenize: str = "13a", lowercase: bool = False) -> BleuResult:
    """Corpus BLEU of ``hypotheses`` against one reference each (detokenized text),
    case-sensitive unless ``lowercase``.

    Raises ``ValueError`` when the two lists differ in length or are empty.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"corpus_bleu: {len(hypotheses)} hypotheses but "
                         f"{len(references)} references")
    if not hypotheses:
        raise UserError("corpus_bleu: no sentences to score")
    metric = BLEU(tokenize=tokenize, lowercase=lowercase)
    result = metric.corpus_score(hypotheses, [references])
    return BleuResult(score=float(result.score),
                      signature=str(metric.get_signature()),
                      precisions=tuple(float(p) for p in result.precisions),
                      brevity_penalty=float(result.bp),
                      hypothesis_length=int(result.sys_len),
                      reference_length=int(result.ref_len))
