"""Evaluation metrics: corpus BLEU through sacreBLEU (``bleu``)."""
from t2t_lite.metrics.bleu import BleuResult, corpus_bleu, read_sgml_segments

__all__ = ["BleuResult", "corpus_bleu", "read_sgml_segments"]
