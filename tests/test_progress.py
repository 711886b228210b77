"""The trainer's progress lines: rates over the line's own window and the time left."""
import pytest

from t2t_lite.training import progress as progress_module
from t2t_lite.training.progress import ProgressLog, format_duration


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def one_step(tokens=400.0):
    return {"loss_sum": 2.0 * tokens, "nll_sum": 1.5 * tokens, "correct": tokens / 2,
            "tokens": tokens, "source_tokens": tokens}


@pytest.mark.parametrize("seconds, text", [(0, "0:00:00"), (59.6, "0:01:00"),
                                           (3599, "0:59:59"), (25_212, "7:00:12"),
                                           (100 * 3600 + 61, "100:01:01")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_progress_line_rates_and_time_left(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    log = ProgressLog(total_steps=1000, every=100, learning_rate=lambda: 1e-3)
    for step in range(1, 101):
        # the first step (tracing) is left out: the window is 99 steps in 495 s
        clock.now += 60.0 if step == 1 else 2.0 if step <= 67 else 11.0
        line = log.update(step, one_step())
        assert (line is None) == (step < 100)
    assert line == ("step 100/1000 loss 2.000 acc 0.500 ppl 4.48 lr 1.00e-03 | "
                    "0.20 steps/s 80 tgt tok/s eta 1:15:00")   # 900 steps at 0.2 steps/s
    assert log.last_scalars["steps_per_sec"] == pytest.approx(0.2)
    for step in range(101, 1001):          # the next windows: 1 s a step
        clock.now += 1.0
        line = log.update(step, one_step())
        if step == 900:
            assert line.endswith("1.00 steps/s 400 tgt tok/s eta 0:01:40")
    assert line.endswith("| 1.00 steps/s 400 tgt tok/s")   # the last step: no time left
    summary = log.summary()
    assert summary["train_seconds"] == pytest.approx(1455.0)   # every second counts here
    assert summary["steps_this_run"] == 1000


def test_a_resumed_runs_first_line_leaves_out_the_datas_skip(monkeypatch):
    """Resumed at step 8,000, the first step waits minutes for the data stream to be read
    past 8,000 batches; the first line's speed and time left are the steps' own."""
    clock = FakeClock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    log = ProgressLog(total_steps=10_000, every=100, learning_rate=lambda: 1e-3)
    for step in range(8001, 8101):
        clock.now += 300.0 if step == 8001 else 0.5
        line = log.update(step, one_step())
    assert line.endswith("| 2.00 steps/s 800 tgt tok/s eta 0:15:50")   # 1,900 at 2 a second
    assert log.summary()["train_seconds"] == pytest.approx(349.5)


def test_a_first_step_that_is_a_logging_step_is_its_own_line(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    log = ProgressLog(total_steps=10, every=1, learning_rate=lambda: 1e-3)
    clock.now += 4.0
    assert log.update(1, one_step()).endswith("| 0.25 steps/s 100 tgt tok/s eta 0:00:36")
