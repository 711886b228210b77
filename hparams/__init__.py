"""Registered hparam sets (installed as ``t2t_lite.hparams``)."""
from t2t_lite.hparams import transformer  # noqa: F401  (registers the sets)
