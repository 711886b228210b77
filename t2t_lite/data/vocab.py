"""Shared source/target vocabularies applied in the TensorFlow graph.

Two kinds, both ``tf.Module`` objects so an exporter can bake them into a SavedModel:

* ``SentencePieceVocab``: a BPE model trained with the ``sentencepiece`` package and applied
  with ``tensorflow_text.SentencepieceTokenizer``. Stored as ``<name>.spm.model``.
* ``WordPieceVocab``: word-pieces learned with tf-text's BERT vocabulary learner and applied
  with ``tensorflow_text.FastWordpieceTokenizer`` after splitting on single spaces. Stored
  as ``<name>.wordpiece.txt`` (one piece a line; ``##`` marks a word continuation).

Ids follow tensor2tensor: pad = 0, EOS = 1, unknown = 2. ``tokenize`` never appends EOS
(the input pipeline does). ``detokenize`` stops at the first EOS and ignores pad.
"""
from __future__ import annotations

import io
import random
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, List, Sequence, Union

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from t2t_lite.errors import UserError
from t2t_lite.quiet_tf import filtered_stderr, quiet_requested
from t2t_lite.user_paths import write_atomically

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
SPM_SUFFIX = ".spm.model"
WORDPIECE_SUFFIX = ".wordpiece.txt"
_WORDPIECE_RESERVED = ("<pad>", "<EOS>", "<unk>")


class VocabError(UserError):
    """A vocabulary file that is missing, of an unknown kind, or unusable."""


def _keep_mask(ids: tf.RaggedTensor) -> tf.RaggedTensor:
    """True for ids before the first EOS that are not pad ([n, None] bool)."""
    before_eos = tf.math.equal(tf.math.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
    return tf.math.logical_and(before_eos, tf.not_equal(ids, PAD_ID))


def _as_ragged(ids: Union[tf.Tensor, tf.RaggedTensor]) -> tf.RaggedTensor:
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int32)
    return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32))


class Vocabulary(tf.Module):
    """Base class: in-graph ``tokenize``/``detokenize`` plus Python ``encode``/``decode``.

    Subclasses implement ``_tokenize(strings [n]) -> int32 ragged [n, None]``,
    ``_detokenize(ids int32 ragged [n, None], no pad/EOS) -> tf.string [n]``, ``vocab_size``
    and ``pieces()`` (the token string of every id, e.g. to label attention plots).
    """

    def __init__(self, path: Union[str, Path], name: str):
        super().__init__(name=name)
        self.path = Path(path)

    # In-graph API -------------------------------------------------------------------
    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """``tf.string [n]`` -> ``int32`` ragged ``[n, None]`` ids, without EOS."""
        return tf.cast(self._tokenize(tf.convert_to_tensor(strings, tf.string)), tf.int32)

    def detokenize(self, ids: Union[tf.Tensor, tf.RaggedTensor]) -> tf.Tensor:
        """int ids, ragged ``[n, None]`` or dense 0/EOS-padded ``[n, t]`` -> ``tf.string [n]``.

        Each row is cut at its first EOS; pad ids are ignored.
        """
        ragged = _as_ragged(ids)
        kept = tf.ragged.boolean_mask(ragged, _keep_mask(ragged))
        return self._detokenize(kept)

    # Python helpers -----------------------------------------------------------------
    def encode(self, text: str) -> List[int]:
        """One string -> its ids (no EOS)."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str], batch_size: int = 2048) -> List[List[int]]:
        """Many strings -> their ids (no EOS), tokenized in graph in batches."""
        out: List[List[int]] = []
        for start in range(0, len(texts), batch_size):
            chunk = tf.constant(list(texts[start:start + batch_size]), tf.string)
            out.extend(self._tokenize_fn(chunk).to_list())
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; stops at the first EOS, ignores pad."""
        ids = [int(i) for i in ids]
        if not ids:
            return ""
        return self._detokenize_fn(tf.constant([ids], tf.int32)).numpy()[0].decode("utf-8")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def _tokenize_fn(self, strings):
        return self.tokenize(strings)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    def _detokenize_fn(self, ids):
        return self.detokenize(ids)

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def pieces(self) -> List[str]:
        """The token string of every id, ``vocab_size`` of them in id order, as the
        vocabulary file holds them (SentencePiece pieces keep their ``\u2581``, word-piece
        continuations their ``##``); reads the file, so call it once."""
        raise NotImplementedError

    def copy_to(self, directory: Union[str, Path]) -> Path:
        """Copies the vocabulary file into ``directory`` (a run directory); returns the copy."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / self.path.name
        if target.resolve() != self.path.resolve():
            write_atomically(target, self.path.read_bytes())
        return target

    def _tokenize(self, strings):
        raise NotImplementedError

    def _detokenize(self, ids):
        raise NotImplementedError


class SentencePieceVocab(Vocabulary):
    """A SentencePiece (BPE) model applied with ``tensorflow_text.SentencepieceTokenizer``."""

    def __init__(self, path: Union[str, Path]):
        super().__init__(path, name="sentencepiece_vocab")
        model = Path(path).read_bytes()
        processor = spm.SentencePieceProcessor(model_proto=model)
        if processor.pad_id() != PAD_ID or processor.eos_id() != EOS_ID:
            raise VocabError(f"{path}: SentencePiece model has pad={processor.pad_id()}, "
                             f"eos={processor.eos_id()}; t2t-lite needs pad=0, eos=1 "
                             f"(train it with train_sentencepiece)")
        self._size = processor.get_piece_size()
        # Its own SentencePiece copy logs "precompiled_charsmap is empty" (LOG(INFO)).
        with filtered_stderr(quiet_requested()):
            self.tokenizer = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)

    @property
    def vocab_size(self) -> int:
        return self._size

    def pieces(self) -> List[str]:
        processor = spm.SentencePieceProcessor(model_proto=self.path.read_bytes())
        return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]

    def _tokenize(self, strings):
        return self.tokenizer.tokenize(strings)

    def _detokenize(self, ids):
        return self.tokenizer.detokenize(ids)


class WordPieceVocab(Vocabulary):
    """Word-pieces applied with ``tensorflow_text.FastWordpieceTokenizer``.

    Text is split on single spaces (so detokenisation, which joins words with one space,
    gives back text whose words are separated by single spaces); each word becomes
    pieces, continuations prefixed with ``##``.
    """

    def __init__(self, path: Union[str, Path]):
        super().__init__(path, name="wordpiece_vocab")
        pieces = Path(path).read_text(encoding="utf-8").split("\n")
        if pieces and pieces[-1] == "":
            pieces.pop()
        if tuple(pieces[:3]) != _WORDPIECE_RESERVED:
            raise VocabError(f"{path}: a word-piece vocabulary must start with the lines "
                             f"{', '.join(_WORDPIECE_RESERVED)} (pad=0, EOS=1, unk=2); "
                             f"rebuild it with train_wordpiece")
        self._size = len(pieces)
        self.tokenizer = tf_text.FastWordpieceTokenizer(
            vocab=pieces, suffix_indicator="##", unknown_token="<unk>",
            no_pretokenization=True, support_detokenization=True, token_out_type=tf.int32)

    @property
    def vocab_size(self) -> int:
        return self._size

    def pieces(self) -> List[str]:
        return self.path.read_text(encoding="utf-8").split("\n")[:self._size]

    def _tokenize(self, strings):
        words = tf.strings.split(strings, sep=" ")  # [n, words]
        pieces = self.tokenizer.tokenize(words.flat_values)  # [total words, pieces]
        # Empty words (from doubled spaces) would vanish; they yield no pieces.
        per_word = tf.RaggedTensor.from_row_splits(pieces.flat_values, pieces.row_splits)
        return tf.RaggedTensor.from_row_splits(per_word, words.row_splits).merge_dims(1, 2)

    def _detokenize(self, ids):
        return self.tokenizer.detokenize(ids)


# Training ---------------------------------------------------------------------------
def reservoir_sample(texts: Iterator[str], size: int, seed: int = 1) -> Iterator[str]:
    """A uniform sample of at most ``size`` of ``texts`` (memory: ``size`` strings).

    When there are at most ``size`` texts, all of them in their order; otherwise the
    sample in reservoir order. Streams: yields only after ``texts`` is exhausted.
    """
    rng = random.Random(seed)
    sample: List[str] = []
    for seen, text in enumerate(texts):
        if seen < size:
            sample.append(text)
        else:
            slot = rng.randrange(seen + 1)
            if slot < size:
                sample[slot] = text
    yield from sample


def train_sentencepiece(texts: Iterable[str], path: Union[str, Path], vocab_size: int, *,
                        model_type: str = "bpe", byte_fallback: bool = True,
                        character_coverage: float = 1.0, max_sentences: int = 2_000_000,
                        seed: int = 1,
                        user_defined_symbols: Sequence[str] = ()) -> SentencePieceVocab:
    """Trains a shared SentencePiece model on ``texts`` and writes it to ``path`` atomically.

    Normalisation is the identity and extra whitespace is kept, so detokenising gives
    back the original text; with ``byte_fallback`` unseen characters survive as bytes.
    ``user_defined_symbols`` (pieces, ``\u2581``-prefixed for a word start) are always
    whole pieces, with ids right after pad, EOS and unk.
    SentencePiece samples ``max_sentences`` of the texts when there are more (0: keeps
    them all; 1..100 is refused by SentencePiece).
    """
    path = Path(path)
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
        model_type=model_type, pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
        user_defined_symbols=list(user_defined_symbols), byte_fallback=byte_fallback,
        character_coverage=character_coverage, normalization_rule_name="identity",
        remove_extra_whitespaces=False, input_sentence_size=max_sentences,
        shuffle_input_sentence=True, hard_vocab_limit=False, minloglevel=2, num_threads=2)
    write_atomically(path, model.getvalue())
    return SentencePieceVocab(path)


def train_wordpiece(texts: Iterable[str], path: Union[str, Path], vocab_size: int, *,
                    max_sentences: int = 2_000_000, lower_thresh: int = 2) -> WordPieceVocab:
    """Learns word-pieces with tf-text's learner and writes them atomically.

    Words are counted after splitting on single spaces, as ``WordPieceVocab`` splits
    them; no lower-casing or normalisation. ``vocab_size`` is an upper bound (the learner
    searches a count threshold that lands within a few percent of it).
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    counts: Counter = Counter()
    for i, text in enumerate(texts):
        if i >= max_sentences:
            break
        counts.update(word for word in text.split(" ") if word)
    if not counts:
        raise VocabError(f"no words to learn a word-piece vocabulary for {path} from")
    # The learner binary-searches a count threshold; none above the top count matters.
    pieces = learner.learn(counts.items(), vocab_size=vocab_size,
                           reserved_tokens=list(_WORDPIECE_RESERVED), lower_thresh=lower_thresh,
                           upper_thresh=max(counts.values()) + 1)
    write_atomically(path, "\n".join(pieces) + "\n")
    return WordPieceVocab(path)


def load_vocabulary(path: Union[str, Path]) -> Vocabulary:
    """Loads a vocabulary file by its suffix (``.spm.model`` or ``.wordpiece.txt``)."""
    path = Path(path)
    if not path.is_file():
        raise VocabError(f"vocabulary file {path} does not exist; run t2t-lite-datagen for "
                         f"this problem with --data_dir={path.parent}")
    if path.name.endswith(SPM_SUFFIX):
        return SentencePieceVocab(path)
    if path.name.endswith(WORDPIECE_SUFFIX):
        return WordPieceVocab(path)
    raise VocabError(f"{path}: unknown vocabulary kind; expected a name ending in "
                     f"{SPM_SUFFIX} or {WORDPIECE_SUFFIX}")

