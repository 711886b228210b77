"""scripts/chart_parser_experiment.py: a tiny model trains on a few sample trees, and an
ensemble of it parses every dev and test sentence into a tree over its own words."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from t2t_lite.parsing.treebank import read_tree_file
from t2t_lite.parsing.trees import parse_trees

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "chart_parser_experiment.py"
TINY = ["--d_model=16", "--layers=1", "--heads=2", "--d_ff=16", "--word_dim=8",
        "--char_dim=4", "--char_out=8", "--mlp=8", "--epochs=2", "--eval_every=1",
        "--max_train_trees=24", "--warmup=2"]


def run(args):
    out = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


@pytest.mark.slow
def test_train_then_parse_test_with_an_ensemble(ptb_sample_dir, tmp_path):
    run_dir, ensemble = tmp_path / "run", tmp_path / "ensemble"
    lines = run([f"--sample_dir={ptb_sample_dir}", f"--output_dir={run_dir}"] + TINY)
    assert [line.split()[:2] for line in lines[:2]] == [["epoch", "1"], ["epoch", "2"]]
    assert all(re.search(r"dev F1 [\d.]+ P [\d.]+ R [\d.]+$", line) for line in lines[:2])
    assert (run_dir / "last.weights.h5").is_file()

    lines = run([f"--sample_dir={ptb_sample_dir}", f"--output_dir={ensemble}",
                 f"--ensemble={run_dir},{run_dir}", "--biases=0,1", "--test_bias=1"])
    assert [line.split(":")[0] for line in lines] == ["bias 0.0", "bias 1.0", "bias 1.0"]
    assert "test F1" in lines[-1]
    parsed = (ensemble / "test.parsed").read_text().splitlines()
    gold = [tree for n in range(170, 180)
            for tree, _ in read_tree_file(ptb_sample_dir / f"wsj_{n:04d}.mrg")]
    assert len(parsed) == len(gold) == 168
    assert [parse_trees(line)[0].words() for line in parsed] == [t.words() for t in gold]
