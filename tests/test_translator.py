"""Translator: cached decoding through the real Transformer against the reference search
over the uncached model, the plan it decodes with, length buckets, batching order,
truncation, N-best lists."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import reference_beam_search as reference
from t2t_lite import registry
from t2t_lite.data.vocab import EOS_ID
from t2t_lite.decoding import DecodingPlan
from t2t_lite.decoding.translator import Translator, bucket_lengths
from t2t_lite.models.transformer import Transformer
from t2t_lite.runs.loading import load_trained_model

from run_dir_helpers import tiny_run_dir
from uncached_model import uncached_logits_fn

VOCAB = 24
EXTRA = 6


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(7)
    hparams = registry.hparams("transformer_tiny", "num_hidden_layers=2,hidden_size=32,"
                               "filter_size=64,num_heads=4,max_length=32")
    model = Transformer(hparams, VOCAB)
    model.build(None)
    return model


@pytest.fixture(scope="module")
def trained_run():
    """(model, vocabulary) of the shared tiny run directory (random weights)."""
    _, _, model, vocabulary = load_trained_model(tiny_run_dir())
    return model, vocabulary


def random_inputs(lengths, width, seed=0):
    rng = np.random.default_rng(seed)
    batch = np.zeros([len(lengths), width], np.int32)
    for row, length in enumerate(lengths):
        batch[row, :length - 1] = rng.integers(3, VOCAB, length - 1)
        batch[row, length - 1] = EOS_ID
    return tf.constant(batch)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["growing_cache", "xla_fixed_cache"])
@pytest.mark.parametrize("beam_size,alpha", [(1, 0.0), (4, 0.6)])
def test_cached_translate_ids_equals_uncached_reference(model, beam_size, alpha, jit_compile):
    # Without XLA the self-attention cache grows a position per step; under XLA it is
    # preallocated. max_input_length 8: a single bucket, so translate_ids traces one search.
    translator = Translator(model, vocabulary=_NoVocab(), beam_size=beam_size, alpha=alpha,
                            extra_length=EXTRA, max_input_length=8, jit_compile=jit_compile)
    inputs = random_inputs([5, 3, 8, 1], width=8)
    ids, scores = translator.translate_ids(inputs)
    assert ids.shape == (4, beam_size, translator.max_output_length)

    max_length = 8 + EXTRA   # the first bucket (8) + extra_length
    lengths = tf.reduce_sum(tf.cast(inputs > 0, tf.int32), axis=1)
    ref_ids, ref_scores = reference.beam_search(uncached_logits_fn(model, inputs),
                                                lengths.numpy() + EXTRA, beam_size, alpha,
                                                max_length=max_length)
    np.testing.assert_array_equal(ids[:, :, :max_length].numpy(), ref_ids)
    assert not np.any(ids[:, :, max_length:].numpy())
    np.testing.assert_allclose(scores.numpy(), ref_scores, rtol=1e-4, atol=1e-5)
    # Every hypothesis is EOS-terminated within input length + extra_length.
    for row, length in enumerate(lengths.numpy()):
        best = list(ids[row, 0].numpy())
        assert EOS_ID in best and best.index(EOS_ID) < length + EXTRA


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_the_translator_decides_its_plan_once(model, beam_size, jit_compile):
    """XLA needs a preallocated cache and a fixed batch; without it the cache grows and
    beam search drops finished sentences; a float32 model never takes its log-probabilities
    from the softmax."""
    translator = Translator(model, vocabulary=_NoVocab(), beam_size=beam_size,
                            jit_compile=jit_compile)
    assert translator.plan == DecodingPlan(
        beam_size, growing_cache=not jit_compile, shrink=not jit_compile and beam_size > 1)
    assert translator.plan == DecodingPlan.choose(beam_size, jit_compile, "none")


def test_bucket_lengths():
    assert bucket_lengths(64) == (8, 16, 32, 64)
    assert bucket_lengths(24) == (8, 16, 24)
    assert bucket_lengths(5) == (5,)
    with pytest.raises(ValueError, match="max_input_length"):
        bucket_lengths(1)


def test_translate_ids_cuts_rows_longer_than_max_input_length(model):
    translator = Translator(model, _NoVocab(), beam_size=1, extra_length=EXTRA,
                            max_input_length=8)
    long_inputs = random_inputs([12, 4], width=12, seed=3)
    cut = long_inputs.numpy()[:, :8].copy()
    cut[0, 7] = EOS_ID
    ids, _ = translator.translate_ids(long_inputs)
    expected, _ = translator.translate_ids(tf.constant(cut))
    np.testing.assert_array_equal(ids.numpy(), expected.numpy())


def test_translate_keeps_input_order_across_buckets_and_batches(trained_run):
    model, vocabulary = trained_run
    sentences = ["one", "ninety-nine thousand, nine hundred and ninety-nine", "", "twelve",
                 "four thousand, five hundred and sixty-seven", "one", "seven hundred"]
    # 8-token batches: one sentence (or two) per batch, several buckets.
    translator = Translator(model, vocabulary, beam_size=2, extra_length=EXTRA,
                            batch_size=16)
    encoded, truncations = translator.encode(sentences)
    assert not truncations and all(ids[-1] == EOS_ID for ids in encoded)
    batches = translator.batches(encoded)
    assert len({bucket for bucket, _ in batches}) >= 2 and len(batches) >= 4
    assert sorted(i for _, indices in batches for i in indices) == list(range(len(sentences)))
    together = translator.translate(sentences)
    alone = [translator.translate([sentence])[0] for sentence in sentences]
    assert together == alone
    assert together[0] == together[5]   # the same sentence twice


def test_encode_truncates_to_max_input_length(trained_run):
    model, vocabulary = trained_run
    translator = Translator(model, vocabulary, beam_size=1, extra_length=2,
                            max_input_length=6)
    long = "ninety-nine thousand, nine hundred and ninety-nine"
    encoded, truncations = translator.encode(["one", long])
    full = len(vocabulary.encode(long)) + 1
    assert full > 6
    assert [(t.index, t.num_tokens, t.kept) for t in truncations] == [(1, full, 6)]
    assert len(encoded[1]) == 6 and encoded[1][-1] == EOS_ID
    assert encoded[1][:5] == vocabulary.encode(long)[:5]
    assert len(translator.translate(["one", long])) == 2


def test_translate_nbest_with_return_beams(trained_run):
    model, vocabulary = trained_run
    translator = Translator(model, vocabulary, beam_size=3, alpha=0.6, extra_length=EXTRA,
                            return_beams=True)
    nbest = translator.translate_nbest(["twenty-one", "three hundred"])
    for beams in nbest:
        assert len(beams) == 3
        scores = [score for _, score in beams]
        assert scores == sorted(scores, reverse=True) and all(np.isfinite(scores))
    assert [beams[0][0] for beams in nbest] == translator.translate(["twenty-one",
                                                                     "three hundred"])


class _NoVocab:
    """translate_ids never tokenises; the Translator only needs detokenize to exist."""

    def detokenize(self, ids):
        return tf.strings.as_string(tf.reduce_sum(ids, axis=1))
