"""Hparams: typing, overrides, JSON round trip, and the registered sets."""
import pytest

from t2t_lite import registry
from t2t_lite.hparams_lib import HParams, HParamsError


def test_overrides_are_typed():
    hp = registry.hparams("transformer_base", "num_heads=4,label_smoothing=0.2,pos=emb")
    assert (hp.num_heads, hp.label_smoothing, hp.pos) == (4, 0.2, "emb")
    assert isinstance(hp.label_smoothing, float)
    assert registry.hparams("transformer_base", "label_smoothing=0").label_smoothing == 0.0
    assert registry.hparams("transformer_base", "shared_embedding_and_softmax_weights=false"
                            ).shared_embedding_and_softmax_weights is False


def test_unknown_key_names_the_key_and_the_valid_keys():
    with pytest.raises(HParamsError) as error:
        registry.hparams("transformer_base", "num_head=4")
    message = str(error.value)
    assert "'num_head'" in message and "valid keys:" in message and "num_heads" in message


@pytest.mark.parametrize("override, fragment", [
    ("num_heads=four", "'num_heads' takes an integer"),
    ("label_smoothing=high", "'label_smoothing' takes a number"),
    ("shared_embedding_and_softmax_weights=maybe", "takes true or false"),
    ("num_heads", "is not key=value"),
    ("pos=rope", "'pos' must be one of"),
    ("num_heads=7", "divisible by num_heads"),
    ("layer_prepostprocess_dropout=1.5", "must be in [0, 1)"),
])
def test_bad_values_are_refused(override, fragment):
    with pytest.raises(HParamsError, match=None) as error:
        registry.hparams("transformer_base", override)
    assert fragment in str(error.value)


@pytest.mark.parametrize("field, value, words", [
    ("num_heads", "8", "must be an integer, got '8'"),
    ("label_smoothing", "0.1", "must be a number, got '0.1'"),
    ("shared_embedding_and_softmax_weights", 1, "must be true or false, got 1"),
    ("pos", 3, "must be a string, got 3"),
])
def test_values_of_the_wrong_python_type_are_named_in_words(field, value, words):
    # The path of a set written in Python and of a run's run_config.json.
    with pytest.raises(HParamsError) as error:
        HParams(**{field: value})
    assert f"hparam {field!r} {words}" in str(error.value)


# Each error line docs/model.md shows, and an override that gives it.
DOCUMENTED_ERRORS = {
    "num_heads=x": "hparam 'num_heads' takes an integer, got 'x'; valid keys: ",
    "clip_grad_norm=nan": "hparam 'clip_grad_norm' must be a finite number, got nan",
    "num_heads=0": "hparam 'num_heads' must be positive, got 0",
    "attention_key_channels=-1": "hparam 'attention_key_channels' must be >= 0, got -1",
    "decode_alpha=-0.5": "hparam 'decode_alpha' must be >= 0 (or -1: the problem's), got -0.5",
    "relu_dropout=1.0": "hparam 'relu_dropout' must be in [0, 1), got 1.0",
    "layer_norm_epsilon=0": "hparam 'layer_norm_epsilon' must be > 0.0, got 0.0",
    "pos=x": "hparam 'pos' must be one of ('timing', 'emb'), got 'x'",
    "hidden_size=63": "hparam 'hidden_size' must be even with pos='timing' (sinusoids come "
                      "in sin/cos pairs), got 63",
    # the divisibility rule is on the effective channels: 0 means hidden_size
    "hidden_size=10,num_heads=4": "attention key channels (10) must be divisible by "
                                  "num_heads (4); set attention_key_channels",
}


@pytest.mark.parametrize("override", sorted(DOCUMENTED_ERRORS))
def test_docs_show_the_errors_the_checks_raise(override):
    import pathlib
    doc = pathlib.Path(__file__).resolve().parent.parent / "docs" / "model.md"
    shown = " ".join(doc.read_text(encoding="utf-8").split())   # table cells and wrapped lines
    expected = DOCUMENTED_ERRORS[override]
    assert f"error: {expected}" in shown
    with pytest.raises(HParamsError) as error:
        registry.hparams("transformer_base", override)
    assert str(error.value).startswith(expected)
    # with explicit channels divisible by num_heads, the same sizes are accepted
    assert registry.hparams("transformer_base", "hidden_size=10,num_heads=4,"
                            "attention_key_channels=8,attention_value_channels=12")


def test_hparams_are_immutable_and_round_trip_json():
    hp = registry.hparams("transformer_big")
    with pytest.raises(Exception):
        hp.num_heads = 3  # frozen dataclass
    assert HParams.from_json(hp.to_json()) == hp
    with pytest.raises(HParamsError, match="unknown hparam 'dead_key'"):
        HParams.from_dict({**hp.to_dict(), "dead_key": 1})


def test_unknown_set_lists_registered_names():
    with pytest.raises(registry.UnknownNameError) as error:
        registry.hparams("transformer_huge")
    assert "transformer_base" in str(error.value) and "transformer_big" in str(error.value)


BASE = HParams()

# (set name, the values its Table 3 row or paper section gives)
PAPER_ROWS = [
    ("transformer_base", dict(num_hidden_layers=6, hidden_size=512, filter_size=2048,
                              num_heads=8, d_k=64, d_v=64, layer_prepostprocess_dropout=0.1,
                              label_smoothing=0.1, train_steps=100000, pos="timing")),
    ("transformer_big", dict(num_hidden_layers=6, hidden_size=1024, filter_size=4096,
                             num_heads=16, d_k=64, d_v=64, layer_prepostprocess_dropout=0.3,
                             train_steps=300000, average_checkpoints=20)),
    ("transformer_big_enfr", dict(hidden_size=1024, layer_prepostprocess_dropout=0.1)),
    ("transformer_base_h1", dict(num_heads=1, d_k=512, d_v=512)),
    ("transformer_base_h4", dict(num_heads=4, d_k=128, d_v=128)),
    ("transformer_base_h16", dict(num_heads=16, d_k=32, d_v=32)),
    ("transformer_base_h32", dict(num_heads=32, d_k=16, d_v=16)),
    ("transformer_base_dk16", dict(num_heads=8, d_k=16, d_v=64)),
    ("transformer_base_dk32", dict(num_heads=8, d_k=32, d_v=64)),
    ("transformer_base_n2", dict(num_hidden_layers=2)),
    ("transformer_base_n4", dict(num_hidden_layers=4)),
    ("transformer_base_n8", dict(num_hidden_layers=8)),
    ("transformer_base_d256", dict(hidden_size=256, d_k=32, d_v=32)),
    ("transformer_base_d1024", dict(hidden_size=1024, d_k=128, d_v=128)),
    ("transformer_base_ff1024", dict(filter_size=1024)),
    ("transformer_base_ff4096", dict(filter_size=4096)),
    ("transformer_base_drop0", dict(layer_prepostprocess_dropout=0.0)),
    ("transformer_base_drop2", dict(layer_prepostprocess_dropout=0.2)),
    ("transformer_base_ls0", dict(label_smoothing=0.0)),
    ("transformer_base_ls2", dict(label_smoothing=0.2)),
    ("transformer_base_learned_pos", dict(pos="emb")),
    ("transformer_parsing_wsj", dict(num_hidden_layers=4, hidden_size=1024, filter_size=2048)),
]


@pytest.mark.parametrize("name, expected", PAPER_ROWS, ids=[row[0] for row in PAPER_ROWS])
def test_sets_reproduce_the_paper_rows(name, expected):
    hp = registry.hparams(name)
    actual = hp.to_dict()
    actual["d_k"] = hp.key_channels // hp.num_heads
    actual["d_v"] = hp.value_channels // hp.num_heads
    assert {key: actual[key] for key in expected} == expected
    # Everything a row does not name stays as in its parent (the optimiser in particular).
    assert (hp.optimizer_adam_beta1, hp.optimizer_adam_beta2, hp.optimizer_adam_epsilon,
            hp.learning_rate_warmup_steps) == (0.9, 0.98, 1e-9, 4000)


def test_all_required_sets_are_registered():
    required = {row[0] for row in PAPER_ROWS} | {
        "transformer_tiny", "transformer_small", "transformer_multi30k_small",
        "transformer_multi30k", "transformer_multi30k_tiny", "transformer_parsing_tiny", "transformer_parsing_small",
        "transformer_parsing_sample"}
    assert required <= set(registry.HPARAMS_SETS.names())
