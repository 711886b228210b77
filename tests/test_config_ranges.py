"""Every float hparam and decode hparam refuses NaN and infinity, and every hparam is
range-checked before a model is built."""
import math

import pytest

from t2t_lite import registry
from t2t_lite.decoding.config import DecodeHParams, DecodeHParamsError, parse_decode_hparams
from t2t_lite.hparams_lib import HParams, HParamsError

FLOAT_HPARAMS = [name for name, kind in HParams.field_types().items() if kind is float]


@pytest.mark.parametrize("name", FLOAT_HPARAMS)
@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN"])
def test_every_float_hparam_refuses_nan_and_infinity(name, text):
    with pytest.raises(HParamsError, match=f"'{name}' must be a finite number"):
        HParams().override_from_string(f"{name}={text}")
    with pytest.raises(HParamsError, match=f"'{name}' must be a finite number"):
        HParams(**{name: math.nan})


@pytest.mark.parametrize("text", ["alpha=nan", "alpha=inf", "alpha=-inf"])
def test_decode_alpha_refuses_nan_and_infinity(text):
    with pytest.raises(DecodeHParamsError, match="'alpha' must be a finite number"):
        parse_decode_hparams(text)


@pytest.mark.parametrize("override, message", [
    ("attention_key_channels=-16", "'attention_key_channels' must be >= 0"),
    ("attention_value_channels=-8", "'attention_value_channels' must be >= 0"),
    ("optimizer_adam_beta1=1.5", "'optimizer_adam_beta1' must be in [0, 1)"),
    ("optimizer_adam_beta1=-0.1", "'optimizer_adam_beta1' must be in [0, 1)"),
    ("optimizer_adam_beta2=1.0", "'optimizer_adam_beta2' must be in [0, 1)"),
    ("learning_rate_constant=-2", "'learning_rate_constant' must be > 0"),
    ("learning_rate_constant=0", "'learning_rate_constant' must be > 0"),
    ("optimizer_adam_epsilon=0", "'optimizer_adam_epsilon' must be > 0"),
    ("layer_norm_epsilon=-1e-6", "'layer_norm_epsilon' must be > 0"),
    ("clip_grad_norm=-1", "'clip_grad_norm' must be >= 0"),
    ("label_smoothing=1.0", "'label_smoothing' must be in [0, 1)"),
    ("relu_dropout=-0.1", "'relu_dropout' must be in [0, 1)"),
    ("num_heads=0", "'num_heads' must be positive"),
])
def test_out_of_range_hparams_name_the_key(override, message):
    with pytest.raises(HParamsError) as error:
        HParams().override_from_string(override)
    assert message in str(error.value)


@pytest.mark.parametrize("text, message", [
    ("beam_size=0", "'beam_size' must be >= 1"),
    ("alpha=-0.5", "'alpha' must be >= 0"),
    ("batch_size=0", "'batch_size' must be >= 1"),
    ("extra_length=-1", "'extra_length' must be >= 0"),
])
def test_out_of_range_decode_hparams_name_the_key(text, message):
    with pytest.raises(DecodeHParamsError) as error:
        parse_decode_hparams(text)
    assert message in str(error.value)


def test_in_range_edges_and_every_registered_set_are_accepted():
    HParams(optimizer_adam_beta1=0.0, clip_grad_norm=0.0, attention_key_channels=0,
            label_smoothing=0.0)
    DecodeHParams(alpha=0.0, extra_length=0)
    for name in registry.HPARAMS_SETS.names():
        registry.hparams(name)
