"""t2t-lite benchmarks: what the commands do, timed on this machine.

Run with the repository installed (``pip install -e .``; ``pip install -e ".[bench]"`` for
``--compare``'s peers)::

    python scripts/benchmark.py train [--hparams_set=transformer_base] [--vocab_size=37000]
        [--batch=64] [--length=32] [--steps=5] [--jit_compile] [--mixed_precision] [--compare]
    python scripts/benchmark.py decode [--hparams_set=transformer_base] [--vocab_size=37000]
        [--batch=32] [--source_length=24] [--target_length=30] [--beam_size=4] [--alpha=0.6]
        [--repeats=5] [--quantize=none|int8] [--jit_compile]
        [--compare [--peers=ctranslate2_float32,ctranslate2_int8,torch]]
    python scripts/benchmark.py datagen --corpus_dir=DIR [--pairs=N,N] [--speedup_pairs=N]
        [--workers=2] [--min_pairs_for_workers=N] [--work_dir=DIR]
    python scripts/benchmark.py input --data_dir=DIR [--problem=translate_ende_multi30k]
        [--tmp_dir=RAW] [--hparams_set=transformer_base] [--no_model]
    python scripts/benchmark.py attention --data_dir=DIR [--hparams_set=transformer_tiny]
        [--steps=50] [--writes=3] [--every=1000]
    python scripts/benchmark.py sweep [--lengths=16,32,64,128,256] [--batches=16,32,64] > s.csv
    python scripts/benchmark.py plot --csv=s.csv --out=sweep.png

The settings are the commands' defaults: ``train`` times the trainer's ``TrainStep`` (no
XLA, float32, unless ``--jit_compile`` / ``--mixed_precision``, the trainer's flags);
``decode`` times ``t2t-lite-decoder``'s path: a ``Translator`` built by
``Translator.from_decode_hparams`` with the decoder's decode hparams (beam 4, alpha 0.6,
batches of 4,096 source tokens padded to their bucket), without XLA unless
``--jit_compile``, int8 by ``quantize_model`` with ``--quantize=int8``, and oneDNN's ops on
(``TF_ENABLE_ONEDNN_OPTS=1`` unless the environment sets it), all as the decoder does.
So that the work is fixed, ``decode``'s model has random weights whose EOS and pad logits
never win, every sentence has ``--source_length`` tokens (EOS included) and the decoder's
``extra_length`` is ``--target_length - --source_length``: every hypothesis runs to
``--target_length`` tokens (EOS included; checked on every run).

``mfu`` (train, decode) is the model's FLOPs per second divided by the float32 matmul peak
measured in the same process: a square float32 ``tf.matmul`` (``--peak_size``), its mean
rate over a window of ``--peak_seconds`` just before and just after every timed run, so
that load from other processes on a shared machine hits both alike. Each run's ratio uses
the mean of its two neighbouring windows; the figure printed is the median over the timed
runs. ``mfu_cpu_time`` is the same ratio per process CPU second. Model FLOPs are counted
analytically (``train_flops``/``decode_flops``): 2*m*n*k per matmul of the work asked for
(every projection, both attention matmuls, the tied softmax projection; training = 3x
the forward pass). Elementwise work, padding to buckets, tokenisation and the search's
bookkeeping are not counted: they are overhead the ratio exposes. The last two lines are
``peak_rss_mb=... matmul_peak_gflops=... mfu_cpu_time=...`` and ``tgt_tok_s=N [step_s=S]
mfu=M``.

``--compare`` (train, decode) then times the peers a user would pick instead
(``benchmark_peers.py``: CTranslate2 float32 and int8 and PyTorch ``nn.Transformer`` for
decode, PyTorch for train) on the same shapes, in paired rounds with t2t-lite (each round
times every one in turn, each after 0.5 s idle and an untimed run of its own; ``--repeats``
rounds for decode, ``--steps`` for train), printing ``peer NAME: S s, tgt_tok_s=N``,
``rounds vs NAME: ...`` and ``ratio_vs_NAME=R`` (R: the median of the per-round ratios of
the peer's time over t2t-lite's; > 1: t2t-lite is faster) before the last two lines.

``datagen`` times ``t2t-lite-datagen``'s work on a synthetic WMT-shaped corpus (made in
``--corpus_dir`` when missing), each run in a fresh process; ``input`` reads training
batches of a problem's generated data and compares their tokens/s with a training step's;
``attention`` times the trainer's attention summaries against training steps; ``sweep``
runs ``train`` over batches x lengths in fresh processes and prints CSV; ``plot`` draws it.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, Iterable

import benchmark_peers
from t2t_lite.commands.quantize_flag import QUANTIZE_CHOICES, use_onednn_ops  # no TF
from t2t_lite.decoding.config import DecodeHParams  # no TF
from t2t_lite.flag_fields import non_negative_int, positive_int  # no TF

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
DECODER_DEFAULTS = DecodeHParams()


# FLOP counts --------------------------------------------------------------------------
def _dims(hparams):
    d = hparams.hidden_size
    return (d, hparams.filter_size, hparams.num_hidden_layers,
            hparams.attention_key_channels or d, hparams.attention_value_channels or d)


def encoder_flops(hparams, batch: int, source_length: int) -> float:
    """Forward matmul FLOPs of the encoder on [batch, source_length]."""
    d, ff, n, kc, vc = _dims(hparams)
    s = source_length
    per_token = (2 * d * (2 * kc + vc) + 2 * vc * d       # fused QKV, output projection
                 + 2 * s * kc + 2 * s * vc                # scores, values
                 + 4 * d * ff)                            # feed-forward
    return float(batch * s * n * per_token)


def train_flops(hparams, vocab_size: int, batch: int, source_length: int,
                target_length: int) -> float:
    """Training FLOPs of one step: 3 x forward (encoder, decoder, softmax projection).
    Attention counts every score of the [t, t] and [t, s] matrices as computed (the
    causal half is not subtracted)."""
    d, ff, n, kc, vc = _dims(hparams)
    s, t = source_length, target_length
    decoder_per_token = (2 * d * (2 * kc + vc) + 2 * vc * d + 2 * t * (kc + vc)  # self
                         + 2 * d * kc + 2 * vc * d + 2 * s * (kc + vc)           # enc-dec
                         + 4 * d * ff)
    memory_kv = 2 * d * (kc + vc) * s                     # enc-dec K/V, per sentence
    forward = (encoder_flops(hparams, batch, s)
               + batch * n * (t * decoder_per_token + memory_kv)
               + batch * t * 2 * d * vocab_size)          # softmax projection
    return 3.0 * forward


def decode_flops(hparams, vocab_size: int, batch: int, source_length: int,
                 target_length: int, beam_size: int) -> float:
    """FLOPs a beam search of ``target_length`` steps requires: the encoder, the
    encoder-decoder keys/values once per sentence, and per step i (0-based) one decoder
    position per live hypothesis (one per sentence at step 0, ``beam_size`` after)
    attending over its i + 1 cached positions and the source, plus the softmax
    projection."""
    d, ff, n, kc, vc = _dims(hparams)
    s = source_length
    total = encoder_flops(hparams, batch, s) + batch * n * 2 * d * (kc + vc) * s
    for i in range(target_length):
        rows = batch * (1 if i == 0 else beam_size)
        per_row = n * (2 * d * (2 * kc + vc) + 2 * vc * d + 2 * (i + 1) * (kc + vc)
                       + 2 * d * kc + 2 * vc * d + 2 * s * (kc + vc)
                       + 4 * d * ff) + 2 * d * vocab_size
        total += rows * per_row
    return float(total)


# The harness: matmul peak, timed runs, the report --------------------------------------
class Peak:
    """float32 matmul FLOP/s of [n, n] x [n, n] with TF's kernel and thread pool: the mean
    rate of back-to-back matmuls over at least ``seconds`` (a window, not a best case, so
    that a burst of load from other processes weighs on it as it weighs on the model)."""

    def __init__(self, tf, size: int, seconds: float):
        self.size = size
        self.seconds = seconds
        self.a = tf.random.normal([size, size], seed=1)
        self.b = tf.random.normal([size, size], seed=2)
        self.fn = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)[:1, :1]),
                              autograph=False)
        self.fn(self.a, self.b).numpy()

    def sample(self):
        """-> (FLOP/s over wall time, FLOP per process CPU second)."""
        count, start, cpu = 0, time.perf_counter(), time.process_time()
        while True:
            self.fn(self.a, self.b).numpy()
            count += 1
            wall = time.perf_counter() - start
            if wall >= self.seconds:
                break
        flops = 2.0 * self.size ** 3 * count
        return flops / wall, flops / max(time.process_time() - cpu, 1e-9)


def timed_interleaved(run: Callable[[], object], peak: Peak, repeats: int) -> Dict[str, list]:
    """Times ``run`` ``repeats`` times with a peak window before and after each."""
    times, cpu_times, peaks = [], [], [peak.sample()]
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu)
        peaks.append(peak.sample())
    return {"times": times, "cpu_times": cpu_times,
            "local_peaks": [(peaks[i][0] + peaks[i + 1][0]) / 2 for i in range(repeats)],
            "local_cpu_peaks": [(peaks[i][1] + peaks[i + 1][1]) / 2 for i in range(repeats)]}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def report(kind: str, result, flops: float, tokens: int, with_step: bool) -> None:
    """One line per timed run, then the two last lines (see the module doc)."""
    times, peaks = result["times"], result["local_peaks"]
    ratios = [flops / t / p for t, p in zip(times, peaks)]
    cpu_ratios = [flops / c / p for c, p in zip(result["cpu_times"], result["local_cpu_peaks"])]
    for i, (t, p, r, c) in enumerate(zip(times, peaks, ratios, cpu_ratios)):
        print(f"  {kind} {i}: {t:.3f} s, {flops / t / 1e9:.1f} GFLOP/s, "
              f"matmul peak {p / 1e9:.1f} GFLOP/s, ratio {r:.3f} (per CPU second {c:.3f})",
              flush=True)
    step_s = statistics.median(times)
    print(f"peak_rss_mb={peak_rss_mb():.0f} matmul_peak_gflops={max(peaks) / 1e9:.1f} "
          f"mfu_cpu_time={statistics.median(cpu_ratios):.3f}", flush=True)
    line = f"tgt_tok_s={tokens / step_s:.0f}"
    if with_step:
        line += f" step_s={step_s:.3f}"
    print(f"{line} mfu={statistics.median(ratios):.3f}", flush=True)


def time_and_report(args, run: Callable[[], object], flops: float, tokens: int,
                       kind: str, rounds: int, peer_runs: Callable[[], Dict]) -> None:
    """The timed part of train and decode once ``run`` is warm: mfu's timed runs, then
    (``--compare``) the paired rounds with the peers, then the report."""
    import tensorflow as tf
    result = timed_interleaved(run, Peak(tf, args.peak_size, args.peak_seconds), rounds)
    if args.compare_ready:
        benchmark_peers.compare_paired(run, peer_runs(), rounds, tokens)
    report(kind, result, flops, tokens, kind == "train")


# Setting up ---------------------------------------------------------------------------
def setup_tf(args):
    """TensorFlow imported as the command of ``args.mode`` sets it up (decode: oneDNN's
    ops on, as ``t2t-lite-decoder``), with ``--intra_threads``/``--inter_threads`` and
    (train) ``--mixed_precision`` applied."""
    if args.mode == "decode":
        use_onednn_ops()
    import tensorflow as tf
    if getattr(args, "intra_threads", 0):
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    if getattr(args, "inter_threads", 0):
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    if getattr(args, "mixed_precision", False):
        import keras
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    return tf


def get_hparams(hparams_set: str, overrides: str = ""):
    """The registered hparams set with ``overrides``; imports no TensorFlow."""
    import t2t_lite.hparams  # noqa: F401  (registers the sets)
    from t2t_lite.registry import hparams as registered
    return registered(hparams_set, overrides)


def checked_hparams(parser: argparse.ArgumentParser, hparams_set: str, overrides: str = ""):
    """``get_hparams``; an unknown set or a bad override ends as the parser's usage and
    one ``error:`` line (exit 2), as a bad flag does."""
    from t2t_lite.errors import UserError
    try:
        return get_hparams(hparams_set, overrides)
    except UserError as error:
        parser.error(str(error))


def describe(args, tf) -> str:
    """The run's settings for the first output line; ``cpu=`` names the CPU's SIMD flags
    (int8 and bfloat16 speeds depend on them), ``onednn=`` whether oneDNN's ops are on."""
    from t2t_lite.cpu_features import simd_summary
    from t2t_lite.layers.int8 import onednn_enabled
    return (f"jit_compile={args.jit_compile} "
            f"mixed_precision={getattr(args, 'mixed_precision', False)} "
            f"threads(intra,inter)=({tf.config.threading.get_intra_op_parallelism_threads()},"
            f"{tf.config.threading.get_inter_op_parallelism_threads()}) "
            f"cpu={simd_summary()} onednn={onednn_enabled()}")


def build_model(hparams, vocab_size: int):
    from t2t_lite.models.transformer import Transformer
    model = Transformer(hparams, vocab_size)
    model.build()
    return model


def peers_ready(args) -> bool:
    """Whether ``--compare`` can run its peers; if not, prints one line saying what to
    install. A ``--peers`` name that is not a peer of the mode exits with one error line.
    Runs before TensorFlow is imported (PyTorch must load first)."""
    benchmark_peers.check_peers(args.mode, args.peers)
    absent = benchmark_peers.missing()
    if absent:
        print(f"--compare: {', '.join(absent)} not installed; install the peers with "
              f"{benchmark_peers.INSTALL_HINT}", flush=True)
        return False
    benchmark_peers.preload()
    return True


# train ----------------------------------------------------------------------------------
def make_train_step(hparams, vocab_size: int, iterator, jit_compile: bool):
    """The trainer's ``TrainStep`` (forward, label-smoothed loss, backward, Adam) on a new
    model over ``iterator``'s batches. Returns (model, step() -> target tokens of the
    step, synchronised)."""
    import tensorflow as tf
    from t2t_lite.training.optimizer import make_optimizer
    from t2t_lite.training.train_step import TrainStep

    model = build_model(hparams, vocab_size)
    optimizer = make_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    train_step = TrainStep(model, optimizer, tf.distribute.get_strategy(),
                           hparams.label_smoothing, jit_compile=jit_compile)
    return model, lambda: float(train_step.step(iterator)["tokens"])


def random_batches(vocab_size: int, batch: int, length: int):
    """An endless iterator over one random batch: inputs and targets int32 [batch, length],
    EOS last, no padding."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(0)
    features = {name: rng.integers(2, vocab_size, size=(batch, length), dtype=np.int32)
                for name in ("inputs", "targets")}
    for ids in features.values():
        ids[:, -1] = 1
    return iter(tf.data.Dataset.from_tensors(features).repeat())


def cmd_train(args) -> None:
    tf = setup_tf(args)
    hparams = get_hparams(args.hparams_set, args.hparams)
    _, run = make_train_step(hparams, args.vocab_size,
                             random_batches(args.vocab_size, args.batch, args.length),
                             args.jit_compile)
    flops = train_flops(hparams, args.vocab_size, args.batch, args.length, args.length)
    print(f"train {args.hparams_set} vocab={args.vocab_size} batch={args.batch}x{args.length} "
          f"{describe(args, tf)}", flush=True)
    print(f"model FLOPs per step: {flops / 1e9:.1f} GFLOP (3 x forward)", flush=True)
    start = time.perf_counter()
    for _ in range(max(1, args.warmup)):
        run()
    print(f"warm-up (trace/compile + {args.warmup} step(s)): "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    time_and_report(args, run, flops, args.batch * args.length, "train", args.steps,
                       lambda: benchmark_peers.train_peer_runs(args, hparams))


# decode ---------------------------------------------------------------------------------
LOSING_LOGIT_PER_CHANNEL = -4.0


def make_ids_lose(model, ids: Iterable[int]) -> None:
    """Sets the random model's weights so that the logits of ``ids`` are far below every
    other: the decoder's output LayerNorm gets beta 1 on every channel and those ids'
    softmax rows ``LOSING_LOGIT_PER_CHANNEL`` on every channel, so (gamma = 1, the
    normalized values sum to 0) their logits are 4 * -d_model (-2,048 at base dimensions,
    where the other logits lie within about -7..7). Every hypothesis then runs to the
    search's forced last-position EOS, with no extra pass over the logits. The embedding
    is shared, so those ids also embed as that row (the work is the same)."""
    import tensorflow as tf
    decoder = model.decoder
    norm = decoder.final_norm if decoder.pre_norm else decoder.blocks[-1].feed_forward_norm
    norm.beta.assign(tf.ones_like(norm.beta))
    weights = model.embedding.softmax_weights                              # [V, d]
    ids = sorted(set(ids))
    rows = tf.fill([len(ids), weights.shape[1]], LOSING_LOGIT_PER_CHANNEL)
    weights.assign(tf.tensor_scatter_nd_update(tf.convert_to_tensor(weights),
                                               [[i] for i in ids], rows))


def word_vocabulary(vocab_size: int):
    """A word-piece vocabulary of ``vocab_size`` whole words (``<pad> <EOS> <unk> w3 ...``):
    id i >= 3 detokenises to the word ``wi``, so a hypothesis of n tokens before EOS reads
    as n words."""
    from t2t_lite.data.vocab import WordPieceVocab
    with tempfile.TemporaryDirectory(prefix="t2t_lite_benchmark_") as directory:
        path = Path(directory) / "words.wordpiece.txt"
        path.write_text("\n".join(["<pad>", "<EOS>", "<unk>"]
                                  + [f"w{i}" for i in range(3, vocab_size)]) + "\n")
        return WordPieceVocab(path)


def make_decode(args, hparams) -> Callable[[], list]:
    """``t2t-lite-decoder``'s translation of one fixed batch of random sentences, with
    ``args``' work (``--batch`` sentences of ``--source_length`` tokens, EOS included, each
    translated to ``--target_length`` tokens, EOS included) and the decoder's settings.
    Returns run() -> the ``Translator``'s n-best lists; a hypothesis of another length is
    an error."""
    import numpy as np
    from t2t_lite.data.vocab import EOS_ID, PAD_ID
    from t2t_lite.decoding.translator import Translator

    model = build_model(hparams, args.vocab_size)
    make_ids_lose(model, (PAD_ID, EOS_ID))
    if args.quantize == "int8":   # as t2t-lite-decoder --quantize=int8
        from t2t_lite.layers.int8 import describe_quantization, quantize_model
        print(describe_quantization(quantize_model(model), args.jit_compile), flush=True)
    decode_hparams = DECODER_DEFAULTS.replace(
        beam_size=args.beam_size, alpha=args.alpha,
        extra_length=args.target_length - args.source_length)
    translator = Translator.from_decode_hparams(model, word_vocabulary(args.vocab_size),
                                                decode_hparams, jit_compile=args.jit_compile)
    rng = np.random.default_rng(0)
    sources = [[int(i) for i in row] + [EOS_ID] for row in
               rng.integers(3, args.vocab_size, size=(args.batch, args.source_length - 1))]
    words = args.target_length - 1

    def run():
        nbest = translator.translate_encoded(sources)
        lengths = sorted({len(text.split()) for beams in nbest for text, _ in beams})
        if lengths != [words] or any(len(beams) != args.beam_size for beams in nbest):
            raise RuntimeError(f"hypotheses of {lengths} tokens before EOS, not {words}: the "
                               f"benchmark's work is not the stated one")
        return nbest

    return run


def check_decode_work(parser: argparse.ArgumentParser, args, hparams) -> None:
    """The work ``decode`` asks for fits the decoder: one ``error:`` line if not."""
    if args.target_length < args.source_length:
        parser.error(f"--target_length={args.target_length} is below --source_length="
                     f"{args.source_length}: the decoder's extra_length (target minus source "
                     f"length) cannot be negative; raise --target_length")
    longest = args.target_length if hparams.pos == "emb" else args.source_length
    if longest > hparams.max_length:
        which = "--target_length" if hparams.pos == "emb" else "--source_length"
        parser.error(f"{which}={longest} exceeds the model's max_length="
                     f"{hparams.max_length}; lower it or raise --hparams=max_length=N")


def cmd_decode(args) -> None:
    import numpy as np
    tf = setup_tf(args)
    hparams = get_hparams(args.hparams_set, args.hparams)
    run = make_decode(args, hparams)
    flops = decode_flops(hparams, args.vocab_size, args.batch, args.source_length,
                         args.target_length, args.beam_size)
    print(f"decode {args.hparams_set} vocab={args.vocab_size} batch={args.batch} "
          f"source={args.source_length} target={args.target_length} beam={args.beam_size} "
          f"alpha={args.alpha} quantize={args.quantize} {describe(args, tf)}", flush=True)
    print(f"required FLOPs per search: {flops / 1e9:.1f} GFLOP", flush=True)
    start = time.perf_counter()
    for _ in range(max(1, args.warmup)):
        run()
    print(f"warm-up (trace/compile + {args.warmup} search(es)): "
          f"{time.perf_counter() - start:.1f} s", flush=True)

    def peer_runs():
        # The peers' own vocabularies keep ids 0-3 special: sources use ids >= 4, EOS added
        # by CTranslate2 (and appended for PyTorch), source_length tokens in all.
        rng = np.random.default_rng(1)
        source = rng.integers(4, args.vocab_size, size=(args.batch, args.source_length - 1))
        return benchmark_peers.decode_peer_runs(args, hparams, source)

    time_and_report(args, run, flops, args.batch * args.target_length, "search",
                       args.repeats, peer_runs)


# datagen --------------------------------------------------------------------------------
MEAN_WORDS = 23.0
SIGMA = 0.6


def make_corpus(corpus_dir: Path, pairs: int, seed: int = 1) -> None:
    """Writes ``source.txt`` and ``target.txt`` (``pairs`` lines each) unless present:
    sentence lengths log-normal with a mean of ~23 words (sigma 0.6, 1..250 words), the
    target's length the source's times a log-normal ratio (sigma 0.15), words drawn from a
    Zipfian (s=1.1) vocabulary of 50,000 made-up words per side (frequent words short)."""
    import numpy as np
    done = corpus_dir / "pairs.txt"
    if done.exists() and int(done.read_text()) >= pairs:
        return
    corpus_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzäöüéèà"))

    def vocabulary(size):
        lengths = np.clip((2 + np.log1p(np.arange(size)) * 0.9).astype(int), 1, 14)
        return [("".join(rng.choice(letters, n))) for n in lengths]

    ranks = np.arange(1, 50_001)
    cdf = np.cumsum(1.0 / ranks ** 1.1)
    cdf /= cdf[-1]
    words = [np.array(vocabulary(len(ranks)), dtype=object) for _ in range(2)]
    mu = math.log(MEAN_WORDS) - SIGMA ** 2 / 2
    chunk = 100_000
    with open(corpus_dir / "source.txt", "w", encoding="utf-8") as src, \
            open(corpus_dir / "target.txt", "w", encoding="utf-8") as tgt:
        for start in range(0, pairs, chunk):
            n = min(chunk, pairs - start)
            src_len = np.clip(np.rint(rng.lognormal(mu, SIGMA, n)), 1, 250).astype(int)
            tgt_len = np.clip(np.rint(src_len * rng.lognormal(0, 0.15, n)), 1, 250).astype(int)
            for lengths, vocab, out in ((src_len, words[0], src), (tgt_len, words[1], tgt)):
                ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
                flat = vocab[ids]
                bounds = np.concatenate([[0], np.cumsum(lengths)])
                out.write("".join(" ".join(flat[bounds[i]:bounds[i + 1]]) + "\n"
                                  for i in range(n)))
    done.write_text(str(pairs))


def synthetic_problem(corpus_dir: Path, pairs: int, vocab_size: int, vocab_sentences: int):
    """A translation problem over the first ``pairs`` pairs of the synthetic corpus;
    dev/test: 3,000 pairs after them."""
    from t2t_lite.data.problem import TranslationProblem, VocabSpec
    from t2t_lite.data.raw import read_parallel_lines

    class SyntheticWmt(TranslationProblem):
        vocab_spec = VocabSpec(kind="sentencepiece", size=vocab_size,
                               max_sentences=vocab_sentences)
        max_length = 256
        train_shards = 10
        registered_name = "benchmark_synthetic_wmt"

        def text_pairs(self, split, tmp_dir):
            lines = read_parallel_lines(corpus_dir / "source.txt", corpus_dir / "target.txt")
            if split == "train":
                return itertools.islice(lines, pairs)
            offset = pairs + (0 if split == "dev" else 3000)
            return itertools.islice(lines, offset, offset + 3000)

    return SyntheticWmt()


def _cpu_seconds(who: int) -> float:
    """User + system CPU seconds of this process (``RUSAGE_SELF``) or of its finished
    children, the encoding workers (``RUSAGE_CHILDREN``)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def datagen_once(args) -> dict:
    """One datagen run in this process (``--run`` pairs); returns its figures."""
    from t2t_lite.data import encoding
    from t2t_lite.data.datagen import generate_problem_data
    if args.min_pairs_for_workers is not None:
        encoding.MIN_PAIRS_FOR_WORKERS = args.min_pairs_for_workers
    problem = synthetic_problem(Path(args.corpus_dir), args.run, args.vocab_size,
                                args.vocab_sentences)
    data_dir = Path(args.data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    if args.vocab_from:
        shutil.copy(Path(args.vocab_from) / problem.vocab_filename, data_dir)
    start = time.perf_counter()
    summary = generate_problem_data(problem, data_dir, data_dir, workers=args.workers)
    seconds = time.perf_counter() - start
    train = summary.splits["train"]
    return {"pairs": args.run, "workers": args.workers, "seconds": round(seconds, 1),
            "pairs_per_s": round(args.run / seconds), "train_examples": train.examples,
            "train_shards": len(train.shards), "vocab_reused": summary.vocab_reused,
            "cpu_s": round(_cpu_seconds(resource.RUSAGE_SELF)
                           + _cpu_seconds(resource.RUSAGE_CHILDREN), 1),
            "main_cpu_s": round(_cpu_seconds(resource.RUSAGE_SELF), 1),
            "workers_cpu_s": round(_cpu_seconds(resource.RUSAGE_CHILDREN), 1),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024}


def _datagen_child(args, pairs: int, workers: int, data_dir: Path, vocab_from: str = "") -> dict:
    command = [sys.executable, os.path.abspath(__file__), "datagen",
               f"--corpus_dir={args.corpus_dir}", f"--run={pairs}", f"--workers={workers}",
               f"--data_dir={data_dir}", f"--vocab_size={args.vocab_size}",
               f"--vocab_sentences={args.vocab_sentences}"]
    if vocab_from:
        command.append(f"--vocab_from={vocab_from}")
    if args.min_pairs_for_workers is not None:
        command.append(f"--min_pairs_for_workers={args.min_pairs_for_workers}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["pairs_per_cpu_s"] = round(pairs / result["cpu_s"])
    print(json.dumps(result), flush=True)
    return result


def cmd_datagen(args) -> None:
    """``--pairs``: the whole datagen (vocabulary from a bounded sample + encoding) per
    size, one JSON line each; ``--speedup_pairs``: the same pairs encoded with 1 then 2
    workers, reusing one vocabulary, and their ratio."""
    if args.run:
        print(json.dumps(datagen_once(args)))
        return
    sizes = [int(p) for p in args.pairs.split(",") if p]
    largest = max(sizes + [args.speedup_pairs])
    start = time.perf_counter()
    make_corpus(Path(args.corpus_dir), largest + 6000)
    made = int((Path(args.corpus_dir) / "pairs.txt").read_text())
    print(f"corpus: {made:,} pairs in {args.corpus_dir} "
          f"({time.perf_counter() - start:.0f} s to make or find)", flush=True)
    work = Path(args.work_dir)
    for pairs in sizes:
        _datagen_child(args, pairs, args.workers, work / f"full_{pairs}")
    if args.speedup_pairs:
        vocab_dir = work / (f"full_{sizes[0]}" if sizes else "vocab")
        if not list(vocab_dir.glob("vocab.*")):  # kept from an earlier run: reused
            _datagen_child(args, 20_000, 1, vocab_dir)
        one = _datagen_child(args, args.speedup_pairs, 1, work / "speedup_1", str(vocab_dir))
        two = _datagen_child(args, args.speedup_pairs, 2, work / "speedup_2", str(vocab_dir))
        print(f"speed-up 2 workers / 1 worker: {one['seconds'] / two['seconds']:.2f}x "
              f"({one['pairs_per_s']:,} -> {two['pairs_per_s']:,} pairs/s)")


# input ----------------------------------------------------------------------------------
def measure_pipeline(dataset, steps: int, warmup: int) -> Dict[str, float]:
    """Batches/s and target tokens/s (real and padded) of ``steps`` batches of ``dataset``
    after ``warmup`` batches."""
    import tensorflow as tf
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    real = padded = 0
    start = time.perf_counter()
    for _ in range(steps):
        targets = next(iterator)["targets"]
        real += int(tf.math.count_nonzero(targets))
        padded += int(tf.size(targets))
    seconds = time.perf_counter() - start
    return {"batches_per_s": steps / seconds, "tokens_per_s": real / seconds,
            "padded_tokens_per_s": padded / seconds}


def generated_problem(problem_name: str, data_dir: str, tmp_dir=None):
    """The registered problem, its data generated into ``data_dir`` when missing."""
    from t2t_lite.data.datagen import generate, stats_path
    from t2t_lite.data.problem import get_problem
    problem = get_problem(problem_name)
    if not stats_path(data_dir, problem.name, "train").exists():
        print(generate(problem.name, data_dir, tmp_dir).format(), flush=True)
    return problem


def cmd_input(args) -> None:
    setup_tf(args)
    from t2t_lite.data.pipeline import make_dataset
    problem = generated_problem(args.problem, args.data_dir, args.tmp_dir)
    hparams = get_hparams(args.hparams_set, args.hparams)
    pipeline = measure_pipeline(
        make_dataset(problem, args.data_dir, "train", hparams, training=True, seed=1),
        args.steps, args.warmup)
    print(f"pipeline {problem.name} batch_size={hparams.batch_size} max_length="
          f"{hparams.max_length}: {pipeline['batches_per_s']:.1f} batches/s, "
          f"{pipeline['tokens_per_s']:,.0f} target tokens/s "
          f"({pipeline['padded_tokens_per_s']:,.0f} with padding)", flush=True)
    if args.no_model:
        return
    model_hparams = get_hparams(args.model_hparams).replace(
        batch_size=args.model_batch_size, max_length=min(args.model_batch_size, 256))
    batches = iter(make_dataset(problem, args.data_dir, "train", model_hparams,
                                training=True, seed=1))
    _, step = make_train_step(model_hparams, problem.load_vocab(args.data_dir).vocab_size,
                              batches, args.jit_compile)
    step()  # trace
    tokens, start = 0.0, time.perf_counter()
    for _ in range(args.model_steps):
        tokens += step()
    seconds = time.perf_counter() - start
    print(f"model {args.model_hparams} batch_size={args.model_batch_size}: "
          f"{args.model_steps / seconds:.3f} steps/s, {tokens / seconds:,.0f} target tokens/s",
          flush=True)
    print(f"pipeline / model tokens per second: "
          f"{pipeline['tokens_per_s'] / (tokens / seconds):.0f}x")


# attention ------------------------------------------------------------------------------
ATTENTION_PROBLEM = "translate_ende_numbers"


def cmd_attention(args) -> None:
    """``--steps`` training steps on ``translate_ende_numbers``, then ``--writes`` calls of
    the trainer's ``AttentionMonitor.write`` (the first one traces the greedy search); the
    overhead at a write every ``--every`` steps is ``mean write time / (every * mean step
    time)``. Prints one JSON line."""
    setup_tf(args)
    from t2t_lite.data.pipeline import make_dataset
    from t2t_lite.monitoring.summaries import AttentionMonitor
    problem = generated_problem(ATTENTION_PROBLEM, args.data_dir, args.data_dir)
    vocabulary = problem.load_vocab(args.data_dir)
    hparams = get_hparams(args.hparams_set, args.hparams)
    batches = iter(make_dataset(problem, args.data_dir, "train", hparams, training=True, seed=1))
    model, step = make_train_step(hparams, vocabulary.vocab_size, batches, args.jit_compile)
    for _ in range(3):  # tracing and warm-up
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    step_seconds = (time.perf_counter() - start) / args.steps

    with tempfile.TemporaryDirectory(prefix="attention_bench_") as logdir:
        monitor = AttentionMonitor(model, problem, vocabulary, args.data_dir, logdir)
        write_seconds = []
        for write in range(args.writes):
            start = time.perf_counter()
            monitor.write(write)
            write_seconds.append(time.perf_counter() - start)
        monitor.close()
    steady = sum(write_seconds[1:]) / max(len(write_seconds) - 1, 1)
    mean = sum(write_seconds) / len(write_seconds)
    print(json.dumps({
        "hparams_set": args.hparams_set, "step_seconds": round(step_seconds, 4),
        "write_seconds": [round(s, 2) for s in write_seconds],
        "every_steps": args.every,
        "overhead_percent_mean": round(100 * mean / (args.every * step_seconds), 2),
        "overhead_percent_steady": round(100 * steady / (args.every * step_seconds), 2),
        "records_per_write": 2 * len(monitor.probes),
    }))


# sweep and plot -------------------------------------------------------------------------
def cmd_sweep(args) -> None:
    """One ``train`` timing per (batch, length) in a fresh process each (peak RSS is per
    process); prints CSV rows."""
    print("batch,length,step_s,peak_rss_mb,mfu", flush=True)
    for batch in [int(b) for b in args.batches.split(",")]:
        for length in [int(n) for n in args.lengths.split(",")]:
            command = [sys.executable, os.path.abspath(__file__), "train",
                       f"--hparams_set={args.hparams_set}", f"--hparams={args.hparams}",
                       f"--vocab_size={args.vocab_size}", f"--batch={batch}",
                       f"--length={length}", f"--steps={args.steps}",
                       f"--warmup={args.warmup}", f"--peak_size={args.peak_size}",
                       f"--peak_seconds={args.peak_seconds}"] + (
                           ["--jit_compile"] if args.jit_compile else ["--no-jit_compile"])
            out = subprocess.run(command, capture_output=True, text=True)
            lines = out.stdout.strip().splitlines()
            if out.returncode or not lines:
                print(f"{batch},{length},failed,,  # {out.stderr.strip()[-200:]}", flush=True)
                continue
            fields = dict(kv.split("=") for kv in lines[-1].split())
            rss = dict(kv.split("=") for kv in lines[-2].split())["peak_rss_mb"]
            print(f"{batch},{length},{fields['step_s']},{rss},{fields['mfu']}", flush=True)


def cmd_plot(args) -> None:
    """Step time per target token and peak RSS against sentence length, one line per
    batch, from the CSV that ``sweep`` prints."""
    import csv
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(args.csv) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))
                if r["step_s"] not in ("", "failed")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=80)
    for batch in sorted({int(r["batch"]) for r in rows}):
        mine = sorted((int(r["length"]), float(r["step_s"]), float(r["peak_rss_mb"]))
                      for r in rows if int(r["batch"]) == batch)
        lengths = [m[0] for m in mine]
        per_token = [m[1] / (batch * m[0]) * 1e3 for m in mine]
        left.plot(lengths, per_token, "o-", label=f"batch {batch}")
        right.plot(lengths, [m[2] / 1024 for m in mine], "o-", label=f"batch {batch}")
    left.set(xscale="log", xlabel="sentence length (tokens, each side)",
             ylabel="step time per target token (ms)", title="time / token")
    right.set(xscale="log", xlabel="sentence length (tokens, each side)",
              ylabel="peak RSS (GiB)", title="memory")
    ticks = sorted({int(r["length"]) for r in rows})
    for axis in (left, right):
        axis.set_xticks(ticks, [str(t) for t in ticks])
        axis.minorticks_off()
        axis.grid(alpha=0.3)
        axis.legend()
    fig.suptitle(args.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1024:.0f} KiB)")


# Flags ----------------------------------------------------------------------------------
def _flag_parent(*adders: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    for add in adders:
        add(parent)
    return parent


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """The model of train, decode and sweep: a registered hparams set on a vocabulary."""
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--hparams", default="", help="overrides, e.g. num_heads=4")
    parser.add_argument("--vocab_size", type=positive_int, default=37000)


def add_jit_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jit_compile", action=argparse.BooleanOptionalAction, default=False,
                        help="compile the train step / the search with XLA (the commands' "
                             "--jit_compile; default off, as in the commands)")


def add_timing_flags(parser: argparse.ArgumentParser) -> None:
    """mfu's matmul peak, warm-up and thread pools (train, decode, sweep)."""
    parser.add_argument("--intra_threads", type=non_negative_int, default=0,
                        help="0: TF's default")
    parser.add_argument("--inter_threads", type=non_negative_int, default=0,
                        help="0: TF's default")
    parser.add_argument("--peak_size", type=positive_int, default=2048)
    parser.add_argument("--peak_seconds", type=float, default=3.0,
                        help="length of each matmul-peak window around a timed run")
    parser.add_argument("--warmup", type=non_negative_int, default=2)


def add_compare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compare", action="store_true",
                        help="also time the peers (CTranslate2 float32/int8 and PyTorch for "
                             "decode, PyTorch for train; pip install -e .[bench]) in paired "
                             "rounds and print ratio_vs_NAME lines (their time / t2t-lite's)")
    parser.add_argument("--peers", default="",
                        help="with --compare: a comma-separated subset of the peers, e.g. "
                             "ctranslate2_float32,ctranslate2_int8 (default: all)")


def add_decode_work_flags(parser: argparse.ArgumentParser) -> None:
    """The search's work: sentences, their source and target lengths, beam size and
    alpha (defaults: the decoder's)."""
    parser.add_argument("--batch", type=positive_int, default=32, help="sentences")
    parser.add_argument("--source_length", type=positive_int, default=24,
                        help="tokens per source sentence, EOS included")
    parser.add_argument("--target_length", type=positive_int, default=30,
                        help="tokens of every hypothesis, EOS included (>= --source_length)")
    parser.add_argument("--beam_size", type=positive_int, default=DECODER_DEFAULTS.beam_size)
    parser.add_argument("--alpha", type=float, default=DECODER_DEFAULTS.alpha)
    parser.add_argument("--quantize", default="none", choices=QUANTIZE_CHOICES,
                        help="int8: as t2t-lite-decoder --quantize=int8 (quantize_model)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    model, jit, timing, compare = (_flag_parent(add_model_flags), _flag_parent(add_jit_flag),
                                   _flag_parent(add_timing_flags),
                                   _flag_parent(add_compare_flags))

    train = sub.add_parser("train", parents=[model, jit, timing, compare],
                           help="the trainer's step on one random batch")
    train.add_argument("--batch", type=positive_int, default=64, help="sentences")
    train.add_argument("--length", type=positive_int, default=32, help="tokens each side")
    train.add_argument("--steps", type=positive_int, default=5)
    train.add_argument("--mixed_precision", action="store_true",
                       help="bfloat16 compute, float32 variables (the trainer's flag)")

    decode = sub.add_parser("decode", parents=[model, jit, timing, compare],
                            help="the decoder's translation of random sentences")
    add_decode_work_flags(decode)
    decode.add_argument("--repeats", type=positive_int, default=5)

    datagen = sub.add_parser("datagen", help="datagen on a synthetic WMT-shaped corpus")
    datagen.add_argument("--corpus_dir", required=True,
                         help="synthetic corpus (made if missing)")
    datagen.add_argument("--work_dir", default="/tmp/benchmark_datagen",
                         help="datagen outputs")
    datagen.add_argument("--pairs", default="",
                         help="comma-separated corpus sizes, whole datagen each")
    datagen.add_argument("--workers", type=positive_int, default=2,
                         help="encoding processes for --pairs")
    datagen.add_argument("--speedup_pairs", type=non_negative_int, default=0,
                         help="encode this many pairs with 1 then 2 workers (one vocabulary)")
    datagen.add_argument("--vocab_size", type=positive_int, default=8000)
    datagen.add_argument("--vocab_sentences", type=positive_int, default=200_000,
                         help="VocabSpec.max_sentences: the bounded vocabulary sample")
    datagen.add_argument("--min_pairs_for_workers", type=non_negative_int, default=None,
                         help="start encoding workers only above this many pairs a split "
                              "(default: datagen's own threshold; 0: always)")
    datagen.add_argument("--run", type=non_negative_int, default=0, help=argparse.SUPPRESS)
    datagen.add_argument("--data_dir", default="", help=argparse.SUPPRESS)
    datagen.add_argument("--vocab_from", default="", help=argparse.SUPPRESS)

    data = sub.add_parser("input", parents=[jit],
                          help="input pipeline tokens/s next to a training step's")
    data.add_argument("--problem", default="translate_ende_multi30k")
    data.add_argument("--data_dir", required=True)
    data.add_argument("--tmp_dir", default=None, help="raw files, when datagen must run")
    data.add_argument("--hparams_set", default="transformer_base",
                      help="its batch_size (tokens) and max_length drive the pipeline")
    data.add_argument("--hparams", default="", help="overrides, e.g. batch_size=4096")
    data.add_argument("--steps", type=positive_int, default=200)
    data.add_argument("--warmup", type=non_negative_int, default=20)
    data.add_argument("--no_model", action="store_true", help="time the pipeline only")
    data.add_argument("--model_hparams", default="transformer_base")
    data.add_argument("--model_batch_size", type=positive_int, default=4096,
                      help="tokens per step for the model timing")
    data.add_argument("--model_steps", type=positive_int, default=3)

    attention = sub.add_parser("attention", parents=[jit],
                               help="the trainer's attention summaries against its steps")
    attention.add_argument("--data_dir", required=True,
                           help=f"{ATTENTION_PROBLEM}'s data (generated when missing)")
    attention.add_argument("--hparams_set", default="transformer_tiny")
    attention.add_argument("--hparams", default="")
    attention.add_argument("--steps", type=positive_int, default=50)
    attention.add_argument("--writes", type=positive_int, default=3)
    attention.add_argument("--every", type=positive_int, default=1000)

    sweep = sub.add_parser("sweep", parents=[model, jit, timing],
                           help="train over batches x lengths, fresh processes; CSV")
    sweep.add_argument("--batches", default="16,32,64")
    sweep.add_argument("--lengths", default="16,32,64,128,256")
    sweep.add_argument("--steps", type=positive_int, default=2)

    plot = sub.add_parser("plot", help="plot a sweep CSV")
    plot.add_argument("--csv", required=True)
    plot.add_argument("--out", required=True)
    plot.add_argument("--title", default="")
    parser.subcommands = sub.choices   # {mode: its parser}, for errors after parsing
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """The flags, checked before any work (a mistake is the usage and one ``error:`` line,
    exit 2): hparams sets and overrides, decode's work, ``--peers``; then whether
    ``--compare`` can run (``compare_ready``), before TensorFlow is imported."""
    parser = build_parser()
    args = parser.parse_args(argv)
    subparser = parser.subcommands[args.mode]
    if args.mode in ("train", "decode", "sweep", "input", "attention"):
        hparams = checked_hparams(subparser, args.hparams_set, args.hparams)
        if args.mode == "decode":
            check_decode_work(subparser, args, hparams)
        if args.mode == "input" and not args.no_model:
            checked_hparams(subparser, args.model_hparams)
    args.compare_ready = bool(getattr(args, "compare", False)) and peers_ready(args)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    {"train": cmd_train, "decode": cmd_decode, "datagen": cmd_datagen, "input": cmd_input,
     "attention": cmd_attention, "sweep": cmd_sweep, "plot": cmd_plot}[args.mode](args)


if __name__ == "__main__":
    main()
