"""SavedModel export: raw sentences in, translations out, everything in the graph.

``export_translator(model, vocabulary, decode_hparams, export_dir)`` writes a SavedModel
whose ``serving_default`` signature maps ``sentences``: ``tf.string [n]`` to

* ``translations``: ``tf.string [n]``, the best hypothesis (UTF-8);
* ``scores``: ``float32 [n]``, its ``log P / length_penalty``;
* with ``return_beams``: ``beam_translations`` ``tf.string [n, k]`` and ``beam_scores``
  ``float32 [n, k]`` as well (an empty slot is ``""`` with score ``-inf``).

Tokenisation (the run's ``Vocabulary`` tf.Module: SentencePiece or word-pieces from
tensorflow-text), truncation to ``max_input_length`` tokens, EOS, the length-bucketed beam
search of ``Translator.translate_ids`` and detokenisation all run in the graph, with the
decode hparams fixed at export. As in ``t2t-lite-decoder``, a blank (empty or whitespace-
only) sentence gives ``""`` with score 0. Loading needs only
``import tensorflow, tensorflow_text`` (tensorflow_text registers the tokenizer ops)::

    import tensorflow as tf, tensorflow_text  # noqa: F401
    translate = tf.saved_model.load(export_dir).signatures["serving_default"]
    translate(sentences=tf.constant(["twenty-one"]))["translations"]

``export_dir/t2t_lite_export.json`` records the problem, checkpoint and decode hparams.
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
from t2t_lite.decoding.translator import Translator
from t2t_lite.errors import UserError

EXPORT_INFO_FILE = "t2t_lite_export.json"


class TranslationModule(tf.Module):
    """The exported object: the model's variables, the vocabulary and ``serve``."""

    def __init__(self, model, vocabulary: Vocabulary, decode_hparams: DecodeHParams,
                 constraint=None):
        super().__init__(name="t2t_lite_translation")
        self.model = model
        self.vocabulary = vocabulary
        self.return_beams = decode_hparams.return_beams
        self._translator = Translator.from_decode_hparams(model, vocabulary, decode_hparams,
                                                          constraint=constraint)
        self.max_input_length = self._translator.max_input_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def serve(self, sentences):
        """sentences tf.string [n] -> {"translations" [n], "scores" [n] (, beams)}."""
        tokens = self.vocabulary.tokenize(sentences)[:, :self.max_input_length - 1]  # [n, None]
        eos = tf.fill([tf.shape(sentences)[0], 1], EOS_ID)
        inputs = tf.concat([tokens, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor()
        ids, scores = self._translator.translate_ids(inputs)            # [n, k, T], [n, k]
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
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=export_dir.parent, prefix=f".{export_dir.name}.",
                                    suffix=".partial"))
    # mkdtemp makes it 0700; the export gets the mode of the empty directory it replaces,
    # or a new directory's (umask), so that a server under another user can read it.
    os.chmod(staging, export_dir.stat().st_mode & 0o7777 if export_dir.is_dir()
             else 0o777 & ~_umask())
    try:
        tf.saved_model.save(module, str(staging), signatures={"serving_default": signature})
        record = dict(info or {})
        record.update(decode_hparams=decode_hparams.to_string(),
                      max_input_length=module.max_input_length,
                      inputs={"sentences": "tf.string [n]"},
                      outputs=sorted(signature.structured_outputs))
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
