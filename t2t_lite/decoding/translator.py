"""Translating text with a trained model: tokenise, batch by length, beam search, detokenise.

    translator = Translator.from_decode_hparams(model, vocabulary, decode_hparams)
    translator.translate(["a sentence", "another"])        # -> best translation each
    translator.translate_nbest(["a sentence"])             # -> [[(text, score), ...]]

Inputs are tokenised with the run's ``Vocabulary``, EOS appended, truncated to
``max_input_length`` tokens (EOS included; 0 = the model's ``hparams.max_length``), sorted
by length and cut into batches of about ``batch_size`` source tokens. Each batch is padded
to a bucket length ``L`` (powers of two from 8, then ``max_input_length``), so the search
is traced once per bucket. A sentence of ``n`` tokens (EOS included) may produce
``n + extra_length`` tokens (EOS included), as the paper decodes. Beam size 1 is greedy
search; otherwise ``beam_search`` with GNMT's length penalty ``alpha``. With
``return_beams`` the search does not stop early, so every one of the ``beam_size``
hypotheses is final (an N-best list). With ``mbr`` the search does not stop early either,
and each sentence's N-best list is reordered by minimum Bayes risk (``decoding.mbr``).
With a ``sampler`` (``sampling_method=random``) each sentence gets ``num_samples`` random
samples instead (``sample_search``), drawn from a stream keyed by the sentence's index in
the list given to ``translate_encoded`` (or ``sentence_ids``), so a sentence's samples do
not depend on its batch. Given
``prefixes`` (token ids per sentence; empty: none), each output starts with its prefix and
the search or the sampling continues it (``PrefixConstraint``). A ``constraint`` (e.g.
parsing's ``TreeConstraint``, from ``Problem.decode_constraint``) restricts the searches
and the sampling to outputs it allows.

``translate_ids`` is one ``tf.function`` over any ``[b, s]`` batch (``s`` padded in the graph
to its bucket by ``tf.switch_case``): the exporter bakes it into a SavedModel. With a
sampler, ``sample_ids`` is the same with each row's stream id and seed as inputs.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import random
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocab import EOS_ID, PAD_ID, Vocabulary
from t2t_lite.decoding.beam_search import beam_search
from t2t_lite.decoding.config import DecodeHParams
from t2t_lite.decoding.greedy import greedy_search
from t2t_lite.decoding.mbr import Hypotheses, mbr_order
from t2t_lite.decoding.plan import DecodingPlan
from t2t_lite.decoding.prefix import PrefixConstraint, first_refusal, pad_prefixes
from t2t_lite.decoding.sampling import Sampler, sample_search
from t2t_lite.decoding.search_common import SearchConstraint
from t2t_lite.decoding.step import DecodingState, step_function
from t2t_lite.errors import UserError
from t2t_lite.layers.int8 import quantization_of

logger = logging.getLogger(__name__)

SMALLEST_BUCKET = 8


@dataclasses.dataclass(frozen=True)
class Truncation:
    """Sentence ``index`` had ``num_tokens`` tokens (EOS included); ``kept`` were decoded."""

    index: int
    num_tokens: int
    kept: int


def bucket_lengths(max_input_length: int) -> Tuple[int, ...]:
    """Padded input lengths: 8, 16, 32, ... below ``max_input_length``, then it."""
    if max_input_length < 2:
        raise UserError(f"max_input_length must be >= 2 (a token and EOS), got "
                        f"{max_input_length}")
    lengths, length = [], SMALLEST_BUCKET
    while length < max_input_length:
        lengths.append(length)
        length *= 2
    return tuple(lengths) + (max_input_length,)


class Translator:
    """Batch translation with a model that implements the step interface.

    Args:
      model: a ``DecodingModel`` (``decoding_state``, ``decode_step``, ``vocab_size``), e.g.
        ``Transformer``, with ``hparams.max_length`` and ``hparams.pos`` (they bound the
        lengths) and its variables restored.
      vocabulary: the run's shared ``Vocabulary``.
      beam_size: hypotheses per sentence; 1 = greedy search.
      alpha: GNMT length-penalty exponent.
      extra_length: a sentence of ``n`` tokens may produce ``n + extra_length`` tokens.
      max_input_length: longer inputs are truncated to it (EOS included); 0 = the model's
        ``hparams.max_length``.
      return_beams: decode complete N-best lists (no early stop).
      mbr: decode complete N-best lists and order each by minimum Bayes risk (``mbr_order``),
        so that ``translate`` gives the MBR choice.
      jit_compile: compile the search with XLA (batch rows are then padded to powers of two
        so that few shapes are compiled).
      batch_size: source tokens (padded) per batch.
      constraint: restricts the search (``initial_state(inputs [b, L], decode_length [b])``,
        ``allowed``, ``update``); None = unconstrained.
      sampler: draw ``num_samples`` random samples per sentence instead of searching
        (``beam_size`` and ``return_beams`` are then unused); None = search.
      num_samples: samples per sentence with a ``sampler``.

    Attributes:
      plan: the ``DecodingPlan`` of every search, decided here once from ``beam_size``,
        ``jit_compile`` and the model's quantization (so quantize the model before building
        its Translator).
    """

    def __init__(self, model, vocabulary: Vocabulary, beam_size: int = 4, alpha: float = 0.6,
                 extra_length: int = 50, max_input_length: int = 0, return_beams: bool = False,
                 jit_compile: bool = False, batch_size: int = 4096,
                 constraint: Optional[SearchConstraint] = None,
                 sampler: Optional[Sampler] = None, num_samples: int = 1,
                 mbr: bool = False):
        if beam_size < 1 or extra_length < 0 or alpha < 0 or batch_size < 1:
            raise UserError(f"Translator needs beam_size >= 1, extra_length >= 0, alpha >= 0 "
                            f"and batch_size >= 1; got beam_size={beam_size}, extra_length="
                            f"{extra_length}, alpha={alpha}, batch_size={batch_size}")
        self.model = model
        self.vocabulary = vocabulary
        self.beam_size = int(beam_size)
        self.alpha = float(alpha)
        self.extra_length = int(extra_length)
        self.return_beams = bool(return_beams)
        self.jit_compile = bool(jit_compile)
        self.batch_size = int(batch_size)
        self.constraint = constraint
        self.sampler = sampler
        self.num_samples = int(num_samples)
        self.mbr = bool(mbr)
        if self.num_samples < 1:
            raise UserError(f"num_samples must be >= 1, got {num_samples}")
        hparams = model.hparams
        self.max_input_length = int(max_input_length or hparams.max_length)
        # Learned positions exist only up to max_length: inputs and outputs must fit.
        self._max_positions = hparams.max_length if hparams.pos == "emb" else None
        if self._max_positions is not None:
            self.max_input_length = min(self.max_input_length, self._max_positions)
        self.buckets = bucket_lengths(self.max_input_length)
        self.vocab_size = int(model.vocab_size)
        if sampler is None:
            self.plan = DecodingPlan.choose(self.beam_size, self.jit_compile,
                                            quantization_of(model))
        else:   # m samples a sentence: the step's rows as beam search's k beams
            self.plan = DecodingPlan(beam_size=self.num_samples,
                                     growing_cache=not self.jit_compile)
        self._search_fn = tf.function(self._search, autograph=False,
                                      jit_compile=self.jit_compile)
        self._bucket_fns: Dict[Tuple[Optional[int], bool], Callable] = {}
        self._detokenize_fn = tf.function(
            vocabulary.detokenize, input_signature=[tf.TensorSpec([None, None], tf.int32)],
            autograph=False)
        self.translate_ids = tf.function(
            self._translate_ids, input_signature=[tf.TensorSpec([None, None], tf.int32)],
            autograph=False)
        self.sample_ids = None
        if sampler is not None:
            self.sample_ids = tf.function(self._translate_ids, input_signature=[
                tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([None], tf.int64)], autograph=False)

    @classmethod
    def from_decode_hparams(cls, model, vocabulary: Vocabulary,
                            decode_hparams: DecodeHParams, jit_compile: bool = False,
                            constraint: Optional[SearchConstraint] = None) -> "Translator":
        """The ``Translator`` that decodes as ``decode_hparams`` say (beam size, alpha,
        extra length, batch size, N-best, input limit): the one way the decoder, the
        exporter, the trainer's evaluation and the attention summaries build theirs.
        ``sampling_method=random`` samples (``seed=-1``: a fresh seed, drawn here)."""
        sampler = None
        if decode_hparams.sampling:
            seed = decode_hparams.seed
            if seed < 0:
                seed = random.SystemRandom().randrange(2 ** 32)
            sampler = Sampler(temperature=decode_hparams.sampling_temp,
                              top_k=decode_hparams.sampling_topk,
                              top_p=decode_hparams.sampling_topp, seed=seed)
        return cls(model, vocabulary, beam_size=decode_hparams.beam_size,
                   alpha=decode_hparams.alpha, extra_length=decode_hparams.extra_length,
                   max_input_length=decode_hparams.max_input_length,
                   return_beams=decode_hparams.return_beams, jit_compile=jit_compile,
                   batch_size=decode_hparams.batch_size, constraint=constraint,
                   sampler=sampler, num_samples=decode_hparams.num_samples,
                   mbr=decode_hparams.mbr)

    # Shapes ---------------------------------------------------------------------------
    def output_length(self, input_length):
        """``T``, the id buffer length for inputs padded to ``input_length`` (an int, or an
        int32 scalar tensor inside the search traced for every bucket)."""
        length = input_length + self.extra_length
        if not self._max_positions:
            return length
        if isinstance(length, int):
            return min(length, self._max_positions)
        return tf.minimum(length, self._max_positions)

    @property
    def max_output_length(self) -> int:
        """``T`` of ``translate_ids``'s output (the largest bucket's)."""
        return self.output_length(self.buckets[-1])

    def bucket_for(self, length: int) -> int:
        """The smallest bucket length >= ``length`` (``length`` <= max_input_length)."""
        for bucket in self.buckets:
            if length <= bucket:
                return bucket
        raise ValueError(f"input of {length} tokens exceeds max_input_length "
                         f"{self.max_input_length}; truncate it first (encode does)")

    # The search, in the graph ---------------------------------------------------------
    def _search(self, inputs, sentence_ids=None, prefixes=None, seeds=None):
        """inputs int32 [b, L] (0-padded, EOS-terminated; L static under XLA) ->
        (ids int32 [b, k, T], scores float32 [b, k]) with T = output_length(L); ``k`` is
        ``num_samples`` with a sampler, whose stream takes each row's id from
        ``sentence_ids`` int32 [b] (None: the row index) and its seed from ``seeds``
        int64 [b] (None: the sampler's). ``prefixes`` int32 [b, P] (0-padded; None: no
        prefixes) start the outputs."""
        length = inputs.shape[1] if inputs.shape[1] is not None else tf.shape(inputs)[1]
        max_length = self.output_length(length)
        source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(inputs, PAD_ID), tf.int32), axis=1)
        decode_length = tf.minimum(source_lengths + self.extra_length, max_length)
        start = DecodingState(*self.model.decoding_state(inputs, max_length, self.plan))
        step_fn = step_function(self.model, self.plan)
        options = dict(max_length=max_length, eos_id=EOS_ID)
        constraint = self.constraint
        if prefixes is not None:
            constraint = PrefixConstraint(prefixes, self.vocab_size, constraint)
        if constraint is not None:
            options.update(constraint=constraint,
                           constraint_state=constraint.initial_state(inputs, decode_length))
        if self.sampler is not None:
            return sample_search(step_fn, start, self.plan, decode_length, self.sampler,
                                 sentence_ids, self.alpha, seeds=seeds, **options)
        if self.plan.beam_size == 1:
            ids, scores = greedy_search(step_fn, start, self.plan, decode_length, self.alpha,
                                        **options)
            return ids[:, None, :], scores[:, None]
        return beam_search(step_fn, start, self.plan, decode_length, self.alpha,
                           stop_early=not (self.return_beams or self.mbr), **options)

    def _bucket_fn(self, length: int, prefixed: bool = False) -> Callable:
        """The search for inputs [None, length], traced on first use: once per bucket
        under XLA (static shapes), once for every bucket without it ([None, None]; the
        growing cache and the id buffers take their lengths at run time). Batches are
        still padded to their bucket, so the numbers do not depend on this."""
        key = length if self.jit_compile else None
        if (key, prefixed) not in self._bucket_fns:
            specs = {}
            if self.sampler is not None:
                specs["sentence_ids"] = tf.TensorSpec([None], tf.int32)
            if prefixed:   # under XLA: as long as the outputs
                width = self.output_length(length) if self.jit_compile else None
                specs["prefixes"] = tf.TensorSpec([None, width], tf.int32)
            self._bucket_fns[key, prefixed] = self._search_fn.get_concrete_function(
                tf.TensorSpec([None, key], tf.int32), **specs)
        return self._bucket_fns[key, prefixed]

    def _translate_ids(self, inputs, sentence_ids=None, seeds=None):
        """inputs int32 [b, s] (0-padded, EOS-terminated) -> (ids int32 [b, k, T],
        scores float32 [b, k]), T = ``max_output_length``. Rows longer than
        ``max_input_length`` are cut to it, EOS last. With a sampler, ``sentence_ids``
        int32 [b] and ``seeds`` int64 [b] key each row's random stream (``_search``);
        ``sample_ids`` is this with both given, ``translate_ids`` with neither."""
        inputs = tf.cast(inputs, tf.int32)
        longest = self.buckets[-1]
        width = tf.shape(inputs)[1]
        cut = inputs[:, :longest]
        last = tf.where(tf.not_equal(cut[:, -1:], PAD_ID) & (width > longest), EOS_ID,
                        cut[:, -1:])
        inputs = tf.concat([cut[:, :-1], last], axis=1)
        width = tf.shape(inputs)[1]
        index = tf.reduce_sum(tf.cast(tf.constant(self.buckets) < width, tf.int32))
        total = self.max_output_length

        def branch(length):
            def run():
                padded = tf.pad(inputs, [[0, 0], [0, length - width]])
                padded = tf.ensure_shape(padded, [None, length])
                if sentence_ids is None and seeds is None:
                    ids, scores = self._search_fn(padded)
                else:
                    ids, scores = self._search_fn(padded, sentence_ids, seeds=seeds)
                ids = tf.pad(ids, [[0, 0], [0, 0], [0, total - self.output_length(length)]])
                return ids, scores
            return run

        return tf.switch_case(index, [branch(length) for length in self.buckets])

    # Python API -----------------------------------------------------------------------
    def encode(self, sentences: Sequence[str]) -> Tuple[List[List[int]], List[Truncation]]:
        """Sentences -> ids with EOS appended, cut to ``max_input_length``, and the cuts."""
        encoded, truncations = [], []
        for index, ids in enumerate(self.vocabulary.encode_batch(list(sentences))):
            ids = list(ids) + [EOS_ID]
            if len(ids) > self.max_input_length:
                truncations.append(Truncation(index, len(ids), self.max_input_length))
                ids = ids[:self.max_input_length - 1] + [EOS_ID]
            encoded.append(ids)
        return encoded, truncations

    def batches(self, encoded: Sequence[Sequence[int]]) -> List[Tuple[int, List[int]]]:
        """(bucket length, sentence indices) per batch: longest first, ``batch_size`` tokens."""
        order = sorted(range(len(encoded)), key=lambda i: (-len(encoded[i]), i))
        batches: List[Tuple[int, List[int]]] = []
        for index in order:
            bucket = self.bucket_for(len(encoded[index]))
            rows = max(1, self.batch_size // bucket)
            if batches and batches[-1][0] == bucket and len(batches[-1][1]) < rows:
                batches[-1][1].append(index)
            else:
                batches.append((bucket, [index]))
        return batches

    def translate_encoded(self, encoded: Sequence[Sequence[int]],
                          progress: Optional[Callable[[int], None]] = None,
                          sentence_ids: Optional[Sequence[int]] = None,
                          prefixes: Optional[Sequence[Sequence[int]]] = None
                          ) -> List[Hypotheses]:
        """EOS-terminated id lists (from ``encode``) -> each one's hypotheses, best first.

        A sentence gets ``beam_size`` (text, score) pairs, fewer when early stopping left
        a beam slot without a finished hypothesis; with a sampler, ``num_samples`` pairs
        in draw order, drawn from the stream of its id in ``sentence_ids`` (default: its
        index in ``encoded``). ``progress(n)`` is called after each batch with the number
        of sentences it held. ``prefixes``: each sentence's output prefix (token ids, no
        EOS; empty: none), kept at the start of every hypothesis; a prefix that does not
        fit the sentence's output length or that the constraint refuses is a
        ``UserError`` naming ``sentence_ids[i] + 1`` (the input line) before any decoding.
        """
        if sentence_ids is None:
            sentence_ids = range(len(encoded))
        if len(sentence_ids) != len(encoded):
            raise ValueError(f"{len(sentence_ids)} sentence_ids for {len(encoded)} sentences")
        if prefixes is not None:
            if len(prefixes) != len(encoded):
                raise ValueError(f"{len(prefixes)} prefixes for {len(encoded)} sentences")
            self.check_prefixes(encoded, prefixes, sentence_ids)
        results: List[Optional[Hypotheses]] = [None] * len(encoded)
        for bucket, indices in self.batches(encoded):
            rows = len(indices)
            padded_rows = _next_power_of_two(rows) if self.jit_compile else rows
            batch = np.zeros([padded_rows, bucket], np.int32)
            batch[rows:, 0] = EOS_ID  # filler rows under XLA: an empty sentence
            for row, index in enumerate(indices):
                batch[row, :len(encoded[index])] = encoded[index]
            arguments = {}
            if self.sampler is not None:
                ids_of_rows = np.zeros([padded_rows], np.int32)
                ids_of_rows[:rows] = [sentence_ids[index] for index in indices]
                arguments["sentence_ids"] = tf.constant(ids_of_rows)
            if prefixes is not None:
                arguments["prefixes"] = tf.constant(pad_prefixes(
                    [prefixes[index] for index in indices] + [[]] * (padded_rows - rows),
                    self.output_length(bucket)))
            ids, scores = self._bucket_fn(bucket, prefixes is not None)(tf.constant(batch),
                                                                         **arguments)
            ids, scores = ids[:rows], scores[:rows].numpy()
            k = ids.shape[1]
            texts = self._detokenize_fn(tf.reshape(ids, [rows * k, -1])).numpy()
            for row, index in enumerate(indices):
                results[index] = [(texts[row * k + j].decode("utf-8", errors="replace"),
                                   float(scores[row, j]))
                                  for j in range(k) if math.isfinite(scores[row, j])]
                if self.mbr:
                    results[index] = mbr_order(results[index])
            if progress is not None:
                progress(rows)
        return results  # type: ignore[return-value]

    def decode_length_of(self, encoded: Sequence[int]) -> int:
        """The most output tokens (EOS included) of the EOS-terminated source ``encoded``."""
        return min(len(encoded) + self.extra_length,
                   self.output_length(self.bucket_for(len(encoded))))

    def check_prefixes(self, encoded: Sequence[Sequence[int]],
                       prefixes: Sequence[Sequence[int]], sentence_ids: Sequence[int]) -> None:
        """Every prefix must leave room for EOS in its sentence's output and, with a
        constraint, be a start of an output the constraint allows; else a ``UserError``
        naming the input line (``sentence_ids[i] + 1``)."""
        for index, (source, prefix) in enumerate(zip(encoded, prefixes)):
            if len(prefix) + 1 > self.decode_length_of(source):
                raise UserError(
                    f"line {sentence_ids[index] + 1}: the prefix has {len(prefix)} tokens but "
                    f"the line's output holds at most {self.decode_length_of(source)} "
                    f"(EOS included); shorten the prefix or raise extra_length")
        rows = [index for index, prefix in enumerate(prefixes) if prefix]
        if self.constraint is None or not rows:
            return
        width = max(len(encoded[index]) for index in rows)
        inputs = np.zeros([len(rows), width], np.int32)
        for row, index in enumerate(rows):
            inputs[row, :len(encoded[index])] = encoded[index]
        lengths = np.array([self.decode_length_of(encoded[index]) for index in rows], np.int32)
        refusal = first_refusal(self.constraint, inputs, lengths,
                                pad_prefixes([prefixes[index] for index in rows]))
        if refusal is not None:
            row, position = refusal
            raise UserError(f"line {sentence_ids[rows[row]] + 1}: the prefix cannot start an "
                            f"output the problem's decode constraint allows (token "
                            f"{position + 1} is refused); fix or empty that prefix line")

    def translate_nbest(self, sentences: Sequence[str]) -> List[Hypotheses]:
        """Each sentence's hypotheses [(text, score)], best first, in input order."""
        encoded, truncations = self.encode(sentences)
        for cut in truncations:
            logger.warning("sentence %d has %d tokens (EOS included); truncated to %d",
                           cut.index, cut.num_tokens, cut.kept)
        return self.translate_encoded(encoded)

    def translate(self, sentences: Sequence[str]) -> List[str]:
        """The best translation of each sentence, in input order."""
        return [beams[0][0] if beams else "" for beams in self.translate_nbest(sentences)]


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
