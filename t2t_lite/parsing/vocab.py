"""The parsing vocabulary: SentencePiece BPE in which every bracket token is one piece.

Every bracket token of the training targets (``(NP``, ``)NP``, ...), those of the Penn
Treebank's labels (``PTB_LABELS``, seen in training or not) and the placeholder ``XX``
are user-defined symbols, so a linearised target is exactly one id per token and
``detokenize(tokenize(target)) == target``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Set, Union

from t2t_lite.data.raw import RawDataError
from t2t_lite.parsing.linearize import PLACEHOLDER

if TYPE_CHECKING:
    from t2t_lite.data.vocab import SentencePieceVocab

SPACE = "\u2581"  # SentencePiece's word-boundary mark
# The Penn Treebank's constituent labels: always whole symbols, seen in training or not.
PTB_LABELS = ("ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP", "PRN",
              "PRT", "QP", "RRC", "S", "SBAR", "SBARQ", "SINV", "SQ", "UCP", "VP", "WHADJP",
              "WHADVP", "WHNP", "WHPP", "X")


def bracket_symbols(text: str) -> Iterator[str]:
    """The bracket tokens (``(L``, ``)L``) of a linearised tree, in order."""
    for token in text.split(" "):
        if len(token) > 1 and token[0] in "()" and "(" not in token[1:] and ")" not in token[1:]:
            yield token


def train_parsing_vocab(texts: Iterable[str], path: Union[str, Path], vocab_size: int, *,
                        max_sentences: int = 2_000_000, seed: int = 1) -> "SentencePieceVocab":
    """Trains SentencePiece BPE on ``texts`` (sources and linearised targets) with the
    bracket tokens of every label seen in them or in ``PTB_LABELS``, and ``XX``, as whole
    user-defined symbols; writes it to ``path`` atomically.

    Texts are sampled (``data.vocab.reservoir_sample``, seeded) down to
    ``max_sentences``; symbols are collected from all of them. Settings otherwise as
    ``data.vocab.train_sentencepiece`` (BPE, identity normalisation, whitespace kept, byte
    fallback), so detokenisation gives back the text exactly. Raises ``RawDataError``
    when ``texts`` is empty.
    """
    from t2t_lite.data.vocab import reservoir_sample, train_sentencepiece  # imports TF
    symbols: Set[str] = {PLACEHOLDER} | {f"{side}{label}" for label in PTB_LABELS
                                         for side in "()"}

    def collecting(texts: Iterable[str]) -> Iterator[str]:
        for text in texts:
            symbols.update(bracket_symbols(text))
            yield text

    sample = list(reservoir_sample(collecting(texts), max_sentences, seed))
    if not sample:
        raise RawDataError(f"no training text to learn the vocabulary {path} from; the train "
                           f"split's tree files hold no tree")
    # max_sentences=0: SentencePiece keeps the whole (already bounded) sample; it refuses
    # a bound of 1..100, so a small treebank could not be given its own size.
    return train_sentencepiece(sample, path, vocab_size, max_sentences=0, seed=seed,
                               user_defined_symbols=[SPACE + s for s in sorted(symbols)])
