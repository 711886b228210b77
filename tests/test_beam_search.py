"""Beam search and greedy search on hand-built models whose answers are known.

The models are Markov tables: first order, ``logits = table[previous id]``, or second
order, ``logits = table[id two back, previous id]`` where the id two back is read from a
``path`` state (so a state gathered from the wrong beam gives a wrong answer). Expected
results come from hand-computed log-probabilities, GNMT's ((5 + len) / 6) ** alpha,
exhaustive enumeration of every EOS-terminated sequence and the plain reference search
(``reference_beam_search``).
"""
import math

import numpy as np
import pytest
import tensorflow as tf

import reference_beam_search as reference
from t2t_lite.decoding import (DecodingPlan, DecodingState, beam_search, greedy_search,
                               length_penalty)

EOS = 1
NEG = -np.inf


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    top = logits.max(-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))


def gnmt_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def beams(k, **choices):
    return DecodingPlan(beam_size=k, **choices)


GREEDY = DecodingPlan()


def first_order(table, counter=None):
    """A step function with ``logits = table[ids]`` (table [V, V])."""
    table = tf.constant(table, tf.float32)

    def fn(ids, step, states, sentence_states):
        if counter is not None:
            counter.assign_add(1)
        return tf.gather(table, ids), states

    return fn


def second_order(table, max_length):
    """``logits = table[id two back, ids]`` (table [V, V, V]); the id two back comes from
    the ``path`` state, int32 [b, T, 1], where step ``s`` records the id fed at ``s``."""
    table = tf.constant(table, tf.float32)
    positions = tf.range(max_length)[None, :, None]

    def fn(ids, step, states, sentence_states):
        path = states["nested"]["path"]
        two_back = tf.gather(path[:, :, 0], tf.maximum(step - 1, 0), axis=1)
        logits = tf.gather_nd(table, tf.stack([two_back, ids], axis=1))
        path = tf.where(positions == step, ids[:, None, None], path)
        return logits, {"nested": {"path": path}, "calls": states["calls"] + 1}

    return fn


def second_order_states(batch, max_length):
    return {"nested": {"path": tf.zeros([batch, max_length, 1], tf.int32)},
            "calls": tf.zeros([batch], tf.int32)}


def second_order_logits(table, starts):
    """The reference's ``logits_fn`` for ``second_order(table)`` fed ``starts`` [b]."""
    def logits_fn(sentence, prefixes):
        rows = []
        for prefix in prefixes:
            history = [0, starts[sentence]] + list(prefix)
            rows.append(table[history[-2], history[-1]])
        return np.array(rows)
    return logits_fn


def unpad(ids):
    """Token list up to and including the first EOS."""
    ids = list(np.asarray(ids))
    return ids[:ids.index(EOS) + 1] if EOS in ids else ids


def random_table(shape, seed):
    return np.random.RandomState(seed).normal(scale=2.0, size=shape).astype(np.float32)


# Beam 1 and greedy -------------------------------------------------------------------
def argmax_loop(table, start, decode_length):
    """The plain greedy reference: argmax each step, EOS forced at the last position."""
    tokens, previous, total = [], start, 0.0
    for position in range(decode_length):
        log_probs = log_softmax(table[previous])
        token = EOS if position == decode_length - 1 else int(np.argmax(log_probs))
        total += log_probs[token]
        tokens.append(token)
        previous = token
        if token == EOS:
            break
    return tokens, total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy_argmax(seed):
    vocab_size = 7
    table = random_table([vocab_size, vocab_size], seed)
    table[:, EOS] -= 1.5  # longer sentences
    starts, lengths = [0, 3, 5, 6], [1, 4, 8, 12]
    fn = first_order(table)
    greedy_ids, greedy_scores = greedy_search(fn, DecodingState(starts), GREEDY, lengths)
    beam_ids, beam_scores = beam_search(fn, DecodingState(starts), beams(1), lengths, 0.0)
    assert beam_ids.shape == (4, 1, 12) and greedy_ids.shape == (4, 12)
    for row, (start, length) in enumerate(zip(starts, lengths)):
        tokens, total = argmax_loop(table, start, length)
        assert unpad(greedy_ids[row]) == tokens
        assert unpad(beam_ids[row, 0]) == tokens
        assert not np.any(greedy_ids[row, len(tokens):])  # 0 after EOS
        np.testing.assert_allclose(greedy_scores[row], total, rtol=1e-5)
        np.testing.assert_allclose(beam_scores[row, 0], total, rtol=1e-5)


# Length penalty ----------------------------------------------------------------------
# V = {0: pad/start, 1: EOS, 2: "a"}. From the start: P(EOS) = 0.4, P(a) = 0.6; after "a":
# P(EOS) = P(a) = 0.5. "EOS" has log P = log 0.4 (length 1); "a EOS" has log 0.6 + log 0.5
# (length 2). With alpha = 0 the short one wins; "a EOS" wins once
# ((5 + 2) / 6) ** alpha > log(0.3) / log(0.4), i.e. alpha > 1.77.
LENGTH_TABLE = np.log(np.array([[1e-30, 0.4, 0.6],
                                [1e-30, 1.0, 1e-30],
                                [1e-30, 0.5, 0.5]], np.float64)).astype(np.float32)


@pytest.mark.parametrize("alpha, winner", [(0.0, [EOS]), (1.0, [EOS]), (2.0, [2, EOS])])
def test_length_penalty_changes_the_winner_as_the_formula_says(alpha, winner):
    short = math.log(0.4) / gnmt_penalty(1, alpha)
    long = (math.log(0.6) + math.log(0.5)) / gnmt_penalty(2, alpha)
    assert (short > long) == (winner == [EOS])
    ids, scores = beam_search(first_order(LENGTH_TABLE), DecodingState([0]), beams(2), [2],
                              alpha)
    assert unpad(ids[0, 0]) == winner
    expected = sorted([short, long], reverse=True)
    np.testing.assert_allclose(scores[0], expected, rtol=1e-5)
    np.testing.assert_allclose(length_penalty(2, alpha), gnmt_penalty(2, alpha), rtol=1e-6)


# Early termination -------------------------------------------------------------------
# From the start: P(EOS) = 0.3, P(a) = 0.7; after "a": P(EOS) = 0.6, P(a) = 0.4.
STOP_TABLE = np.log(np.array([[1e-30, 0.3, 0.7],
                              [1e-30, 1.0, 1e-30],
                              [1e-30, 0.6, 0.4]], np.float64)).astype(np.float32)


def expected_stop_step(alpha, decode_length):
    """Steps run before the bound is met, computed by hand for STOP_TABLE: after step n
    the best alive is "a"^(n+1) with log P = log .7 + n log .4; the finished ones are
    "EOS" and "a"^m "EOS" for m <= n."""
    bound_penalty = gnmt_penalty(decode_length, alpha)
    finished = [math.log(0.3) / gnmt_penalty(1, alpha)]
    for step in range(decode_length):
        if step >= 1:
            finished.append((math.log(0.7) + (step - 1) * math.log(0.4) + math.log(0.6))
                            / gnmt_penalty(step + 1, alpha))
        alive = math.log(0.7) + step * math.log(0.4)
        if max(finished) >= alive / bound_penalty:
            return step + 1
    return decode_length


@pytest.mark.parametrize("alpha, calls", [(0.0, 2), (1.0, 3)])
def test_early_termination_stops_when_no_alive_hypothesis_can_win(alpha, calls):
    assert expected_stop_step(alpha, 10) == calls  # the hand count agrees with the bound
    counter = tf.Variable(0)
    ids, scores = beam_search(first_order(STOP_TABLE, counter), DecodingState([0]),
                              beams(2), [10], alpha)
    assert int(counter.numpy()) == calls
    best = (math.log(0.7) + math.log(0.6)) / gnmt_penalty(2, alpha)  # "a EOS"
    assert unpad(ids[0, 0]) == [2, EOS]
    np.testing.assert_allclose(scores[0, 0], best, rtol=1e-5)

    counter.assign(0)
    full_ids, full_scores = beam_search(first_order(STOP_TABLE, counter), DecodingState([0]),
                                        beams(2), [10], alpha, stop_early=False)
    assert int(counter.numpy()) == 10
    assert unpad(full_ids[0, 0]) == [2, EOS]
    np.testing.assert_allclose(full_scores[0, 0], best, rtol=1e-5)


def test_early_termination_in_a_graph_counts_the_same_steps():
    counter = tf.Variable(0)
    fn = first_order(STOP_TABLE, counter)
    decode = tf.function(lambda: beam_search(fn, DecodingState([0]), beams(2), [10], 0.0),
                         autograph=False)
    ids, _ = decode()
    assert int(counter.numpy()) == 2 and unpad(ids[0, 0]) == [2, EOS]


@pytest.mark.parametrize("seed", range(4))
def test_early_stop_keeps_the_best_hypothesis_of_the_full_search(seed):
    vocab_size = 6
    table = random_table([vocab_size, vocab_size], 10 + seed)
    starts, lengths = [0, 2, 4], [3, 6, 9]
    early = beam_search(first_order(table), DecodingState(starts), beams(3), lengths, 0.6)
    full = beam_search(first_order(table), DecodingState(starts), beams(3), lengths, 0.6,
                       stop_early=False)
    np.testing.assert_array_equal(early[0][:, 0], full[0][:, 0])
    np.testing.assert_allclose(early[1][:, 0], full[1][:, 0], rtol=1e-6)


def test_best_finished_hypothesis_is_never_dropped():
    # "EOS" first (log .9) is the best hypothesis; without early stopping each later step
    # brings new finished candidates, all worse, that compete for the one finished slot.
    table = np.log(np.array([[1e-30, 0.9, 0.05, 0.05],
                             [1e-30, 1.0, 1e-30, 1e-30],
                             [1e-30, 0.5, 0.25, 0.25],
                             [1e-30, 0.5, 0.25, 0.25]])).astype(np.float32)
    for beam_size in (1, 2, 3):
        ids, scores = beam_search(first_order(table), DecodingState([0]), beams(beam_size),
                                  [6], 0.6, stop_early=False)
        assert unpad(ids[0, 0]) == [EOS]
        np.testing.assert_allclose(scores[0, 0], math.log(0.9), rtol=1e-6)


# Lengths, N-best, states ---------------------------------------------------------------
def test_each_sentence_respects_its_decode_length_with_forced_eos():
    # EOS is very unlikely everywhere; the best hypothesis uses the whole length and ends
    # in the forced EOS, whose (small) log-prob counts.
    vocab_size = 5
    table = np.zeros([vocab_size, vocab_size], np.float32)
    table[:, EOS] = -6.0
    table[:, 3] = 1.0
    lengths = [1, 2, 5, 3]
    ids, scores = beam_search(first_order(table), DecodingState([0, 0, 0, 0]), beams(2),
                              lengths, 0.6, max_length=7)
    assert ids.shape == (4, 2, 7)
    log_probs = log_softmax(table[0])
    for row, length in enumerate(lengths):
        for beam in range(2):
            if np.isneginf(scores[row, beam]):  # an empty slot: length 1 has one hypothesis
                assert length == 1 and beam == 1 and not np.any(ids[row, beam])
                continue
            tokens = unpad(ids[row, beam])
            assert len(tokens) <= length and tokens[-1] == EOS
            assert not np.any(ids[row, beam, len(tokens):])
        assert unpad(ids[row, 0]) == [3] * (length - 1) + [EOS]
        expected = ((length - 1) * log_probs[3] + log_probs[EOS]) / gnmt_penalty(length, 0.6)
        np.testing.assert_allclose(scores[row, 0], expected, rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
def test_states_follow_their_beams_and_wide_beam_is_exhaustive(seed):
    # Beam 12 keeps every candidate of a 4-token vocabulary up to length 3 (at most 3 * 4
    # per step), so the N-best list must be the 12 best of all 13 EOS-terminated
    # sequences, under a model that reads the
    # id two back from the ``path`` state: a state gathered from the wrong beam changes
    # the log-probabilities and the answer.
    vocab_size, beam_size, max_length = 4, 12, 3
    table = random_table([vocab_size] * 3, 20 + seed)
    starts, lengths = [0, 2, 3], [3, 3, 2]
    fn = second_order(table, max_length)
    ids, scores = beam_search(fn, DecodingState(starts, second_order_states(3, max_length)),
                              beams(beam_size), lengths, 0.6, stop_early=False)
    for row, length in enumerate(lengths):
        outputs = reference.enumerate_outputs(second_order_logits(table, starts), row,
                                                length, vocab_size, 0.6)
        count = min(beam_size, len(outputs))
        np.testing.assert_allclose(scores[row, :count], [s for s, _ in outputs[:count]],
                                   rtol=1e-5)
        assert unpad(ids[row, 0]) == outputs[0][1]
        by_tokens = {tuple(tokens): score for score, tokens in outputs}
        for beam in range(count):  # every returned hypothesis carries its own score
            np.testing.assert_allclose(by_tokens[tuple(unpad(ids[row, beam]))],
                                       scores[row, beam], rtol=1e-5)
        assert np.all(np.isneginf(scores[row, count:]))  # empty slots


def test_a_sentence_decodes_the_same_alone_and_in_a_batch():
    vocab_size, max_length = 5, 8
    table = random_table([vocab_size] * 3, 7)
    starts, lengths = [0, 2, 4], [8, 3, 6]
    fn = second_order(table, max_length)
    batch = beam_search(fn, DecodingState(starts, second_order_states(3, max_length)),
                        beams(3), lengths, 0.6, max_length=max_length)
    for row, (start, length) in enumerate(zip(starts, lengths)):
        alone = beam_search(fn, DecodingState([start], second_order_states(1, max_length)),
                            beams(3), [length], 0.6, max_length=max_length)
        np.testing.assert_array_equal(alone[0][0], batch[0][row])
        np.testing.assert_allclose(alone[1][0], batch[1][row], rtol=1e-6)


@pytest.mark.parametrize("plan", [beams(2), beams(2, shrink=True),
                                  beams(2, log_probs_from_softmax=True),
                                  beams(2, growing_cache=True, shrink=True)],
                         ids=["whole_batch", "shrink", "from_softmax", "growing_shrink"])
def test_first_step_runs_once_per_sentence_and_states_follow_the_beams(plan):
    """Step 0 feeds one row per sentence (states [b, ...]) and the states are repeated to
    the beams after it; whatever the plan, the stateful second-order model (its ``path``
    and ``calls`` states must reach the right beams) gives the reference search's
    hypotheses and scores, eagerly, in a graph and (without shrink) under XLA."""
    vocab_size, max_length = 6, 8
    table = random_table([vocab_size] * 3, 11)
    starts, lengths = [0, 2, 5, 3], [8, 1, 5, 6]
    fn = second_order(table, max_length)
    rows_seen = []

    def counting_fn(ids, step, states, sentence_states):
        rows_seen.append(ids.shape[0])   # None in a graph with shrink (dynamic batch)
        return fn(ids, step, states, sentence_states)

    def search():
        return beam_search(counting_fn,
                           DecodingState(starts, second_order_states(4, max_length)), plan,
                           lengths, 0.6, max_length=max_length)

    ids, scores = search()
    assert rows_seen[0] == 4 and rows_seen[1] <= 4 * 2   # step 0 untiled, then the beams
    want_ids, want_scores = reference.beam_search(second_order_logits(table, starts),
                                                  lengths, 2, 0.6, max_length=max_length)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5)
    compiled = tf.function(search, jit_compile=not plan.shrink, autograph=False)()
    np.testing.assert_array_equal(compiled[0], ids)
    np.testing.assert_allclose(compiled[1], scores, rtol=1e-6)


# XLA -----------------------------------------------------------------------------------
def test_xla_matches_eager_and_graph():
    vocab_size, max_length = 6, 7
    table = random_table([vocab_size] * 3, 3)
    starts = tf.constant([0, 2, 5, 3])
    lengths = tf.constant([7, 2, 5, 4])
    fn = second_order(table, max_length)

    def decode(starts, lengths):
        start = DecodingState(starts, second_order_states(4, max_length))
        return (beam_search(fn, start, beams(3), lengths, 0.6, max_length=max_length)
                + greedy_search(fn, start, GREEDY, lengths, max_length=max_length))

    eager = decode(starts, lengths)
    graph = tf.function(decode, autograph=False)(starts, lengths)
    xla = tf.function(decode, jit_compile=True, autograph=False)(starts, lengths)
    for a, b, c in zip(eager, graph, xla):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-5)


def test_bad_arguments_are_refused():
    fn = first_order(LENGTH_TABLE)
    with pytest.raises(ValueError, match="beam_size"):
        beams(0)
    with pytest.raises(ValueError, match="shrink must be a bool"):
        DecodingPlan(shrink=1)
    with pytest.raises(ValueError, match="alpha"):
        beam_search(fn, DecodingState([0]), beams(2), [2], -1.0)
    with pytest.raises(ValueError, match=r"eos_id 5 is outside the vocabulary \[0, 3\)"):
        beam_search(fn, DecodingState([0]), beams(2), [2], 0.6, eos_id=5)
    with pytest.raises(ValueError, match="eos_id 5"):
        greedy_search(fn, DecodingState([0]), GREEDY, [2], eos_id=5)
    with pytest.raises(ValueError, match="greedy_search needs a plan with beam_size 1"):
        greedy_search(fn, DecodingState([0]), beams(2), [2])


def test_the_translators_plan_follows_xla_quantization_and_beam_size():
    choose = DecodingPlan.choose
    assert choose(4, False, "none") == DecodingPlan(4, growing_cache=True, shrink=True)
    assert choose(4, False, "int8") == DecodingPlan(4, growing_cache=True, shrink=True,
                                                    log_probs_from_softmax=True)
    assert choose(4, True, "int8") == choose(4, True, "none") == DecodingPlan(4)
    assert choose(1, False, "int8") == DecodingPlan(1, growing_cache=True)
    assert choose(1, True, "none") == DecodingPlan()
