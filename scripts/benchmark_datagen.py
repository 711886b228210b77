"""Datagen at the paper's scale: throughput, peak memory and the speed-up of workers.

Makes a synthetic parallel corpus on the spot (plain text, one sentence a line) shaped
like WMT: sentence lengths log-normal with a mean of ~23 words (sigma 0.6, 1..250 words),
the target's length the source's times a log-normal ratio (sigma 0.15), words drawn from
a Zipfian (s=1.1) vocabulary of 50,000 made-up words per side (frequent words short).
Then runs datagen on its first N pairs, each run in a fresh process, and reports pairs/s,
CPU seconds (all, the datagen process's own and its encoding workers') and peak RSS
(``ru_maxrss`` of the datagen process and, separately, of its largest encoding worker):

    python scripts/benchmark_datagen.py --corpus_dir=/tmp/bench_corpus --pairs=1000000,4000000
    python scripts/benchmark_datagen.py --corpus_dir=/tmp/bench_corpus --speedup_pairs=400000

``--pairs`` runs the whole datagen (vocabulary from a bounded sample + encoding) per
size; ``--speedup_pairs`` encodes the same pairs with 1 and then 2 workers back to back,
reusing one vocabulary, and prints the ratio (on a shared machine, compare only figures
of one run). Datagen starts workers only for a split of more than
``t2t_lite.data.encoding.MIN_PAIRS_FOR_WORKERS`` pairs; ``--min_pairs_for_workers=0``
starts them for any size, to measure what starting them costs on a small corpus:

    python scripts/benchmark_datagen.py --corpus_dir=/tmp/bench_corpus --speedup_pairs=29000 \
        --min_pairs_for_workers=0
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

MEAN_WORDS = 23.0
SIGMA = 0.6


def make_corpus(corpus_dir: Path, pairs: int, seed: int = 1) -> None:
    """Writes ``source.txt`` and ``target.txt`` (``pairs`` lines each) unless present."""
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


def _problem(corpus_dir: Path, pairs: int, vocab_size: int, vocab_sentences: int):
    from t2t_lite.data.problem import TranslationProblem, VocabSpec
    from t2t_lite.data.raw import read_parallel_lines

    class SyntheticWmt(TranslationProblem):
        """The first ``pairs`` synthetic pairs; dev/test: 3,000 pairs after them."""

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


def run_once(args) -> dict:
    """One datagen run in this process; returns its figures."""
    from t2t_lite.data import encoding
    from t2t_lite.data.datagen import generate_problem_data
    if args.min_pairs_for_workers is not None:
        encoding.MIN_PAIRS_FOR_WORKERS = args.min_pairs_for_workers
    problem = _problem(Path(args.corpus_dir), args.run, args.vocab_size, args.vocab_sentences)
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


def _child(args, pairs: int, workers: int, data_dir: Path, vocab_from: str = "") -> dict:
    command = [sys.executable, __file__, f"--corpus_dir={args.corpus_dir}", f"--run={pairs}",
               f"--workers={workers}", f"--data_dir={data_dir}",
               f"--vocab_size={args.vocab_size}", f"--vocab_sentences={args.vocab_sentences}"]
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus_dir", required=True, help="synthetic corpus (made if missing)")
    parser.add_argument("--work_dir", default="/tmp/benchmark_datagen", help="datagen outputs")
    parser.add_argument("--pairs", default="", help="comma-separated corpus sizes, full datagen")
    parser.add_argument("--workers", type=int, default=2, help="encoding processes for --pairs")
    parser.add_argument("--speedup_pairs", type=int, default=0,
                        help="encode this many pairs with 1 then 2 workers (vocabulary reused)")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--vocab_sentences", type=int, default=200_000,
                        help="VocabSpec.max_sentences: the bounded vocabulary sample")
    parser.add_argument("--min_pairs_for_workers", type=int, default=None,
                        help="start encoding workers only above this many pairs a split "
                             "(default: datagen's own threshold; 0: always)")
    parser.add_argument("--run", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data_dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--vocab_from", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        print(json.dumps(run_once(args)))
        return 0
    sizes = [int(p) for p in args.pairs.split(",") if p]
    largest = max(sizes + [args.speedup_pairs])
    start = time.perf_counter()
    make_corpus(Path(args.corpus_dir), largest + 6000)
    made = int((Path(args.corpus_dir) / "pairs.txt").read_text())
    print(f"corpus: {made:,} pairs in {args.corpus_dir} "
          f"({time.perf_counter() - start:.0f} s to make or find)", flush=True)
    work = Path(args.work_dir)
    for pairs in sizes:
        _child(args, pairs, args.workers, work / f"full_{pairs}")
    if args.speedup_pairs:
        vocab_dir = work / (f"full_{sizes[0]}" if sizes else "vocab")
        if not list(vocab_dir.glob("vocab.*")):  # kept from an earlier run: reused
            _child(args, 20_000, 1, vocab_dir)
        one = _child(args, args.speedup_pairs, 1, work / "speedup_1", str(vocab_dir))
        two = _child(args, args.speedup_pairs, 2, work / "speedup_2", str(vocab_dir))
        print(f"speed-up 2 workers / 1 worker: {one['seconds'] / two['seconds']:.2f}x "
              f"({one['pairs_per_s']:,} -> {two['pairs_per_s']:,} pairs/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
