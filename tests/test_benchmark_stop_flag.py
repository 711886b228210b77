"""scripts/benchmark_stop_flag.py: two real CPU workers time the step with the SIGTERM flag
folded into the statistics' all-reduce and with its own all-reduce."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark_stop_flag.py"


@pytest.mark.slow
def test_both_variants_are_timed_on_two_workers():
    result = subprocess.run([sys.executable, str(SCRIPT), "--steps=2", "--rounds=2",
                             "--warmup=1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    rounds = report["rounds_ms_per_step"]
    assert sorted(rounds) == ["folded", "separate"] and report["steps_per_round"] == 2
    assert all(len(values) == 2 and min(values) > 0 for values in rounds.values())
    medians = report["ms_per_step_median"]
    assert report["separate_minus_folded_ms"] == pytest.approx(
        medians["separate"] - medians["folded"])
