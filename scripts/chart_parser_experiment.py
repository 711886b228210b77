"""Experiment: a span-based chart parser on the WSJ sample, against the seq2seq parsers.

Run with the repository installed (``pip install -e .``)::

    python scripts/chart_parser_experiment.py --sample_dir=SAMPLE --output_dir=RUN [--seed=S]
    python scripts/chart_parser_experiment.py --sample_dir=SAMPLE --output_dir=ENS \
        --ensemble=RUN1,RUN2,RUN3 --biases=0,0.5,1,1.5,2 [--test_bias=B]

``SAMPLE`` holds ``wsj_0001.mrg`` ... ``wsj_0179.mrg``, split as
``parsing_english_ptb_sample`` splits them (train 0001-0159, dev 0160-0169, test
0170-0179). The model, after Stern et al. (2017) and Kitaev and Klein (2018):

* each word is a word embedding (words seen in training; rarer words replaced by
  ``<unk>`` with probability ``a / (a + count)``, ``--word_dropout`` a) joined with a
  max-pooled character CNN, plus a learned position embedding, between ``<s>`` and
  ``</s>``;
* a pre-norm Transformer encoder; each output vector is split into a forward and a
  backward half, and span ``(i, j)`` is ``[f_j - f_i ; b_(i+1) - b_(j+1)]``;
* an MLP (ReLU, LayerNorm) gives each span a softmax over the labels
  (``t2t_lite.parsing.chart.labeled_spans``'s, label 0 for none), trained with the sum of
  every span's cross-entropy per word; AdamW, linear warm-up, then cosine decay to 0;
* decoding is CKY (``best_bracketing``) over each span's log-probabilities minus that of
  label 0, plus ``--bias`` (more constituents as it grows).

A training run writes ``RUN/last.weights.h5`` and its dev F1 (EVALB, COLLINS.prm, gold
tags) every ``--eval_every`` epochs. ``--ensemble`` averages the members' probabilities,
prints dev F1 for each of ``--biases`` and, with ``--test_bias``, the test F1 and
``ENS/test.parsed``. Test is for the final choice only.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import random
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from t2t_lite.parsing import evalb
from t2t_lite.parsing.chart import NO_LABEL, best_bracketing, labeled_spans, tree_from_spans
from t2t_lite.parsing.evalb_files import evalb_gold_tree
from t2t_lite.parsing.treebank import read_tree_file
from t2t_lite.parsing.trees import Tree

MAX_CHARS = 20
PAD, UNK, BOS, EOS = 0, 1, 2, 3                 # word ids; characters add <bow>, <eow>
BOW, EOW, BOS_CHAR, EOS_CHAR = 2, 3, 4, 5


def read_splits(sample_dir: Path, splits=("train", "dev", "test")) -> Dict[str, List[Tree]]:
    from t2t_lite.data.problem import get_problem
    problem = get_problem("parsing_english_ptb_sample")
    return {split: [tree for path in problem.split_files(split, sample_dir)
                    for tree, _ in read_tree_file(path) if tree is not None]
            for split in splits}


class Vocabulary:
    """Words, characters and span labels of the training trees."""

    def __init__(self, trees: List[Tree]):
        self.word_count = collections.Counter(w for t in trees for w in t.words())
        self.words = ["<pad>", "<unk>", "<s>", "</s>"] + sorted(self.word_count)
        self.word_id = {w: i for i, w in enumerate(self.words)}
        chars = collections.Counter(c for w in self.word_count for c in w)
        self.chars = ["<pad>", "<unk>", "<bow>", "<eow>", "<s>", "</s>"] + sorted(chars)
        self.char_id = {c: i for i, c in enumerate(self.chars)}
        spans = collections.Counter(l for t in trees for l in labeled_spans(t).values())
        self.labels = [None] + sorted(spans)
        self.label_id = {l: i for i, l in enumerate(self.labels)}


def make_batch(vocab: Vocabulary, trees: List[Tree], word_dropout: float, rng: random.Random):
    """Arrays for ``trees``: words ``(B, T)``, characters ``(B, T, MAX_CHARS)``, span
    labels and their mask ``(B, T - 1, T - 1)``; ``T`` is the longest sentence plus 2,
    rounded up to a multiple of 8."""
    longest = max(len(t.words()) for t in trees) + 2
    T = int(math.ceil(longest / 8) * 8)
    words = np.zeros((len(trees), T), np.int32)
    chars = np.zeros((len(trees), T, MAX_CHARS), np.int32)
    labels = np.zeros((len(trees), T - 1, T - 1), np.int32)
    mask = np.zeros((len(trees), T - 1, T - 1), np.float32)
    for b, tree in enumerate(trees):
        sentence = tree.words()
        n = len(sentence)
        ids = []
        for w in sentence:
            i = vocab.word_id.get(w, UNK)
            count = vocab.word_count[w]
            if word_dropout and i != UNK and rng.random() < word_dropout / (word_dropout + count):
                i = UNK
            ids.append(i)
        words[b, :n + 2] = [BOS] + ids + [EOS]
        chars[b, 0, 0], chars[b, n + 1, 0] = BOS_CHAR, EOS_CHAR
        for k, w in enumerate(sentence, start=1):
            spelled = [BOW] + [vocab.char_id.get(c, UNK) for c in w[:MAX_CHARS - 2]] + [EOW]
            chars[b, k, :len(spelled)] = spelled
        mask[b][np.triu_indices(n + 1, 1)] = 1.0
        for (i, j), label in labeled_spans(tree).items():
            labels[b, i, j] = vocab.label_id.get(label, NO_LABEL)
    return words, chars, labels, mask


def batches(trees: List[Tree], batch_words: int, rng: random.Random, shuffle: bool):
    """Index lists of sentences of similar length, at most ``batch_words`` padded words."""
    order = sorted(range(len(trees)), key=lambda i: len(trees[i].words()) + rng.random())
    groups, group, longest = [], [], 0
    for i in order:
        n = len(trees[i].words()) + 2
        if group and max(longest, n) * (len(group) + 1) > batch_words:
            groups.append(group)
            group, longest = [], 0
        group.append(i)
        longest = max(longest, n)
    groups.append(group)
    if shuffle:
        rng.shuffle(groups)
    return groups


def build_model(vocab: Vocabulary, args):
    import keras
    import tensorflow as tf

    class SpanScorer(keras.Model):
        """(words (B, T), chars (B, T, C)) -> span label logits (B, T - 1, T - 1, L)."""

        # The attribute names are those the measured runs saved their weights under.
        def __init__(self):
            super().__init__()
            d = args.d_model
            self.wemb = keras.layers.Embedding(len(vocab.words), args.word_dim)
            self.cemb = keras.layers.Embedding(len(vocab.chars), args.char_dim)
            self.conv = keras.layers.Conv1D(args.char_out, 3, padding="same",
                                                 activation="relu")
            self.proj = keras.layers.Dense(d)
            self.pos = keras.layers.Embedding(512, d)
            self.emb_norm = keras.layers.LayerNormalization()
            self.drop = keras.layers.Dropout(args.dropout)
            self.blocks = [dict(
                ln1=keras.layers.LayerNormalization(),
                att=keras.layers.MultiHeadAttention(args.heads, d // args.heads,
                                                          dropout=args.attention_dropout),
                d1=keras.layers.Dropout(args.dropout),
                ln2=keras.layers.LayerNormalization(),
                f1=keras.layers.Dense(args.d_ff, activation="relu"),
                fd=keras.layers.Dropout(args.relu_dropout),
                f2=keras.layers.Dense(d),
                d2=keras.layers.Dropout(args.dropout)) for _ in range(args.layers)]
            for k, block in enumerate(self.blocks):
                for name, layer in block.items():
                    setattr(self, f"b{k}_{name}", layer)
            self.final_norm = keras.layers.LayerNormalization()
            self.q = keras.layers.Dense(args.mlp, use_bias=False)
            self.mlp_bias = self.add_weight(shape=(args.mlp,), initializer="zeros", name="mb")
            self.mlp_norm = keras.layers.LayerNormalization()
            self.out = keras.layers.Dense(len(vocab.labels))

        def call(self, words, chars, training=False):
            B, T = tf.shape(words)[0], tf.shape(words)[1]
            flat_chars = tf.reshape(chars, [-1, MAX_CHARS])
            char_mask = tf.cast(flat_chars > 0, tf.float32)[..., None]
            spelled = self.conv(self.cemb(flat_chars))
            spelled = tf.nn.relu(tf.reduce_max(spelled * char_mask - (1 - char_mask) * 1e4, 1))
            spelled = tf.reshape(spelled, [B, T, args.char_out])
            x = tf.concat([self.wemb(words), spelled], -1)
            x = self.proj(x) + self.pos(tf.range(T))[None]
            x = self.drop(self.emb_norm(x), training=training)
            present = words > 0
            attention_mask = present[:, None, :] & present[:, :, None]
            for block in self.blocks:
                h = block["ln1"](x)
                h = block["att"](h, h, attention_mask=attention_mask, training=training)
                x = x + block["d1"](h, training=training)
                h = block["f1"](block["ln2"](x))
                h = block["f2"](block["fd"](h, training=training))
                x = x + block["d2"](h, training=training)
            x = self.final_norm(x)
            forward, backward = x[..., :args.d_model // 2], x[..., args.d_model // 2:]
            fenceposts = tf.concat([forward[:, :-1], -backward[:, 1:]], -1)   # (B, T-1, d)
            # The MLP's first layer is linear, so W [f_j - f_i ; b_(i+1) - b_(j+1)] is
            # the difference of two projected fenceposts: [b, i, j] = P_j - P_i.
            projected = self.q(fenceposts)
            hidden = projected[:, None, :, :] - projected[:, :, None, :] + self.mlp_bias
            return self.out(tf.nn.relu(self.mlp_norm(hidden)))

    return SpanScorer()


def parse(models, vocab: Vocabulary, trees: List[Tree], bias: float) -> List[Tree]:
    """Each tree's words parsed by the members' mean span probabilities and CKY."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def log_probs(words, chars):
        probs = tf.add_n([tf.nn.softmax(m(words, chars, training=False), -1) for m in models])
        return tf.math.log(probs / len(models) + 1e-12)

    parsed: List[Tree] = [None] * len(trees)
    for group in batches(trees, 4000, random.Random(0), shuffle=False):
        words, chars, _, _ = make_batch(vocab, [trees[i] for i in group], 0.0, None)
        scores = log_probs(tf.constant(words), tf.constant(chars)).numpy()
        for b, i in enumerate(group):
            sentence = trees[i].words()
            n = len(sentence)
            relative = scores[b, :n + 1, :n + 1] - scores[b, :n + 1, :n + 1, :1]
            relative[..., 1:] += bias
            parsed[i] = tree_from_spans(sentence, best_bracketing(relative), vocab.labels)
    return parsed


def evalb_scores(gold: List[Tree], parsed: List[Tree]):
    return evalb.evaluate([evalb_gold_tree(t) for t in gold],
                          [evalb_gold_tree(t) for t in parsed])


def train(args, data, vocab: Vocabulary, out: Path) -> None:
    import keras
    import tensorflow as tf

    rng = random.Random(args.seed)
    tf.random.set_seed(args.seed)
    model = build_model(vocab, args)
    steps_per_epoch = len(batches(data["train"], args.batch_words, random.Random(0), False))
    total = steps_per_epoch * args.epochs

    def learning_rate(step: int) -> float:
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        done = (step - args.warmup) / max(1, total - args.warmup)
        return args.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, done)))

    optimizer = keras.optimizers.AdamW(learning_rate=args.lr, beta_2=0.98, clipnorm=5.0,
                                       weight_decay=0.0)

    @tf.function(reduce_retracing=True)
    def train_step(words, chars, labels, mask):
        with tf.GradientTape() as tape:
            logits = model(words, chars, training=True)
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.reduce_sum(loss * mask) / tf.reduce_sum(tf.cast(words > EOS, tf.float32))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    step, start = 0, time.time()
    for epoch in range(1, args.epochs + 1):
        losses = []
        for group in batches(data["train"], args.batch_words, rng, shuffle=True):
            arrays = make_batch(vocab, [data["train"][i] for i in group], args.word_dropout, rng)
            optimizer.learning_rate.assign(learning_rate(step))
            losses.append(float(train_step(*arrays)))
            step += 1
        line = f"epoch {epoch} step {step} loss {np.mean(losses):.4f} {time.time() - start:.0f}s"
        if epoch % args.eval_every == 0 or epoch == args.epochs:
            result = evalb_scores(data["dev"], parse([model], vocab, data["dev"], 0.0))
            line += f" dev F1 {result.f1:.2f} P {result.precision:.2f} R {result.recall:.2f}"
        print(line, flush=True)
    model.save_weights(str(out / "last.weights.h5"))
    print(f"train_seconds={time.time() - start:.0f}", flush=True)


def evaluate_ensemble(args, data, vocab: Vocabulary, out: Path) -> None:
    import tensorflow as tf

    models = []
    for run in args.ensemble.split(","):
        member_args = argparse.Namespace(**{**vars(args), **json.loads(
            (Path(run) / "args.json").read_text())})
        model = build_model(vocab, member_args)
        words, chars, _, _ = make_batch(vocab, data["dev"][:1], 0.0, None)
        model(tf.constant(words), tf.constant(chars))
        model.load_weights(str(Path(run) / "last.weights.h5"))
        models.append(model)
    for bias in (float(b) for b in args.biases.split(",")):
        result = evalb_scores(data["dev"], parse(models, vocab, data["dev"], bias))
        print(f"bias {bias}: dev F1 {result.f1:.2f} P {result.precision:.2f} "
              f"R {result.recall:.2f}", flush=True)
    if args.test_bias is not None:
        parsed = parse(models, vocab, data["test"], args.test_bias)
        (out / "test.parsed").write_text("".join(t.to_string() + "\n" for t in parsed))
        result = evalb_scores(data["test"], parsed)
        print(f"bias {args.test_bias}: test F1 {result.f1:.2f} P {result.precision:.2f} "
              f"R {result.recall:.2f} exact match {result.exact_match:.2f}", flush=True)


MODEL_FLAGS = dict(d_model=256, layers=4, heads=8, d_ff=1024, word_dim=128, char_dim=64,
                   char_out=128, mlp=250, dropout=0.2, attention_dropout=0.2,
                   relu_dropout=0.1)
TRAINING_FLAGS = dict(word_dropout=0.3, lr=8e-4, warmup=400, epochs=60, batch_words=1200,
                      seed=1, eval_every=5)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample_dir", type=Path, required=True)
    parser.add_argument("--output_dir", type=Path, required=True)
    for name, default in {**MODEL_FLAGS, **TRAINING_FLAGS}.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    parser.add_argument("--max_train_trees", type=int, default=0,
                        help="train on the first N trees only (0: all)")
    parser.add_argument("--ensemble", default="", help="comma-separated training runs")
    parser.add_argument("--biases", default="0,0.5,1,1.5,2")
    parser.add_argument("--test_bias", type=float, default=None)
    args = parser.parse_args(argv)
    data = read_splits(args.sample_dir)
    vocab = Vocabulary(data["train"])
    if args.max_train_trees:
        data["train"] = data["train"][:args.max_train_trees]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    if args.ensemble:
        evaluate_ensemble(args, data, vocab, args.output_dir)
        return
    (args.output_dir / "args.json").write_text(json.dumps(
        {name: getattr(args, name) for name in {**MODEL_FLAGS, **TRAINING_FLAGS}}))
    train(args, data, vocab, args.output_dir)


if __name__ == "__main__":
    main()
