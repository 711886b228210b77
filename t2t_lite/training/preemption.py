"""Graceful stop on SIGTERM (cloud preemption, Kubernetes pod eviction).

``StopOnSignal`` catches SIGTERM while training runs; at each step boundary the trainer
asks ``requested(...)``, saves a checkpoint when it is true and raises
``TrainingPreempted``, which ``t2t-lite-trainer`` prints as one line before exiting with
status 143 (128 + SIGTERM, what a shell reports for a process that SIGTERM ended).

With one worker the flag is read as it is at the step boundary. With several, every
worker must stop, and save, after the same step, even when only one was signalled: each
worker passes ``received`` into the train step, whose one all-reduce of the step's
statistics sums the flags too (``TrainStep.step(iterator, stop=...)``'s
``stop_requests``), and all stop when that sum is positive. A SIGTERM that arrives while
a step runs is therefore acted on one step later than with one worker; no collective is
spent on the flag alone.

(TensorFlow's ``PreemptionCheckpointHandler`` was not used: it adds its own run counter
to the checkpoint, restores a non-chief worker from the checkpoint manager passed in, the
worker's scratch directory, and its own manager keeps one checkpoint, deleting the ones
kept for averaging.)
"""
from __future__ import annotations

import signal
import threading

EXIT_STATUS = 128 + signal.SIGTERM


class TrainingPreempted(Exception):
    """Training stopped on SIGTERM after saving a checkpoint; rerunning resumes it."""

    exit_status = EXIT_STATUS


class StopOnSignal:
    """Context manager; ``arm()`` installs the SIGTERM handler, leaving restores the old one.

    Before ``arm()`` (run directory, data, model set-up) SIGTERM keeps its default
    action: nothing has been trained that a checkpoint would keep.
    """

    def __init__(self, multi_worker: bool):
        self._multi_worker = multi_worker
        self._received = False
        self._previous = None

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
        """This process got SIGTERM (what it passes to the next train step)."""
        return self._received

    def requested(self, stop_requests: float = 0.0) -> bool:
        """Whether to stop after the step just trained. One worker: it got SIGTERM.
        Several: ``stop_requests``, the step's all-reduced sum of the flags every worker
        passed in, is positive (the same answer on every worker)."""
        if not self._multi_worker:
            return self._received
        return stop_requests > 0.0
