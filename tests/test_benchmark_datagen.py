"""``scripts/benchmark.py datagen``: the synthetic corpus is shaped like WMT, and a tiny
run prints its figures (no timing is asserted)."""
import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _benchmark():
    """scripts/benchmark.py, imported as ``python scripts/benchmark.py`` finds its
    neighbours (the scripts folder first on the path)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import benchmark
    return benchmark


def test_synthetic_corpus_has_wmt_like_lengths_and_zipfian_words(tmp_path):
    _benchmark().make_corpus(tmp_path, 4000)
    sources = (tmp_path / "source.txt").read_text(encoding="utf-8").splitlines()
    targets = (tmp_path / "target.txt").read_text(encoding="utf-8").splitlines()
    assert len(sources) == len(targets) == 4000
    lengths = [len(line.split(" ")) for line in sources]
    assert 21 < sum(lengths) / len(lengths) < 25 and max(lengths) > 60
    counts = collections.Counter(word for line in sources for word in line.split(" "))
    top = [count for _, count in counts.most_common(10)]
    assert 1.6 < top[0] / top[1] < 2.6 and 7 < top[0] / top[9] < 20  # ~ rank ** -1.1


@pytest.mark.slow
def test_datagen_runs_in_fresh_processes_and_prints_one_json_line_each(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "benchmark.py"), "datagen",
         f"--corpus_dir={tmp_path / 'corpus'}", f"--work_dir={tmp_path / 'work'}",
         "--pairs=500", "--workers=1", "--vocab_size=300", "--vocab_sentences=1000"],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith(f"corpus: 6,500 pairs in {tmp_path / 'corpus'}")
    figures = json.loads(lines[1])
    assert figures["pairs"] == 500 and figures["workers"] == 1
    assert 0 < figures["train_examples"] <= 500 and figures["train_shards"] == 10
    assert figures["pairs_per_s"] > 0 and figures["peak_rss_mb"] > 0
