"""Importing the decoding package's pure-Python parts must not import TensorFlow."""
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["t2t_lite.decoding", "t2t_lite.decoding.lines",
                                    "t2t_lite.decoding.config", "t2t_lite.decoding.plan",
                                    "t2t_lite.decoding.step"])
def test_import_does_not_load_tensorflow(module):
    code = (f"import sys, {module}\n"
            "from t2t_lite.decoding import DecodingPlan, DecodingState, parse_decode_hparams\n"
            "assert parse_decode_hparams('beam_size=2', {}).beam_size == 2\n"
            "assert DecodingPlan.choose(2, False, 'int8').log_probs_from_softmax\n"
            "assert DecodingState([0]).states is None\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_every_public_name_resolves():
    import t2t_lite.decoding as decoding
    for name in decoding.__all__:
        assert getattr(decoding, name) is not None, name


def test_searches_load_on_first_use():
    code = ("import sys, t2t_lite.decoding as d\n"
            "assert 'tensorflow' not in sys.modules\n"
            "from t2t_lite.decoding.beam_search import NEG_INF\n"   # the submodule first
            "import t2t_lite.decoding.translator\n"
            "from t2t_lite.decoding import beam_search, greedy_search, length_penalty\n"
            "assert 'tensorflow' in sys.modules\n"
            "assert sys.modules['t2t_lite.decoding.beam_search'].NEG_INF == NEG_INF\n"
            "assert beam_search.__name__ == d.beam_search.__name__ == 'beam_search'\n"
            "assert callable(greedy_search)\n"
            "from t2t_lite.decoding import Sampler, Scorer, sample_search, score_ids\n"
            "import t2t_lite.decoding.sampling as sampling, t2t_lite.decoding.scoring as scoring\n"
            "assert sample_search is sampling.sample_search is d.sample_search\n"
            "assert Sampler is sampling.Sampler and Sampler(seed=3).seed == 3\n"
            "assert Scorer is scoring.Scorer and score_ids is scoring.score_ids\n"
            "print(float(d.length_penalty(1, 1.0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "1.0"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import t2t_lite.decoding as decoding
        decoding.nothing  # noqa: B018
