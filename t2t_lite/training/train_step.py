"""One optimisation step under any tf.distribute strategy, with optional XLA and
gradient accumulation.

Design (why not ``model.fit``): under ``MirroredStrategy`` Keras compiles the whole
cross-replica step with XLA and fails reading another replica's variable, and
``Adam(gradient_accumulation_steps=N)`` fails in ``merge_call``. Here each replica runs
``_replica_gradients`` (forward, label-smoothed loss, backward), which alone is compiled
with XLA when asked; gradients of the *summed* loss are accumulated in ON_READ
variables (local to each replica) over ``accumulation_steps`` micro-batches; then the
apply step all-reduces the token count and applies ``sum_grads / global_tokens`` once.
The loss is therefore the mean over every non-padding target token of the global step,
whatever the number of replicas or micro-batches.

With float16 (``keras.optimizers.LossScaleOptimizer``), each micro-batch's summed loss is
multiplied by the loss scale before the backward pass and the optimizer divides the
gradients by it. Whether any replica's accumulated gradients overflowed travels in the
statistics' all-reduce; when one did, every replica hands the optimizer non-finite
gradients, so that all of them skip the update and halve the scale together (Keras
checks each replica's own gradients, which may differ before they are summed). A skipped
step still counts as a step (``optimizer.iterations`` is advanced): its batches were
consumed, and the step count stays the position in the data stream that resuming relies
on; the learning-rate schedule moves on with it.

The step's statistics and the caller's stop flag (a worker that got SIGTERM,
``preemption.StopOnSignal``) are summed in one ``all_reduce`` of one nested structure,
so that stopping every worker after the same step costs no collective of its own.
"""
from __future__ import annotations

from typing import Callable, Dict

import keras
import tensorflow as tf

from t2t_lite.data.vocab import PAD_ID
from t2t_lite.errors import UserError
from t2t_lite.training.losses import label_smoothed_cross_entropy
from t2t_lite.training.metrics import token_statistics
from t2t_lite.training.optimizer import uses_loss_scaling

# Per-step statistics, summed over replicas and micro-batches.
STAT_NAMES = ("loss_sum", "nll_sum", "correct", "tokens", "source_tokens")
# Summed over replicas with them: replicas whose worker asked to stop before the step.
STOP_REQUESTS = "stop_requests"
# With loss scaling: replicas whose gradients overflowed (> 0: the step was skipped).
OVERFLOWS = "overflowing_replicas"


class TrainStep:
    """Builds the distributed ``step(iterator, stop=False) -> stats`` function: one
    optimiser update; ``stats`` maps each of ``STAT_NAMES`` and ``STOP_REQUESTS`` (and,
    with loss scaling, ``OVERFLOWS``) to a float32 scalar tensor summed over every
    replica of every worker.

    Args:
      model: a built Transformer created under ``strategy.scope()``.
      optimizer: a built Keras optimizer created under ``strategy.scope()``; a
        ``LossScaleOptimizer`` turns loss scaling on.
      strategy: the distribution strategy.
      label_smoothing: epsilon_ls.
      accumulation_steps: micro-batches per optimiser update (>= 1).
      jit_compile: compile each replica's forward/backward pass with XLA.
      take: ``take(iterator)``, one micro-batch of per-replica features from the
        iterator ``step`` is given (traced in the step); the default, ``next``, suits a
        distributed iterator (``stream.TrainingStream.take`` for the trainer's stream).
    """

    def __init__(self, model: keras.Model, optimizer: keras.optimizers.Optimizer,
                 strategy: tf.distribute.Strategy, label_smoothing: float,
                 accumulation_steps: int = 1, jit_compile: bool = False,
                 take: Callable = next):
        if accumulation_steps < 1:
            raise UserError(f"--gradient_accumulation_steps must be >= 1, got {accumulation_steps}")
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.label_smoothing = label_smoothing
        self.accumulation_steps = accumulation_steps
        self._take = take
        self.loss_scaling = uses_loss_scaling(optimizer)
        self._replica_gradients_fn = tf.function(self._replica_gradients, autograph=False,
                                                 jit_compile=jit_compile)
        on_read = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)
        with strategy.scope():
            self._grad_sums = [tf.Variable(tf.zeros(v.shape, tf.float32), **on_read)
                               for v in model.trainable_variables]
            self._stat_sums = {name: tf.Variable(0.0, **on_read) for name in STAT_NAMES}
        self._step_fn = tf.function(self._step, autograph=False)

    def step(self, iterator, stop: bool = False) -> Dict[str, tf.Tensor]:
        """One update from ``accumulation_steps`` batches of ``iterator``; ``stop``: this
        worker asks to stop (every worker must call ``step`` the same number of times)."""
        return self._step_fn(iterator, tf.constant(1.0 if stop else 0.0))  # no retrace

    # Replica context ----------------------------------------------------------------
    def _replica_gradients(self, features: Dict[str, tf.Tensor]):
        """Gradients of the summed loss of one replica's micro-batch, and its statistics."""
        targets = features["targets"]
        with tf.GradientTape() as tape:
            logits = self.model(features, training=True)
            loss_sum, _ = label_smoothed_cross_entropy(targets, logits, self.label_smoothing)
            scaled = self.optimizer.scale_loss(loss_sum) if self.loss_scaling else loss_sum
        grads = tape.gradient(scaled, self.model.trainable_variables)
        stats = token_statistics(targets, logits)
        stats["loss_sum"] = loss_sum
        stats["source_tokens"] = tf.reduce_sum(tf.cast(features["inputs"] != PAD_ID, tf.float32))
        return grads, stats

    def _accumulate(self, features):
        grads, stats = self._replica_gradients_fn(features)
        for total, grad in zip(self._grad_sums, grads):
            total.assign_add(tf.convert_to_tensor(grad, tf.float32))
        for name in STAT_NAMES:
            self._stat_sums[name].assign_add(tf.cast(stats[name], tf.float32))

    def _apply(self, stop: tf.Tensor):
        context = tf.distribute.get_replica_context()
        local_stats = {name: tf.identity(var) for name, var in self._stat_sums.items()}
        local_stats[STOP_REQUESTS] = tf.identity(stop)  # a copy on the replica's device
        if self.loss_scaling:
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(total))
                                    for total in self._grad_sums])
            local_stats[OVERFLOWS] = 1.0 - tf.cast(finite, tf.float32)
        global_stats = context.all_reduce(tf.distribute.ReduceOp.SUM, local_stats)
        scale = 1.0 / tf.maximum(global_stats["tokens"], 1.0)
        grads = [tf.identity(total) * scale for total in self._grad_sums]
        if self.loss_scaling:  # NaN everywhere when any replica overflowed, else + 0
            poison = tf.where(global_stats[OVERFLOWS] > 0, float("nan"), 0.0)
            grads = [grad + poison for grad in grads]
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        for total in self._grad_sums:
            total.assign(tf.zeros_like(total))
        for var in self._stat_sums.values():
            var.assign(0.0)
        return global_stats

    # Cross-replica context ----------------------------------------------------------
    def _step(self, iterator, stop: tf.Tensor) -> Dict[str, tf.Tensor]:
        for _ in range(self.accumulation_steps):
            self.strategy.run(self._accumulate, args=(self._take(iterator),))
        per_replica = self.strategy.run(self._apply, args=(stop,))
        # Every replica holds the same all-reduced values: take one.
        stats = {name: self.strategy.experimental_local_results(value)[0]
                 for name, value in per_replica.items()}
        if self.loss_scaling:  # a skipped update counts as a step (see the module doc)
            iterations = self.optimizer.iterations
            iterations.assign_add(tf.cast(stats[OVERFLOWS] > 0, iterations.dtype))
        return stats
