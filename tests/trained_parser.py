"""A transformer_parsing_tiny run on the Penn Treebank WSJ sample, made once per test
session (conftest's ``trained_ptb_parser``): datagen + training is the slowest set-up in
the suite, shared by the tests that need a parser with some structure (EVALB agreement,
constrained decoding)."""
import contextlib
import io
import json
import re
from pathlib import Path
from typing import Dict, NamedTuple

PROBLEM = "parsing_english_ptb_sample"
TRAIN_STEPS = 300       # outputs with structure, far from perfect (real repairs, misses)
EVAL_SENTENCES = 30     # dev sentences the trainer's final evaluation decodes (greedy)


class TrainedParser(NamedTuple):
    data: Path          # datagen output: vocabulary, records, dev/test .source/.gold text
    run: Path           # the trainer's output_dir (checkpoints, hparams)
    final_eval: Dict[str, float]   # the trainer's last ``[eval] step N: name=value, ...``


def train_ptb_parser(sample_dir: Path, root: Path) -> None:
    """Runs t2t-lite-datagen and t2t-lite-trainer in process into ``root``/data, /run, and
    writes the trainer's final evaluation to ``root``/final_eval.json."""
    from t2t_lite.commands import datagen, trainer
    data, run = root / "data", root / "run"
    assert datagen.main([f"--problem={PROBLEM}", f"--data_dir={data}",
                         f"--tmp_dir={sample_dir}", "--no_download"]) == 0
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert trainer.main([f"--problem={PROBLEM}", "--hparams_set=transformer_parsing_tiny",
                             f"--data_dir={data}", f"--output_dir={run}",
                             f"--train_steps={TRAIN_STEPS}", "--local_eval_frequency=0",
                             f"--eval_decode_sentences={EVAL_SENTENCES}",
                             "--log_step_count_steps=100", "--attention_probes=0"]) == 0
    last_eval = printed.getvalue().split("[eval]")[-1].splitlines()[0]
    final_eval = {name: float(value) for name, value in re.findall(r"(\w+)=([^,\s]+)", last_eval)}
    (root / "final_eval.json").write_text(json.dumps(final_eval))


def load(root: Path) -> TrainedParser:
    """What ``train_ptb_parser`` made in ``root``."""
    final_eval = json.loads((root / "final_eval.json").read_text())
    return TrainedParser(root / "data", root / "run", final_eval)
