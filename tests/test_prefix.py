"""Target prefixes (``t2t_lite.decoding.prefix``, ``Translator(prefixes=)``,
``t2t-lite-decoder --decode_prefix_file``): the prefix is kept, forced steps score as the
model does, cached and uncached decoding agree, and the tree constraint covers prefix and
continuation."""
import numpy as np
import pytest
import tensorflow as tf

import reference_beam_search as reference
from t2t_lite.data.vocab import EOS_ID
from t2t_lite.decoding import DecodingPlan, DecodingState, beam_search, greedy_search
from t2t_lite.decoding.prefix import PrefixConstraint, first_refusal, pad_prefixes
from t2t_lite.decoding.sampling import Sampler, sample_search
from t2t_lite.errors import UserError

from run_dir_helpers import tiny_run_dir
from uncached_model import uncached_logits_fn
from test_search_exactness import (ALPHA, EXTRA, INPUT_LENGTHS, SHAPES, _inputs, _model,
                                   assert_same_search, library_search)

PREFIXES = [[5, 6], [], [7], [3, 3, 3], [9, 2, 4, 8], [], [11], [], [4]]


def forcing(prefixes, vocab):
    """The reference's ``allowed_fn`` for ``prefixes``."""
    def allowed_fn(sentence, output, budget):
        prefix = prefixes[sentence]
        allowed = np.ones(vocab, bool)
        if len(output) < len(prefix):
            allowed[:] = False
            allowed[prefix[len(output)]] = True
        return allowed
    return allowed_fn


def starts_with(ids, prefix):
    return list(ids[:len(prefix)]) == list(prefix)


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 4])
def test_prefixed_search_equals_the_uncached_reference(beam):
    """The cached step (preallocated and growing caches, finished sentences dropped)
    against the reference over the uncached model, forced through the same prefixes."""
    _, vocab = SHAPES["d16_v23"]
    model = _model("d16_v23")
    inputs = _inputs(vocab, INPUT_LENGTHS, seed=3)
    constraint = PrefixConstraint(pad_prefixes(PREFIXES), vocab)
    want = reference.beam_search(
        uncached_logits_fn(model, inputs, 0.0),
        np.asarray(inputs).astype(bool).sum(axis=1) + EXTRA, beam,
        ALPHA if beam > 1 else 0.0, max_length=inputs.shape[1] + EXTRA,
        allowed_fn=forcing(PREFIXES, vocab))
    for ids, prefix in zip(want[0], PREFIXES):
        assert all(starts_with(hypothesis, prefix) for hypothesis in ids)
    plans = [DecodingPlan(beam), DecodingPlan.choose(beam, jit_compile=False,
                                                     quantization="none")]
    if beam == 1:
        plans = [DecodingPlan(), DecodingPlan(growing_cache=True)]
    for plan in plans:
        got = library_search(model, inputs, plan, 0.0, greedy=beam == 1,
                             constraint=constraint)
        assert_same_search(got, want)
    free = library_search(model, inputs, plans[-1], 0.0, greedy=beam == 1)
    assert not np.array_equal(free[0], want[0])      # the prefixes changed the outputs


def random_table_step(seed, vocab=17, length=16):
    """Logits from a random table indexed by (step, last token); never the padding id 0,
    which ends a prefix row."""
    table = np.random.default_rng(seed).normal(0, 2, [length, vocab, vocab])
    table[:, :, 0] = -50.0
    table = tf.constant(table, tf.float32)
    return lambda ids, i, states, sentence_states: (tf.gather(table[i], ids), states)


def test_the_searchs_own_best_output_as_prefix_changes_nothing():
    """Greedy: any start of its output as prefix gives the same output. Beam search: its
    whole best output as prefix gives the same best; a shorter start of it is kept (the
    beam then spends its k slots on continuations of that start, and may find a
    hypothesis the free beam had pruned)."""
    step = random_table_step(5)
    b, lengths = 6, tf.constant([16, 9, 12, 5, 16, 7])
    start = DecodingState(tf.zeros([b], tf.int32))
    for search in ("greedy", "beam"):
        def run(constraint=None):
            options = dict(eos_id=EOS_ID, max_length=16)
            if constraint is not None:
                options.update(constraint=constraint,
                               constraint_state=constraint.initial_state(None, lengths))
            if search == "greedy":
                ids, scores = greedy_search(step, start, DecodingPlan(), lengths, **options)
                return ids.numpy()[:, None], scores.numpy()[:, None]
            ids, scores = beam_search(step, start, DecodingPlan(4), lengths, 0.6, **options)
            return ids.numpy(), scores.numpy()

        ids, scores = run()
        for cut in (1, 3, None):     # a start of the best output, or all of it (EOS aside)
            prefixes = []
            for row in ids[:, 0].tolist():
                body = row[:row.index(EOS_ID)]
                prefixes.append(body if cut is None else body[:cut])
            again, again_scores = run(PrefixConstraint(pad_prefixes(prefixes), 17))
            for row, prefix in enumerate(prefixes):
                finite = np.isfinite(again_scores[row])
                assert all(starts_with(h, prefix) for h in again[row][finite])
            if search == "greedy" or cut is None:
                np.testing.assert_array_equal(again[:, 0], ids[:, 0])
                np.testing.assert_allclose(again_scores[:, 0], scores[:, 0], rtol=1e-6)


def test_samples_keep_their_prefix():
    step = random_table_step(6)
    prefixes = [[4, 5, 6], [], [2]]
    lengths = tf.constant([16, 10, 8])
    constraint = PrefixConstraint(pad_prefixes(prefixes), 17)
    ids, scores = sample_search(step, DecodingState(tf.zeros([3], tf.int32)), DecodingPlan(5),
                                lengths, Sampler(1.5, seed=2), eos_id=EOS_ID, max_length=16,
                                constraint=constraint,
                                constraint_state=constraint.initial_state(None, lengths))
    assert np.isfinite(scores.numpy()).all()
    for row, prefix in enumerate(prefixes):
        for sample in ids.numpy()[row]:
            assert starts_with(sample, prefix) and EOS_ID in sample.tolist()


def test_a_prefix_under_the_tree_constraint():
    from test_tree_constraint import (ID, S, constraint as tree_constraint, is_tree_over,
                                      random_step, source)
    words, lengths = [2, 3, 1], [20, 30, 10]
    inputs = np.array([source(n) for n in words], np.int32)
    machine = tree_constraint()
    good = [[ID[S + "(S"], ID[S + "(NP"], ID[S + "XX"]], [ID[S + "(S"]], []]
    assert first_refusal(machine, inputs, np.array(lengths, np.int32),
                         pad_prefixes(good)) is None
    bad = [[ID[S + "(S"]], [ID[S + "(S"], ID[S + ")S"]], []]     # closes an empty tree
    assert first_refusal(machine, inputs, np.array(lengths, np.int32),
                         pad_prefixes(bad)) == (1, 1)
    constraint = PrefixConstraint(pad_prefixes(good), len(ID), machine)
    decode_length = tf.constant(lengths)
    ids, scores = beam_search(random_step(2), DecodingState(tf.zeros([3], tf.int32)),
                              DecodingPlan(3), decode_length, 0.6, eos_id=EOS_ID,
                              max_length=40, constraint=constraint,
                              constraint_state=constraint.initial_state(tf.constant(inputs),
                                                                        decode_length))
    for row, (prefix, num_words) in enumerate(zip(good, words)):
        for hypothesis in ids.numpy()[row][np.isfinite(scores.numpy()[row])]:
            assert starts_with(hypothesis, prefix) and is_tree_over(hypothesis, num_words)


def run_decoder(capsys, tmp_path, sources, prefixes, *flags):
    source, prefix_file = tmp_path / "src.txt", tmp_path / "prefix.txt"
    target = tmp_path / "out.txt"
    source.write_text("".join(line + "\n" for line in sources))
    prefix_file.write_text("".join(line + "\n" for line in prefixes))
    from t2t_lite.commands import decoder
    status = decoder.main(
        ["--output_dir", str(tiny_run_dir()), "--decode_from_file", str(source),
         "--decode_prefix_file", str(prefix_file), "--decode_to_file", str(target), *flags])
    captured = capsys.readouterr()
    lines = target.read_text().split("\n")[:-1] if target.exists() else None
    return status, lines, captured.err


@pytest.mark.slow
@pytest.mark.parametrize("hparams", ["beam_size=3,extra_length=6",
                                     "sampling_method=random,seed=4,extra_length=6"])
def test_decoder_outputs_start_with_their_prefix(capsys, tmp_path, hparams):
    sources = ["twenty-one", "", "nine", "three hundred"]
    prefixes = ["einund", "", "", "drei hundert"]
    status, lines, err = run_decoder(capsys, tmp_path, sources, prefixes,
                                     "--decode_hparams", hparams)
    assert status == 0, err
    assert len(lines) == 4 and lines[1] == ""
    assert lines[0].startswith("einund") and lines[3].startswith("drei hundert")
    free_status, free, _ = run_decoder(capsys, tmp_path, sources, [""] * 4,
                                       "--decode_hparams", hparams)
    assert free_status == 0 and free[2] == lines[2]     # no prefix: as without the file
    assert not free[0].startswith("einund")


@pytest.mark.slow
@pytest.mark.parametrize("prefixes,message", [
    (["a"], "has 1 lines but"),
    (["", "", "eins " * 30], "line 3: the prefix has"),
])
def test_decoder_prefix_errors_name_the_line(capsys, tmp_path, prefixes, message):
    status, lines, err = run_decoder(capsys, tmp_path, ["one", "two", "three"], prefixes,
                                     "--decode_hparams", "beam_size=1,extra_length=4")
    assert status != 0 and lines is None
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], err


def test_translator_refuses_a_prefix_the_constraint_refuses():
    from t2t_lite.decoding.translator import Translator
    from test_tree_constraint import ID, S, constraint as tree_constraint, source

    class Model:   # check_prefixes needs only the lengths
        vocab_size = len(ID)
        hparams = type("H", (), {"max_length": 64, "pos": "timing"})()

    class Vocabulary:
        def detokenize(self, ids):
            return ids

    translator = Translator(Model(), Vocabulary(), beam_size=2, extra_length=20,
                            constraint=tree_constraint())
    encoded = [[t for t in source(2) if t], [t for t in source(1) if t]]
    translator.check_prefixes(encoded, [[ID[S + "(S"]], []], [4, 8])
    with pytest.raises(UserError, match="line 9: the prefix cannot start"):
        translator.check_prefixes(encoded, [[], [ID[S + ")S"]]], [4, 8])
