"""Graceful stop on SIGTERM (cloud preemption, Kubernetes pod eviction).

``StopOnSignal`` catches SIGTERM while training runs; at each step boundary the trainer
asks ``requested()``, saves a checkpoint when it is true and raises ``TrainingPreempted``,
which ``t2t-lite-trainer`` prints as one line before exiting with status 143 (128 +
SIGTERM, what a shell reports for a process that SIGTERM ended). With several workers
``requested()`` sums every worker's flag with one all-reduce, so all of them stop, and
save, after the same step, even when only one was signalled.

(TensorFlow's ``PreemptionCheckpointHandler`` was not used: it adds its own run counter
to the checkpoint, restores a non-chief worker from the checkpoint manager passed in, the
worker's scratch directory, and its own manager keeps one checkpoint, deleting the ones
kept for averaging.)
"""
from __future__ import annotations

import signal
import threading

import tensorflow as tf

EXIT_STATUS = 128 + signal.SIGTERM


class TrainingPreempted(Exception):
    """Training stopped on SIGTERM after saving a checkpoint; rerunning resumes it."""

    exit_status = EXIT_STATUS


class StopOnSignal:
    """Context manager; ``arm()`` installs the SIGTERM handler, leaving restores the old one.

    Before ``arm()`` (run directory, data, model set-up) SIGTERM keeps its default
    action: nothing has been trained that a checkpoint would keep.
    """

    def __init__(self, strategy: tf.distribute.Strategy, multi_worker: bool):
        self._strategy = strategy
        self._multi_worker = multi_worker
        self._received = False
        self._previous = None
        self._any_worker = tf.function(self._sum_over_workers) if multi_worker else None

    def __enter__(self) -> "StopOnSignal":
        return self

    def arm(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _on_signal(self, signum, frame) -> None:
        self._received = True

    @property
    def received(self) -> bool:
        """This process got SIGTERM."""
        return self._received

    def requested(self) -> bool:
        """True when this worker, or any worker of the cluster, got SIGTERM. With several
        workers it runs a collective: every worker must call it at the same step."""
        if not self._multi_worker:
            return self._received
        flag = tf.constant(1.0 if self._received else 0.0)
        total = self._strategy.experimental_local_results(self._any_worker(flag))[0]
        return float(total) > 0.0

    def _sum_over_workers(self, flag: tf.Tensor):
        def replica_sum(value):
            # identity: a copy on the replica's device (an input has none to reduce to)
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.identity(value))
        return self._strategy.run(replica_sum, args=(flag,))
