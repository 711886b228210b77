"""The Transformer: causality, cached decoding (preallocated and growing caches, the
searches' step interface) = teacher forcing, serialisation, and
parameter counts against an analytic formula and the paper's Table 3."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.decoding import DecodingPlan
from t2t_lite.hparams_lib import HParams
from t2t_lite.models.parameters import build_shapes_only, parameter_counts
from t2t_lite.models.transformer import Transformer, layer_kwargs, shift_right

from test_hparams import PAPER_ROWS

VOCAB = 23
TINY = HParams(hidden_size=16, filter_size=32, num_heads=4, num_hidden_layers=2,
               max_length=16, layer_prepostprocess_dropout=0.1, attention_dropout=0.1,
               relu_dropout=0.1)
VARIANTS = {
    "post_timing": TINY,
    "pre_emb_kv": TINY.replace(layer_norm_position="pre", pos="emb",
                               attention_key_channels=8, attention_value_channels=24),
    "untied": TINY.replace(shared_embedding_and_softmax_weights=False),
}
INPUTS = np.array([[5, 6, 7, 8, 1, 0], [9, 4, 1, 0, 0, 0]], np.int32)
TARGETS = np.array([[11, 12, 13, 1, 0], [14, 1, 0, 0, 0]], np.int32)


def _features(inputs=INPUTS, targets=TARGETS):
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def model(request):
    keras.utils.set_random_seed(0)
    model = Transformer(VARIANTS[request.param], VOCAB)
    model(_features())
    return model


def test_logits_shape_dtype_and_shift(model):
    logits = model(_features())
    assert logits.shape == (2, 5, VOCAB) and logits.dtype == tf.float32
    np.testing.assert_array_equal(shift_right(TARGETS), [[0, 11, 12, 13, 1], [0, 14, 1, 0, 0]])


def test_future_targets_do_not_change_earlier_logits(model):
    base = model(_features()).numpy()
    for position in range(TARGETS.shape[1]):
        changed = TARGETS.copy()
        changed[:, position] = (changed[:, position] + 3) % VOCAB + 2
        logits = model(_features(targets=changed)).numpy()
        # Position p's logits see decoder inputs 0..p, i.e. targets 0..p-1.
        np.testing.assert_allclose(logits[:, :position + 1], base[:, :position + 1], atol=1e-5)
        if position + 1 < TARGETS.shape[1]:
            assert np.abs(logits[:, position + 1:] - base[:, position + 1:]).max() > 1e-4


def test_extra_source_padding_changes_nothing(model):
    padded = np.pad(INPUTS, ((0, 0), (0, 3)))
    np.testing.assert_allclose(model(_features(inputs=padded)), model(_features()), atol=1e-5)


def test_dropout_acts_only_in_training(model):
    a, b = model(_features(), training=True), model(_features(), training=True)
    assert np.abs(a - b).max() > 1e-4
    np.testing.assert_array_equal(model(_features()), model(_features()))


def _decode_all(model, decoder_inputs, max_length, plan):
    start, states, sentence_states = model.decoding_state(INPUTS, max_length, plan)
    np.testing.assert_array_equal(start, [0, 0])          # the start symbol
    steps = []
    for step in range(decoder_inputs.shape[1]):
        logits, states = model.decode_step(decoder_inputs[:, step], step, states,
                                           sentence_states, plan)
        steps.append(logits)
    return np.stack(steps, axis=1), states, sentence_states


@pytest.mark.parametrize("growing", [False, True], ids=["preallocated", "growing"])
def test_cached_decoding_equals_teacher_forcing(model, growing):
    full = model(_features()).numpy()
    plan = DecodingPlan(growing_cache=growing)
    stepped, states, sentence_states = _decode_all(model, shift_right(TARGETS).numpy(), 8,
                                                   plan)
    np.testing.assert_allclose(stepped, full, atol=1e-5)
    hp = model.hparams
    for tensor in tf.nest.flatten((states, sentence_states)):   # all lead with the batch
        assert tensor.shape[0] == 2
    layer = states["decoder"]["layer_0"]
    length = TARGETS.shape[1] if growing else 8
    assert layer["self_k"].shape == (2, hp.num_heads, length,
                                     hp.key_channels // hp.num_heads)
    assert layer["self_v"].shape == (2, hp.num_heads, length,
                                     hp.value_channels // hp.num_heads)
    memory = sentence_states["decoder"]["layer_0"]
    assert memory["encdec_k"].shape[:3] == (2, hp.num_heads, INPUTS.shape[1])
    assert sentence_states["memory_mask"].dtype == tf.bool


def test_cached_decoding_in_xla_while_loop_equals_teacher_forcing():
    keras.utils.set_random_seed(1)
    model = Transformer(VARIANTS["pre_emb_kv"], VOCAB)
    full = model(_features()).numpy()
    decoder_inputs = tf.constant(shift_right(TARGETS))
    length = TARGETS.shape[1]

    plan = DecodingPlan()

    @tf.function(jit_compile=True, autograph=False)
    def decode(inputs, decoder_inputs):
        _, states, sentence_states = model.decoding_state(inputs, length, plan)
        logits = tf.zeros((2, length, VOCAB))

        def body(step, states, logits):
            step_logits, states = model.decode_step(decoder_inputs[:, step], step, states,
                                                    sentence_states, plan)
            update = tf.one_hot(step, length)[None, :, None] * step_logits[:, None, :]
            return step + 1, states, logits + update

        return tf.while_loop(lambda step, *_: step < length, body,
                             (tf.constant(0), states, logits))[2]

    np.testing.assert_allclose(decode(tf.constant(INPUTS), decoder_inputs), full, atol=1e-5)


def test_attention_weights(model):
    weights = model.attention_weights(_features())
    n, h = model.hparams.num_hidden_layers, model.hparams.num_heads
    assert [w.shape for w in weights["encoder_self"]] == [(2, h, 6, 6)] * n
    assert [w.shape for w in weights["decoder_self"]] == [(2, h, 5, 5)] * n
    assert [w.shape for w in weights["encdec"]] == [(2, h, 5, 6)] * n
    decoder_self = np.asarray(weights["decoder_self"][0])
    assert np.all(np.triu(decoder_self[0, 0], k=1) == 0.0)      # causal
    encdec = np.asarray(weights["encdec"][-1])
    assert np.all(encdec[1, :, :, 3:] == 0.0)                     # source padding
    np.testing.assert_allclose(encdec.sum(-1), 1.0, rtol=1e-5)


def test_config_round_trip(model):
    config = model.get_config()
    assert config["hparams"] == model.hparams.to_dict() and config["vocab_size"] == VOCAB
    clone = Transformer.from_config(config)
    clone(_features())
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(_features()), model(_features()), atol=1e-6)
    assert registry.MODELS.get("transformer") is Transformer


def test_hparams_map_onto_every_layer_and_dropout_is_always_a_rate():
    hparams = TINY.replace(layer_prepostprocess_dropout=0.3, attention_dropout=0.2,
                           relu_dropout=0.4)
    model = Transformer(hparams, VOCAB)
    assert layer_kwargs(hparams)["dropout"] == 0.3
    layers = [layer for stack in (model.encoder, model.decoder) for layer in stack.blocks]
    assert len(layers) == 2 * hparams.num_hidden_layers
    for layer in layers:
        attentions = [layer.self_attention] + ([layer.encdec_attention]
                                               if hasattr(layer, "encdec_attention") else [])
        # A ``*dropout`` attribute is the float rate; its Dropout layer is ``*dropout_layer``.
        for owner, rate in [(layer, 0.3), (layer.feed_forward, None)] + [
                (attention, 0.2) for attention in attentions]:
            if rate is not None:
                assert owner.dropout == rate and isinstance(owner.dropout, float)
            assert isinstance(owner.dropout_layer, keras.layers.Dropout)
        assert layer.dropout_layer.rate == 0.3
        assert layer.feed_forward.relu_dropout == 0.4
        assert layer.feed_forward.dropout_layer.rate == 0.4
        assert all(attention.dropout_layer.rate == 0.2 for attention in attentions)
        assert (layer.num_heads, layer.key_channels, layer.layer_norm_position) == (
            hparams.num_heads, hparams.key_channels, hparams.layer_norm_position)


def test_checkpoint_variable_names_are_stable(tmp_path):
    model = Transformer(TINY.replace(num_hidden_layers=1), VOCAB)
    model(_features())
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    names = {name.removesuffix("/.ATTRIBUTES/VARIABLE_VALUE")
             for name, _ in tf.train.list_variables(path)} - {"_CHECKPOINTABLE_OBJECT_GRAPH"}
    layer = "model/decoder/layer_0/"
    assert {"model/embedding/embeddings", layer + "self_attention/qkv_kernel",
            layer + "encdec_attention/q_kernel", layer + "encdec_attention/kv_kernel",
            layer + "encdec_attention/output_kernel", layer + "feed_forward/hidden/_kernel",
            layer + "feed_forward/output_dense/bias", layer + "encdec_attention_norm/gamma",
            "model/encoder/layer_0/self_attention/output_kernel"} <= names
    assert len(names) == 1 + 2 * 10 + 5       # embedding; 2 * 10 decoder; 10 encoder
    assert not [name for name in names if "dropout" in name]


def test_layers_take_no_global_configuration():
    import ast
    import pathlib
    import t2t_lite.layers
    imported = set()
    for path in pathlib.Path(t2t_lite.layers.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    layer_modules = {f"t2t_lite.layers.{path.stem}"
                     for path in pathlib.Path(t2t_lite.layers.__file__).parent.glob("*.py")}
    # Besides each other, the layers read only the CPU's flags (int8's attention dtype),
    # never hparams, flags or run configuration.
    assert {name for name in imported if name.startswith("t2t_lite")} <= (
        layer_modules | {"t2t_lite.cpu_features"})
    assert {"t2t_lite.layers.attention", "t2t_lite.layers.int8"} <= imported


def test_mixed_precision_logits_are_float32():
    model = Transformer(TINY, VOCAB, dtype="mixed_float16")
    logits = model(_features())
    assert logits.dtype == tf.float32 and np.all(np.isfinite(logits))
    plan = DecodingPlan()
    _, states, sentence_states = model.decoding_state(INPUTS, 4, plan)
    step_logits, _ = model.decode_step(tf.zeros([2], tf.int32), 0, states, sentence_states,
                                       plan)
    assert step_logits.dtype == tf.float32


def test_learned_positions_limit_decode_length():
    model = Transformer(VARIANTS["pre_emb_kv"], VOCAB)
    with pytest.raises(ValueError, match="max_length 17 exceeds the learned"):
        model.decoding_state(INPUTS, 17, DecodingPlan())


# Parameter counts --------------------------------------------------------------------
PAPER_MILLIONS = {"transformer_base": 65, "transformer_base_dk16": 58,
                  "transformer_base_dk32": 60, "transformer_base_n2": 36,
                  "transformer_base_n4": 50, "transformer_base_n8": 80,
                  "transformer_base_d256": 28, "transformer_base_d1024": 168,
                  "transformer_base_ff1024": 53, "transformer_base_ff4096": 90,
                  "transformer_big": 213}


def analytic_parameter_count(hp: HParams, vocab: int) -> int:
    """Counted from the architecture: no attention biases, FFN biases, LayerNorm gain+bias."""
    d, f, n = hp.hidden_size, hp.filter_size, hp.num_hidden_layers
    kc = hp.attention_key_channels or d
    vc = hp.attention_value_channels or d
    attention = d * kc + d * kc + d * vc + vc * d            # W_Q, W_K, W_V, W_O
    ffn = d * f + f + f * d + d
    norm = 2 * d
    encoder = n * (attention + ffn + 2 * norm)
    decoder = n * (2 * attention + ffn + 3 * norm)
    if hp.layer_norm_position == "pre":
        encoder, decoder = encoder + norm, decoder + norm
    embedding = vocab * d * (1 if hp.shared_embedding_and_softmax_weights else 2)
    if hp.pos == "emb":
        embedding += 2 * hp.max_length * d                    # inputs and targets tables
    return embedding + encoder + decoder


@pytest.mark.parametrize("name", [row[0] for row in PAPER_ROWS])
def test_parameter_counts_match_formula_and_paper(name):
    hp = registry.hparams(name)
    model = build_shapes_only(hp, 37000)
    counts = parameter_counts(model)
    assert model.count_params() == counts["total"] == analytic_parameter_count(hp, 37000)
    assert counts["embedding"] + counts["encoder"] + counts["decoder"] == counts["total"]
    if name in PAPER_MILLIONS:
        paper = PAPER_MILLIONS[name] * 1e6
        assert abs(counts["total"] - paper) / paper < 0.07, (name, counts["total"])


def test_base_and_big_counts():
    assert round(build_shapes_only(registry.hparams("transformer_base"), 37000)
                 .count_params() / 1e6, 1) == 63.0
    assert round(build_shapes_only(registry.hparams("transformer_big"), 37000)
                 .count_params() / 1e6) == 214


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_shape_only_build_counts_like_a_real_model(variant):
    hp = VARIANTS[variant]
    real = Transformer(hp, VOCAB)
    real(_features())
    assert build_shapes_only(hp, VOCAB).count_params() == real.count_params() \
        == analytic_parameter_count(hp, VOCAB)


CPU_SETS = ("transformer_tiny", "transformer_small", "transformer_multi30k_small",
            "transformer_multi30k", "transformer_multi30k_tiny", "transformer_parsing_tiny", "transformer_parsing_small",
            "transformer_parsing_sample")


@pytest.mark.parametrize("name", CPU_SETS)
def test_cpu_set_parameter_counts_match_formula(name):
    hp = registry.hparams(name)
    assert build_shapes_only(hp, 8000).count_params() == analytic_parameter_count(hp, 8000)


def test_multi30k_small_set_is_the_small_model_regularised():
    small = registry.hparams("transformer_small")
    multi30k = registry.hparams("transformer_multi30k_small")
    assert build_shapes_only(multi30k, 8000).count_params() \
        == build_shapes_only(small, 8000).count_params() == 7_568_384
    assert (multi30k.layer_prepostprocess_dropout, multi30k.attention_dropout,
            multi30k.relu_dropout) == (0.3, 0.0, 0.0)
    peak = multi30k.learning_rate_constant * multi30k.hidden_size ** -0.5 \
        * multi30k.learning_rate_warmup_steps ** -0.5
    assert (round(peak, 4), multi30k.batch_size, multi30k.train_steps,
            multi30k.average_checkpoints) == (0.003, 4096, 5000, 12)


def test_multi30k_recipe_is_the_small_set_six_layers_deep_and_pre_norm():
    small = registry.hparams("transformer_multi30k_small")
    recipe = registry.hparams("transformer_multi30k")
    # Three more layers a side and the two stacks' final LayerNorms (gain and bias each).
    layer_pair = (build_shapes_only(small.replace(num_hidden_layers=4), 8000).count_params()
                  - build_shapes_only(small, 8000).count_params())
    assert build_shapes_only(recipe, 8000).count_params() \
        == 7_568_384 + 3 * layer_pair + 2 * 2 * recipe.hidden_size == 13_089_792
    assert (recipe.num_hidden_layers, recipe.layer_norm_position, recipe.train_steps,
            recipe.average_checkpoints) == (6, "pre", 4000, 8)
    unchanged = ("hidden_size", "filter_size", "num_heads", "batch_size", "learning_rate_constant",
                 "learning_rate_warmup_steps", "layer_prepostprocess_dropout",
                 "attention_dropout", "relu_dropout", "label_smoothing")
    assert {k: getattr(recipe, k) for k in unchanged} == {k: getattr(small, k) for k in unchanged}


def test_multi30k_tiny_set_is_the_published_fairseq_model():
    small = registry.hparams("transformer_multi30k_small")
    tiny = registry.hparams("transformer_multi30k_tiny")
    # 8,000 x 128 shared embeddings; per encoder layer two 128-wide LayerNorms, an attention
    # block of four 128 x 128 projections (no biases) and a 128 -> 256 -> 128 feed-forward
    # layer with biases; a decoder layer adds a second attention block and a third LayerNorm.
    attention = 4 * 128 * 128
    feed_forward = 128 * 256 + 256 + 256 * 128 + 128
    layer_norm = 2 * 128
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    assert build_shapes_only(tiny, 8000).count_params() \
        == 8000 * 128 + 4 * (encoder_layer + decoder_layer) == 2_342_912
    peak = tiny.learning_rate_constant * tiny.hidden_size ** -0.5 \
        * tiny.learning_rate_warmup_steps ** -0.5
    assert (tiny.num_hidden_layers, tiny.hidden_size, tiny.filter_size, tiny.num_heads,
            tiny.layer_norm_position) == (4, 128, 256, 4, "post")
    assert (round(peak, 4), tiny.batch_size, tiny.train_steps,
            tiny.average_checkpoints) == (0.005, 8192, 8000, 25)
    unchanged = ("layer_prepostprocess_dropout", "attention_dropout", "relu_dropout",
                 "label_smoothing", "shared_embedding_and_softmax_weights")
    assert {k: getattr(tiny, k) for k in unchanged} == {k: getattr(small, k) for k in unchanged}


def test_parsing_small_set_is_the_small_model_for_long_trees():
    small = registry.hparams("transformer_small")
    parsing = registry.hparams("transformer_parsing_small")
    # The parser's vocabulary is 4,000 pieces: 4,000 x 256 shared embeddings less than at 8,000.
    assert build_shapes_only(parsing, 4000).count_params() \
        == build_shapes_only(small, 8000).count_params() - 4000 * 256
    assert (parsing.max_length, parsing.batch_size, parsing.layer_prepostprocess_dropout,
            parsing.attention_dropout, parsing.relu_dropout) == (256, 2048, 0.3, 0.0, 0.0)


def test_parsing_sample_recipe_is_the_parsing_set_two_layers_deep_for_longer():
    small = registry.hparams("transformer_parsing_small")
    recipe = registry.hparams("transformer_parsing_sample")
    # docs/parsing.md's counts at the sample's 4,000-piece vocabulary: 3 layers, then 2.
    assert build_shapes_only(small, 4000).count_params() == 6_544_384
    assert build_shapes_only(recipe, 4000).count_params() == 4_704_256
    assert (recipe.num_hidden_layers, recipe.train_steps, recipe.average_checkpoints) \
        == (2, 13600, 10)
    unchanged = ("hidden_size", "filter_size", "num_heads", "batch_size", "max_length",
                 "learning_rate_constant", "learning_rate_warmup_steps",
                 "layer_prepostprocess_dropout", "attention_dropout", "relu_dropout",
                 "label_smoothing", "layer_norm_position")
    assert {k: getattr(recipe, k) for k in unchanged} == {k: getattr(small, k) for k in unchanged}
