"""Random sampling (``t2t_lite.decoding.sampling``): the distribution each token is drawn
from, reproducibility, the tree constraint, and the Translator's sampling mode."""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.data.vocab import EOS_ID
from t2t_lite.decoding import DecodingPlan, DecodingState, parse_decode_hparams
from t2t_lite.decoding.sampling import Sampler, sample_search, uniform_draws

LOGITS = np.array([0.5, -1.0, 2.0, 0.3, 1.0, -0.5, 1.5, 0.1, -2.0, 0.8], np.float32)
V = len(LOGITS)
DRAWS = 10_000
# Chi-square critical values at p = 0.001 for 1 .. 9 degrees of freedom.
CRITICAL = [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88]


def fixed_step(ids, step, states, sentence_states):
    """A model whose every step has the logits ``LOGITS``."""
    return tf.tile(tf.constant(LOGITS)[None], [tf.shape(ids)[0], 1]), states


def first_tokens(sampler, sentences=DRAWS, samples=1):
    """The first token of ``samples`` samples of each of ``sentences`` sentences."""
    ids, _ = sample_search(fixed_step, DecodingState(tf.zeros([sentences], tf.int32)),
                           DecodingPlan(samples), 2, sampler, eos_id=EOS_ID)
    return ids.numpy()[:, :, 0].reshape(-1)


def expected(temperature=1.0, top_k=0, top_p=1.0):
    """softmax(LOGITS / T) cut to the top k, then to the top p of what is left."""
    p = np.exp(LOGITS / temperature - np.max(LOGITS / temperature))
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    keep = np.ones(V, bool)
    if top_k:
        keep[order[top_k:]] = False
    q = np.where(keep, p, 0)
    q /= q.sum()
    before = np.cumsum(q[order]) - q[order]
    keep[order[before >= top_p]] = False
    q = np.where(keep, q, 0)
    return q / q.sum()


def chi_square(tokens, probabilities):
    """(statistic, degrees of freedom) of ``tokens`` against ``probabilities``; a token of
    probability 0 that was drawn makes it infinite."""
    counts = np.bincount(tokens, minlength=V)
    if counts[probabilities == 0].any():
        return float("inf"), 1
    kept = probabilities > 0
    wanted = probabilities[kept] * len(tokens)
    return float(((counts[kept] - wanted) ** 2 / wanted).sum()), int(kept.sum()) - 1


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, 0, 1.0), (0.6, 0, 1.0), (1.7, 4, 1.0), (1.0, 0, 0.8), (1.3, 6, 0.7), (0.8, 3, 0.95)])
def test_draws_follow_the_tempered_and_cut_softmax(temperature, top_k, top_p):
    tokens = first_tokens(Sampler(temperature, top_k, top_p, seed=5))
    statistic, df = chi_square(tokens, expected(temperature, top_k, top_p))
    assert statistic < CRITICAL[df - 1], (statistic, df)
    # The test can fail: the same draws against a wrong temperature or a wrong cut.
    for wrong in [expected(temperature * 1.5, top_k, top_p), expected(temperature, 0, 1.0)
                  if (top_k, top_p) != (0, 1.0) else expected(temperature, 5, 1.0)]:
        statistic, df = chi_square(tokens, wrong)
        assert statistic > CRITICAL[df - 1]


def test_top_k_of_the_vocabulary_and_top_p_of_one_are_plain_sampling():
    plain = first_tokens(Sampler(1.2, seed=9), sentences=500)
    assert (first_tokens(Sampler(1.2, top_k=V, seed=9), sentences=500) == plain).all()
    assert (first_tokens(Sampler(1.2, top_p=1.0, seed=9), sentences=500) == plain).all()
    assert (first_tokens(Sampler(1.2, top_k=V + 7, top_p=1.0, seed=9),
                         sentences=500) == plain).all()
    assert not (first_tokens(Sampler(1.2, top_k=V - 1, seed=9), sentences=500) == plain).all()


def test_a_draw_depends_on_seed_sentence_sample_and_step_only():
    sentence = tf.constant([0, 0, 7, 7, 3])
    sample = tf.constant([0, 1, 0, 1, 0])
    draws = uniform_draws(11, sentence, sample, tf.constant(4)).numpy()
    # One row alone gives the same number; any key changed gives another.
    assert uniform_draws(11, sentence[2:3], sample[2:3], tf.constant(4)).numpy()[0] == draws[2]
    assert len(set(draws.tolist())) == 5
    assert uniform_draws(12, sentence, sample, tf.constant(4)).numpy()[2] != draws[2]
    assert uniform_draws(11, sentence, sample, tf.constant(5)).numpy()[2] != draws[2]
    many = uniform_draws(0, tf.range(20000), tf.zeros([20000], tf.int32), tf.constant(0))
    many = many.numpy()
    assert 0 <= many.min() and many.max() < 1
    counts = np.bincount((many * 10).astype(int), minlength=10)
    assert ((counts - 2000) ** 2 / 2000).sum() < 27.88


def random_table_step(seed, vocab=V, length=12):
    """Logits from a random table indexed by (step, last token)."""
    table = tf.constant(np.random.default_rng(seed).normal(0, 2, [length, vocab, vocab]),
                        tf.float32)
    return lambda ids, i, states, sentence_states: (tf.gather(table[i], ids), states)


def test_samples_do_not_depend_on_the_batch():
    step = random_table_step(1)
    sampler = Sampler(0.9, top_k=6, seed=21)
    lengths = tf.constant([12, 5, 9, 12])

    def run(rows, ids):
        out, scores = sample_search(step, DecodingState(tf.zeros([len(rows)], tf.int32)),
                                    DecodingPlan(3), tf.gather(lengths, rows), sampler,
                                    sentence_ids=tf.constant(ids), eos_id=EOS_ID,
                                    max_length=12)
        return out.numpy(), scores.numpy()

    whole, whole_scores = run([0, 1, 2, 3], [0, 1, 2, 3])
    for row in range(4):
        alone, alone_scores = run([row], [row])
        assert (alone[0] == whole[row]).all()
        np.testing.assert_allclose(alone_scores[0], whole_scores[row], rtol=1e-6)
    reversed_ids, _ = run([3, 2, 1, 0], [3, 2, 1, 0])
    assert (reversed_ids[::-1] == whole).all()
    again, _ = run([0, 1, 2, 3], [0, 1, 2, 3])
    assert (again == whole).all()
    # The samples of one sentence differ from each other, and the lengths hold.
    assert len({tuple(sample) for sample in whole[0]}) > 1
    for row, length in enumerate(lengths.numpy()):
        for sample in whole[row]:
            assert EOS_ID in sample[:length].tolist()


def test_scores_are_the_model_log_probabilities_of_the_samples():
    step = random_table_step(2)
    ids, scores = sample_search(step, DecodingState(tf.zeros([2], tf.int32)), DecodingPlan(4),
                                12, Sampler(2.0, seed=3), alpha=0.6, eos_id=EOS_ID,
                                max_length=12)
    for row in range(2):
        for j in range(4):
            tokens = ids.numpy()[row, j].tolist()
            tokens = tokens[:tokens.index(EOS_ID) + 1]
            total, last = 0.0, 0
            for i, token in enumerate(tokens):
                logits, _ = step(tf.constant([last]), i, {}, {})
                total += float(tf.nn.log_softmax(logits)[0, token])
                last = token
            penalty = ((5 + len(tokens)) / 6) ** 0.6
            np.testing.assert_allclose(scores.numpy()[row, j], total / penalty, rtol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_samples_under_the_tree_constraint_are_trees(jit_compile):
    from test_tree_constraint import LENGTHS, WORDS, constraint, is_tree_over, random_step, \
        source
    inputs = tf.constant([source(n) for n in WORDS])
    decode_length = tf.constant(LENGTHS)
    machine = constraint()

    def run(plan_growing):
        return sample_search(random_step(4), DecodingState(tf.zeros([len(WORDS)], tf.int32)),
                             DecodingPlan(5, growing_cache=plan_growing), decode_length,
                             Sampler(1.5, top_p=0.9, seed=8), eos_id=EOS_ID, max_length=40,
                             constraint=machine,
                             constraint_state=machine.initial_state(inputs, decode_length))

    ids, scores = (tf.function(run, jit_compile=True, autograph=False)(False) if jit_compile else run(True))
    assert np.isfinite(scores.numpy()).all()
    for row, (num_words, length) in enumerate(zip(WORDS, LENGTHS)):
        for sample in ids.numpy()[row]:
            assert is_tree_over(sample, num_words)
            assert list(sample).index(EOS_ID) < length


def test_decode_hparams_choose_sampling_and_check_its_values():
    hp = parse_decode_hparams("sampling_method=random,num_samples=5,seed=3,sampling_topk=4,"
                              "sampling_topp=0.9,sampling_temp=0.7")
    assert hp.sampling and (hp.num_samples, hp.seed, hp.sampling_topk) == (5, 3, 4)
    assert not parse_decode_hparams("").sampling
    for bad, words in [("sampling_method=beam", "sampling_method"),
                       ("sampling_temp=0", "sampling_temp"), ("sampling_topp=0", "sampling_topp"),
                       ("sampling_topp=1.01", "sampling_topp"), ("num_samples=0", "num_samples"),
                       ("num_samples=3", "sampling_method=random"), ("seed=-2", "seed"),
                       ("seed=4294967296", "seed"), ("sampling_topk=-1", "sampling_topk")]:
        with pytest.raises(ValueError, match=words):
            parse_decode_hparams(bad)


SENTENCES = ["twenty-one", "three hundred and five", "seven thousand and eleven", "nine",
             "four hundred", "eighty-eight"]


def sample_translations(model, vocabulary, sentences, sentence_ids=None, jit_compile=False,
                        **hparams):
    from t2t_lite.decoding.translator import Translator
    text = ",".join(f"{key}={value}" for key, value in {
        "sampling_method": "random", "num_samples": 3, "seed": 17, "extra_length": 4,
        **hparams}.items())
    translator = Translator.from_decode_hparams(model, vocabulary, parse_decode_hparams(text),
                                                jit_compile=jit_compile)
    encoded, _ = translator.encode(sentences)
    return translator.translate_encoded(encoded, sentence_ids=sentence_ids)


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [False, True])
def test_translator_samples_do_not_depend_on_batching(jit_compile):
    from t2t_lite.runs.loading import load_trained_model

    from run_dir_helpers import tiny_run_dir
    _, _, model, vocabulary = load_trained_model(tiny_run_dir())
    whole = sample_translations(model, vocabulary, SENTENCES, jit_compile=jit_compile)
    assert all(len(samples) == 3 for samples in whole)
    assert any(len({text for text, _ in samples}) > 1 for samples in whole)
    # One sentence a batch, and the sentences in another order with their own ids.
    alone = sample_translations(model, vocabulary, SENTENCES, batch_size=8,
                                jit_compile=jit_compile)
    order = [3, 0, 5, 1, 4, 2]
    shuffled = sample_translations(model, vocabulary, [SENTENCES[i] for i in order],
                                   sentence_ids=order, jit_compile=jit_compile)
    for samples, wanted in zip(alone, whole):
        assert [text for text, _ in samples] == [text for text, _ in wanted]
        np.testing.assert_allclose([s for _, s in samples], [s for _, s in wanted], rtol=1e-5)
    for position, index in enumerate(order):
        assert [t for t, _ in shuffled[position]] == [t for t, _ in whole[index]]
    # Another seed draws other samples.
    other = sample_translations(model, vocabulary, SENTENCES, seed=18, jit_compile=jit_compile)
    assert [[t for t, _ in s] for s in other] != [[t for t, _ in s] for s in whole]


@pytest.mark.slow
def test_decoder_samples_with_int8(capsys, tmp_path):
    from t2t_lite.commands import decoder

    from run_dir_helpers import tiny_run_dir
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(["twenty-one", "", "nine"]) + "\n")
    flags = ["--output_dir", str(tiny_run_dir()), "--decode_from_file", str(source),
             "--decode_to_file", str(target), "--quantize=int8", "--decode_hparams",
             "sampling_method=random,num_samples=4,seed=3,sampling_topk=5,extra_length=4"]
    assert decoder.main(flags) == 0, capsys.readouterr().err
    lines = target.read_text().split("\n")[:-1]
    assert len(lines) == 3 and lines[1] == ""
    for line in (lines[0], lines[2]):
        fields = line.split("\t")
        assert len(fields) == 8          # 4 (sample, score) pairs
        assert all(float(score) <= 0 for score in fields[1::2])
    assert decoder.main(flags) == 0      # the same seed: the same samples
    assert target.read_text().split("\n")[:-1] == lines
