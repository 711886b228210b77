"""Evaluation metrics: corpus BLEU through sacreBLEU (``bleu``). WMT SGML files are read
with ``t2t_lite.data.raw.read_sgm_text``."""
from t2t_lite.metrics.bleu import BleuResult, corpus_bleu

__all__ = ["BleuResult", "corpus_bleu"]
