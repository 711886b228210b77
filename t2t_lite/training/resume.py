"""Resuming a run on every worker, and turning a lost worker into one clear error.

Every worker restores the run's latest checkpoint from ``--output_dir`` (the chief's);
only the chief writes there, the other workers write their copies to scratch
directories. With several workers, ``check_same_step`` verifies that they all restored
the same step (``--output_dir`` must be one shared directory, e.g. a network filesystem
or a GCS bucket, under the same path on every worker).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from t2t_lite.errors import UserError

# What a collective raises when another worker died, froze, or timed out.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
               tf.errors.AbortedError, tf.errors.CancelledError)


class WorkerLostError(RuntimeError):
    """Another worker died or stopped answering during training."""


def check_same_step(strategy: tf.distribute.Strategy, step: int, output_dir: str) -> None:
    """Raises ``UserError`` unless every worker restored the same step.

    All workers gather every replica's step (one all-reduce of a vector holding each
    replica's step at its index), so all of them reach the same verdict and none is left
    waiting for the others.
    """
    def gather(value):
        context = tf.distribute.get_replica_context()
        slot = tf.one_hot(context.replica_id_in_sync_group, context.num_replicas_in_sync)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, slot * value)

    steps = strategy.experimental_local_results(tf.function(
        lambda: strategy.run(gather, args=(tf.constant(float(step)),)), autograph=False)())[0]
    steps = sorted({int(value) for value in np.asarray(steps)})
    if len(steps) > 1:
        raise UserError(
            f"the workers restored different steps ({', '.join(map(str, steps))}) from "
            f"--output_dir={output_dir}: every worker must see the chief's run directory "
            f"(a shared filesystem, same path on every worker)")


def worker_lost(error: tf.errors.OpError, step: int, output_dir: str,
                worker_timeout_secs: int) -> WorkerLostError:
    """The error to raise when a collective failed because another worker is gone."""
    latest = tf.train.latest_checkpoint(output_dir) or "none yet"
    timeout = (f"--worker_timeout_secs={worker_timeout_secs}" if worker_timeout_secs
               else "--worker_timeout_secs (default: TensorFlow's 10 s heartbeat timeout)")
    return WorkerLostError(
        f"lost contact with another worker after step {step} ({_reason(error)}). The run's "
        f"last checkpoint is {latest}; restart every worker with the same command to resume "
        f"from it. {timeout} sets how long a worker waits for the others.")


def _reason(error: tf.errors.OpError) -> str:
    """The informative line of a collective's error message."""
    lines = [line.strip() for line in str(error.message).splitlines() if line.strip()]
    for line in lines:
        if "aborted by" in line or "timed out" in line.lower():
            return f"{type(error).__name__}: {line}"
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"
