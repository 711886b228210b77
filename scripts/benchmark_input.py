"""Input pipeline throughput next to what a transformer consumes, on this machine.

    python scripts/benchmark_input.py --problem=translate_ende_multi30k \
        --tmp_dir=../shared/data/multi30k --data_dir=/tmp/t2t_data/multi30k

Generates the data when ``--data_dir`` lacks it, then reads ``--steps`` training batches
(after ``--warmup`` batches) with the hparams set's token budget and reports batches/s,
real (non-pad) and padded tokens/s per side. Unless ``--no_model``, it then times
``--model_steps`` real training steps (``t2t_lite.training.TrainStep``: forward, label-
smoothed loss, backward, Adam) of the ``--model_hparams`` model on batches from the same
pipeline, and prints the ratio of the pipeline's tokens/s to the model's.
"""
from __future__ import annotations

import argparse
import time
from typing import Dict

import tensorflow as tf

from t2t_lite.data.datagen import generate
from t2t_lite.data.datagen import stats_path
from t2t_lite.data.pipeline import make_dataset
from t2t_lite.data.problem import get_problem
from t2t_lite.registry import hparams as get_hparams


def measure_pipeline(dataset: tf.data.Dataset, steps: int, warmup: int) -> Dict[str, float]:
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    real = padded = 0
    start = time.perf_counter()
    for _ in range(steps):
        batch = next(iterator)
        targets = batch["targets"]
        real += int(tf.math.count_nonzero(targets))
        padded += int(tf.size(targets))
    seconds = time.perf_counter() - start
    return {"batches_per_s": steps / seconds, "tokens_per_s": real / seconds,
            "padded_tokens_per_s": padded / seconds}


def measure_model(problem, data_dir: str, hparams_name: str, batch_size: int, steps: int,
                  vocab_size: int) -> Dict[str, float]:
    from t2t_lite.models.transformer import Transformer
    from t2t_lite.training.optimizer import make_optimizer
    from t2t_lite.training.train_step import TrainStep

    hparams = get_hparams(hparams_name).replace(batch_size=batch_size,
                                                max_length=min(batch_size, 256))
    strategy = tf.distribute.get_strategy()
    model = Transformer(hparams, vocab_size)
    model.build()
    optimizer = make_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    step = TrainStep(model, optimizer, strategy, hparams.label_smoothing)
    iterator = iter(make_dataset(problem, data_dir, "train", hparams, training=True, seed=1))
    step.step(iterator)  # trace
    tokens = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        tokens += float(step.step(iterator)["tokens"])
    seconds = time.perf_counter() - start
    return {"steps_per_s": steps / seconds, "tokens_per_s": tokens / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problem", default="translate_ende_multi30k")
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--tmp_dir", default=None, help="raw files, when datagen must run")
    parser.add_argument("--hparams_set", default="transformer_base",
                        help="its batch_size (tokens) and max_length drive the pipeline")
    parser.add_argument("--hparams", default="", help="overrides, e.g. batch_size=4096")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--no_model", action="store_true")
    parser.add_argument("--model_hparams", default="transformer_base")
    parser.add_argument("--model_batch_size", type=int, default=4096,
                        help="tokens per step for the model timing (tokens/s barely depends "
                             "on it once the CPU is busy)")
    parser.add_argument("--model_steps", type=int, default=3)
    args = parser.parse_args()

    problem = get_problem(args.problem)
    if not stats_path(args.data_dir, problem.name, "train").exists():
        print(generate(args.problem, args.data_dir, args.tmp_dir).format())  # None: DATA_DIR/raw
    hparams = get_hparams(args.hparams_set, args.hparams)
    pipeline = measure_pipeline(
        make_dataset(problem, args.data_dir, "train", hparams, training=True, seed=1),
        args.steps, args.warmup)
    print(f"pipeline {problem.name} batch_size={hparams.batch_size} max_length="
          f"{hparams.max_length}: {pipeline['batches_per_s']:.1f} batches/s, "
          f"{pipeline['tokens_per_s']:,.0f} target tokens/s "
          f"({pipeline['padded_tokens_per_s']:,.0f} with padding)")
    if args.no_model:
        return
    vocab_size = problem.load_vocab(args.data_dir).vocab_size
    model = measure_model(problem, args.data_dir, args.model_hparams, args.model_batch_size,
                          args.model_steps, vocab_size)
    print(f"model {args.model_hparams} batch_size={args.model_batch_size}: "
          f"{model['steps_per_s']:.3f} steps/s, {model['tokens_per_s']:,.0f} target tokens/s")
    print(f"pipeline / model tokens per second: "
          f"{pipeline['tokens_per_s'] / model['tokens_per_s']:.0f}x")


if __name__ == "__main__":
    main()
