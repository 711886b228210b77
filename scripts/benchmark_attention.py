"""Overhead of the training-time attention summaries, relative to training.

    python scripts/benchmark_attention.py --data_dir=DATA [--hparams_set=transformer_tiny]
        [--steps=50] [--writes=3] [--every=1000]

Times ``--steps`` training steps of the hparams set on ``translate_ende_numbers`` (the data
is generated into DATA when missing), then ``--writes`` calls of ``AttentionMonitor.write``
(the first one includes tracing the greedy search). The overhead at a write every
``--every`` steps (the trainer's default: with each evaluation, every 1000 steps) is
``mean write time / (every * mean step time)``. The monitor runs only at its steps, so
steps between writes pay nothing. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data.datagen import generate
from t2t_lite.data.pipeline import make_dataset
from t2t_lite.data.problem import get_problem
from t2t_lite.monitoring.summaries import AttentionMonitor
from t2t_lite.training.optimizer import make_optimizer
from t2t_lite.training.train_step import TrainStep

PROBLEM = "translate_ende_numbers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--hparams", default="")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--writes", type=int, default=3)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()

    problem = get_problem(PROBLEM)
    if not problem.vocab_path(args.data_dir).exists():
        generate(PROBLEM, args.data_dir, args.data_dir)
    vocabulary = problem.load_vocab(args.data_dir)
    hparams = registry.hparams(args.hparams_set, args.hparams)
    strategy = tf.distribute.get_strategy()
    model = registry.MODELS.get("transformer")(hparams, vocabulary.vocab_size)
    ones = tf.ones([1, 2], tf.int32)
    model({"inputs": ones, "targets": ones})
    optimizer = make_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    train_step = TrainStep(model, optimizer, strategy, hparams.label_smoothing)
    iterator = iter(make_dataset(problem, args.data_dir, "train", hparams, training=True, seed=1))

    for _ in range(3):  # tracing and warm-up
        train_step.step(iterator)
    start = time.perf_counter()
    for _ in range(args.steps):
        stats = train_step.step(iterator)
    float(stats["loss_sum"])
    step_seconds = (time.perf_counter() - start) / args.steps

    monitor = AttentionMonitor(model, problem, vocabulary, args.data_dir,
                               tempfile.mkdtemp(prefix="attention_bench_"))
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


if __name__ == "__main__":
    main()
