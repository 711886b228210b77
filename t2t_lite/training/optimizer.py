"""Adam with the paper's schedule and the hparams' beta1, beta2, epsilon and clipping;
for float16 training, wrapped in Keras' ``LossScaleOptimizer`` (dynamic loss scaling)."""
from __future__ import annotations

from typing import Dict

import keras

from t2t_lite.hparams_lib import HParams
from t2t_lite.training.schedule import TransformerSchedule


def make_optimizer(hparams: HParams, loss_scaling: bool = False) -> keras.optimizers.Optimizer:
    """Adam(TransformerSchedule, beta_1, beta_2, epsilon); global-norm gradient clipping
    at ``hparams.clip_grad_norm`` when it is > 0. With ``loss_scaling``, Adam inside
    ``keras.optimizers.LossScaleOptimizer`` (initial scale 2^15, doubled after 2,000
    steps without overflow, halved and the step skipped on one)."""
    clip = hparams.clip_grad_norm if hparams.clip_grad_norm > 0 else None
    adam = keras.optimizers.Adam(learning_rate=TransformerSchedule.from_hparams(hparams),
                                 beta_1=hparams.optimizer_adam_beta1,
                                 beta_2=hparams.optimizer_adam_beta2,
                                 epsilon=hparams.optimizer_adam_epsilon,
                                 global_clipnorm=clip)
    return keras.optimizers.LossScaleOptimizer(adam) if loss_scaling else adam


def uses_loss_scaling(optimizer: keras.optimizers.Optimizer) -> bool:
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def optimizer_checkpoint(optimizer: keras.optimizers.Optimizer) -> Dict[str, object]:
    """The optimizer's entries of the run's ``tf.train.Checkpoint``: ``optimizer`` is Adam
    whether or not it is wrapped for loss scaling, and ``loss_scale`` the wrapper (its
    scale and growth counter), so that a run can be resumed with or without
    ``--mixed_precision=float16``."""
    if uses_loss_scaling(optimizer):
        return {"optimizer": optimizer.inner_optimizer, "loss_scale": optimizer}
    return {"optimizer": optimizer}
