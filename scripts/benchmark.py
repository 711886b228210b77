"""t2t-lite benchmarks: training steps and beam-search decoding against the machine's limit.

    python scripts/benchmark.py train --hparams_set=transformer_base --vocab_size=37000 \
        --batch=64 --length=32 --steps=5
    python scripts/benchmark.py decode --hparams_set=transformer_base --vocab_size=37000 \
        --batch=32 --source_length=24 --target_length=30 --beam_size=4
    python scripts/benchmark.py input --data_dir=... [benchmark_input.py's flags]
    python scripts/benchmark.py attention --data_dir=... [benchmark_attention.py's flags]
    python scripts/benchmark.py sweep --lengths=8,16,32,64,128 --batches=16,32,64 ... > s.csv
    python scripts/benchmark.py plot --csv=s.csv --out=docs/performance_sweep.png

``mfu`` is the model's FLOPs per second divided by the float32 matmul peak measured in the
same process: a square float32 ``tf.matmul`` (``--peak_size``, TF's own kernel and thread
pool), its mean rate over a window of ``--peak_seconds`` just before and just after every
timed step, so that load from other processes on a shared machine hits both alike. Each
step's ratio uses the mean of its two neighbouring windows; the figure printed is the
median over the timed steps. ``mfu_cpu_time`` is the same ratio per process CPU second
(FLOPs per CPU second of the model over those of the matmul), which time-slicing by other
processes affects less (spinning worker threads count against the model there).

Model FLOPs are counted analytically (``train_flops``/``decode_flops``): 2*m*n*k per
matmul, every projection, both attention matmuls (scores and values) and the
embedding-tied softmax projection; training = 3x the forward pass. Elementwise work
(softmax, LayerNorm, Adam, top-k) is not counted: it is overhead the ratio exposes.

Optimisations can be switched off to see what each buys: ``--no-jit_compile`` (XLA),
``--no-fused_qkv`` (three Q/K/V matmuls instead of one fused one; same weights),
``--no-memory_per_sentence`` (decode: encoder-decoder keys/values tiled to every beam and
reordered each step instead of kept once per sentence), ``--no-expand_after_first_step``
(decode: step 0 on the ``k`` tiled beams of each sentence instead of one row, although
they compute the same logits), ``--mixed_precision`` (bfloat16
compute, float32 variables). Thread pools: ``--intra_threads``, ``--inter_threads``.
``decode --quantize=int8`` runs every matmul in int8 (``t2t_lite.layers.int8``), with the
self-attention cache in the dtype the decoder picks for this CPU (``--int8_attention``
sets it: float32 or bfloat16) and the sublayers' inputs quantized per tensor
(``--int8_activation_scales=row``: every input per row; ``tensor``: every input per
tensor); as the decoder, an int8 search
without XLA takes each hypothesis's best tokens from the softmax
(``--[no-]log_probs_from_softmax``, ``beam_search``'s option). ``decode``
sets ``TF_ENABLE_ONEDNN_OPTS=1`` unless the environment sets it, as ``t2t-lite-decoder``
does; the first line names the CPU's SIMD flags (``cpu=``) and whether oneDNN is on.

``--compare`` (train and decode) then times, in the same process and on the same shapes
with random weights, the peers a user would pick instead (``scripts/benchmark_peers.py``;
``pip install -e ".[bench]"``): CTranslate2 float32 and int8 and PyTorch ``nn.Transformer``
for decoding, PyTorch for training. They are timed in paired rounds after t2t-lite's own
timing: in each round t2t-lite and every peer take turns, each turn 0.5 s of idle (so that
one library's spinning worker threads do not slow the next), an untimed run and the timed
one (so that each is timed warm, as in back-to-back batch translation); ``--repeats``
rounds for decode, ``--steps`` for train. Each peer prints ``peer NAME: S s, tgt_tok_s=N`` (medians), its
per-round ratios (``rounds vs NAME: ...``) and one ``ratio_vs_NAME=R`` line, R the median
of the per-round ratios of the peer's time over t2t-lite's (> 1: t2t-lite is faster),
before the usual last lines. Without the extra it prints one line saying what
to install. ``--peers=ctranslate2_float32,ctranslate2_int8`` times a subset (an unknown
name is one ``error:`` line).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from t2t_lite.commands.quantize_flag import QUANTIZE_CHOICES  # noqa: E402  (no TF)
from t2t_lite.layers.int8_scales import (  # noqa: E402  (no TF)
    ACTIVATION_SCALES, DEFAULT_ACTIVATION_SCALES)
from t2t_lite.flag_fields import non_negative_int, positive_int  # noqa: E402  (no TF)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


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


# Measurement helpers --------------------------------------------------------------------
class Peak:
    """float32 matmul FLOP/s of [n, n] x [n, n] with TF's kernel and thread pool: the mean
    rate of back-to-back matmuls over at least ``seconds`` (a window, not a best case, so
    that a burst of load from other processes weighs on it as it weighs on the model)."""

    def __init__(self, tf, size: int, seconds: float):
        self.size = size
        self.seconds = seconds
        self.a = tf.random.normal([size, size], seed=1)
        self.b = tf.random.normal([size, size], seed=2)
        self.fn = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)[:1, :1]))
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


def timed_interleaved(run: Callable[[], None], peak: Peak, repeats: int) -> Dict[str, list]:
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


def setup_tf(args):
    if hasattr(args, "quantize") and "tensorflow" not in sys.modules:
        # decode: oneDNN's ops on, as t2t-lite-decoder turns them on (its int8 matmul,
        # and its float32 matmul, faster than TensorFlow's default without XLA)
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    import tensorflow as tf
    if args.intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    if args.inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    import keras
    if args.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    if not args.fused_qkv:
        _unfuse_projections()
    return tf


def _unfuse_projections() -> None:
    """Baseline for ``--no-fused_qkv``: the same fused kernels, applied as separate Q, K, V
    matmuls (what an implementation with three Dense layers computes)."""
    from keras import ops
    from t2t_lite.layers.attention import MultiHeadAttention

    def project_self(self, x):
        w = self._kernel(self.qkv_kernel)
        kc = self.key_channels
        return (self._split_heads(ops.matmul(x, w[:, :kc]), self.key_depth),
                self._split_heads_first(ops.matmul(x, w[:, kc:2 * kc]), self.key_depth),
                self._split_heads_first(ops.matmul(x, w[:, 2 * kc:]), self.value_depth))

    def project_memory(self, memory):
        memory = ops.cast(memory, self.compute_dtype)
        w = self._kernel(self.kv_kernel)
        kc = self.key_channels
        return (self._split_heads_first(ops.matmul(memory, w[:, :kc]), self.key_depth),
                self._split_heads_first(ops.matmul(memory, w[:, kc:]), self.value_depth))

    def project_position(self, x, dtype=None):
        # one position: [b, 1, h, d] and [b, h, 1, d] hold the same order
        return tuple(ops.reshape(ops.cast(tensor, dtype or self.compute_dtype),
                                 (-1, self.num_heads, 1, depth))
                     for tensor, depth in zip(project_self(self, x),
                                              (self.key_depth, self.key_depth,
                                               self.value_depth)))

    MultiHeadAttention.project_self = project_self
    MultiHeadAttention.project_position = project_position
    MultiHeadAttention.project_memory = project_memory


def add_search_flags(parser: argparse.ArgumentParser) -> None:
    """The model and the work of ``decode``'s search, for scripts that time pieces of it
    (defaults: base dimensions, V = 37,000, 32 sentences x 24 source tokens, beam 4, 30
    forced target tokens). ``checked_hparams`` then resolves --hparams_set/--hparams."""
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--hparams", default="", help="overrides, e.g. num_heads=4")
    parser.add_argument("--vocab_size", type=positive_int, default=37000)
    add_search_work_flags(parser)


def add_search_variant_flags(parser: argparse.ArgumentParser) -> None:
    """``--quantize`` and ``--jit_compile`` (default off) of the scripts that time or
    profile ``decode``'s search, then ``add_search_flags``; ``setup_search`` follows."""
    parser.add_argument("--quantize", default="none", choices=QUANTIZE_CHOICES)
    parser.add_argument("--jit_compile", action=argparse.BooleanOptionalAction, default=False)
    add_search_flags(parser)


def setup_search(parser: argparse.ArgumentParser, parsed: argparse.Namespace):
    """After ``add_search_variant_flags``'s flags are parsed: the hparams (a bad one is the
    parser's usage and one ``error:`` line), ``make_decode``'s arguments and TensorFlow set
    up. Returns (hparams, args, tf)."""
    hparams = checked_hparams(parser, parsed)
    args = search_args(parsed, parsed.quantize, parsed.jit_compile)
    return hparams, args, setup_tf(args)


def add_search_work_flags(parser: argparse.ArgumentParser) -> None:
    """The search's work: sentences, source and forced target lengths, beam size."""
    parser.add_argument("--batch", type=positive_int, default=32)
    parser.add_argument("--source_length", type=positive_int, default=24)
    parser.add_argument("--target_length", type=positive_int, default=30)
    parser.add_argument("--beam_size", type=positive_int, default=4)
    parser.add_argument("--expand_after_first_step", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="step 0 on one row per sentence, the beams tiled after it "
                             "(as the decoder and CTranslate2 do)")


def checked_hparams(parser: argparse.ArgumentParser, parsed: argparse.Namespace):
    """``get_hparams(parsed)``; an unknown set or a bad override ends as the parser's
    usage and one ``error:`` line (exit 2), as a bad flag does. Imports no TensorFlow."""
    from t2t_lite.errors import UserError
    try:
        return get_hparams(parsed)
    except UserError as error:
        parser.error(str(error))


def search_args(parsed: argparse.Namespace, quantize: str,
                jit_compile: bool) -> argparse.Namespace:
    """What ``make_decode`` takes, from ``add_search_flags``'s flags: the decoder's
    defaults otherwise (fused Q/K/V, float32 compute, encoder-decoder keys and values once
    per sentence, α 0.6, TensorFlow's own thread counts)."""
    return argparse.Namespace(
        hparams_set=parsed.hparams_set, hparams=parsed.hparams, vocab_size=parsed.vocab_size,
        jit_compile=jit_compile, fused_qkv=True, mixed_precision=False, intra_threads=0,
        inter_threads=0, batch=parsed.batch, source_length=parsed.source_length,
        target_length=parsed.target_length, beam_size=parsed.beam_size, alpha=0.6,
        memory_per_sentence=True, quantize=quantize, int8_attention=None,
        int8_activation_scales="mixed", log_probs_from_softmax=None,
        expand_after_first_step=parsed.expand_after_first_step)


def int8_search_ab_setup(description: str, default_rounds: int, argv=None):
    """The start of the int8 A/B scripts: ``--rounds`` and ``add_search_flags`` parsed
    and checked (a bad one is argparse's usage and one ``error:`` line), then the int8
    search's ``make_decode`` arguments (no XLA) and TensorFlow set up. Returns (parsed
    flags, hparams, args, tf)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=positive_int, default=default_rounds)
    add_search_flags(parser)
    parsed = parser.parse_args(argv)
    hparams = checked_hparams(parser, parsed)
    args = search_args(parsed, quantize="int8", jit_compile=False)
    return parsed, hparams, args, setup_tf(args)


def same_weight_searches(args, hparams, change: Callable[[], None]):
    """Two of ``make_decode``'s searches on the same random weights (seed 0): the first
    traced as the library is, the second traced after ``change()`` (which replaces some
    library code). Returns ((first, its output), (second, its output))."""
    import keras
    keras.utils.set_random_seed(0)
    first = make_decode(args, hparams)
    first_output = first()
    change()
    keras.utils.set_random_seed(0)
    second = make_decode(args, hparams)
    return (first, first_output), (second, second())


def interleaved_timings(runs: Dict[str, Callable[[], object]], rounds: int,
                        warmup_rounds: int = 0,
                        before_each: Optional[Callable[[Callable[[], object]], None]] = None
                        ) -> Dict[str, Tuple[list, list]]:
    """Each of ``runs`` run in turn ``rounds`` times after ``warmup_rounds`` untimed rounds,
    ``before_each(run)`` (untimed) before every timed run when given: {name: (wall
    seconds per round, process CPU seconds per round)}. CPU time is what time-slicing by
    other processes on a shared machine disturbs least."""
    timings: Dict[str, Tuple[list, list]] = {name: ([], []) for name in runs}
    for round_ in range(warmup_rounds + rounds):
        for name, run in runs.items():
            if before_each is not None:
                before_each(run)
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            if round_ >= warmup_rounds:
                timings[name][0].append(time.perf_counter() - start)
                timings[name][1].append(time.process_time() - start_cpu)
    return timings


def interleaved_seconds(runs: Dict[str, Callable[[], object]], rounds: int,
                        warmup_rounds: int = 0) -> Dict[str, list]:
    """Wall seconds of each of ``runs``, run in turn ``rounds`` times after
    ``warmup_rounds`` untimed rounds: {name: [seconds per round]}."""
    return {name: wall for name, (wall, _) in
            interleaved_timings(runs, rounds, warmup_rounds).items()}


def interleaved_wall_and_cpu(runs: Dict[str, Callable[[], object]], rounds: int
                             ) -> Dict[str, Tuple[float, float]]:
    """Each of ``runs`` run in turn ``rounds`` times: {name: (median wall seconds, median
    process CPU seconds)}."""
    return {name: (statistics.median(wall), statistics.median(cpu))
            for name, (wall, cpu) in interleaved_timings(runs, rounds).items()}


def interleaved_medians(runs: Dict[str, Callable[[], object]], rounds: int,
                        warmup_rounds: int = 0) -> Dict[str, float]:
    """The median of each run's ``interleaved_seconds``."""
    return {name: statistics.median(times)
            for name, times in interleaved_seconds(runs, rounds, warmup_rounds).items()}


def build_model(args, hparams):
    from t2t_lite.models.transformer import Transformer
    model = Transformer(hparams, args.vocab_size)
    model.build()
    return model


def get_hparams(args):
    from t2t_lite.registry import hparams as registered
    import t2t_lite.hparams  # noqa: F401  (registers the sets)
    return registered(args.hparams_set, args.hparams)


def describe(args, tf) -> str:
    """The run's settings for the first output line; ``cpu=`` names the CPU's SIMD flags
    (``t2t_lite.cpu_features``): int8 and bfloat16 speeds depend on them."""
    from t2t_lite.cpu_features import simd_summary
    from t2t_lite.layers.int8 import onednn_enabled
    return (f"jit_compile={args.jit_compile} fused_qkv={args.fused_qkv} "
            f"mixed_precision={args.mixed_precision} "
            f"threads(intra,inter)=({tf.config.threading.get_intra_op_parallelism_threads()},"
            f"{tf.config.threading.get_inter_op_parallelism_threads()}) "
            f"cpu={simd_summary()} onednn={onednn_enabled()}")


# Training -------------------------------------------------------------------------------
def make_train_step(args, hparams, batch: int, length: int):
    """A TrainStep on one fixed random batch; returns run() -> None (synchronised)."""
    import numpy as np
    import tensorflow as tf
    from t2t_lite.training.optimizer import make_optimizer
    from t2t_lite.training.train_step import TrainStep

    model = build_model(args, hparams)
    optimizer = make_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    step = TrainStep(model, optimizer, tf.distribute.get_strategy(), hparams.label_smoothing,
                     jit_compile=args.jit_compile)
    rng = np.random.default_rng(0)
    features = {name: rng.integers(2, args.vocab_size, size=(batch, length), dtype=np.int32)
                for name in ("inputs", "targets")}
    for ids in features.values():
        ids[:, -1] = 1  # EOS ends every sentence; no padding
    iterator = iter(tf.data.Dataset.from_tensors(features).repeat())

    def run():
        float(step.step(iterator)["tokens"])

    return model, run


def cmd_train(args) -> None:
    compare = args.compare and peers_ready(args)  # before TensorFlow is imported
    tf = setup_tf(args)
    hparams = get_hparams(args)
    _, run = make_train_step(args, hparams, args.batch, args.length)
    flops = train_flops(hparams, args.vocab_size, args.batch, args.length, args.length)
    print(f"train {args.hparams_set} vocab={args.vocab_size} batch={args.batch}x{args.length} "
          f"{describe(args, tf)}", flush=True)
    print(f"model FLOPs per step: {flops / 1e9:.1f} GFLOP (3 x forward)", flush=True)
    start = time.perf_counter()
    for _ in range(max(1, args.warmup)):
        run()
    print(f"warm-up (trace/compile + {args.warmup} step(s)): "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    peak = Peak(tf, args.peak_size, args.peak_seconds)
    result = timed_interleaved(run, peak, args.steps)
    if compare:
        import benchmark_peers
        benchmark_peers.compare_paired(run, benchmark_peers.train_peer_runs(args, hparams),
                                       args.steps, args.batch * args.length)
    report("train", result, flops, args.batch * args.length, True)


def report(kind: str, result, flops: float, tokens: int, with_step: bool) -> None:
    times, peaks = result["times"], result["local_peaks"]
    ratios = [flops / t / p for t, p in zip(times, peaks)]
    cpu_ratios = [flops / c / p for c, p in zip(result["cpu_times"], result["local_cpu_peaks"])]
    for i, (t, p, r, c) in enumerate(zip(times, peaks, ratios, cpu_ratios)):
        print(f"  {kind} {i}: {t:.3f} s, {flops / t / 1e9:.1f} GFLOP/s, "
              f"matmul peak {p / 1e9:.1f} GFLOP/s, ratio {r:.3f} (per CPU second {c:.3f})",
              flush=True)
    step_s = statistics.median(times)
    mfu = statistics.median(ratios)
    print(f"peak_rss_mb={peak_rss_mb():.0f} matmul_peak_gflops={max(peaks) / 1e9:.1f} "
          f"mfu_cpu_time={statistics.median(cpu_ratios):.3f}", flush=True)
    line = f"tgt_tok_s={tokens / step_s:.0f}"
    if with_step:
        line += f" step_s={step_s:.3f}"
    print(f"{line} mfu={mfu:.3f}", flush=True)


# Decoding -------------------------------------------------------------------------------
EOS_LOGIT_PER_CHANNEL = -4.0


def make_eos_lose(model, eos_id: int) -> None:
    """Sets the random model's weights so that EOS's logit is far below every other:
    the decoder's output LayerNorm gets beta 1 on every channel and EOS's softmax row
    ``EOS_LOGIT_PER_CHANNEL`` on every channel, so (gamma = 1, the normalized values sum to
    0) EOS's logit is 4 * -d_model: -2,048 at base dimensions, where the other logits of
    the benchmark's first steps lie within -7..7. Every hypothesis then runs to the
    search's forced last-position EOS, as CTranslate2 is asked to with
    ``min_decoding_length``, with no extra pass over the logits inside the timed search.
    The embedding is shared, so the sources' final EOS embeds as that row too (one
    large-valued input position per sentence; the work is the same)."""
    import tensorflow as tf
    decoder = model.decoder
    norm = decoder.final_norm if decoder.pre_norm else decoder.blocks[-1].feed_forward_norm
    norm.beta.assign(tf.ones_like(norm.beta))
    weights = model.embedding.softmax_weights                              # [V, d]
    row = tf.fill([1, weights.shape[1]], EOS_LOGIT_PER_CHANNEL)
    weights.assign(tf.tensor_scatter_nd_update(tf.convert_to_tensor(weights), [[eos_id]], row))


def make_decode(args, hparams):
    """The search over one fixed random batch as a tf.function; returns (run, check)."""
    import numpy as np
    import tensorflow as tf
    from t2t_lite.decoding.beam_search import beam_search, log_probs_from_softmax_by_default

    model = build_model(args, hparams)
    eos_id, target_length, vocab = 1, args.target_length, args.vocab_size
    make_eos_lose(model, eos_id)
    if args.quantize == "int8":
        from t2t_lite.layers.int8 import describe_quantization, quantize_model
        weights = quantize_model(model, args.int8_attention, args.int8_activation_scales)
        print(describe_quantization(weights, args.jit_compile), flush=True)
    from_softmax = args.log_probs_from_softmax
    if from_softmax is None:   # the decoder's choice
        from_softmax = log_probs_from_softmax_by_default(args.quantize == "int8",
                                                         args.jit_compile)
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, vocab, size=(args.batch, args.source_length), dtype=np.int32)
    inputs[:, -1] = eos_id
    inputs = tf.constant(inputs)

    def search(inputs):
        memory, memory_mask = model.encode(inputs, training=False)
        # As the Translator does: XLA needs the preallocated cache; without XLA the
        # self-attention cache grows one position per step.
        growing = not args.jit_compile
        cache = model.initial_decode_cache(memory, memory_mask,
                                           0 if growing else target_length)
        if args.memory_per_sentence:
            # Encoder-decoder keys/values stay [b, s, ...]: neither tiled nor reordered.
            cache, constants = model.split_memory_cache(cache)
            decode_step = model.beam_decode_step(constants, args.beam_size, growing=growing)
        else:
            def decode_step(ids, i, states):
                return model.decode_step(ids, i, states, growing=growing)

        # EOS never wins before the last position (make_eos_lose), where beam_search
        # forces it: every hypothesis has exactly target_length tokens (checked in run).
        start = tf.zeros([tf.shape(inputs)[0]], tf.int32)
        return beam_search(decode_step, start, args.beam_size, target_length, vocab,
                           args.alpha, states=cache, eos_id=eos_id, stop_early=True,
                           max_length=target_length, growing_states=growing,
                           expand_after_first_step=args.expand_after_first_step,
                           log_probs_from_softmax=from_softmax)

    fn = tf.function(search, jit_compile=args.jit_compile)

    def run():
        ids, scores = fn(inputs)
        ids = ids.numpy()   # token 0 is a token too: only EOS's position says the length
        if not ((ids[..., -1] == eos_id).all() and (ids[..., :-1] != eos_id).all()):
            raise RuntimeError("a hypothesis ended before --target_length: the benchmark's "
                               "work is not the stated one")
        return ids, scores.numpy()

    return run


def cmd_decode(args) -> None:
    import numpy as np
    compare = args.compare and peers_ready(args)  # before TensorFlow is imported
    tf = setup_tf(args)
    hparams = get_hparams(args)
    run = make_decode(args, hparams)
    flops = decode_flops(hparams, args.vocab_size, args.batch, args.source_length,
                         args.target_length, args.beam_size)
    print(f"decode {args.hparams_set} vocab={args.vocab_size} batch={args.batch} "
          f"source={args.source_length} target={args.target_length} beam={args.beam_size} "
          f"memory_per_sentence={args.memory_per_sentence} quantize={args.quantize} "
          f"{describe(args, tf)}", flush=True)
    print(f"required FLOPs per search: {flops / 1e9:.1f} GFLOP", flush=True)
    start = time.perf_counter()
    ids, scores = run()
    for _ in range(max(0, args.warmup - 1)):
        run()
    print(f"warm-up (trace/compile + {args.warmup} search(es)): "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    lengths = np.sum(ids[:, 0] != 0, axis=-1)
    if not (np.all(lengths == args.target_length) and np.all(np.isfinite(scores[:, 0]))
            and np.all(ids[:, 0, args.target_length - 1] == 1)):
        raise SystemExit(f"hypotheses are not all {args.target_length} tokens: {lengths}")
    peak = Peak(tf, args.peak_size, args.peak_seconds)
    result = timed_interleaved(run, peak, args.repeats)
    if compare:
        import benchmark_peers
        # The peers' own vocabularies keep ids 0-3 special: sources use ids >= 4, EOS added
        # by CTranslate2 (and appended for PyTorch), source_length tokens in all.
        rng = np.random.default_rng(1)
        source = rng.integers(4, args.vocab_size, size=(args.batch, args.source_length - 1))
        benchmark_peers.compare_paired(
            run, benchmark_peers.decode_peer_runs(args, hparams, source), args.repeats,
            args.batch * args.target_length)
    report("search", result, flops, args.batch * args.target_length, False)


def peers_ready(args=None) -> bool:
    """Whether ``--compare`` can run its peers; if not, prints one line saying what to
    install. A ``--peers`` name that is not a peer of the mode exits with one error line."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchmark_peers
    if args is not None:
        benchmark_peers.check_peers(args.mode, args.peers)
    absent = benchmark_peers.missing()
    if absent:
        print(f"--compare: {', '.join(absent)} not installed; install the peers with "
              f"{benchmark_peers.INSTALL_HINT}", flush=True)
        return False
    benchmark_peers.preload()
    return True


# Sweep (the plot in docs/performance.md) --------------------------------------------------
def cmd_sweep(args) -> None:
    """One training-step timing per (batch, length) in a fresh process each (peak RSS is
    per process); prints CSV rows."""
    print("batch,length,step_s,peak_rss_mb,mfu", flush=True)
    for batch in [int(b) for b in args.batches.split(",")]:
        for length in [int(n) for n in args.lengths.split(",")]:
            command = [sys.executable, os.path.abspath(__file__), "train",
                       f"--hparams_set={args.hparams_set}", f"--vocab_size={args.vocab_size}",
                       f"--batch={batch}", f"--length={length}", f"--steps={args.steps}",
                       f"--warmup={args.warmup}"] + (
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
    """Step time and peak RSS against sentence length, one line per batch, from the CSV
    that ``sweep`` prints."""
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


# Input pipeline -------------------------------------------------------------------------
DELEGATED = {"input": "benchmark_input.py", "attention": "benchmark_attention.py"}


def cmd_delegated(mode: str, rest: List[str]) -> None:
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), DELEGATED[mode])
    raise SystemExit(subprocess.call([sys.executable, script] + rest))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in DELEGATED:
        cmd_delegated(argv[0], argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--hparams_set", default="transformer_base")
    common.add_argument("--hparams", default="", help="overrides, e.g. num_heads=4")
    common.add_argument("--vocab_size", type=positive_int, default=37000)
    common.add_argument("--jit_compile", action=argparse.BooleanOptionalAction, default=True,
                        help="XLA-compile the train step / the whole search")
    common.add_argument("--fused_qkv", action=argparse.BooleanOptionalAction, default=True)
    common.add_argument("--mixed_precision", action=argparse.BooleanOptionalAction,
                        default=False, help="bfloat16 compute, float32 variables")
    common.add_argument("--intra_threads", type=non_negative_int, default=0, help="0: TF's default")
    common.add_argument("--inter_threads", type=non_negative_int, default=0, help="0: TF's default")
    common.add_argument("--peak_size", type=positive_int, default=2048)
    common.add_argument("--peak_seconds", type=float, default=3.0,
                        help="length of each matmul-peak window around a timed step")
    common.add_argument("--warmup", type=non_negative_int, default=2)
    common.add_argument("--compare", action="store_true",
                        help="also time the peers (CTranslate2 float32/int8 and PyTorch for "
                             "decode, PyTorch for train; pip install -e .[bench]) on the "
                             "same shapes and print ratio_vs_NAME lines (t2t-lite speed / "
                             "the peer's)")
    common.add_argument("--peers", default="",
                        help="with --compare: a comma-separated subset of the peers, e.g. "
                             "ctranslate2_float32,ctranslate2_int8 (default: all)")

    train = sub.add_parser("train", parents=[common])
    train.add_argument("--batch", type=positive_int, default=64)
    train.add_argument("--length", type=positive_int, default=32)
    train.add_argument("--steps", type=positive_int, default=5)

    decode = sub.add_parser("decode", parents=[common])
    add_search_work_flags(decode)
    decode.add_argument("--alpha", type=float, default=0.6)
    decode.add_argument("--repeats", type=positive_int, default=5)
    decode.add_argument("--memory_per_sentence", action=argparse.BooleanOptionalAction,
                        default=False)
    decode.add_argument("--quantize", default="none", choices=QUANTIZE_CHOICES,
                        help="int8: int8 weights and activations (t2t_lite.layers.int8)")
    decode.add_argument("--int8_activation_scales", default=DEFAULT_ACTIVATION_SCALES,
                        choices=ACTIVATION_SCALES,
                        help="with --quantize=int8: the sublayers' inputs per tensor, the "
                             "rest per row (mixed, the decoder's default), all per row or "
                             "all per tensor")
    decode.add_argument("--log_probs_from_softmax", default=None,
                        action=argparse.BooleanOptionalAction,
                        help="each hypothesis's best tokens from the softmax, their log "
                             "alone (default: the decoder's choice, on for int8 without "
                             "XLA)")
    decode.add_argument("--int8_attention", default=None, choices=("float32", "bfloat16"),
                        help="with --quantize=int8 --no-jit_compile: the self-attention "
                             "cache's dtype "
                             "(default: the decoder's choice for this CPU)")

    sweep = sub.add_parser("sweep", parents=[common])
    sweep.add_argument("--batches", default="16,32,64")
    sweep.add_argument("--lengths", default="16,32,64,128,256")
    sweep.add_argument("--steps", type=positive_int, default=2)

    plot = sub.add_parser("plot", help="plot a sweep CSV")
    plot.add_argument("--csv", required=True)
    plot.add_argument("--out", required=True)
    plot.add_argument("--title", default="")

    sub.add_parser("input", help="scripts/benchmark_input.py with the remaining flags")
    sub.add_parser("attention", help="scripts/benchmark_attention.py (attention-monitoring "
                                     "overhead) with the remaining flags")
    args = parser.parse_args(argv)
    if getattr(args, "int8_attention", None) and args.quantize != "int8":
        parser.error("--int8_attention sets int8 decoding's self-attention; add "
                     "--quantize=int8 or drop it")
    if getattr(args, "int8_activation_scales", "mixed") != "mixed" and args.quantize != "int8":
        parser.error("--int8_activation_scales sets int8 decoding's activations; add "
                     "--quantize=int8 or drop it")
    if getattr(args, "int8_attention", None) and args.jit_compile:
        parser.error("--int8_attention applies without XLA (an XLA-compiled search keeps "
                     "the compute dtype); add --no-jit_compile or drop it")
    if args.mode in ("train", "decode", "sweep"):
        checked_hparams(parser, args)
    {"train": cmd_train, "decode": cmd_decode, "sweep": cmd_sweep,
     "plot": cmd_plot}[args.mode](args)


if __name__ == "__main__":
    main()
