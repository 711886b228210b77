"""Scoring given targets: each (source, target) pair's log-probability under the model.

    scorer = Scorer(model, vocabulary, alpha=0.6)
    scorer.score(["a source"], ["its target"])      # -> [(log P, log P / penalty)]

A pair is scored by one teacher-forced pass of the model's ``call`` (``{"inputs" [b, s],
"targets" [b, t]} -> logits [b, t, V]``): the target's tokens with EOS appended, their
``log_softmax`` log-probabilities summed (EOS included), and that sum divided by GNMT's
``length_penalty(t, alpha)`` with ``t`` the target's tokens, EOS included: exactly what
beam search scores a finished hypothesis of those tokens with (up to float rounding of the
cached step). Sources are tokenised and truncated as the ``Translator`` does (EOS
appended, cut to ``max_input_length``); a target longer than the model's learned positions
allow is a ``UserError`` naming its line. Pairs are batched by length (about
``batch_size`` padded tokens a batch), so a pair's score does not depend on its neighbours
beyond the float rounding of the batch's matmuls.

``score_ids`` is the graph part, shared with the SavedModel export's ``score`` signature
(``t2t_lite.runs.export``): padded id batches in, both scores out.

``split_pairs`` reads ``source<TAB>target`` lines (no TensorFlow needed for it).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from t2t_lite.errors import UserError

Score = Tuple[float, float]   # (log P, log P / length_penalty)


def split_pairs(lines: Sequence[str], file_name: str) -> Tuple[List[str], List[str]]:
    """(sources, targets) of ``source<TAB>target`` lines; a line without exactly one tab
    is a ``UserError`` naming ``file_name`` and the line (1-based)."""
    sources, targets = [], []
    for number, line in enumerate(lines, start=1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise UserError(f"{file_name}: line {number}: expected 'source<TAB>target' (one "
                            f"tab), found {len(parts) - 1} tabs; write each pair on one "
                            f"line, source and target separated by one tab")
        sources.append(parts[0])
        targets.append(parts[1])
    return sources, targets


def format_score(score: Score) -> str:
    """The decoder's output line of one scored pair: ``LOGPROB<TAB>NORMALISED``."""
    return f"{score[0]:.6f}\t{score[1]:.6f}"


def score_ids(model, inputs, targets, alpha: float):
    """Teacher-forced scores of padded id batches, in the graph or eagerly.

    Args:
      model: the ``Transformer`` (its ``call``).
      inputs: int32 [b, s], EOS-terminated sources, 0-padded.
      targets: int32 [b, t], EOS-terminated targets, 0-padded.
      alpha: the GNMT length-penalty exponent.

    Returns:
      log_probs: float32 [b], the sum of each target's token log-probabilities (EOS
        included).
      scores: float32 [b], ``log_probs / length_penalty(tokens, alpha)``, tokens counting
        EOS.
    """
    import tensorflow as tf

    from t2t_lite.decoding.search_common import length_penalty
    logits = model({"inputs": inputs, "targets": targets}, training=False)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)       # [b, t, V]
    token_log_probs = tf.gather(log_probs, targets, batch_dims=2)               # [b, t]
    real = targets != 0
    sums = tf.reduce_sum(tf.where(real, token_log_probs, 0.0), axis=1)          # [b]
    lengths = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)                    # [b]
    return sums, sums / length_penalty(lengths, alpha)


class Scorer:
    """Teacher-forced log-probabilities of targets given sources.

    Args:
      model: a ``Transformer`` (its ``call`` and ``hparams.max_length`` / ``hparams.pos``),
        variables restored.
      vocabulary: the run's ``Vocabulary``.
      alpha: the GNMT length-penalty exponent of the normalised score (>= 0).
      max_input_length: sources are cut to it (EOS included); 0 = the model's maximum.
      batch_size: padded tokens (the longer of source and target) per batch.
    """

    def __init__(self, model, vocabulary, alpha: float = 0.6, max_input_length: int = 0,
                 batch_size: int = 4096):
        import tensorflow as tf
        if alpha < 0 or batch_size < 1:
            raise UserError(f"Scorer needs alpha >= 0 and batch_size >= 1, got alpha={alpha}, "
                            f"batch_size={batch_size}")
        self.model = model
        self.vocabulary = vocabulary
        self.alpha = float(alpha)
        self.batch_size = int(batch_size)
        hparams = model.hparams
        self.max_input_length = int(max_input_length or hparams.max_length)
        self.max_target_length: Optional[int] = None
        if hparams.pos == "emb":
            self.max_input_length = min(self.max_input_length, hparams.max_length)
            self.max_target_length = int(hparams.max_length)
        spec = tf.TensorSpec([None, None], tf.int32)
        self._score_ids = tf.function(
            lambda inputs, targets: score_ids(self.model, inputs, targets, self.alpha),
            input_signature=[spec, spec], autograph=False)

    def encode(self, sources: Sequence[str], targets: Sequence[str]
               ) -> Tuple[List[List[int]], List[List[int]]]:
        """EOS-terminated ids of the sources (cut to ``max_input_length``) and targets."""
        from t2t_lite.data.vocab import EOS_ID
        encoded_sources = []
        for ids in self.vocabulary.encode_batch(list(sources)):
            ids = list(ids) + [EOS_ID]
            if len(ids) > self.max_input_length:
                ids = ids[:self.max_input_length - 1] + [EOS_ID]
            encoded_sources.append(ids)
        encoded_targets = []
        for number, ids in enumerate(self.vocabulary.encode_batch(list(targets)), start=1):
            ids = list(ids) + [EOS_ID]
            if self.max_target_length is not None and len(ids) > self.max_target_length:
                raise UserError(f"target of line {number} has {len(ids)} tokens (EOS "
                                f"included); the model's learned positions allow at most "
                                f"{self.max_target_length}; shorten the line")
            encoded_targets.append(ids)
        return encoded_sources, encoded_targets

    def score_encoded(self, sources: Sequence[Sequence[int]],
                      targets: Sequence[Sequence[int]]) -> List[Score]:
        """(log P, normalised) of each EOS-terminated target id list given its source's."""
        import numpy as np
        import tensorflow as tf

        order = sorted(range(len(sources)),
                       key=lambda i: (-max(len(sources[i]), len(targets[i])), i))
        results: List[Optional[Score]] = [None] * len(sources)
        start = 0
        while start < len(order):
            width = max(len(sources[order[start]]), len(targets[order[start]]))
            rows = max(1, self.batch_size // max(width, 1))
            batch = order[start:start + rows]
            start += len(batch)
            inputs = np.zeros([len(batch), max(len(sources[i]) for i in batch)], np.int32)
            outputs = np.zeros([len(batch), max(len(targets[i]) for i in batch)], np.int32)
            for row, index in enumerate(batch):
                inputs[row, :len(sources[index])] = sources[index]
                outputs[row, :len(targets[index])] = targets[index]
            sums, scores = (tensor.numpy() for tensor in
                            self._score_ids(tf.constant(inputs), tf.constant(outputs)))
            for row, index in enumerate(batch):
                results[index] = (float(sums[row]), float(scores[row]))
        return results  # type: ignore[return-value]

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> List[Score]:
        """(log P, log P / length_penalty) of each target given its source, in order."""
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
        return self.score_encoded(*self.encode(sources, targets))
