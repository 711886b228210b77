"""Graceful stop on SIGTERM (cloud preemption, Kubernetes pod eviction) and SIGINT (Ctrl-C).

``StopOnSignal`` catches SIGTERM and SIGINT while training runs; at each step boundary the trainer
asks ``requested(...)``, saves a checkpoint when it is true and raises
``TrainingPreempted``, which ``t2t-lite-trainer`` prints as one line before exiting with
status 143 (128 + SIGTERM, what a shell reports for a process that SIGTERM ended), or 130
after SIGINT (128 + SIGINT).

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
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingPreempted(Exception):
    """Training stopped on SIGTERM or SIGINT after saving a checkpoint; rerunning resumes
    it. ``exit_status``: 128 + the signal (143 for SIGTERM, 130 for SIGINT)."""

    def __init__(self, message: str, exit_status: int = EXIT_STATUS):
        super().__init__(message)
        self.exit_status = exit_status


class StopOnSignal:
    """Context manager; ``arm()`` installs the SIGTERM and SIGINT handlers, leaving
    restores the old ones.

    Before ``arm()`` (run directory, data, model set-up) SIGTERM keeps its default
    action and SIGINT raises ``KeyboardInterrupt`` (one line, exit status 130: see
    ``commands.common``): nothing has been trained that a checkpoint would keep.
    """

    def __init__(self, multi_worker: bool):
        self._multi_worker = multi_worker
        self._received = False
        self.signum = signal.SIGTERM   # the signal received (SIGTERM until one is)
        self._previous = {}

    def __enter__(self) -> "StopOnSignal":
        return self

    def arm(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._on_signal)
                              for signum in STOP_SIGNALS}

    def __exit__(self, *exc_info) -> None:
        for signum, previous in self._previous.items():
            if previous is not None:
                signal.signal(signum, previous)
        self._previous = {}

    def _on_signal(self, signum, frame) -> None:
        if not self._received:
            self.signum = signal.Signals(signum)
        self._received = True

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + int(self.signum)

    @property
    def received(self) -> bool:
        """This process got SIGTERM or SIGINT (what it passes to the next train step)."""
        return self._received

    def requested(self, stop_requests: float = 0.0) -> bool:
        """Whether to stop after the step just trained. One worker: it got SIGTERM.
        Several: ``stop_requests``, the step's all-reduced sum of the flags every worker
        passed in, is positive (the same answer on every worker)."""
        if not self._multi_worker:
            return self._received
        return stop_requests > 0.0
