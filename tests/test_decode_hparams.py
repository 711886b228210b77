"""DecodeHParams: defaults, a problem's defaults, typed overrides and clear errors."""
import pytest

from t2t_lite.decoding import DecodeHParams, DecodeHParamsError, parse_decode_hparams
from t2t_lite.hparams_lib import HParamsError

TRANSLATION = {"beam_size": 4, "alpha": 0.6, "extra_length": 50}
PARSING = {"beam_size": 21, "alpha": 0.3, "extra_length": 300}


def test_defaults_are_the_papers_translation_settings():
    hp = DecodeHParams()
    assert (hp.beam_size, hp.alpha, hp.extra_length, hp.batch_size, hp.return_beams,
            hp.max_input_length) == (4, 0.6, 50, 4096, False, 0)
    assert parse_decode_hparams("", TRANSLATION) == hp


def test_problem_defaults_then_overrides():
    hp = parse_decode_hparams("", PARSING)
    assert (hp.beam_size, hp.alpha, hp.extra_length) == (21, 0.3, 300)
    hp = parse_decode_hparams("beam_size=8, alpha=1, batch_size=2000,return_beams=TRUE", PARSING)
    assert (hp.beam_size, hp.alpha, hp.extra_length, hp.batch_size, hp.return_beams) == (
        8, 1.0, 300, 2000, True)
    assert isinstance(hp.alpha, float)
    assert parse_decode_hparams("return_beams=false,max_input_length=128", {}).return_beams is False


def test_to_string_round_trips():
    hp = parse_decode_hparams("beam_size=2,alpha=0.0,return_beams=true", PARSING)
    assert parse_decode_hparams(hp.to_string(), {}) == hp


@pytest.mark.parametrize("text, fragments", [
    ("beam=4", ["unknown decode hparam 'beam'", "valid keys:", "beam_size"]),
    ("beam_size=four", ["'beam_size' takes an integer", "valid keys:"]),
    ("alpha=high", ["'alpha' takes a number"]),
    ("return_beams=maybe", ["'return_beams' takes true or false"]),
    ("beam_size=4.5", ["'beam_size' takes an integer"]),
    ("beam_size", ["is not key=value", "valid keys:"]),
    ("beam_size=2,beam_size=3", ["'beam_size' is given twice"]),
    ("beam_size=0", ["'beam_size' must be >= 1"]),
    ("alpha=-0.5", ["'alpha' must be >= 0"]),
    ("extra_length=-1", ["'extra_length' must be >= 0"]),
])
def test_bad_overrides_name_the_key(text, fragments):
    with pytest.raises(DecodeHParamsError) as error:
        parse_decode_hparams(text, TRANSLATION)
    assert all(fragment in str(error.value) for fragment in fragments), str(error.value)
    assert isinstance(error.value, HParamsError)


def test_bad_problem_defaults_are_refused():
    with pytest.raises(DecodeHParamsError, match="unknown decode hparam 'beam'"):
        parse_decode_hparams("", {"beam": 4})
    with pytest.raises(DecodeHParamsError, match="'beam_size' must be an integer"):
        parse_decode_hparams("", {"beam_size": "4"})


def test_decode_hparams_are_immutable():
    hp = DecodeHParams()
    with pytest.raises(Exception):
        hp.beam_size = 2  # frozen dataclass
    assert hp.replace(beam_size=2).beam_size == 2 and hp.beam_size == 4
