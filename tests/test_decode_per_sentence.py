"""Beam decoding with encoder-decoder keys/values kept once per sentence
(``split_memory_cache`` + ``beam_decode_step``) equals the tiled cache, step by step and
through a whole beam search."""
import keras
import numpy as np
import tensorflow as tf

from t2t_lite.decoding.beam_search import beam_search, tile_beams
from t2t_lite.hparams_lib import HParams
from t2t_lite.models.transformer import Transformer

VOCAB = 23
TINY = HParams(hidden_size=16, filter_size=32, num_heads=4, num_hidden_layers=2,
               max_length=16)
INPUTS = np.array([[5, 6, 7, 8, 1, 0], [9, 4, 1, 0, 0, 0], [3, 1, 0, 0, 0, 0]], np.int32)


def _model():
    keras.utils.set_random_seed(0)
    model = Transformer(TINY, VOCAB)
    model.build()
    return model


def test_per_sentence_step_equals_tiled_step():
    model, beams, length = _model(), 3, 5
    memory, mask = model.encode(tf.constant(INPUTS))
    cache = model.initial_decode_cache(memory, mask, length)
    tiled = tile_beams(cache, beams)
    states, constants = model.split_memory_cache(cache)
    states = tile_beams(states, beams)
    step_fn = model.beam_decode_step(constants, beams)
    ids = tf.zeros([len(INPUTS) * beams], tf.int32)
    rng = np.random.default_rng(0)
    for step in range(length):
        expected, tiled = model.decode_step(ids, step, tiled)
        logits, states = step_fn(ids, step, states)
        np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
        ids = tf.constant(rng.integers(2, VOCAB, size=ids.shape), tf.int32)
    assert set(states["decoder"]["layer_0"]) == {"self_k", "self_v"}


def test_per_sentence_beam_search_equals_tiled_under_xla():
    model, beams, length = _model(), 4, 8

    @tf.function(jit_compile=True)
    def search(inputs, per_sentence):
        memory, mask = model.encode(inputs)
        cache = model.initial_decode_cache(memory, mask, length)
        step_fn = model.decode_step
        if per_sentence:
            cache, constants = model.split_memory_cache(cache)
            step_fn = model.beam_decode_step(constants, beams)
        start = tf.zeros([tf.shape(inputs)[0]], tf.int32)
        return beam_search(step_fn, start, beams, length, VOCAB, 0.6, states=cache,
                           max_length=length)

    ids, scores = search(tf.constant(INPUTS), True)
    expected_ids, expected_scores = search(tf.constant(INPUTS), False)
    np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), expected_scores.numpy(), rtol=1e-5)


def test_first_step_on_one_row_per_sentence_equals_the_tiled_search():
    """``expand_after_first_step`` (what the Translator uses): step 0 runs the Transformer
    on one row per sentence, the self-attention caches are tiled to the beams after it;
    the hypotheses and scores are those of the search that tiles first, with a growing
    cache, finished sentences dropped (``shrink``) and int8 weights too."""
    from t2t_lite.layers.int8 import quantize_model

    model, beams, length = _model(), 4, 9

    def search(inputs, expand):
        memory, mask = model.encode(inputs)
        cache, constants = model.split_memory_cache(model.initial_decode_cache(memory, mask, 0))
        start = tf.zeros([tf.shape(inputs)[0]], tf.int32)
        return beam_search(model.sentence_decode_step(beams, growing=True), start, beams,
                           length, VOCAB, 0.6, states=cache, max_length=length,
                           growing_states=True, sentence_states=constants, shrink=True,
                           expand_after_first_step=expand)

    for quantize in (False, True):
        if quantize:
            quantize_model(model)
        traced = tf.function(search)   # traced again once the model is quantized
        ids, scores = traced(tf.constant(INPUTS), False)
        expanded_ids, expanded_scores = traced(tf.constant(INPUTS), True)
        np.testing.assert_array_equal(expanded_ids.numpy(), ids.numpy())
        np.testing.assert_allclose(expanded_scores.numpy(), scores.numpy(), rtol=1e-6)
