"""Registered problems (installed as ``t2t_lite.problems``); each import registers its own."""
from t2t_lite.problems import translate_multi30k, translate_numbers, translate_wmt14  # noqa: F401
from t2t_lite.problems import translate_text_files  # noqa: F401
from t2t_lite.problems import parsing  # noqa: F401
