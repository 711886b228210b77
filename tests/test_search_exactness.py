"""The optimised beam search returns exactly (ids and scores, bit for bit) what the search
before its speed work returned (tests/reference_beam_search.py), on random-weight
Transformers of several shapes, beam 1 and 4, with sentences ending early (EOS favoured)
and not (EOS forbidden before the last position), and on logits full of ties."""
import functools
import importlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import reference_beam_search
from t2t_lite.decoding import search_common
from t2t_lite.decoding.beam_search import beam_search
from t2t_lite.hparams_lib import HParams
from t2t_lite.models.transformer import Transformer

# The module (the package binds the name ``beam_search`` to the function).
beam_search_module = importlib.import_module("t2t_lite.decoding.beam_search")

SHAPES = {
    "d16_v23": (HParams(hidden_size=16, filter_size=32, num_heads=4, num_hidden_layers=2,
                        max_length=64), 23),
    "d32_v300": (HParams(hidden_size=32, filter_size=64, num_heads=4, num_hidden_layers=1,
                         max_length=64), 300),
    "d64_v1000_pre": (HParams(hidden_size=64, filter_size=128, num_heads=8,
                              num_hidden_layers=2, max_length=64,
                              layer_prepostprocess_dropout=0.0), 1000),
}


def _inputs(vocab, lengths, seed):
    rng = np.random.default_rng(seed)
    batch = np.zeros([len(lengths), max(lengths)], np.int32)
    for row, length in enumerate(lengths):
        batch[row, :length - 1] = rng.integers(2, vocab, length - 1)
        batch[row, length - 1] = 1
    return tf.constant(batch)


def _search(search, model, vocab, inputs, beam, eos_bias, extra, growing, shrink=False):
    memory, mask = model.encode(inputs)
    max_length = inputs.shape[1] + extra
    cache = model.initial_decode_cache(memory, mask, 0 if growing else max_length)
    states, constants = model.split_memory_cache(cache)
    eos_column = tf.one_hot(1, vocab)
    options = {}
    if shrink:
        step_fn = model.sentence_decode_step(beam, growing=growing)
        options = dict(sentence_states=constants, shrink=True)

        def symbols_to_logits(ids, i, states, constants):
            logits, states = step_fn(ids, i, states, constants)
            return logits + eos_bias * eos_column, states
    else:
        step_fn = model.beam_decode_step(constants, beam, growing=growing)

        def symbols_to_logits(ids, i, states):
            logits, states = step_fn(ids, i, states)
            return logits + eos_bias * eos_column, states    # > 0: EOS early; < 0: late

    lengths = tf.reduce_sum(tf.cast(inputs > 0, tf.int32), axis=1)
    start = tf.zeros([inputs.shape[0]], tf.int32)
    return search(symbols_to_logits, start, beam, lengths + extra, vocab, 0.6, states=states,
                  max_length=max_length, growing_states=growing, **options)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("eos_bias", [2.0, -30.0], ids=["eos_early", "eos_late"])
def test_optimised_search_equals_the_reference(shape, beam, eos_bias):
    hparams, vocab = SHAPES[shape]
    if eos_bias > 0 and vocab < 100:
        eos_bias = 0.0        # 1 in 23 tokens: EOS comes early enough unaided
    keras.utils.set_random_seed(11)
    model = Transformer(hparams, vocab)
    model.build()
    input_lengths = [7, 3, 12, 5, 9, 1, 4, 10, 2]
    inputs = _inputs(vocab, input_lengths, seed=beam)
    ran = {}
    for name, search, shrink in [("whole batch", beam_search, False),
                                 ("shrinking", beam_search, True),
                                 ("reference", reference_beam_search.beam_search, False)]:
        fn = tf.function(lambda x, search=search, shrink=shrink: _search(
            search, model, vocab, x, beam, eos_bias, 6, True, shrink))
        ran[name] = [t.numpy() for t in fn(inputs)]
    ids, scores = ran["reference"]
    np.testing.assert_array_equal(ran["whole batch"][0], ids)
    np.testing.assert_array_equal(ran["whole batch"][1], scores)
    np.testing.assert_array_equal(ran["shrinking"][0], ids)
    # Fewer matmul rows may round the last bits differently (as any other batch would).
    np.testing.assert_allclose(ran["shrinking"][1], scores, rtol=1e-5, atol=1e-5)
    lengths = (ids[:, 0] != 0).sum(-1)
    if eos_bias > 0:      # sentences end at different steps, some before their limit
        assert len(set(lengths)) > 1 and np.any(lengths < np.array(input_lengths) + 6)


def test_optimised_search_equals_the_reference_under_xla():
    hparams, vocab = SHAPES["d32_v300"]
    keras.utils.set_random_seed(3)
    model = Transformer(hparams, vocab)
    model.build()
    inputs = _inputs(vocab, [4, 8, 2], seed=5)
    out = {}
    for name, search in [("new", beam_search), ("reference", reference_beam_search.beam_search)]:
        fn = tf.function(lambda x, search=search: _search(search, model, vocab, x, 4, 1.0, 5,
                                                          False), jit_compile=True)
        out[name] = [t.numpy() for t in fn(inputs)]
    for new, reference in zip(out["new"], out["reference"]):
        np.testing.assert_array_equal(new, reference)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("eos_bias", [2.0, -30.0], ids=["eos_early", "eos_late"])
def test_log_probs_from_softmax_keeps_the_reference_ids(shape, eos_bias):
    """``log_probs_from_softmax`` (the int8 decoder's): the reference's ids, scores within
    float32 rounding (the log of a softmax is not ``log_softmax`` bit for bit), with
    shrinking and step 0 on one row per sentence as the Translator searches."""
    hparams, vocab = SHAPES[shape]
    keras.utils.set_random_seed(11)
    model = Transformer(hparams, vocab)
    model.build()
    inputs = _inputs(vocab, [7, 3, 12, 5, 9, 1, 4, 10, 2], seed=4)
    ran = {}
    searches = [("reference", reference_beam_search.beam_search, False),
                ("softmax", functools.partial(beam_search, log_probs_from_softmax=True,
                                              expand_after_first_step=True), True)]
    for name, search, shrink in searches:
        fn = tf.function(lambda x, search=search, shrink=shrink: _search(
            search, model, vocab, x, 4, eos_bias, 6, True, shrink))
        ran[name] = [t.numpy() for t in fn(inputs)]
    np.testing.assert_array_equal(ran["softmax"][0], ran["reference"][0])
    np.testing.assert_allclose(ran["softmax"][1], ran["reference"][1], rtol=1e-5, atol=1e-5)


def test_log_probs_from_softmax_takes_the_softmax_tokens_where_they_prove_the_ranking(
        monkeypatch):
    """Eagerly (``tf.cond`` runs one branch): steps use the softmax's kept tokens, whose
    log-probabilities are the log of the softmax's (within 2e-6 of log_softmax's), and
    the steps where they cannot prove the ranking fall back to the whole matrix."""
    hparams, vocab = SHAPES["d64_v1000_pre"]
    keras.utils.set_random_seed(11)
    model = Transformer(hparams, vocab)
    model.build()
    inputs = _inputs(vocab, [7, 3, 12, 5, 9], seed=4)
    calls = {"softmax": 0, "whole matrix": 0}
    kept_differences = []
    softmax_candidates = beam_search_module._softmax_candidates
    all_candidates = beam_search_module._all_candidates
    candidates_from_kept = beam_search_module._candidates_from_kept

    def counting_softmax(logits, *args):
        calls["softmax"] += 1
        exact = tf.nn.log_softmax(logits)
        kept = tf.math.log(search_common.top_k_last_axis(tf.nn.softmax(logits), 9)[0])
        kept_differences.append(float(tf.reduce_max(tf.abs(
            kept - search_common.top_k_last_axis(exact, 9)[0]))))
        return softmax_candidates(logits, *args)

    def counting_all(*args):
        calls["whole matrix"] += 1
        return all_candidates(*args)

    monkeypatch.setattr(beam_search_module, "_softmax_candidates", counting_softmax)
    monkeypatch.setattr(beam_search_module, "_all_candidates", counting_all)
    monkeypatch.setattr(beam_search_module, "_candidates_from_kept", candidates_from_kept)
    search = functools.partial(beam_search, log_probs_from_softmax=True)
    ids, _ = _search(search, model, vocab, inputs, 4, -30.0, 6, True)
    reference_ids, _ = _search(reference_beam_search.beam_search, model, vocab, inputs, 4,
                               -30.0, 6, True)
    np.testing.assert_array_equal(ids.numpy(), reference_ids.numpy())
    assert calls["softmax"] == ids.shape[2]             # every step of the longest sentence
    # Falls back at each sentence's last position (EOS forced) and at ranking ties.
    assert 0 < calls["whole matrix"] < calls["softmax"]
    assert 0 < max(kept_differences) < 2e-6


def _beams(alive, seed, vocab):
    b, beam = alive.shape
    rng = np.random.default_rng(seed)
    return reference_beam_search._initial_beams(tf.zeros([b], tf.int32), beam, 7)._replace(
        alive_log_probs=tf.constant(alive, tf.float32),
        alive_seq=tf.constant(rng.integers(0, vocab, (b, beam, 7)), tf.int32))


def _reference_candidates(log_probs, beams):
    floored = tf.maximum(log_probs, beam_search_module.NEG_INF)
    return reference_beam_search._top_candidates(floored, beams, tf.constant(2), 0.6)


@pytest.mark.parametrize("beam", [2, 4])
def test_candidates_with_ties_equal_the_whole_matrix(beam):
    # Logits on a coarse grid: many tokens tie, across and within hypotheses, and at the
    # 2k boundary; some hypotheses are empty (NEG_INF), one holds -inf. Each sentence is
    # searched alone: the kept extensions must be the reference's whenever they say so,
    # and the step's result (falling back otherwise) always.
    exact_seen = set()
    for seed in range(12):
        rng = np.random.default_rng(seed)
        vocab = 40
        log_probs = np.round(rng.normal(size=(1, beam, vocab)) * 2) / 2 - 3.0
        alive = np.round(rng.normal(size=(1, beam)), 1) - 1.0
        if seed % 3 == 1:
            alive[0, 1:] = beam_search_module.NEG_INF
        if seed % 3 == 2:
            log_probs[0, 1] = -np.inf
            alive[0] = alive[0, 0]                 # equal alive scores: ties across beams
        beams = _beams(alive, seed, vocab)
        log_probs = tf.constant(log_probs, tf.float32)
        want = _reference_candidates(log_probs, beams)
        kept, exact = beam_search_module._kept_candidates(log_probs, beams, tf.constant(2),
                                                          0.6)
        exact_seen.add(bool(exact))
        got = beam_search_module._top_candidates(log_probs, beams, tf.constant(2), 0.6)
        for result in [got] + ([kept] if exact else []):
            for a, b in zip(result, want):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert exact_seen == {True, False}     # both the kept path and the fallback ran


def test_candidates_tied_by_rounding_keep_the_lower_token_first():
    # -3000 + -1.00001 and -3000 + -1.00002 round to the same float32: the reference ranks
    # the lower token (3) first although its log-probability is lower.
    vocab, alive = 40, np.array([[-3000.0, -3000.5]])
    log_probs = np.full((1, 2, vocab), -20.0)
    log_probs[0, 0, [3, 5, 7, 9, 11]] = [-1.00002, -1.00001, -2.0, -2.5, -2.7]
    log_probs[0, 1, [0, 8]] = [-1.5, -1.6]
    log_probs = tf.constant(log_probs, tf.float32)
    beams = _beams(alive, 0, vocab)
    want = _reference_candidates(log_probs, beams)
    assert list(want.token.numpy()[0][:2]) == [3, 5]
    kept, exact = beam_search_module._kept_candidates(log_probs, beams, tf.constant(2), 0.6)
    assert bool(exact)
    for a, b in zip(kept, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("vocab,k", [(37000, 9), (8000, 9), (300, 5), (1000, 3), (40, 9),
                                     (8191, 9)])
def test_top_k_last_axis_equals_top_k(vocab, k):
    rng = np.random.default_rng(vocab)
    x = rng.normal(size=(3, 4, vocab)).astype(np.float32)
    x[0, 0] = np.round(x[0, 0])                       # many ties, inside and across chunks
    x[0, 1] = 0.0                                      # all tied
    x[1, 0, ::7] = 5.0                                 # ties at the top, spread out
    x[1, 1, -3:] = 9.0                                 # the best in the last chunk
    x[2, 0, :] = -np.inf
    x[2, 0, [vocab - 1, 5]] = [1.0, 1.0]
    values, index = search_common.top_k_last_axis(tf.constant(x), k)
    want_values, want_index = tf.math.top_k(tf.constant(x), k)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(index.numpy(), want_index.numpy())
    assert search_common.chunk_size(37000, 9) in (50, 74)   # about sqrt(V / k)
