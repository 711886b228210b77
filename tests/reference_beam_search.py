"""An independent oracle for ``t2t_lite.decoding.beam_search``: a deliberately plain beam
search written from the semantics its module docstring states, and a brute-force
enumerator of every output for tiny vocabularies.

It shares no code with ``t2t_lite`` and uses no TensorFlow: one sentence at a time,
hypotheses as Python lists, every extension of every alive hypothesis ranked with a plain
sort, arithmetic in float64 (or in the dtype of the arrays given to ``ranked_extensions``).
The model is a function ``logits_fn(sentence, prefixes) -> logits [len(prefixes), V]``:
the next-token logits after each prefix (a list of token ids, the start symbol excluded)
of sentence ``sentence``. An optional ``allowed_fn(sentence, prefix, budget) -> bool [V]``
restricts the tokens a hypothesis may emit next (``budget``: tokens it may still emit,
EOS included).

The semantics (per sentence, ``k`` beams, ``n`` = the sentence's decode length):

* a hypothesis of length ``m`` scores ``log P / ((5 + m) / 6) ** alpha``;
* each step extends every alive hypothesis by every token it may emit (at the last
  position, ``n - 1``, only EOS; with ``allowed_fn``, only the allowed ones, scored with
  the model's own log-probabilities); the ``2k`` best extensions are kept, ties going to
  the lower (beam, token), beams in their alive order;
* those of the kept extensions that end in EOS and rank among the best ``k`` join the
  finished hypotheses, which keep their ``k`` best (a tie keeps the older one); the ``k``
  best kept extensions that do not end in EOS become the alive hypotheses;
* the sentence stops after ``n`` steps or, with ``stop_early``, as soon as it has a
  finished hypothesis scoring at least the best alive log P divided by the penalty of
  length ``n``;
* it returns its finished hypotheses, best first, EOS-terminated and 0-padded to ``T``
  (empty slots: ids 0, score -inf); with none finished, its alive ones scored at their
  length.
"""
from __future__ import annotations

import itertools
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

LogitsFn = Callable[[int, List[List[int]]], np.ndarray]
AllowedFn = Callable[[int, List[int], int], np.ndarray]


def gnmt_penalty(length, alpha: float):
    """GNMT's length penalty ((5 + length) / 6) ** alpha, in float64."""
    return ((5.0 + np.asarray(length, np.float64)) / 6.0) ** alpha


def log_softmax(logits) -> np.ndarray:
    """log softmax over the last axis, in float64."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def ranked_extensions(alive_log_probs, token_log_probs, penalty, limit: Optional[int] = None
                      ) -> List[Tuple[float, float, int, int]]:
    """Every extension of every alive hypothesis, best first: (score, log P, beam, token);
    the first ``limit`` of them when given.

    alive_log_probs [k'] and token_log_probs [k', V] are the alive hypotheses' and their
    next tokens' log-probabilities; impossible tokens (-inf) are left out. Arithmetic is in
    the arrays' dtype, element by element: the sum, then the division by ``penalty``; ties
    go to the lower (beam, token)."""
    alive_log_probs = np.asarray(alive_log_probs)
    token_log_probs = np.asarray(token_log_probs)
    dtype = np.result_type(alive_log_probs, token_log_probs)
    log_probs = alive_log_probs.astype(dtype)[:, None] + token_log_probs.astype(dtype)
    scores = log_probs / dtype.type(penalty)
    beams, tokens = np.nonzero(~np.isneginf(token_log_probs))   # in (beam, token) order
    # A stable sort on the score alone keeps (beam, token) order among equal scores.
    order = np.argsort(-scores[beams, tokens], kind="stable")[:limit]
    return [(scores[beams[i], tokens[i]], log_probs[beams[i], tokens[i]], int(beams[i]),
             int(tokens[i])) for i in order]


def _search_sentence(logits_fn: LogitsFn, sentence: int, beam_size: int,
                     decode_length: int, alpha: float, stop_early: bool, eos_id: int,
                     allowed_fn: Optional[AllowedFn]):
    """One sentence's search: ([(score, tokens)] best first, finished or not)."""
    alive: List[Tuple[List[int], float]] = [([], 0.0)]
    finished: List[Tuple[float, List[int]]] = []
    for step in range(decode_length):
        log_probs = log_softmax(logits_fn(sentence, [tokens for tokens, _ in alive]))
        if allowed_fn is not None:
            for row, (tokens, _) in enumerate(alive):
                allowed = np.asarray(allowed_fn(sentence, tokens, decode_length - step))
                log_probs[row, ~allowed] = -np.inf
        if step == decode_length - 1:                   # only EOS may end the sentence
            eos = log_probs[:, eos_id].copy()
            log_probs[:] = -np.inf
            log_probs[:, eos_id] = eos
        kept = ranked_extensions([log_prob for _, log_prob in alive], log_probs,
                                 gnmt_penalty(step + 1, alpha), limit=2 * beam_size)
        new_finished = [(score, alive[beam][0] + [token])
                        for score, _, beam, token in kept[:beam_size] if token == eos_id]
        # Older finished hypotheses first: the stable sort keeps them ahead on a tie.
        finished = sorted(finished + new_finished, key=lambda item: -item[0])[:beam_size]
        alive = [(alive[beam][0] + [token], log_prob)
                 for _, log_prob, beam, token in kept if token != eos_id][:beam_size]
        if stop_early and finished and alive:
            best_alive = max(log_prob for _, log_prob in alive)
            if finished[0][0] >= best_alive / gnmt_penalty(decode_length, alpha):
                break
    if finished:
        return finished
    return [(log_prob / gnmt_penalty(len(tokens), alpha), tokens) for tokens, log_prob in alive]


def beam_search(logits_fn: LogitsFn, decode_lengths: Sequence[int], beam_size: int,
                alpha: float, stop_early: bool = True, eos_id: int = 1,
                max_length: Optional[int] = None, allowed_fn: Optional[AllowedFn] = None
                ) -> Tuple[np.ndarray, np.ndarray]:
    """Beam search of ``b = len(decode_lengths)`` sentences.

    Each decode length is clipped to [1, T], T = ``max_length`` (default: the largest).
    Returns ids int32 [b, k, T] (0 after EOS and in empty slots) and scores float64 [b, k]
    (-inf for empty slots), best first."""
    max_length = max(decode_lengths) if max_length is None else max_length
    ids = np.zeros([len(decode_lengths), beam_size, max_length], np.int32)
    scores = np.full([len(decode_lengths), beam_size], -np.inf)
    for sentence, length in enumerate(decode_lengths):
        length = min(max(int(length), 1), max_length)
        results = _search_sentence(logits_fn, sentence, beam_size, length, alpha,
                                   stop_early, eos_id, allowed_fn)
        for slot, (score, tokens) in enumerate(results):
            ids[sentence, slot, :len(tokens)] = tokens
            scores[sentence, slot] = score
    return ids, scores


def enumerate_outputs(logits_fn: LogitsFn, sentence: int, decode_length: int,
                      vocab_size: int, alpha: float, eos_id: int = 1
                      ) -> List[Tuple[float, List[int]]]:
    """Brute force: every EOS-terminated output of at most ``decode_length`` tokens with its
    score, best first (at the last position only EOS may follow, its log P counted).
    ``vocab_size ** (decode_length - 1)`` outputs: tiny vocabularies and lengths only."""
    others = [token for token in range(vocab_size) if token != eos_id]
    outputs = []
    for length in range(1, decode_length + 1):
        for body in itertools.product(others, repeat=length - 1):
            tokens = list(body) + [eos_id]
            total = 0.0
            for position, token in enumerate(tokens):
                total += log_softmax(logits_fn(sentence, [tokens[:position]]))[0, token]
            outputs.append((total / gnmt_penalty(length, alpha), tokens))
    return sorted(outputs, key=lambda item: -item[0])
