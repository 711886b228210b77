"""Progress lines and the end-of-run summary of training throughput."""
from __future__ import annotations

import math
import time
from typing import Callable, Dict, Optional


class ProgressLog:
    """Accumulates step statistics and formats a line every ``every`` steps.

    ``update(step, stats)`` takes the summed statistics of one step (``loss_sum``,
    ``nll_sum``, ``correct``, ``tokens``, ``source_tokens``) and returns a line such as
    ``step 200/2000 loss 3.412 acc 0.412 ppl 21.3 lr 6.2e-04 | 2.1 steps/s 9,400 tgt tok/s
    eta 0:14:55`` when a logging step is reached, else ``None``: ``eta`` is the time the
    remaining steps take at the line's own steps/s (over the time since the previous line,
    evaluations and saves in it included), absent on the last step. The first step this
    process runs is left out of the first line (unless it is a logging step itself): it
    traces the step function and, in a resumed run, first reads the training data past the
    batches already trained on, which would understate the speed and overstate the time
    left. ``last_scalars`` then holds the values for TensorBoard; ``summary`` counts every
    step and second.
    """

    def __init__(self, total_steps: int, every: int, learning_rate: Callable[[], float]):
        self.total_steps = total_steps
        self.every = max(1, every)
        self.learning_rate = learning_rate
        self.last_scalars: Dict[str, float] = {}
        self._window = self._empty()
        self._window_start = time.monotonic()
        self._run_start = self._window_start
        self._run_tokens = 0.0
        self._run_steps = 0

    @staticmethod
    def _empty() -> Dict[str, float]:
        return {"loss_sum": 0.0, "nll_sum": 0.0, "correct": 0.0, "tokens": 0.0,
                "source_tokens": 0.0, "steps": 0}

    def update(self, step: int, stats: Dict[str, float]) -> Optional[str]:
        for name in ("loss_sum", "nll_sum", "correct", "tokens", "source_tokens"):
            self._window[name] += stats[name]
        self._window["steps"] += 1
        self._run_tokens += stats["tokens"]
        self._run_steps += 1
        if step % self.every and step != self.total_steps:
            if self._run_steps == 1:   # the first step: tracing, a resumed stream's skip
                self._start_window()
            return None
        elapsed = max(time.monotonic() - self._window_start, 1e-9)
        w = self._window
        tokens = max(w["tokens"], 1.0)
        nll = w["nll_sum"] / tokens
        self.last_scalars = {
            "loss": w["loss_sum"] / tokens,
            "accuracy": w["correct"] / tokens,
            "log_ppl": nll,
            "perplexity": math.exp(min(nll, 50.0)),
            "learning_rate": self.learning_rate(),
            "steps_per_sec": w["steps"] / elapsed,
            "tokens_per_sec": w["tokens"] / elapsed,
            "source_tokens_per_sec": w["source_tokens"] / elapsed,
        }
        s = self.last_scalars
        line = (f"step {step}/{self.total_steps} loss {s['loss']:.3f} acc {s['accuracy']:.3f} "
                f"ppl {s['perplexity']:.3g} lr {s['learning_rate']:.2e} | "
                f"{s['steps_per_sec']:.2f} steps/s {s['tokens_per_sec']:,.0f} tgt tok/s")
        if step < self.total_steps:
            line += f" eta {format_duration((self.total_steps - step) / s['steps_per_sec'])}"
        self._start_window()
        return line

    def _start_window(self) -> None:
        """The next line's statistics and time start now."""
        self._window = self._empty()
        self._window_start = time.monotonic()

    def summary(self) -> Dict[str, float]:
        elapsed = time.monotonic() - self._run_start
        return {"train_seconds": elapsed, "steps_this_run": self._run_steps,
                "tokens_per_sec": self._run_tokens / max(elapsed, 1e-9),
                **{f"final_{k}": v for k, v in self.last_scalars.items()
                   if k in ("loss", "accuracy", "perplexity")}}


def format_duration(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (hours unbounded), rounded to the nearest second."""
    total = int(round(seconds))
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"
