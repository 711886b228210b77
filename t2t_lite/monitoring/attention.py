"""Attention of a few sentence pairs: probe selection, token labels, weights, statistics.

Shapes: s source tokens (EOS included), t target tokens (EOS included), N layers, h heads.
An ``AttentionRecord`` holds one sentence pair's teacher-forced weights trimmed to the real
lengths, per kind, as float32 ``[N, h, q, k]``:

* ``encoder_self``: ``[N, h, s, s]``, queries and keys are source tokens;
* ``decoder_self``: ``[N, h, t, t]``, query i predicts target token i; key j is the decoder
  input at position j (``<s>`` then the target tokens shifted right), so the weights are
  zero above the diagonal;
* ``encdec``: ``[N, h, t, s]``, queries as in ``decoder_self``, keys are source tokens.

Every query row sums to one over its keys.

    probes = select_probes(sources, references, vocabulary, AttentionConfig())
    records = compute_records(model, [(p.source_ids, p.reference_ids) for p in probes], ...)
    scalars = attention_statistics(records, threshold=0.5)
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocab import EOS_ID, PAD_ID, Vocabulary
from t2t_lite.errors import UserError

KINDS = ("encoder_self", "decoder_self", "encdec")
START_LABEL = "<s>"
EOS_LABEL = "</s>"
MAX_LABEL_CHARS = 14


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """What the training-time attention monitor records.

    Attributes:
      num_probes: dev sentences followed through training (0 turns monitoring off).
      min_source_tokens: probes have at least this many source tokens (EOS included), so
        that the pictures show structure rather than two tokens.
      max_tokens: probes have at most this many source and reference tokens (readable
        axes); the greedy translation may run ``max_tokens`` tokens past its source.
      concentration_threshold: a head is "concentrated" when its mean (over queries)
        largest weight exceeds this.
    """

    num_probes: int = 3
    min_source_tokens: int = 6
    max_tokens: int = 24
    concentration_threshold: float = 0.5

    def __post_init__(self):
        if self.num_probes < 0 or self.min_source_tokens < 1 or \
                self.max_tokens < self.min_source_tokens:
            raise ValueError(f"AttentionConfig needs num_probes >= 0 and 1 <= "
                             f"min_source_tokens <= max_tokens; got {self}")
        if not 0.0 < self.concentration_threshold < 1.0:
            raise ValueError(f"concentration_threshold must lie in (0, 1), got "
                             f"{self.concentration_threshold}")


@dataclasses.dataclass(frozen=True)
class Probe:
    """A dev sentence pair followed through training; ids end with EOS."""

    index: int                      # line of the dev split
    source: str
    reference: str
    source_ids: Tuple[int, ...]
    reference_ids: Tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class AttentionRecord:
    """One sentence pair's attention (see the module docstring for the shapes)."""

    source: str
    target: str
    mode: str                            # "reference" or "translation": what was forced
    source_tokens: Tuple[str, ...]       # s labels, EOS included
    target_tokens: Tuple[str, ...]       # t labels of the predicted tokens, EOS included
    weights: Dict[str, np.ndarray]       # kind -> float32 [N, h, q, k]

    @property
    def num_layers(self) -> int:
        return int(self.weights["encdec"].shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.weights["encdec"].shape[1])

    @property
    def decoder_inputs(self) -> Tuple[str, ...]:
        """Labels of the decoder's input positions: ``<s>`` then the targets shifted right."""
        return (START_LABEL,) + self.target_tokens[:-1]

    def axis_labels(self, kind: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
        """(query labels, key labels) of ``kind``."""
        if kind == "encoder_self":
            return self.source_tokens, self.source_tokens
        if kind == "decoder_self":
            return self.target_tokens, self.decoder_inputs
        if kind == "encdec":
            return self.target_tokens, self.source_tokens
        raise ValueError(f"unknown attention kind {kind!r}; kinds: {', '.join(KINDS)}")


class TokenLabeler:
    """Per-token strings of a vocabulary (SentencePiece pieces keep their ``▁``)."""

    def __init__(self, vocabulary: Vocabulary):
        self._pieces = list(vocabulary.pieces())
        self._pieces[PAD_ID] = START_LABEL
        self._pieces[EOS_ID] = EOS_LABEL

    def __call__(self, ids: Sequence[int]) -> Tuple[str, ...]:
        return tuple(_short(self._pieces[i]) if 0 <= i < len(self._pieces) else f"<{i}>"
                     for i in ids)


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else label[:MAX_LABEL_CHARS - 1] + "…"


def with_eos(ids: Sequence[int]) -> Tuple[int, ...]:
    return tuple(int(i) for i in ids) + (EOS_ID,)


def select_probes(sources: Sequence[str], references: Sequence[str], vocabulary: Vocabulary,
                  config: AttentionConfig) -> List[Probe]:
    """``num_probes`` pairs with distinct sources, fixed for a corpus: among the pairs with
    ``min_source_tokens``..``max_tokens`` source tokens and at most ``max_tokens`` reference
    tokens (EOS included), ranked by total length (ties: corpus order), those at the
    quantiles 1/(n+1), ..., n/(n+1), so short and longer sentences are both shown. When
    too few qualify (e.g. long linearised parse trees), the shortest remaining non-empty
    pairs fill the list."""
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references")
    if config.num_probes and not sources:
        raise UserError("the dev split holds no sentence to probe attention with")
    source_ids = vocabulary.encode_batch(list(sources))
    reference_ids = vocabulary.encode_batch(list(references))
    ranked = []
    for index, (src, ref) in enumerate(zip(source_ids, reference_ids)):
        s, t = len(src) + 1, len(ref) + 1
        fits = config.min_source_tokens <= s <= config.max_tokens and t <= config.max_tokens
        if sources[index].strip():
            ranked.append((not fits, s + t, index))
    ranked.sort()
    fitting = [entry for entry in ranked if not entry[0]]
    distinct = list({sources[entry[2]]: entry for entry in reversed(fitting)}.values())[::-1]
    distinct.sort()
    count = min(config.num_probes, len(distinct))
    picks = [distinct[(len(distinct) * (i + 1)) // (count + 1)] for i in range(count)]
    probes: List[Probe] = []
    seen = set()
    for _, _, index in picks + ranked:
        if len(probes) == config.num_probes:
            break
        if sources[index] in seen:
            continue
        seen.add(sources[index])
        probes.append(Probe(index, sources[index], references[index],
                            with_eos(source_ids[index]), with_eos(reference_ids[index])))
    return probes


def _pad(rows: Sequence[Sequence[int]]) -> np.ndarray:
    batch = np.zeros([len(rows), max(len(r) for r in rows)], np.int32)
    for row, ids in enumerate(rows):
        batch[row, :len(ids)] = ids
    return batch


def compute_records(model, pairs: Sequence[Tuple[Sequence[int], Sequence[int]]],
                    labeler: Callable[[Sequence[int]], Tuple[str, ...]],
                    texts: Sequence[Tuple[str, str]], mode: str) -> List[AttentionRecord]:
    """Teacher-forced attention of each (source ids, target ids) pair, both EOS-terminated.

    One ``model.attention_weights`` call over the padded batch; each record is trimmed to
    its pair's lengths. ``texts``: (source, target) strings for the records' titles.
    """
    if not pairs:
        return []
    if any(len(src) == 0 or len(tgt) == 0 for src, tgt in pairs):
        raise ValueError("every source and target needs at least one token (EOS)")
    features = {"inputs": tf.constant(_pad([p[0] for p in pairs])),
                "targets": tf.constant(_pad([p[1] for p in pairs]))}
    weights = model.attention_weights(features)
    stacked = {kind: np.stack([tf.cast(w, tf.float32).numpy() for w in weights[kind]], axis=1)
               for kind in KINDS}  # [b, N, h, q, k]
    records = []
    for row, ((src, tgt), (source, target)) in enumerate(zip(pairs, texts)):
        s, t = len(src), len(tgt)
        records.append(AttentionRecord(
            source=source, target=target, mode=mode,
            source_tokens=labeler(src), target_tokens=labeler(tgt),
            weights={"encoder_self": stacked["encoder_self"][row, :, :, :s, :s],
                     "decoder_self": stacked["decoder_self"][row, :, :, :t, :t],
                     "encdec": stacked["encdec"][row, :, :, :t, :s]}))
    return records


def head_statistics(weights: np.ndarray, kind: str) -> Tuple[np.ndarray, np.ndarray]:
    """weights [N, h, q, k] -> (mean entropy in nats [N, h], mean largest weight [N, h]),
    averaged over query rows; ``decoder_self``'s first row (one key: trivially
    concentrated) is left out when there are others."""
    rows = weights[:, :, 1:, :] if kind == "decoder_self" and weights.shape[2] > 1 else weights
    p = np.clip(rows.astype(np.float64), 1e-12, 1.0)
    entropy = -(rows * np.log(p)).sum(axis=-1)          # [N, h, q]
    return entropy.mean(axis=-1), rows.max(axis=-1).mean(axis=-1)


def attention_statistics(records: Sequence[AttentionRecord],
                         threshold: float) -> Dict[str, float]:
    """Scalars per kind and layer over ``records``: ``attention_entropy/<kind>/layer_<i>``
    (mean over heads, rows and records, nats) and ``attention_concentrated/<kind>/layer_<i>``
    (share of heads whose mean largest weight exceeds ``threshold``)."""
    scalars: Dict[str, float] = {}
    if not records:
        return scalars
    for kind in KINDS:
        stats = [head_statistics(record.weights[kind], kind) for record in records]
        entropy = np.mean([e for e, _ in stats], axis=0)    # [N, h]
        largest = np.mean([m for _, m in stats], axis=0)    # [N, h]
        for layer in range(entropy.shape[0]):
            scalars[f"attention_entropy/{kind}/layer_{layer}"] = float(entropy[layer].mean())
            scalars[f"attention_concentrated/{kind}/layer_{layer}"] = float(
                (largest[layer] > threshold).mean())
    return scalars
