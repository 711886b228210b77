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
                                  input_signature=[tf.TensorSpec([None], tf.string)],
                                  autograph=False)
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


def test_pieces_name_every_id_in_order(spm_vocab, tmp_path):
    pieces = spm_vocab.pieces()
    assert len(pieces) == spm_vocab.vocab_size and pieces[:3] == ["<pad>", "</s>", "<unk>"]
    ids = spm_vocab.encode("Two dogs")
    assert "".join(pieces[i] for i in ids).replace("\u2581", " ") == " Two dogs"
    words = vocab_lib.train_wordpiece(["dogs run", "dogs play", "cats run"] * 5,
                                      tmp_path / "w.wordpiece.txt", vocab_size=60,
                                      lower_thresh=1)
    pieces = words.pieces()
    assert len(pieces) == words.vocab_size and pieces[:3] == ["<pad>", "<EOS>", "<unk>"]
    assert [pieces[i] for i in words.encode("dogs run")] == ["dogs", "run"]


def test_token_labels_come_from_the_vocabulary_not_its_class():
    from t2t_lite.monitoring.attention import EOS_LABEL, START_LABEL, TokenLabeler

    class Letters(vocab_lib.Vocabulary):
        def __init__(self):
            super().__init__("letters.txt", name="letters")

        @property
        def vocab_size(self):
            return 5

        def pieces(self):
            return ["<pad>", "<EOS>", "<unk>", "a", "a_very_long_piece_of_text"]

    labels = TokenLabeler(Letters())([0, 3, 4, 1, 9])
    assert labels[:2] == (START_LABEL, "a") and labels[3:] == (EOS_LABEL, "<9>")
    assert labels[2].endswith("…") and "a_very_long_piece_of_text".startswith(labels[2][:-1])


def test_bad_vocab_files(tmp_path):
    with pytest.raises(vocab_lib.VocabError, match="does not exist; run t2t-lite-datagen"):
        vocab_lib.load_vocabulary(tmp_path / "missing.spm.model")
    (tmp_path / "v.wordpiece.txt").write_text("a\nb\nc\n")
    with pytest.raises(vocab_lib.VocabError, match="must start with the lines"):
        vocab_lib.load_vocabulary(tmp_path / "v.wordpiece.txt")
    (tmp_path / "v.bin").write_text("x")
    with pytest.raises(vocab_lib.VocabError, match="unknown vocabulary kind"):
        vocab_lib.load_vocabulary(tmp_path / "v.bin")


def test_pad_and_eos_ids_are_defined_once_in_the_vocabulary_module():
    """The model, losses, metrics and decoders import PAD_ID/EOS_ID from data/vocab.py;
    a second ``PAD_ID = ...`` elsewhere could silently disagree with the vocabulary."""
    import ast
    from pathlib import Path

    import t2t_lite
    root = Path(t2t_lite.__file__).parent
    defined = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name) and target.id in ("PAD_ID", "EOS_ID"):
                    defined.setdefault(target.id, []).append(str(path.relative_to(root)))
    assert defined == {"PAD_ID": ["data/vocab.py"], "EOS_ID": ["data/vocab.py"]}
    assert (vocab_lib.PAD_ID, vocab_lib.EOS_ID) == (0, 1)   # tensor2tensor's ids
