"""Vocabularies: in-graph tokenize/detokenize, pad=0/EOS=1, round trips, file handling."""
import gzip

import pytest
import tensorflow as tf

from t2t_lite.data import vocab as vocab_lib

SENTENCES = [
    "A man in an orange hat starring at something.",
    "Two dogs play in the snow, while a child watches.",
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Zwei Hunde spielen im Schnee, während ein Kind zuschaut.",
] * 50


@pytest.fixture(scope="module")
def spm_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("spm") / "v.spm.model"
    return vocab_lib.train_sentencepiece(SENTENCES, path, vocab_size=300)


def test_sentencepiece_reserved_ids_and_size(spm_vocab):
    assert spm_vocab.vocab_size == 300
    assert isinstance(spm_vocab, tf.Module)
    ids = spm_vocab.encode("Two dogs play.")
    assert ids and vocab_lib.PAD_ID not in ids and vocab_lib.EOS_ID not in ids


def test_sentencepiece_round_trip_incl_unseen_characters(spm_vocab):
    # byte_fallback: characters never seen in training ("ß", "€", "Ω") survive.
    for text in SENTENCES[:4] + ["Größe: 5 € Ω", "two  spaces inside and after  "]:
        assert spm_vocab.decode(spm_vocab.encode(text)) == text
    # The one loss: SentencePiece's decoder drops leading whitespace.
    assert spm_vocab.decode(spm_vocab.encode("  lead")) == "lead"


def test_detokenize_dense_stops_at_eos_and_ignores_pad(spm_vocab):
    a, b = spm_vocab.encode("Two dogs"), spm_vocab.encode("A man")
    garbage = spm_vocab.encode("snow")
    dense = tf.constant([a + [1] + garbage + [0], b + [0] * (len(a) - len(b) + 2 + len(garbage))])
    assert spm_vocab.detokenize(dense).numpy().tolist() == [b"Two dogs", b"A man"]
    ragged = spm_vocab.tokenize(tf.constant(["Two dogs", "A man"]))
    assert ragged.dtype == tf.int32 and ragged.shape.rank == 2
    assert spm_vocab.detokenize(ragged).numpy().tolist() == [b"Two dogs", b"A man"]


def test_load_and_copy_to_run_dir(spm_vocab, tmp_path):
    copy = spm_vocab.copy_to(tmp_path / "run")
    loaded = vocab_lib.load_vocabulary(copy)
    assert loaded.encode("Two dogs play.") == spm_vocab.encode("Two dogs play.")


def test_vocab_saved_model_round_trip(spm_vocab, tmp_path):
    module = tf.Module()
    module.vocab = spm_vocab
    module.tokenize = tf.function(spm_vocab.tokenize,
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    ids = restored.tokenize(tf.constant(["Two dogs play."]))
    assert ids.to_list() == [spm_vocab.encode("Two dogs play.")]


def test_wordpiece_round_trip_on_single_spaced_text(tmp_path, multi30k_dir):
    with gzip.open(multi30k_dir / "train.en.gz", "rt", encoding="utf-8") as handle:
        lines = [next(handle).rstrip("\n") for _ in range(1000)]
    vocab = vocab_lib.train_wordpiece(lines, tmp_path / "v.wordpiece.txt", vocab_size=800)
    assert vocab.vocab_size <= 800 * 1.1
    assert vocab.encode("a")[0] not in (0, 1, 2)
    back = [t.decode() for t in vocab.detokenize(vocab.tokenize(tf.constant(lines))).numpy()]
    # Lines with doubled spaces or characters absent from the learned alphabet differ.
    assert sum(a == b for a, b in zip(lines, back)) >= 0.97 * len(lines)
    assert vocab.decode(vocab.encode("A dog, running.")) == "A dog, running."


def test_bad_vocab_files(tmp_path):
    with pytest.raises(vocab_lib.VocabError, match="does not exist; run t2t-lite-datagen"):
        vocab_lib.load_vocabulary(tmp_path / "missing.spm.model")
    (tmp_path / "v.wordpiece.txt").write_text("a\nb\nc\n")
    with pytest.raises(vocab_lib.VocabError, match="must start with the lines"):
        vocab_lib.load_vocabulary(tmp_path / "v.wordpiece.txt")
    (tmp_path / "v.bin").write_text("x")
    with pytest.raises(vocab_lib.VocabError, match="unknown vocabulary kind"):
        vocab_lib.load_vocabulary(tmp_path / "v.bin")
