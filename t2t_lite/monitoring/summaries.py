"""Attention summaries during training, written to TensorBoard under ``output_dir/attention``.

At its steps, ``AttentionMonitor`` takes the run's fixed probe sentences (the shortest
suitable dev pairs, chosen once), translates them greedily with the current weights, and
records the teacher-forced attention of every layer and head twice per probe: forced on
the reference and forced on the model's own translation (re-tokenised). It writes

* images ``attention/<encoder_self|decoder_self|encdec>/layer_<i>``: per probe, first the
  reference-forced then the translation-forced grid of heads (samples 0, 1, 2, ...);
* scalars ``attention_entropy/<kind>/layer_<i>`` and ``attention_concentrated/<kind>/layer_<i>``
  over the reference-forced probes (a fixed input, so the curves show the model change);
* text ``attention_probes/probe_<n>``: source, reference and current translation.

The monitor does nothing between its steps; its cost is one greedy search and two
attention passes over a few short sentences, plus matplotlib rendering.
"""
from __future__ import annotations

import os
import sys
from typing import List, Optional

import tensorflow as tf

from t2t_lite.data.problem import eval_text
from t2t_lite.errors import UserError
from t2t_lite.monitoring.attention import (KINDS, AttentionConfig, AttentionRecord, Probe,
                                           TokenLabeler, attention_statistics,
                                           compute_records, select_probes, with_eos)
from t2t_lite.monitoring.rendering import (kind_layer_images, pad_to_same_size,
                                           tensorboard_columns)

LOG_SUBDIR = "attention"


class AttentionMonitor:
    """Writes attention summaries every ``every_steps`` steps, or with each evaluation.

    Args:
      model: a ``Transformer`` (``attention_weights``, ``encode``, ``decode_step``).
      problem, vocabulary, data_dir: where the dev probes come from.
      log_dir: the summary directory (the trainer passes ``output_dir/attention``).
      every_steps: 0 = at each evaluation (``after_step(..., evaluated=True)``).
      config: probe count and sizes, the concentration threshold.
      max_input_length: the model's longest input (its ``hparams.max_length``).
    """

    def __init__(self, model, problem, vocabulary, data_dir: str, log_dir: str,
                 every_steps: int = 0, config: Optional[AttentionConfig] = None,
                 max_input_length: int = 0):
        if every_steps < 0:
            raise UserError(f"attention summary steps must be >= 0, got {every_steps}")
        self.model = model
        self.problem = problem
        self.vocabulary = vocabulary
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.every_steps = int(every_steps)
        self.config = config or AttentionConfig()
        self.max_input_length = int(max_input_length or model.hparams.max_length)
        self._probes: Optional[List[Probe]] = None
        self._translator = None
        self._labeler = None
        self._writer = None
        self._last_step: Optional[int] = None

    # When --------------------------------------------------------------------------
    def due(self, step: int, evaluated: bool = False, final: bool = False) -> bool:
        """Whether ``after_step`` writes at ``step``."""
        if step == self._last_step or not self.config.num_probes:
            return False
        if final:
            return True
        return evaluated if self.every_steps == 0 else step % self.every_steps == 0

    def after_step(self, step: int, evaluated: bool = False, final: bool = False) -> bool:
        """The trainer's hook: writes when ``due``; returns whether it wrote."""
        if not self.due(step, evaluated, final):
            return False
        self.write(step)
        return True

    # What ----------------------------------------------------------------------------
    @property
    def probes(self) -> List[Probe]:
        """The run's probe pairs (chosen from the dev split on first use)."""
        if self._probes is None:
            sources, references = eval_text(self.problem, self.data_dir, "dev")
            self._probes = select_probes(sources, references, self.vocabulary, self.config)
        return self._probes

    def _translate(self, probes: List[Probe]) -> List[str]:
        if self._translator is None:
            from t2t_lite.decoding.config import parse_decode_hparams
            from t2t_lite.decoding.translator import Translator
            # Greedy probe translations of at most max_tokens tokens past the input's.
            decode_hparams = parse_decode_hparams("", self.problem.decode_defaults).replace(
                beam_size=1, extra_length=self.config.max_tokens,
                max_input_length=self.max_input_length)
            self._translator = Translator.from_decode_hparams(
                self.model, self.vocabulary, decode_hparams,
                constraint=self.problem.decode_constraint(self.vocabulary))
        return self._translator.translate([probe.source for probe in probes])

    def records(self) -> List[AttentionRecord]:
        """Per probe: the reference-forced record, then the translation-forced one."""
        if self._labeler is None:
            self._labeler = TokenLabeler(self.vocabulary)
        probes = self.probes
        translations = self._translate(probes)
        translation_ids = [with_eos(ids) for ids in self.vocabulary.encode_batch(translations)]
        reference = compute_records(
            self.model, [(p.source_ids, p.reference_ids) for p in probes], self._labeler,
            [(p.source, p.reference) for p in probes], "reference")
        translated = compute_records(
            self.model, [(p.source_ids, ids) for p, ids in zip(probes, translation_ids)],
            self._labeler, [(p.source, text) for p, text in zip(probes, translations)],
            "translation")
        return [record for pair in zip(reference, translated) for record in pair]

    def write(self, step: int) -> List[AttentionRecord]:
        """Computes and writes every summary for ``step``; returns the records drawn
        (none, with one warning, when no dev sentence can serve as a probe)."""
        if not self.probes:
            if self._last_step is None:
                print("warning: no attention summaries: the dev split has no non-blank "
                      "source sentence to probe with", file=sys.stderr, flush=True)
            self._last_step = step
            return []
        records = self.records()
        if self._writer is None:
            os.makedirs(self.log_dir, exist_ok=True)
            self._writer = tf.summary.create_file_writer(self.log_dir)
        scalars = attention_statistics([r for r in records if r.mode == "reference"],
                                       self.config.concentration_threshold)
        with self._writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
            for kind in KINDS:
                for layer in range(records[0].num_layers):
                    columns = tensorboard_columns(records[0].num_heads)
                    images = pad_to_same_size(kind_layer_images(records, kind, layer, columns))
                    tf.summary.image(f"attention/{kind}/layer_{layer}", images,
                                     max_outputs=len(images),
                                     description=_image_description(kind, len(records) // 2))
            for number, (forced, translated) in enumerate(zip(records[::2], records[1::2])):
                tf.summary.text(f"attention_probes/probe_{number}",
                                _probe_markdown(forced, translated, step))
        self._writer.flush()
        self._last_step = step
        return records

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def _image_description(kind: str, probes: int) -> str:
    names = {"encoder_self": "encoder self-attention (source × source)",
             "decoder_self": "decoder self-attention (target × shifted target; causal)",
             "encdec": "encoder–decoder attention (target × source)"}
    return (f"{names[kind]}, every head of the layer. Samples: for each of the {probes} "
            f"probes, forced on the reference, then on the current greedy translation.")


def _probe_markdown(forced: AttentionRecord, translated: AttentionRecord, step: int) -> str:
    tokens = lambda labels: " ".join(f"`{label}`" for label in labels)
    return "\n\n".join([
        f"**source**: {forced.source}",
        f"**reference**: {forced.target}",
        f"**greedy translation at step {step}**: {translated.target}",
        f"source tokens: {tokens(forced.source_tokens)}",
        f"translation tokens: {tokens(translated.target_tokens)}",
    ])

