"""An hparams set's decode defaults (``decode_beam_size``, ``decode_alpha``): applied over
the problem's by the decoder (one run or an ensemble), the exporter and the trainer's dev
decoding, under ``--decode_hparams``; and never a reason to refuse resuming a run."""
import json
from pathlib import Path

import pytest

from t2t_lite import registry
from t2t_lite.commands import decoder, exporter
from t2t_lite.decoding import parse_decode_hparams
from t2t_lite.hparams_lib import HParams, HParamsError
from t2t_lite.runs.config import RunConfig

from run_dir_helpers import OVERRIDES, data_dir, make_run_dir

TRANSLATION = {"beam_size": 4, "alpha": 0.6, "extra_length": 50}
SET_DEFAULTS = ",decode_beam_size=3,decode_alpha=1.0"
SENTENCES = ["twenty-one", "", "nine hundred and seven", "three"]


def test_unset_decode_keys_leave_the_problems_defaults():
    assert HParams().decode_defaults == {}
    assert parse_decode_hparams("", TRANSLATION, HParams()) == parse_decode_hparams(
        "", TRANSLATION)
    assert HParams(decode_alpha=0.0).decode_defaults == {"alpha": 0.0}   # 0 is a setting


def test_set_defaults_apply_over_the_problems_and_under_the_flag():
    hparams = HParams(decode_beam_size=5, decode_alpha=1.5)
    hp = parse_decode_hparams("", TRANSLATION, hparams)
    assert (hp.beam_size, hp.alpha, hp.extra_length) == (5, 1.5, 50)
    hp = parse_decode_hparams("beam_size=2", TRANSLATION, hparams)
    assert (hp.beam_size, hp.alpha) == (2, 1.5)


def test_the_multi30k_sets_carry_their_documented_decoding():
    assert registry.hparams("transformer_multi30k_tiny", "").decode_defaults == {
        "beam_size": 5, "alpha": 1.5}
    assert registry.hparams("transformer_multi30k", "").decode_defaults == {"alpha": 1.5}
    assert registry.hparams("transformer_multi30k_small", "").decode_defaults == {"alpha": 1.5}
    assert registry.hparams("transformer_base", "").decode_defaults == {}
    assert registry.hparams("transformer_parsing_sample", "").decode_defaults == {}


@pytest.mark.parametrize("override, fragment", [
    ("decode_beam_size=-1", "'decode_beam_size' must be >= 0"),
    ("decode_alpha=-0.5", "'decode_alpha' must be >= 0 (or -1: the problem's)"),
    ("decode_alpha=high", "'decode_alpha' takes a number"),
])
def test_bad_set_decode_values_name_the_key(override, fragment):
    with pytest.raises(HParamsError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        registry.hparams("transformer_tiny", override)


def _run_config(**hparams) -> RunConfig:
    return RunConfig(problem="p", model="transformer", hparams_set="s", hparams_overrides="",
                     hparams=hparams, vocab_size=8, vocab_file="v")


def test_resuming_may_change_the_decode_defaults_but_not_the_model():
    trained = _run_config(**HParams().to_dict())
    trained.check_same_run(_run_config(**HParams(decode_beam_size=5,
                                                 decode_alpha=1.5).to_dict()), "RUN")
    with pytest.raises(Exception, match="hparams.num_heads: run directory has 8"):
        _run_config(**HParams(num_heads=4).to_dict()).check_same_run(trained, "RUN")


def test_a_run_config_without_the_newer_keys_compares_with_their_defaults():
    older = {key: value for key, value in HParams().to_dict().items()
             if key not in HParams.USAGE_KEYS}
    _run_config(**HParams().to_dict()).check_same_run(_run_config(**older), "RUN")
    assert _run_config(**older).resolved_hparams() == HParams()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run directories with the same weights (seed 1): one whose hparams set decodes
    with beam 3 and alpha 1.0, one with the problem's defaults."""
    root = tmp_path_factory.mktemp("set_decode")
    return (make_run_dir(root / "with_defaults", OVERRIDES + SET_DEFAULTS),
            make_run_dir(root / "plain"))


def _decode(capsys, tmp_path: Path, name: str, *flags: str):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    target = tmp_path / f"{name}.txt"
    assert decoder.main(["--decode_from_file", str(source), "--decode_to_file", str(target),
                         *flags]) == 0
    summary = capsys.readouterr().err.strip().splitlines()
    return target.read_text(encoding="utf-8"), next(
        line for line in summary if line.startswith("decoded "))


def test_the_decoder_decodes_as_the_runs_set_says(capsys, tmp_path, runs):
    with_defaults, plain = runs
    output, summary = _decode(capsys, tmp_path, "set", f"--output_dir={with_defaults}")
    assert "alpha=1.0" in summary and "beam_size=3" in summary
    explicit, summary = _decode(capsys, tmp_path, "explicit", f"--output_dir={plain}",
                                "--decode_hparams=beam_size=3,alpha=1.0")
    assert output == explicit and "beam_size=3" in summary
    _, summary = _decode(capsys, tmp_path, "plain", f"--output_dir={plain}")
    assert "alpha=0.6" in summary and "beam_size=4" in summary
    _, summary = _decode(capsys, tmp_path, "flag", f"--output_dir={with_defaults}",
                         "--decode_hparams=beam_size=2")
    assert "alpha=1.0" in summary and "beam_size=2" in summary


def test_an_ensemble_decodes_as_its_first_members_set_says(capsys, tmp_path, runs):
    with_defaults, plain = runs
    _, summary = _decode(capsys, tmp_path, "first", f"--ensemble_dirs={with_defaults},{plain}")
    assert "alpha=1.0" in summary and "beam_size=3" in summary
    _, summary = _decode(capsys, tmp_path, "second", f"--ensemble_dirs={plain},{with_defaults}")
    assert "alpha=0.6" in summary and "beam_size=4" in summary


@pytest.mark.slow
def test_the_exporter_records_the_runs_set_decoding(capsys, tmp_path, runs):
    with_defaults, _ = runs
    assert exporter.main([f"--output_dir={with_defaults}",
                          f"--export_dir={tmp_path / 'export'}"]) == 0
    recorded = json.loads((tmp_path / "export" / "t2t_lite_export.json").read_text())
    assert "alpha=1.0" in recorded["decode_hparams"]
    assert "beam_size=3" in recorded["decode_hparams"]


def test_the_trainers_dev_decoding_takes_the_sets_alpha(runs):
    from t2t_lite.runs.loading import load_trained_model
    from t2t_lite.training.evaluation import Evaluator

    run_config, problem, model, vocabulary = load_trained_model(runs[0])
    evaluator = Evaluator(model, problem, vocabulary, run_config.resolved_hparams(),
                          str(data_dir()), eval_steps=1, decode_sentences=2, beam_size=2)
    evaluator.text_metrics()
    assert (evaluator._translator.beam_size, evaluator._translator.alpha) == (2, 1.0)
