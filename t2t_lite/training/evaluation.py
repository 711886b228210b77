"""Evaluation during training: dev loss, token accuracy, per-token perplexity, and the
problem's text metrics (BLEU for translation, EVALB F1 against the gold dev trees for
parsing: ``Problem.eval_references``) on decoded dev sentences.

Dev sentences are decoded with ``decoding.Translator`` (greedy unless ``beam_size`` > 1):
``training`` uses ``decoding``, which never imports ``training``.
"""
from __future__ import annotations

import math
from typing import Dict, List

import keras
import tensorflow as tf

from t2t_lite.data.pipeline import make_dataset
from t2t_lite.data.problem import eval_text
from t2t_lite.decoding.config import parse_decode_hparams
from t2t_lite.decoding.translator import Translator
from t2t_lite.hparams_lib import HParams
from t2t_lite.metrics.text_metrics import score_texts
from t2t_lite.training.losses import label_smoothed_cross_entropy
from t2t_lite.training.metrics import token_statistics


class Evaluator:
    """Evaluates ``model`` on the problem's dev split.

    Args:
      eval_steps: dev batches for the loss metrics; 0 = the whole dev set.
      decode_sentences: the first N dev sentences are decoded and scored with the problem's
        text metrics (sacreBLEU for translation); 0 turns decoding off.
      beam_size: 1 = greedy decoding (the default during training).
      decode_hparams: how to decode the dev sentences (alpha, extra length, batch size);
        default: the problem's decode defaults (``problem.decode_defaults``) with the
        hparams set's (``HParams.decode_defaults``) over them. ``beam_size``
        replaces its beam size and the model's ``max_length`` its input limit.
    """

    def __init__(self, model: keras.Model, problem, vocabulary, hparams: HParams,
                 data_dir: str, eval_steps: int = 0, decode_sentences: int = 100,
                 beam_size: int = 1, decode_hparams=None):
        self.model = model
        self.problem = problem
        self.vocabulary = vocabulary
        self.hparams = hparams
        self.data_dir = data_dir
        self.eval_steps = eval_steps
        self.decode_sentences = decode_sentences
        self.beam_size = beam_size
        self.decode_hparams = decode_hparams
        # Eval batches come in many (batch, length) shapes; one relaxed trace serves them
        # all instead of a retrace (and TensorFlow's retracing warning) per shape.
        self._stats_fn = tf.function(self._batch_statistics, autograph=False,
                                    reduce_retracing=True)
        self._texts = None
        self._translator = None

    def _batch_statistics(self, features):
        logits = self.model(features, training=False)
        loss_sum, _ = label_smoothed_cross_entropy(features["targets"], logits,
                                                   self.hparams.label_smoothing)
        stats = token_statistics(features["targets"], logits)
        stats["loss_sum"] = loss_sum
        return stats

    def loss_metrics(self) -> Dict[str, float]:
        dataset = make_dataset(self.problem, self.data_dir, "dev", self.hparams, training=False)
        if self.eval_steps:
            dataset = dataset.take(self.eval_steps)
        totals = {"loss_sum": 0.0, "nll_sum": 0.0, "correct": 0.0, "tokens": 0.0}
        for features in dataset:
            for name, value in self._stats_fn(features).items():
                if name in totals:
                    totals[name] += float(value)
        tokens = max(totals["tokens"], 1.0)
        log_ppl = totals["nll_sum"] / tokens
        return {"loss": totals["loss_sum"] / tokens, "accuracy": totals["correct"] / tokens,
                "log_ppl": log_ppl, "perplexity": math.exp(min(log_ppl, 50.0))}

    def text_metrics(self) -> Dict[str, float]:
        if not self.decode_sentences or not self.problem.eval_metrics:
            return {}
        if self._texts is None:
            sources = eval_text(self.problem, self.data_dir, "dev")[0]
            references = self.problem.eval_references(self.data_dir, "dev")
            self._texts = (list(sources[: self.decode_sentences]),
                           list(references[: self.decode_sentences]))
        sources, references = self._texts
        if self._translator is None:  # one per run: its traced decode functions are reused
            decode_hparams = (self.decode_hparams or
                              parse_decode_hparams("", self.problem.decode_defaults,
                                                   self.hparams))
            self._translator = Translator.from_decode_hparams(
                self.model, self.vocabulary,
                decode_hparams.replace(beam_size=self.beam_size,
                                       max_input_length=self.hparams.max_length),
                constraint=self.problem.decode_constraint(self.vocabulary))
        hypotheses: List[str] = self._translator.translate(sources)
        return score_texts(self.problem.eval_metrics,
                           self.problem.metric_hypotheses(sources, hypotheses), references,
                           sources)

    def evaluate(self) -> Dict[str, float]:
        return {**self.loss_metrics(), **self.text_metrics()}
