"""Constrained decoding for parsing: only extensions that can still become a tree.

``TreeConstraint`` is built from the target vocabulary's pieces: ``▁XX`` is the word slot,
``▁(L`` opens and ``▁)L`` closes a constituent labeled ``L`` (only labels that have both
pieces), EOS ends the output; every other piece is never allowed. A search (``beam_search``,
``greedy_search``) carries a per-hypothesis state, a dict of ``n`` rows (``n`` = batch, or
batch * beam):

* ``remaining`` int32 [n]: words of the input not yet placed (``XX`` still to emit);
* ``depth`` int32 [n]: open constituents; ``stack`` int32 [n, max_depth] their label ids
  (1-based, innermost at ``depth - 1``);
* ``started`` bool [n]: the root was opened (true from the start for an empty input);
* ``has_child`` bool [n]: the innermost open constituent holds a word or constituent;
* ``open_run`` int32 [n]: opening brackets emitted since the last other token;
* ``active`` bool [n]: the constraint applies (false when even the shortest tree,
  ``(L XX ... XX )L EOS`` = words + 3 tokens, does not fit the sentence's decode length;
  that output is left to repair).

``allowed(state, budget)`` gives the tokens [n, V] that keep the hypothesis completable
within ``budget`` tokens (this one included, EOS included): a word slot while words remain
inside a bracket; an opening bracket while words remain (a constituent needs a word) and
``max_depth`` is not reached and fewer than ``max_open_run`` opening brackets came in a
row (a treebank bound: the WSJ sample never has more than 6; it stops an undertrained
model from opening brackets until the depth limit); the closing bracket of the innermost label once it holds
something (the root only after the last word); EOS only when every word is placed and
every bracket closed; and anything that adds a token only if the shortest completion still
fits. Starting from a state that fits, some token always remains allowed, so every
hypothesis ends well formed. Everything is plain tensor ops (XLA-compatible).

The number of words comes from the source ids (``word_counts``): words are maximal runs of
non-space characters of the detokenised source, as ``str.split()`` finds them (ASCII and
``▁`` spaces; a multi-byte Unicode space spelled with byte-fallback pieces is not seen).

**Words in the target** (``words_in_target=True``, the linearisation
``(S (NP The dog )NP (VP barks )VP . )S``): the word slot is not ``▁XX`` but the source's
own pieces, in order. The state then also holds ``source`` int32 [n, L] (the source ids),
``boundary`` bool [n, L] (the piece starts a word's group of pieces: a word start, or the
first of the space pieces before one) and ``position`` int32 [n] (the next source piece
to copy); ``remaining`` counts source *pieces* left. At a group's first piece the rules are
the ones above with "the next source piece" as the word slot; inside a group only its
next piece is allowed, so words are copied whole and brackets fall between words. A
source piece that is also a bracket piece is read as the word when it is copied.
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
import tensorflow as tf

from t2t_lite.parsing.linearize import PLACEHOLDER

SPACE = "\u2581"  # SentencePiece's word-boundary mark
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_OPEN_RUN = 8   # the WSJ sample's longest run of opening brackets is 6
_UNREACHABLE = 1 << 24  # a completion length no decode length reaches
_ASCII_SPACES = frozenset(range(0x09, 0x0E)) | frozenset(range(0x1C, 0x21))

State = Dict[str, tf.Tensor]


def _piece_text(piece: str, is_control: bool, is_unknown: bool) -> str:
    """The characters a piece stands for (spaces as ' '); control pieces stand for none."""
    if is_control:
        return ""
    if is_unknown:
        return "?"
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return " " if int(piece[3:5], 16) in _ASCII_SPACES else "b"
    return piece.replace(SPACE, " ")


class TreeConstraint:
    """Per-token class tables of a vocabulary and the tree state machine over them.

    Args:
      pieces: the vocabulary's pieces, indexed by id (SentencePiece spelling, ``▁`` for
        a space).
      eos_id: the end-of-sequence id.
      control_ids: ids that stand for no text (pad, EOS, ...); ``unknown_ids``: ids that
        stand for one unknown character.
      max_depth: the most constituents open at once.
      max_open_run: the most opening brackets in a row.
    """

    def __init__(self, pieces: Sequence[str], eos_id: int, control_ids: Sequence[int] = (),
                 unknown_ids: Sequence[int] = (), max_depth: int = DEFAULT_MAX_DEPTH,
                 words_in_target: bool = False, max_open_run: int = DEFAULT_MAX_OPEN_RUN):
        if max_depth < 1 or max_open_run < 1:
            raise ValueError(f"max_depth and max_open_run must be >= 1, got {max_depth} "
                             f"and {max_open_run}")
        self.max_open_run = int(max_open_run)
        self.vocab_size = len(pieces)
        self.max_depth = int(max_depth)
        self.words_in_target = bool(words_in_target)
        opens = {p[2:]: i for i, p in enumerate(pieces) if p.startswith(SPACE + "(")}
        closes = {p[2:]: i for i, p in enumerate(pieces) if p.startswith(SPACE + ")")}
        self.labels = tuple(sorted(label for label in opens if label in closes and label
                                   and not set(label) & set("()" + SPACE)))
        if not self.words_in_target and SPACE + PLACEHOLDER not in pieces:
            raise ValueError(f"the vocabulary has no piece {SPACE + PLACEHOLDER!r} (the word "
                             f"slot); it is not a parsing vocabulary")
        if not self.labels:
            raise ValueError("the vocabulary has no pair of bracket pieces '▁(L' and '▁)L'; "
                             "it is not a parsing vocabulary")
        open_label = np.zeros(len(pieces), np.int32)
        close_label = np.zeros(len(pieces), np.int32)
        for index, label in enumerate(self.labels, start=1):
            open_label[opens[label]] = index
            close_label[closes[label]] = index
        word = np.array([p == SPACE + PLACEHOLDER for p in pieces])
        eos = np.arange(len(pieces)) == eos_id
        self.tables = {"word": word, "eos": eos, "open_label": open_label,
                       "close_label": close_label}
        controls, unknowns = set(control_ids), set(unknown_ids)
        texts = [_piece_text(p, i in controls, i in unknowns) for i, p in enumerate(pieces)]
        self.word_tables = {
            # space -> non-space transitions inside the piece
            "starts": np.array([sum(a == " " and b != " " for a, b in zip(t, t[1:]))
                                for t in texts], np.int32),
            "begins_word_char": np.array([bool(t) and t[0] != " " for t in texts]),
            "ends_space": np.array([bool(t) and t[-1] == " " for t in texts]),
            "only_space": np.array([bool(t) and not t.strip(" ") for t in texts]),
            "control": np.array([i in controls for i in range(len(pieces))]),
        }

    @classmethod
    def from_vocabulary(cls, vocabulary, max_depth: int = DEFAULT_MAX_DEPTH,
                        words_in_target: bool = False) -> "TreeConstraint":
        """The constraint of a ``SentencePieceVocab`` (read from its model file)."""
        import sentencepiece as spm
        from t2t_lite.data.vocab import EOS_ID
        processor = spm.SentencePieceProcessor(model_proto=vocabulary.path.read_bytes())
        size = processor.get_piece_size()
        return cls([processor.id_to_piece(i) for i in range(size)], EOS_ID,
                   control_ids=[i for i in range(size) if processor.is_control(i)],
                   unknown_ids=[i for i in range(size) if processor.is_unknown(i)],
                   max_depth=max_depth, words_in_target=words_in_target)

    # Source side ----------------------------------------------------------------------
    def _word_starts(self, inputs) -> tf.Tensor:
        """inputs int32 [b, L] -> int32 [b, L]: words that begin in each piece."""
        starts = tf.gather(self.word_tables["starts"], inputs)
        begins = tf.gather(self.word_tables["begins_word_char"], inputs)
        ends_space = tf.gather(self.word_tables["ends_space"], inputs)
        after_space = tf.concat([tf.ones_like(ends_space[:, :1]), ends_space[:, :-1]], axis=1)
        return starts + tf.cast(begins & after_space, tf.int32)

    def word_counts(self, inputs) -> tf.Tensor:
        """inputs int32 [b, L] (0-padded source ids) -> int32 [b], words of each source."""
        return tf.reduce_sum(self._word_starts(tf.cast(inputs, tf.int32)), axis=1)

    def group_starts(self, inputs) -> tf.Tensor:
        """inputs int32 [b, L] -> bool [b, L]: the pieces that begin a word's group when
        words are copied into the target: a piece where a word starts or a piece of spaces
        only, unless the piece before it is spaces only (then the group began there); the
        first piece always. Control pieces (pad, EOS) begin none."""
        only_space = tf.gather(self.word_tables["only_space"], inputs)
        after_only_space = tf.concat([tf.zeros_like(only_space[:, :1]), only_space[:, :-1]],
                                     axis=1)
        first = tf.equal(tf.range(tf.shape(inputs)[1])[None, :], 0)
        starts = ((self._word_starts(inputs) > 0) | only_space) & ~after_only_space
        return (starts | first) & ~tf.gather(self.word_tables["control"], inputs)

    # Target side: the state machine ----------------------------------------------------
    def initial_state(self, inputs, decode_length) -> State:
        """The state of the empty output, [b] rows, for source ids [b, L] and decode
        lengths int32 [b] (output tokens allowed, EOS included)."""
        inputs = tf.cast(inputs, tf.int32)
        words = self.word_counts(inputs)
        batch = tf.shape(words)[0]
        state = {"remaining": words,
                 "depth": tf.zeros([batch], tf.int32),
                 "stack": tf.zeros([batch, self.max_depth], tf.int32),
                 "started": tf.equal(words, 0),
                 "has_child": tf.zeros([batch], tf.bool),
                 "open_run": tf.zeros([batch], tf.int32)}
        if self.words_in_target:
            content = ~tf.gather(self.word_tables["control"], inputs)
            state.update(remaining=tf.reduce_sum(tf.cast(content, tf.int32), axis=1),
                         source=inputs, boundary=self.group_starts(inputs),
                         position=tf.zeros([batch], tf.int32))
            state["started"] = tf.equal(state["remaining"], 0)
        fits = self._shortest_completion(**_machine(state)) <= tf.cast(decode_length, tf.int32)
        state["active"] = fits
        return state

    @staticmethod
    def _shortest_completion(remaining, depth, started, has_child) -> tf.Tensor:
        """Tokens (EOS included) of the shortest well-formed completion; huge if none."""
        unreachable = tf.fill(tf.shape(remaining), _UNREACHABLE)
        inside = tf.where(remaining > 0, remaining + depth + 1,
                          tf.where(has_child, depth + 1, unreachable))
        top_level = tf.where(started, tf.where(remaining > 0, unreachable, tf.ones_like(depth)),
                             remaining + 3)
        return tf.where(depth > 0, inside, top_level)

    def allowed(self, state: State, budget) -> tf.Tensor:
        """bool [n, V]: the tokens that keep each hypothesis completable; ``budget`` int32
        [n] is how many tokens it may still emit, this one and EOS included."""
        remaining, depth = state["remaining"], state["depth"]
        started, has_child = state["started"], state["has_child"]
        fits_after = tf.cast(budget, tf.int32) - 1
        shortest = self._shortest_completion
        yes = tf.ones_like(started)
        can_word = (depth > 0) & (remaining > 0) & (
            shortest(remaining - 1, depth, started, yes) <= fits_after)
        can_open = ((depth > 0) | ~started) & (remaining > 0) & (depth < self.max_depth) & (
            state["open_run"] < self.max_open_run) & (
            shortest(remaining, depth + 1, yes, ~yes) <= fits_after)
        can_close = (depth > 0) & has_child & (
            shortest(remaining, depth - 1, yes, yes) <= fits_after)
        can_eos = started & tf.equal(depth, 0) & tf.equal(remaining, 0)
        if self.words_in_target:
            # Inside a word's group only its next piece: no bracket, no EOS.
            between_words = ~(remaining > 0) | self._next(state, "boundary")
            can_open &= between_words
            can_close &= between_words
            word = tf.equal(tf.range(self.vocab_size)[None, :],
                            self._next(state, "source")[:, None])                # [n, V]
        else:
            word = tf.constant(self.tables["word"])[None, :]
        top = tf.gather(state["stack"], tf.maximum(depth - 1, 0), batch_dims=1)   # [n]
        close_label = tf.constant(self.tables["close_label"])
        allowed = ((word & can_word[:, None])
                   | ((tf.constant(self.tables["open_label"]) > 0)[None, :] & can_open[:, None])
                   | ((close_label > 0)[None, :] & tf.equal(close_label[None, :], top[:, None])
                      & can_close[:, None])
                   | (tf.constant(self.tables["eos"])[None, :] & can_eos[:, None]))
        return allowed | ~state["active"][:, None]

    def update(self, state: State, tokens) -> State:
        """The state after each row emits ``tokens`` int32 [n]; tokens outside the tree
        classes (EOS, or anything on an inactive row) leave the tree unchanged."""
        tokens = tf.cast(tokens, tf.int32)
        open_label = tf.gather(self.tables["open_label"], tokens)
        opening, closing = open_label > 0, tf.gather(self.tables["close_label"], tokens) > 0
        if self.words_in_target:
            is_word = (state["remaining"] > 0) & tf.equal(tokens, self._next(state, "source"))
            opening &= ~is_word
            closing &= ~is_word
            open_label = tf.where(opening, open_label, 0)
        else:
            is_word = tf.gather(self.tables["word"], tokens)
        depth = state["depth"]
        slots = tf.range(self.max_depth, dtype=tf.int32)[None, :]
        stack = tf.where(opening[:, None] & tf.equal(slots, depth[:, None]),
                         open_label[:, None], state["stack"])
        new_depth = depth + tf.cast(opening & (depth < self.max_depth), tf.int32) \
            - tf.cast(closing & (depth > 0), tf.int32)
        new_state = dict(state)
        new_state.update(
            remaining=tf.maximum(state["remaining"] - tf.cast(is_word, tf.int32), 0),
            depth=new_depth,
            stack=stack,
            started=state["started"] | opening,
            has_child=tf.where(opening, False, state["has_child"] | is_word | closing),
            open_run=tf.where(opening, state["open_run"] + 1, 0))
        if self.words_in_target:
            new_state["position"] = state["position"] + tf.cast(is_word, tf.int32)
        return new_state

    @staticmethod
    def _next(state: State, key: str) -> tf.Tensor:
        """``state[key]`` [n, L] at each row's ``position`` (clipped to the last column)."""
        last = tf.shape(state[key])[1] - 1
        return tf.gather(state[key], tf.minimum(state["position"], last), batch_dims=1)


def _machine(state: State) -> Dict[str, tf.Tensor]:
    return {key: state[key] for key in ("remaining", "depth", "started", "has_child")}
