"""Adam with the paper's schedule and the hparams' beta1, beta2, epsilon and clipping."""
from __future__ import annotations

import keras

from t2t_lite.hparams_lib import HParams
from t2t_lite.training.schedule import TransformerSchedule


def make_optimizer(hparams: HParams) -> keras.optimizers.Adam:
    """Adam(TransformerSchedule, beta_1, beta_2, epsilon); global-norm gradient clipping
    at ``hparams.clip_grad_norm`` when it is > 0."""
    clip = hparams.clip_grad_norm if hparams.clip_grad_norm > 0 else None
    return keras.optimizers.Adam(learning_rate=TransformerSchedule.from_hparams(hparams),
                                 beta_1=hparams.optimizer_adam_beta1,
                                 beta_2=hparams.optimizer_adam_beta2,
                                 epsilon=hparams.optimizer_adam_epsilon,
                                 global_clipnorm=clip)
