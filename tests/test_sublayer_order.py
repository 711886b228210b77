"""The order inside each residual sub-layer, recomputed by hand from the layer's own parts.

The paper's post-norm block is LayerNorm(x + Dropout(Sublayer(x))); pre-norm is
x + Dropout(Sublayer(LayerNorm(x))). Each test rebuilds the layer's output from its
sub-layers (attention, feed-forward, LayerNorms with random gains and biases so that no
order can coincide with another) and compares with ``layer(x)``: swapping the residual
and the normalisation, or normalising the wrong tensor, changes the result.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer

D, HEADS = 16, 4
SIZES = dict(hidden_size=D, filter_size=32, num_heads=HEADS, key_channels=D,
             value_channels=D, dropout=0.1, attention_dropout=0.0, relu_dropout=0.0)


def _randomise_norms(layer) -> None:
    rng = np.random.default_rng(0)
    norms = [getattr(layer, name) for name in dir(layer) if name.endswith("_norm")]
    for norm in (n for n in norms if isinstance(n, keras.layers.LayerNormalization)):
        norm.gamma.assign(rng.uniform(0.5, 2.0, norm.gamma.shape).astype(np.float32))
        norm.beta.assign(rng.normal(0.0, 1.0, norm.beta.shape).astype(np.float32))


def _block(position: str, norm, sublayer, x):
    if position == "pre":
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


@pytest.mark.parametrize("position", ["post", "pre"])
def test_encoder_layer_applies_its_residual_blocks_in_the_documented_order(position):
    x = tf.random.stateless_normal([2, 5, D], seed=[1, 2])
    layer = EncoderLayer(**SIZES, layer_norm_position=position)
    layer(x)
    _randomise_norms(layer)
    attention = lambda y: layer.self_attention(y, training=False)  # noqa: E731
    expected = _block(position, layer.self_attention_norm, attention, x)
    expected = _block(position, layer.feed_forward_norm, layer.feed_forward, expected)
    np.testing.assert_allclose(layer(x, training=False), expected, rtol=1e-5, atol=1e-5)
    if position == "post":  # the output is normalised: per-position mean is LayerNorm's bias
        swapped = x + layer.self_attention_norm(attention(x))
        assert not np.allclose(layer(x, training=False), swapped, atol=1e-3)


@pytest.mark.parametrize("position", ["post", "pre"])
def test_decoder_layer_applies_its_residual_blocks_in_the_documented_order(position):
    x = tf.random.stateless_normal([2, 4, D], seed=[3, 4])
    memory = tf.random.stateless_normal([2, 6, D], seed=[5, 6])
    layer = DecoderLayer(**SIZES, layer_norm_position=position)
    layer(x, memory)
    _randomise_norms(layer)
    self_attention = lambda y: layer.self_attention(y, training=False)  # noqa: E731
    encdec = lambda y: layer.encdec_attention(y, memory, training=False)  # noqa: E731
    expected = _block(position, layer.self_attention_norm, self_attention, x)
    expected = _block(position, layer.encdec_attention_norm, encdec, expected)
    expected = _block(position, layer.feed_forward_norm, layer.feed_forward, expected)
    np.testing.assert_allclose(layer(x, memory, training=False), expected,
                               rtol=1e-5, atol=1e-5)
