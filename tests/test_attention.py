"""Our fused multi-head attention against keras.layers.MultiHeadAttention(use_bias=False)."""
import keras
import numpy as np
import pytest

from t2t_lite.layers.attention import (MultiHeadAttention, causal_mask, padding_mask,
                                       to_keras_mha_kernels)

B, Q, K, D = 2, 5, 7, 16


def _keras_reference(ours: MultiHeadAttention, query, memory):
    """A Keras MHA holding our weights, mapped by the documented split/reshape."""
    reference = keras.layers.MultiHeadAttention(
        num_heads=ours.num_heads, key_dim=ours.key_depth, value_dim=ours.value_depth,
        use_bias=False, output_shape=ours.output_channels)
    reference(query, memory)  # build
    kernels = to_keras_mha_kernels(ours)
    reference.query_dense.kernel.assign(kernels["query"])
    reference.key_dense.kernel.assign(kernels["key"])
    reference.value_dense.kernel.assign(kernels["value"])
    reference.output_dense.kernel.assign(kernels["output"])
    return reference


@pytest.mark.parametrize("heads, key_channels, value_channels, output_channels", [
    (4, 16, 16, 16),      # d_k = d_v
    (2, 8, 24, 12),       # key channels != value channels, output != input width
    (1, 16, 16, 16),      # a single head
])
@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "padding+causal"])
def test_self_attention_equals_keras(heads, key_channels, value_channels, output_channels,
                                     mask_kind):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, Q, D)).astype("float32")
    ids = np.array([[3, 4, 5, 1, 0], [3, 1, 0, 0, 0]])
    ours = MultiHeadAttention(heads, key_channels, value_channels, output_channels)
    masks = {"none": None, "padding": padding_mask(ids), "causal": causal_mask(Q)}
    masks["padding+causal"] = np.logical_and(masks["padding"], masks["causal"])
    mask = masks[mask_kind]
    out, weights = ours(x, attention_mask=mask, return_attention_weights=True)

    reference = _keras_reference(ours, x, x)
    keras_mask = None if mask is None else np.broadcast_to(mask, (B, 1, Q, Q))[:, 0]
    expected, expected_weights = reference(x, x, attention_mask=keras_mask,
                                           return_attention_scores=True)
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    assert out.shape == (B, Q, output_channels) and weights.shape == (B, heads, Q, Q)
    # The fused kernel holds Q, K and V side by side.
    assert ours.qkv_kernel.shape == (D, 2 * key_channels + value_channels)


@pytest.mark.parametrize("key_channels, value_channels", [(16, 16), (8, 32)])
def test_encoder_decoder_attention_equals_keras(key_channels, value_channels):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(B, Q, D)).astype("float32")
    memory = rng.normal(size=(B, K, 12)).astype("float32")   # memory width != query width
    source = np.array([[3, 4, 5, 6, 7, 8, 1], [3, 4, 1, 0, 0, 0, 0]])
    ours = MultiHeadAttention(4, key_channels, value_channels, D, self_attention=False)
    mask = padding_mask(source)
    out = ours(query, memory, attention_mask=mask)
    assert ours.q_kernel.shape == (D, key_channels)
    assert ours.kv_kernel.shape == (12, key_channels + value_channels)

    reference = _keras_reference(ours, query, memory)
    expected = reference(query, memory, attention_mask=np.broadcast_to(mask, (B, 1, Q, K))[:, 0])
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-5)


def test_padding_keys_get_zero_weight_and_rows_sum_to_one():
    ids = np.array([[3, 4, 1, 0, 0]])
    layer = MultiHeadAttention(2, 8, 8, 8)
    x = np.random.default_rng(2).normal(size=(1, 5, 8)).astype("float32")
    _, weights = layer(x, attention_mask=padding_mask(ids), return_attention_weights=True)
    weights = np.asarray(weights)
    assert np.all(weights[..., 3:] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


# A decoding step splits the fused QKV by one unstack when d_k == d_v, by slices otherwise.
STEP_CHANNELS = pytest.mark.parametrize("value_channels", [8, 16])


@STEP_CHANNELS
def test_cached_self_attention_steps_equal_causal_attention(value_channels):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(B, Q, D)).astype("float32")
    layer = MultiHeadAttention(4, 16, value_channels, D)
    full = layer(x, attention_mask=causal_mask(Q))
    cache = layer.initial_cache(B, Q + 2)   # longer than needed: extra slots stay masked
    assert cache["k"].shape == (B, 4, Q + 2, 4)
    assert cache["v"].shape == (B, 4, Q + 2, value_channels // 4)
    steps = []
    for step in range(Q):
        out, cache = layer.self_attention_step(x[:, step:step + 1], step, cache)
        steps.append(out)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # step 0: 1 key
@STEP_CHANNELS
def test_growing_cache_steps_equal_causal_attention_and_the_preallocated_cache(
        value_channels):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(B, Q, D)).astype("float32")
    layer = MultiHeadAttention(4, 16, value_channels, D)
    full = layer(x, attention_mask=causal_mask(Q))
    growing, fixed = layer.initial_cache(B, 0), layer.initial_cache(B, Q)
    assert growing["k"].shape == (B, 4, 0, 4) and fixed["k"].shape == (B, 4, Q, 4)
    steps = []
    for step in range(Q):
        out, growing = layer.self_attention_step(x[:, step:step + 1], step, growing,
                                                 growing=True)
        fixed_out, fixed = layer.self_attention_step(x[:, step:step + 1], step, fixed)
        assert growing["k"].shape == (B, 4, step + 1, 4)   # exactly the positions so far
        np.testing.assert_allclose(out, fixed_out, atol=1e-6)
        steps.append(out)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)
    np.testing.assert_allclose(growing["v"], fixed["v"], atol=0)


@STEP_CHANNELS
def test_a_step_projects_the_heads_of_the_full_projection(value_channels):
    """``project_position`` gives one position's q, k, v head-major, exactly as
    ``project_self`` splits them (q token-major there)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(B, 1, D)).astype("float32")
    layer = MultiHeadAttention(4, 16, value_channels, D)
    layer(x)  # build
    q, k, v = layer.project_self(x)
    step_q, step_k, step_v = layer.project_position(x)
    assert step_q.shape == (B, 4, 1, 4) and step_v.shape == (B, 4, 1, value_channels // 4)
    np.testing.assert_array_equal(step_q, np.transpose(q, (0, 2, 1, 3)))
    np.testing.assert_array_equal(step_k, k)
    np.testing.assert_array_equal(step_v, v)
    assert layer.project_position(x, "bfloat16")[1].dtype == "bfloat16"


def test_config_round_trip_and_errors():
    layer = MultiHeadAttention(4, 16, 32, 8, dropout=0.1, self_attention=False, name="a")
    clone = MultiHeadAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    with pytest.raises(ValueError, match="divisible by num_heads"):
        MultiHeadAttention(3, 16, 16, 16)
    with pytest.raises(ValueError, match="needs memory"):
        MultiHeadAttention(2, 8, 8, 8, self_attention=False)(np.zeros((1, 2, 8), "float32"))


def test_both_products_run_in_the_caches_dtype():
    """A bfloat16 cache (int8 decoding's choice) is attended in bfloat16 by both products:
    neither the keys nor the values are cast to float32 first (the attention's Dropout
    layer once cast the weights to float32, and the values with them)."""
    import tensorflow as tf

    layer = MultiHeadAttention(num_heads=2, key_channels=8, value_channels=8,
                               output_channels=8)
    layer.build((1, 1, 8))
    q = tf.zeros([3, 2, 1, 4], tf.bfloat16)
    k = v = tf.zeros([3, 2, 5, 4], tf.bfloat16)
    graph = tf.function(lambda q, k, v: layer.attend(q, k, v, one_position=True)[0],
                        autograph=False).get_concrete_function(q, k, v).graph
    products = [op for op in graph.get_operations()
                if op.type in ("Einsum", "BatchMatMulV2", "BatchMatMulV3")]
    assert len(products) == 2
    for op in products:
        assert [t.dtype for t in op.inputs] == [tf.bfloat16, tf.bfloat16], op.name
