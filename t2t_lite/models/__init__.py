"""Registered models, declared lazily: ``MODELS.get("transformer")`` imports
``t2t_lite.models.transformer`` (and TensorFlow) only when a model is built, so listing
the registries stays fast."""
from t2t_lite.registry import MODELS

MODELS.declare("transformer", "t2t_lite.models.transformer")
