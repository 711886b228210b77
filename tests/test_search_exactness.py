"""The library's searches return what the independent reference search
(``reference_beam_search``: plain Python over an uncached Transformer, no code shared
with ``t2t_lite``) returns: the same ids, scores within float32 rounding. On
random-weight Transformers of several shapes, beam 1 and 4, greedy, with sentences ending
early (EOS favoured) and not (EOS forbidden before the last position), with and without
a constraint, under every plan the ``Translator`` can choose (whole batch with a preallocated cache, growing cache with
finished sentences dropped, log-probabilities from the softmax, XLA), and on candidate
rankings full of ties. The comparison fails on a search with a wrong length penalty or
states that do not follow their beams."""
import importlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import reference_beam_search as reference
from t2t_lite.decoding import (DecodingPlan, DecodingState, beam_search, greedy_search,
                               search_common, step_function)
from t2t_lite.hparams_lib import HParams
from t2t_lite.models.transformer import Transformer
from uncached_model import uncached_logits_fn

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
INPUT_LENGTHS = [7, 3, 12, 5, 9, 1, 4, 10, 2]
EXTRA = 6
ALPHA = 0.6
# Cached steps and the uncached model round their float32 products differently; the
# scores (sums of up to 18 log-probabilities, of magnitude 1 to 100) agree to within this.
SCORE_TOLERANCE = dict(rtol=1e-6, atol=2e-5)


def _model(shape, seed=11):
    hparams, vocab = SHAPES[shape]
    keras.utils.set_random_seed(seed)
    model = Transformer(hparams, vocab)
    model.build()
    return model


def _inputs(vocab, lengths, seed):
    rng = np.random.default_rng(seed)
    batch = np.zeros([len(lengths), max(lengths)], np.int32)
    for row, length in enumerate(lengths):
        batch[row, :length - 1] = rng.integers(2, vocab, length - 1)
        batch[row, length - 1] = 1
    return tf.constant(batch)


def _decode_lengths(inputs):
    return np.asarray(inputs).astype(bool).sum(axis=1) + EXTRA


def library_search(model, inputs, plan, eos_bias, jit_compile=False, greedy=False,
                   constraint=None):
    """The library's search of ``inputs`` through the Transformer's decode step, EOS's
    logit raised by ``eos_bias``: (ids [b, k, T], scores [b, k]) as numpy."""
    max_length = inputs.shape[1] + EXTRA
    eos_column = tf.one_hot(1, model.vocab_size)
    step = step_function(model, plan)

    def biased_step(ids, i, states, sentence_states):
        logits, states = step(ids, i, states, sentence_states)
        return logits + eos_bias * eos_column, states      # > 0: EOS early; < 0: late

    def search(inputs):
        start = DecodingState(*model.decoding_state(inputs, max_length, plan))
        lengths = tf.reduce_sum(tf.cast(inputs > 0, tf.int32), axis=1) + EXTRA
        options = dict(max_length=max_length)
        if constraint is not None:
            options.update(constraint=constraint,
                           constraint_state=constraint.initial_state(inputs, lengths))
        if greedy:
            ids, scores = greedy_search(biased_step, start, plan, lengths, 0.0, **options)
            return ids[:, None], scores[:, None]
        return beam_search(biased_step, start, plan, lengths, ALPHA, **options)

    return [t.numpy() for t in tf.function(search, jit_compile=jit_compile, autograph=False)(inputs)]


def reference_search(model, inputs, beam, eos_bias, alpha=ALPHA, allowed_fn=None):
    return reference.beam_search(uncached_logits_fn(model, inputs, eos_bias),
                                 _decode_lengths(inputs), beam, alpha,
                                 max_length=inputs.shape[1] + EXTRA, allowed_fn=allowed_fn)


def assert_same_search(got, want):
    """Ids equal; scores (-inf for the same empty slots) within ``SCORE_TOLERANCE``."""
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], **SCORE_TOLERANCE)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("eos_bias", [2.0, -30.0], ids=["eos_early", "eos_late"])
def test_searches_equal_the_reference(shape, beam, eos_bias):
    hparams, vocab = SHAPES[shape]
    if eos_bias > 0 and vocab < 100:
        eos_bias = 0.0        # 1 in 23 tokens: EOS comes early enough unaided
    model = _model(shape)
    inputs = _inputs(vocab, INPUT_LENGTHS, seed=beam)
    want = reference_search(model, inputs, beam, eos_bias)
    plans = [DecodingPlan(beam),                                   # as under XLA
             DecodingPlan.choose(beam, jit_compile=False, quantization="none")]
    for plan in plans:
        assert_same_search(library_search(model, inputs, plan, eos_bias), want)
    if beam == 1:    # greedy: beam 1 without length penalty
        greedy = library_search(model, inputs, DecodingPlan(growing_cache=True), eos_bias,
                                greedy=True)
        assert_same_search(greedy, reference_search(model, inputs, 1, eos_bias, alpha=0.0))
    lengths = (want[0][:, 0] != 0).sum(-1)
    if eos_bias > 0:      # sentences end at different steps, some before their limit
        assert len(set(lengths)) > 1 and np.any(lengths < _decode_lengths(inputs))
    elif eos_bias < 0:    # EOS only where it is forced
        np.testing.assert_array_equal(lengths, _decode_lengths(inputs))


def test_searches_equal_the_reference_under_xla():
    _, vocab = SHAPES["d32_v300"]
    model = _model("d32_v300", seed=3)
    inputs = _inputs(vocab, [4, 8, 2], seed=5)
    for beam in (1, 4):
        plan = DecodingPlan.choose(beam, jit_compile=True, quantization="none")
        got = library_search(model, inputs, plan, 1.0, jit_compile=True, greedy=beam == 1)
        assert_same_search(got, reference_search(model, inputs, beam, 1.0,
                                                 alpha=ALPHA if beam > 1 else 0.0))


class NoRepeat:
    """A ``SearchConstraint``: no token but EOS right after itself."""

    def initial_state(self, inputs, decode_length):
        return {"last": -tf.ones([tf.shape(inputs)[0]], tf.int32)}

    def allowed(self, state, budget):
        tokens = tf.range(SHAPES["d16_v23"][1])[None, :]
        return (tokens != state["last"][:, None]) | (tokens == 1)

    def update(self, state, tokens):
        return {"last": tokens}


def no_repeat(sentence, prefix, budget):
    allowed = np.ones(SHAPES["d16_v23"][1], bool)
    if prefix and prefix[-1] != 1:
        allowed[prefix[-1]] = False
    return allowed


def test_constrained_searches_equal_the_reference():
    """With a constraint (here: no immediate repeats), as parsing decodes: the reference
    gives the forbidden tokens no probability and scores the others as the model does."""
    _, vocab = SHAPES["d16_v23"]
    model = _model("d16_v23")
    inputs = _inputs(vocab, INPUT_LENGTHS, seed=6)
    for beam in (1, 4):
        want = reference_search(model, inputs, beam, -30.0, alpha=ALPHA if beam > 1 else 0.0,
                                allowed_fn=no_repeat)
        for ids in want[0].reshape(-1, want[0].shape[-1]):
            ids = list(ids[:list(ids).index(1)]) if 1 in ids else []
            assert all(a != b for a, b in zip(ids, ids[1:]))
        free = reference_search(model, inputs, beam, -30.0, alpha=ALPHA if beam > 1 else 0.0)
        assert not np.array_equal(free[0], want[0])      # the constraint changed outputs
        plan = DecodingPlan.choose(beam, jit_compile=False, quantization="none")
        assert_same_search(library_search(model, inputs, plan, -30.0, greedy=beam == 1,
                                          constraint=NoRepeat()), want)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("eos_bias", [2.0, -30.0], ids=["eos_early", "eos_late"])
def test_log_probs_from_softmax_keeps_the_reference_ids(shape, eos_bias):
    """``log_probs_from_softmax`` (the int8 decoder's plan, here on a float32 model): the
    reference's ids, scores within float32 rounding, with finished sentences dropped as
    the Translator searches."""
    _, vocab = SHAPES[shape]
    model = _model(shape)
    inputs = _inputs(vocab, INPUT_LENGTHS, seed=4)
    plan = DecodingPlan(4, growing_cache=True, shrink=True, log_probs_from_softmax=True)
    assert_same_search(library_search(model, inputs, plan, eos_bias),
                       reference_search(model, inputs, 4, eos_bias))


def test_log_probs_from_softmax_takes_the_softmax_tokens_where_they_prove_the_ranking(
        monkeypatch):
    """Eagerly (``tf.cond`` runs one branch): steps use the softmax's kept tokens, whose
    log-probabilities are the log of the softmax's (within 2e-6 of log_softmax's), and
    the steps where they cannot prove the ranking fall back to the whole matrix."""
    _, vocab = SHAPES["d64_v1000_pre"]
    model = _model("d64_v1000_pre")
    inputs = _inputs(vocab, [7, 3, 12, 5, 9], seed=4)
    calls = {"softmax": 0, "whole matrix": 0}
    kept_differences = []
    softmax_candidates = beam_search_module._softmax_candidates
    all_candidates = beam_search_module._all_candidates

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
    plan = DecodingPlan(4, growing_cache=True, log_probs_from_softmax=True)
    max_length = inputs.shape[1] + EXTRA
    start = DecodingState(*model.decoding_state(inputs, max_length, plan))
    eos_column = tf.one_hot(1, vocab)
    step = step_function(model, plan)

    def late_eos(ids, i, states, sentence_states):
        logits, states = step(ids, i, states, sentence_states)
        return logits - 30.0 * eos_column, states

    ids, _ = beam_search(late_eos, start, plan, _decode_lengths(inputs), ALPHA,
                         max_length=max_length)
    want_ids, _ = reference_search(model, inputs, 4, -30.0)
    np.testing.assert_array_equal(ids.numpy(), want_ids)
    assert calls["softmax"] == ids.shape[2]             # every step of the longest sentence
    # Falls back at each sentence's last position (EOS forced) and at ranking ties.
    assert 0 < calls["whole matrix"] < calls["softmax"]
    assert 0 < max(kept_differences) < 2e-6


def _wrong_length_penalty(length, alpha):
    return tf.pow((6.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


_REORDER = beam_search_module._reorder


def _states_of_sorted_beams(states, constraint_state, origin, constraint, tokens):
    """Each sentence's states go to its new hypotheses in the order of their origins,
    not to the hypothesis that extends them."""
    sorted_origin = tf.reshape(tf.sort(tf.reshape(origin, [-1, 4]), axis=1), [-1])
    return _REORDER(states, constraint_state, sorted_origin, constraint, tokens)


@pytest.mark.parametrize("name,bug", [("length_penalty", _wrong_length_penalty),
                                      ("_reorder", _states_of_sorted_beams)],
                         ids=["wrong_length_penalty", "states_follow_the_wrong_beams"])
def test_the_comparison_catches_a_wrong_search(monkeypatch, name, bug):
    """The reference comparison can fail: a search with GNMT's penalty off by one in its
    ``5 +`` no longer passes (its scores differ), nor one whose states do not follow the
    hypotheses they belong to (its ids differ)."""
    _, vocab = SHAPES["d32_v300"]
    model = _model("d32_v300")
    inputs = _inputs(vocab, INPUT_LENGTHS, seed=4)
    want = reference_search(model, inputs, 4, 2.0)
    plan = DecodingPlan(4)
    assert_same_search(library_search(model, inputs, plan, 2.0), want)
    monkeypatch.setattr(beam_search_module, name, bug)
    wrong = library_search(model, inputs, plan, 2.0)
    with pytest.raises(AssertionError):
        assert_same_search(wrong, want)
    if name == "_reorder":
        assert not np.array_equal(wrong[0], want[0])


def test_the_reference_is_the_exhaustive_search_when_the_beam_holds_everything():
    """The oracle checked against brute force: a beam as wide as every hypothesis of a
    4-token vocabulary up to length 3, without early stopping, returns the best outputs of
    the enumeration, best first."""
    rng = np.random.default_rng(0)
    table = rng.normal(scale=2.0, size=[3, 4, 4])        # sentence, previous token -> logits

    def logits_fn(sentence, prefixes):
        return np.array([table[sentence, prefix[-1] if prefix else 0] for prefix in prefixes])

    lengths = [3, 2, 1]
    ids, scores = reference.beam_search(logits_fn, lengths, 12, ALPHA, stop_early=False)
    for sentence, length in enumerate(lengths):
        outputs = reference.enumerate_outputs(logits_fn, sentence, length, 4, ALPHA)
        assert len(outputs) == sum(3 ** (n - 1) for n in range(1, length + 1))
        count = min(12, len(outputs))
        np.testing.assert_allclose(scores[sentence, :count], [s for s, _ in outputs[:count]])
        for slot, (_, tokens) in enumerate(outputs[:count]):
            assert list(ids[sentence, slot, :len(tokens)]) == tokens
            assert not ids[sentence, slot, len(tokens):].any()
        assert np.isneginf(scores[sentence, count:]).all()


def _beams(alive, seed, vocab):
    b, beam = alive.shape
    rng = np.random.default_rng(seed)
    return beam_search_module._initial_beams(tf.zeros([b], tf.int32), beam, 7)._replace(
        alive_log_probs=tf.constant(alive, tf.float32),
        alive_seq=tf.constant(rng.integers(0, vocab, (b, beam, 7)), tf.int32))


def _assert_reference_candidates(candidates, log_probs, beams, step=2):
    """``candidates`` (of one sentence) are the reference's ``2k`` best extensions, ranked
    in float32 as the library computes (ties: lower beam, then lower token)."""
    alive = beams.alive_log_probs.numpy()[0]
    existing = alive > beam_search_module.NEG_INF / 2           # no empty beams
    k = len(alive)
    want = reference.ranked_extensions(alive[existing], log_probs.numpy()[0][existing],
                                       np.float32(reference.gnmt_penalty(step + 1, 0.6))
                                       )[:2 * k]
    np.testing.assert_array_equal(candidates.beam.numpy()[0], [w[2] for w in want])
    np.testing.assert_array_equal(candidates.token.numpy()[0], [w[3] for w in want])
    np.testing.assert_array_equal(candidates.log_probs.numpy()[0], [w[1] for w in want])
    np.testing.assert_allclose(candidates.scores.numpy()[0], [w[0] for w in want],
                               rtol=1e-6)
    seq = beams.alive_seq.numpy()[0][[w[2] for w in want]]
    seq[:, step] = [w[3] for w in want]
    np.testing.assert_array_equal(candidates.seq.numpy()[0], seq)


@pytest.mark.parametrize("beam", [2, 4])
def test_candidates_with_ties_equal_the_reference(beam):
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
        kept, exact = beam_search_module._kept_candidates(log_probs, beams, tf.constant(2),
                                                          0.6)
        exact_seen.add(bool(exact))
        got = beam_search_module._top_candidates(log_probs, beams, tf.constant(2), 0.6)
        for result in [got] + ([kept] if exact else []):
            _assert_reference_candidates(result, log_probs, beams)
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
    kept, exact = beam_search_module._kept_candidates(log_probs, beams, tf.constant(2), 0.6)
    assert bool(exact)
    assert list(kept.token.numpy()[0][:2]) == [3, 5]
    _assert_reference_candidates(kept, log_probs, beams)


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
