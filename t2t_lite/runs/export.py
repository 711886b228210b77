"""SavedModel export: raw sentences in, translations out, everything in the graph.

``export_translator(model, vocabulary, decode_hparams, export_dir)`` writes a SavedModel
whose ``serving_default`` signature maps ``sentences``: ``tf.string [n]`` to

* ``translations``: ``tf.string [n]``, the best hypothesis (UTF-8);
* ``scores``: ``float32 [n]``, its ``log P / length_penalty``;
* with ``return_beams``: ``beam_translations`` ``tf.string [n, k]`` and ``beam_scores``
  ``float32 [n, k]`` as well (an empty slot is ``""`` with score ``-inf``).

With ``sampling_method=random`` it samples instead (``num_samples`` > 1: ``m`` samples per
sentence in ``beam_translations`` / ``beam_scores`` ``[n, m]``, in draw order) and takes a
second, optional input ``seed``: ``int64 [n]``, one seed per sentence in [0, 2**32). Row
``i`` then draws from the stream ``(seed[i], 0)`` of ``decoding.sampling``: its samples
depend on its sentence, its seed and the model only, not on its place in the call nor on
the other rows. An empty ``seed`` (``[0]``, the recorded default) draws row ``i`` from
``(S, i)``, ``S`` the recorded ``seed`` decode hparam, as ``t2t-lite-decoder`` draws line
``i``; with ``seed=-1`` recorded, ``S`` is drawn afresh on every call. The SignatureDef
records that default; TensorFlow's Python signature functions take every input, the
loaded module's ``serve(sentences)`` leaves it out.

A second signature, ``score``, maps ``sources`` and ``targets`` (``tf.string [n]`` each,
aligned) to ``log_probs`` (``float32 [n]``: the target's log-probability, EOS included)
and ``scores`` (``log_probs`` / GNMT's length penalty with the recorded ``alpha``):
``t2t-lite-decoder --score_file``'s two numbers (``decoding.scoring.score_ids``, sources
tokenised and cut as for ``serving_default``). An empty batch, a number of targets other
than the number of sources, and (learned positions) a target longer than the model's
``max_length`` are ``InvalidArgumentError`` at call time with a message saying so.

Tokenisation (the run's ``Vocabulary`` tf.Module: SentencePiece or word-pieces from
tensorflow-text), truncation to ``max_input_length`` tokens, EOS, the length-bucketed beam
search of ``Translator.translate_ids`` and detokenisation all run in the graph, with the
decode hparams fixed at export. As in ``t2t-lite-decoder``, a blank (empty or whitespace-
only) sentence gives ``""`` with score 0. Loading needs only
``import tensorflow, tensorflow_text`` (tensorflow_text registers the tokenizer ops)::

    import tensorflow as tf, tensorflow_text  # noqa: F401
    translate = tf.saved_model.load(export_dir).signatures["serving_default"]
    translate(sentences=tf.constant(["twenty-one"]))["translations"]

``export_dir/t2t_lite_export.json`` records the problem, checkpoint, decode hparams and
both signatures' inputs and outputs.
The problem's search constraint (``Problem.decode_constraint``: parsing emits only
well-formed trees over the input words) is part of the graph; problem-specific
post-processing (``Problem.postprocess_decode``, e.g. the bracketed tree with its words) is
Python and is not part of the export.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Union

import tensorflow as tf

from t2t_lite.data.vocab import EOS_ID, Vocabulary
from t2t_lite.decoding.config import DecodeHParams
from t2t_lite.decoding.scoring import score_ids
from t2t_lite.decoding.translator import Translator
from t2t_lite.errors import UserError

EXPORT_INFO_FILE = "t2t_lite_export.json"


class TranslationModule(tf.Module):
    """The exported object: the model's variables, the vocabulary, ``serve`` (the
    ``serving_default`` signature: a search, or sampling with a ``seed`` input) and
    ``score`` (the ``score`` signature)."""

    def __init__(self, model, vocabulary: Vocabulary, decode_hparams: DecodeHParams,
                 constraint=None):
        super().__init__(name="t2t_lite_translation")
        self.model = model
        self.vocabulary = vocabulary
        # num_samples > 1 needs sampling: a search export keeps return_beams alone.
        self.return_beams = decode_hparams.return_beams or decode_hparams.num_samples > 1
        self._translator = Translator.from_decode_hparams(model, vocabulary, decode_hparams,
                                                          constraint=constraint)
        self.max_input_length = self._translator.max_input_length
        self.alpha = decode_hparams.alpha
        hparams = model.hparams
        self.max_target_length = int(hparams.max_length) if hparams.pos == "emb" else 0
        self.sampling = decode_hparams.sampling
        self.seed = decode_hparams.seed
        sentences = tf.TensorSpec([None], tf.string, name="sentences")
        if self.sampling:
            no_seed = tf.constant([], tf.int64)

            def sample(sentences, seed=no_seed):
                return self._sample(sentences, seed)

            self.serve = tf.function(sample, input_signature=[
                sentences, tf.TensorSpec([None], tf.int64, name="seed")], autograph=False)
        else:
            self.serve = tf.function(self._search, input_signature=[sentences],
                                     autograph=False)
        self.score = tf.function(self._score, input_signature=[
            tf.TensorSpec([None], tf.string, name="sources"),
            tf.TensorSpec([None], tf.string, name="targets")], autograph=False)

    def _source_ids(self, sentences):
        """sentences tf.string [n] -> int32 [n, s]: tokens cut to ``max_input_length - 1``,
        EOS, 0-padded (the ``Translator``'s and the ``Scorer``'s ``encode``)."""
        tokens = self.vocabulary.tokenize(sentences)[:, :self.max_input_length - 1]  # [n, None]
        eos = tf.fill([tf.shape(sentences)[0], 1], EOS_ID)
        return tf.concat([tokens, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor()

    def _search(self, sentences):
        """sentences tf.string [n] -> {"translations" [n], "scores" [n] (, beams)}."""
        ids, scores = self._translator.translate_ids(self._source_ids(sentences))
        return self._outputs(sentences, ids, scores)                    # [n, k, T], [n, k]

    def _sample(self, sentences, seed):
        """sentences tf.string [n], seed int64 [n] or [0] -> ``_search``'s outputs, the
        ``num_samples`` samples of each sentence in draw order. Given seeds, row ``i``
        draws from stream ``(seed[i], 0)``; none (``[0]``): from ``(S, i)``, ``S`` the
        recorded seed or, when that is -1, a fresh seed per call."""
        n = tf.shape(sentences)[0]
        given = tf.size(seed) > 0
        checks = [
            tf.debugging.Assert(
                tf.logical_or(tf.logical_not(given), tf.size(seed) == n),
                [tf.strings.format("serving_default: seed has {} values for {} sentences; "
                                   "give one seed per sentence (int64 [n]) or none",
                                   (tf.size(seed), n))]),
            tf.debugging.Assert(
                tf.reduce_all((seed >= 0) & (seed < 2 ** 32)),
                [tf.strings.format("serving_default: every seed must be in [0, 2**32); "
                                   "got {}", seed, summarize=-1)])]
        with tf.control_dependencies(checks):
            if self.seed >= 0:
                default = tf.constant(self.seed, tf.int64)
            else:
                # seed = seed2 = 0: the kernel seeds itself at random in every process
                # (tf.random.uniform would take fixed seeds from a global seed).
                default = tf.raw_ops.RandomUniformInt(
                    shape=tf.constant([], tf.int32), minval=tf.constant(0, tf.int64),
                    maxval=tf.constant(2 ** 32, tf.int64), seed=0, seed2=0)
            seeds = tf.cond(given, lambda: tf.identity(seed), lambda: tf.fill([n], default))
            sentence_ids = tf.where(given, tf.zeros([n], tf.int32), tf.range(n))
        ids, scores = self._translator.sample_ids(self._source_ids(sentences), sentence_ids,
                                                  seeds)
        return self._outputs(sentences, ids, scores)

    def _outputs(self, sentences, ids, scores):
        """ids int32 [n, k, T] and scores float32 [n, k] -> the signature's outputs: a
        blank sentence gives "" with score 0, an empty beam slot "" with score -inf."""
        n, k = tf.shape(ids)[0], tf.shape(ids)[1]
        texts = self.vocabulary.detokenize(tf.reshape(ids, [n * k, -1]))
        texts = tf.reshape(texts, [n, k])
        blank = tf.equal(tf.strings.length(tf.strings.strip(sentences)), 0)[:, None]
        texts = tf.where(blank | tf.math.is_inf(scores), "", texts)
        scores = tf.where(blank, 0.0, scores)
        outputs = {"translations": texts[:, 0], "scores": scores[:, 0]}
        if self.return_beams:
            outputs.update(beam_translations=texts, beam_scores=scores)
        return outputs

    def _score(self, sources, targets):
        """sources, targets tf.string [n] (aligned) -> {"log_probs" [n], "scores" [n]}:
        ``Scorer``'s two numbers per pair (``scoring.score_ids``)."""
        n = tf.shape(sources)[0]
        target_ids = self.vocabulary.tokenize(targets)
        eos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(targets)[0], 1], EOS_ID))
        target_ids = tf.concat([target_ids, eos], axis=1).to_tensor()      # [n, t]
        checks = [
            tf.debugging.Assert(n > 0, ["score: the batch is empty; give at least one "
                                        "(source, target) pair"]),
            tf.debugging.Assert(
                tf.equal(tf.shape(targets)[0], n),
                [tf.strings.format("score: got {} sources but {} targets; give exactly "
                                   "one target per source (aligned)",
                                   (n, tf.shape(targets)[0]))])]
        if self.max_target_length:
            checks.append(tf.debugging.Assert(
                tf.shape(target_ids)[1] <= self.max_target_length,
                [tf.strings.format("score: a target has {} tokens (EOS included); learned "
                                   "positions exist for at most {}; shorten it",
                                   (tf.shape(target_ids)[1], self.max_target_length))]))
        with tf.control_dependencies(checks):
            source_ids = tf.identity(self._source_ids(sources))
            target_ids = tf.identity(target_ids)
        log_probs, scores = score_ids(self.model, source_ids, target_ids, self.alpha)
        return {"log_probs": log_probs, "scores": scores}


def export_translator(model, vocabulary: Vocabulary, decode_hparams: DecodeHParams,
                      export_dir: Union[str, Path], info: Dict[str, Any] = None,
                      constraint=None) -> Path:
    """Writes the SavedModel into ``export_dir`` (which must not hold one already);
    ``constraint`` (``Problem.decode_constraint``) restricts its search as the decoder's.

    The SavedModel and its ``t2t_lite_export.json`` are written into a hidden staging
    directory beside ``export_dir`` (``.NAME.*.partial``) and renamed onto it at the end:
    a reader never sees half an export, a failure removes the staging directory, and of
    two exports into the same directory at once the second to finish is refused instead
    of mixing its files with the first's. (A SIGKILL leaves the staging directory.)"""
    export_dir = Path(export_dir)
    _refuse_filled(export_dir)
    module = TranslationModule(model, vocabulary, decode_hparams, constraint)
    signature = module.serve.get_concrete_function()
    # The functions, not their concrete functions: the SignatureDef then records the
    # default of an optional input (a sampling export's ``seed``).
    signatures = {"serving_default": module.serve, "score": module.score}
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=export_dir.parent, prefix=f".{export_dir.name}.",
                                    suffix=".partial"))
    # mkdtemp makes it 0700; the export gets the mode of the empty directory it replaces,
    # or a new directory's (umask), so that a server under another user can read it.
    os.chmod(staging, export_dir.stat().st_mode & 0o7777 if export_dir.is_dir()
             else 0o777 & ~_umask())
    try:
        tf.saved_model.save(module, str(staging), signatures=signatures)
        record = dict(info or {})
        inputs = {"sentences": "tf.string [n]"}
        if module.sampling:
            inputs["seed"] = "int64 [n], optional"
        record.update(decode_hparams=decode_hparams.to_string(),
                      max_input_length=module.max_input_length,
                      inputs=inputs, outputs=sorted(signature.structured_outputs),
                      score={"inputs": {"sources": "tf.string [n]",
                                        "targets": "tf.string [n]"},
                             "outputs": ["log_probs", "scores"]})
        (staging / EXPORT_INFO_FILE).write_text(json.dumps(record, indent=2) + "\n")
        try:
            os.rename(staging, export_dir)  # replaces an empty directory, never a full one
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            raise UserError(f"--export_dir={export_dir} was filled by another process "
                            f"while this export ran; this export was discarded (choose a "
                            f"new directory)") from None
    except (tf.errors.OpError, OSError) as error:
        shutil.rmtree(staging, ignore_errors=True)
        if not _is_disk_full(error):
            raise
        raise UserError(f"no space left on device while exporting to --export_dir="
                        f"{export_dir}; nothing was left there. Free space on that disk (or "
                        f"choose another --export_dir) and re-run") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return export_dir


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _is_disk_full(error: BaseException) -> bool:
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC
    return isinstance(error, tf.errors.ResourceExhaustedError) and \
        "No space left on device" in str(error)


def _refuse_filled(export_dir: Path) -> None:
    if export_dir.exists() and any(export_dir.iterdir()):
        raise UserError(f"--export_dir={export_dir} is not empty; choose a new "
                        f"directory (an export is never overwritten)")
