"""Label-smoothed cross-entropy over non-padding target tokens (section 5.4).

The smoothed target puts 1 - eps on the gold token and eps / (V - 1) on each other token
(as tensor2tensor). The loss is the cross-entropy H(q, p) of that target with the model's
distribution; tensor2tensor additionally subtracts the constant entropy H(q), which
changes the reported value but not the gradients. Padding (label 0) never counts.
Shapes: labels [b, t] int, logits [b, t, V].
"""
from __future__ import annotations

from typing import Tuple

import keras
import tensorflow as tf
from keras import ops

from t2t_lite.data.vocab import PAD_ID


def token_cross_entropy(labels, logits, smoothing: float) -> tf.Tensor:
    """labels [b, t], logits [b, t, V] -> float32 [b, t] smoothed cross-entropy per token
    (padding positions included; mask them yourself).

    The gradient with respect to the logits is softmax(logits) - q, written out rather
    than left to autodiff: the gold token's log-probability is a gather, whose automatic
    gradient scatters into a dense [b * t, V] tensor (a segment sum over every logit)."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")
    vocab_size = logits.shape[-1]
    if vocab_size is None or vocab_size < 2:
        raise ValueError(f"logits need a static vocabulary dimension >= 2, got {vocab_size}")
    labels = ops.cast(labels, "int32")
    low = smoothing / (vocab_size - 1)

    @tf.custom_gradient
    def cross_entropy(logits):
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        gold = tf.gather(log_probs, labels, batch_dims=len(labels.shape))
        if smoothing == 0.0:
            losses = -gold
        else:   # sum_v q_v log p_v with q = low everywhere except 1 - eps at the gold token.
            losses = -((1.0 - smoothing - low) * gold
                       + low * tf.reduce_sum(log_probs, axis=-1))

        def gradient(upstream):
            target = tf.one_hot(labels, vocab_size, on_value=1.0 - smoothing, off_value=low)
            return upstream[..., None] * (tf.exp(log_probs) - target)

        return losses, gradient

    return cross_entropy(ops.cast(logits, "float32"))


def label_smoothed_cross_entropy(labels, logits, smoothing: float,
                                 pad_id: int = PAD_ID) -> Tuple[tf.Tensor, tf.Tensor]:
    """labels [b, t] int, logits [b, t, V] -> (loss_sum, num_tokens), float32 scalars,
    summed over the tokens whose label is not ``pad_id``."""
    weights = ops.cast(ops.not_equal(ops.cast(labels, "int32"), pad_id), "float32")
    losses = token_cross_entropy(labels, logits, smoothing)
    return ops.sum(losses * weights), ops.sum(weights)


class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """``keras.losses.Loss``: the mean smoothed cross-entropy over non-padding tokens.

    ``loss(labels [b, t], logits [b, t, V])`` -> scalar. Works with Keras's default
    ``sum_over_batch_size`` reduction (and its distribution scaling): each token's loss is
    weighted by (b * t) / non-padding tokens, padding by 0.
    """

    def __init__(self, smoothing: float = 0.1, pad_id: int = PAD_ID,
                 name: str = "label_smoothed_cross_entropy", **kwargs):
        reduction = kwargs.pop("reduction", "sum_over_batch_size")
        if reduction != "sum_over_batch_size":
            raise ValueError("LabelSmoothedCrossEntropy averages over non-padding tokens; "
                             f"only reduction='sum_over_batch_size' is supported, "
                             f"got {reduction!r}")
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.smoothing = smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        weights = ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        total = ops.cast(ops.size(weights), "float32")
        scale = total / ops.maximum(ops.sum(weights), 1.0)
        return token_cross_entropy(labels, y_pred, self.smoothing) * weights * scale

    def get_config(self):
        config = super().get_config()
        config.update(smoothing=self.smoothing, pad_id=self.pad_id)
        return config
