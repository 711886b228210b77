"""Token accuracy and per-token log-perplexity over non-padding target tokens.

Log-perplexity is the mean negative log-likelihood of the gold token (unsmoothed);
perplexity = exp(log-perplexity). Shapes: labels [b, t] int, logits [b, t, V].
"""
from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf
from keras import ops

from t2t_lite.data.vocab import PAD_ID


def token_statistics(labels, logits, pad_id: int = PAD_ID,
                     sample_weight=None) -> Dict[str, tf.Tensor]:
    """-> {"nll_sum", "correct", "tokens"} float32 scalars summed over non-padding tokens
    (each token weighted by ``sample_weight`` [b, t] or [b] when given)."""
    labels = ops.cast(labels, "int32")
    weights = ops.cast(ops.not_equal(labels, pad_id), "float32")
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, "float32")
        if len(sample_weight.shape) == 1:
            sample_weight = sample_weight[:, None]
        weights = weights * sample_weight
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    gold = ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels),
                       "float32")
    return {"nll_sum": -ops.sum(gold * weights), "correct": ops.sum(correct * weights),
            "tokens": ops.sum(weights)}


class _TokenMetric(keras.metrics.Metric):
    """Accumulates a sum of ``token_statistics[key]`` and a token count."""

    key = ""

    def __init__(self, name: str, pad_id: int = PAD_ID, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        stats = token_statistics(y_true, y_pred, self.pad_id, sample_weight)
        self.total.assign_add(stats[self.key])
        self.count.assign_add(stats["tokens"])

    def result(self):
        return ops.divide_no_nan(self.total, self.count)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update(pad_id=self.pad_id)
        return config


class TokenAccuracy(_TokenMetric):
    """Fraction of non-padding tokens whose argmax logit is the gold token."""

    key = "correct"

    def __init__(self, name: str = "token_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)


class LogPerplexity(_TokenMetric):
    """Mean negative log-likelihood of the gold token per non-padding token."""

    key = "nll_sum"

    def __init__(self, name: str = "log_perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
