"""The Transformer's decode step keeps the encoder-decoder keys/values once per sentence
(``sentence_states``, never tiled nor reordered; a sentence's hypotheses attend to them
together): it equals the step that carries a copy of them for every hypothesis, step by
step and through whole beam searches (under XLA, and with a growing cache, finished
sentences dropped and int8 weights, as the Translator decodes)."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.decoding import DecodingPlan, DecodingState, beam_search, step_function
from t2t_lite.decoding.beam_search import tile_beams
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
    plan = DecodingPlan(beams)
    ids0, states, sentence_states = model.decoding_state(tf.constant(INPUTS), length, plan)
    assert set(states["decoder"]["layer_0"]) == {"self_k", "self_v"}
    assert set(sentence_states["decoder"]["layer_0"]) == {"encdec_k", "encdec_v"}
    np.testing.assert_array_equal(ids0.numpy(), [0, 0, 0])
    states = tile_beams(states, beams)
    # Every hypothesis its own "sentence", with its own copy of the memory.
    tiled_states, tiled_memory = states, tile_beams(sentence_states, beams)
    ids = tf.zeros([len(INPUTS) * beams], tf.int32)
    rng = np.random.default_rng(0)
    for step in range(length):
        expected, tiled_states = model.decode_step(ids, step, tiled_states, tiled_memory,
                                                   DecodingPlan())
        logits, states = model.decode_step(ids, step, states, sentence_states, plan)
        np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
        ids = tf.constant(rng.integers(2, VOCAB, size=ids.shape), tf.int32)
    assert set(states["decoder"]["layer_0"]) == {"self_k", "self_v"}


def _searches(model, plan, length):
    """(per-sentence, tiled-memory) beam searches of ``inputs`` under ``plan``: the second
    carries the memory as a per-hypothesis state, repeated to the beams and reordered."""
    one_row = DecodingPlan(growing_cache=plan.growing_cache)

    def tiled_step(ids, step, states, sentence_states):
        logits, new = model.decode_step(ids, step, states["self"], states["memory"], one_row)
        return logits, {"self": new, "memory": states["memory"]}

    def search(inputs, per_sentence):
        ids, states, sentence_states = model.decoding_state(inputs, length, plan)
        if per_sentence:
            start, step_fn = DecodingState(ids, states, sentence_states), step_function(
                model, plan)
        else:
            start = DecodingState(ids, {"self": states, "memory": sentence_states})
            step_fn = tiled_step
        return beam_search(step_fn, start, plan, length, 0.6, max_length=length)

    return search


def test_per_sentence_beam_search_equals_tiled_under_xla():
    model, length = _model(), 8
    plan = DecodingPlan.choose(4, jit_compile=True, quantization="none")
    search = tf.function(_searches(model, plan, length), jit_compile=True, autograph=False)
    ids, scores = search(tf.constant(INPUTS), True)
    expected_ids, expected_scores = search(tf.constant(INPUTS), False)
    np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), expected_scores.numpy(), rtol=1e-5)


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_per_sentence_beam_search_equals_tiled_as_the_translator_decodes(quantization):
    """Without XLA: a growing cache, finished sentences dropped, and (int8) the
    log-probabilities from the softmax; step 0 runs on one row per sentence either way."""
    from t2t_lite.layers.int8 import quantize_model, quantization_of

    model, length = _model(), 9
    if quantization == "int8":
        quantize_model(model)
    plan = DecodingPlan.choose(4, jit_compile=False, quantization=quantization_of(model))
    assert plan.shrink and plan.log_probs_from_softmax == (quantization == "int8")
    search = tf.function(_searches(model, plan, length), autograph=False)
    ids, scores = search(tf.constant(INPUTS), True)
    expected_ids, expected_scores = search(tf.constant(INPUTS), False)
    np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), expected_scores.numpy(), rtol=1e-5)
