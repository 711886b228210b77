"""Registered models."""
from t2t_lite.models.transformer import Transformer  # noqa: F401  (registers "transformer")
