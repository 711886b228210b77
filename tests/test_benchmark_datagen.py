"""scripts/benchmark_datagen.py: the synthetic corpus is shaped like WMT (no timing is
asserted; the figures are in docs/data.md)."""
import collections
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark_datagen.py"


def _script():
    spec = importlib.util.spec_from_file_location("benchmark_datagen", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synthetic_corpus_has_wmt_like_lengths_and_zipfian_words(tmp_path):
    _script().make_corpus(tmp_path, 4000)
    sources = (tmp_path / "source.txt").read_text(encoding="utf-8").splitlines()
    targets = (tmp_path / "target.txt").read_text(encoding="utf-8").splitlines()
    assert len(sources) == len(targets) == 4000
    lengths = [len(line.split(" ")) for line in sources]
    assert 21 < sum(lengths) / len(lengths) < 25 and max(lengths) > 60
    counts = collections.Counter(word for line in sources for word in line.split(" "))
    top = [count for _, count in counts.most_common(10)]
    assert 1.6 < top[0] / top[1] < 2.6 and 7 < top[0] / top[9] < 20  # ~ rank ** -1.1
