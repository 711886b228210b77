"""The paper's learning rate (section 5.3, formula 3):

    lrate = constant * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

with step = optimizer iterations + 1 (Keras counts iterations from 0).
"""
from __future__ import annotations

import keras
from keras import ops

from t2t_lite.hparams_lib import HParams


class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up for ``warmup_steps`` then decay with the inverse square root."""

    def __init__(self, d_model: int, warmup_steps: int = 4000, constant: float = 1.0):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(f"d_model and warmup_steps must be positive, got {d_model}, "
                             f"{warmup_steps}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.constant = constant

    @classmethod
    def from_hparams(cls, hparams: HParams) -> "TransformerSchedule":
        return cls(hparams.hidden_size, hparams.learning_rate_warmup_steps,
                   hparams.learning_rate_constant)

    def __call__(self, iterations):
        step = ops.cast(iterations, "float32") + 1.0
        return (self.constant * self.d_model ** -0.5
                * ops.minimum(ops.rsqrt(step), step * self.warmup_steps ** -1.5))

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
                "constant": self.constant}
