"""English constituency parsing: trees (``trees``), their linearisation for a
sequence-to-sequence model and its repair (``linearize``), and EVALB scoring (``evalb``) with
EVALB's own input files (``evalb_files``).
"""
from t2t_lite.parsing.evalb import (EvalbError, EvalbResult, evaluate, evaluate_sentence,
                                    score_sentences)
from t2t_lite.parsing.evalb_files import read_gold_trees, write_evalb_files
from t2t_lite.parsing.linearize import (LinearizationError, RepairReport, delinearize,
                                        linearize, linearize_tokens, placeholders_from_words,
                                        repair, source_text)
from t2t_lite.parsing.trees import (Tree, TreeParseError, normalize, parse_trees, read_mrg,
                                    read_mrg_files, strip_label)

__all__ = [
    "EvalbError", "EvalbResult", "evaluate", "evaluate_sentence", "score_sentences",
    "read_gold_trees", "write_evalb_files",
    "LinearizationError", "RepairReport", "delinearize", "linearize", "linearize_tokens",
    "placeholders_from_words", "repair", "source_text",
    "Tree", "TreeParseError", "normalize", "parse_trees", "read_mrg", "read_mrg_files",
    "strip_label",
]
