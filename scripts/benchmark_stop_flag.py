"""Step time of two CPU workers with the SIGTERM flag in the step's all-reduce or in its own.

    python scripts/benchmark_stop_flag.py [--steps=100] [--rounds=5]

Starts two local worker processes (``MultiWorkerMirroredStrategy`` on 127.0.0.1, as
tests/test_trainer_resume.py does) that train a tiny Transformer on fixed random batches
with ``TrainStep`` and time ``--steps`` steps per variant, alternating the order every
round:

* ``folded``: ``step(iterator, stop=flag)``, the flag summed in the statistics' one
  all-reduce (what the trainer does);
* ``separate``: ``step(iterator)`` and then a second all-reduce of the flag alone (what the
  trainer did before: ``StopOnSignal.requested`` ran its own collective every step).

Worker 0 prints one JSON line: the median milliseconds per step of each variant over the
rounds, their difference, and every round's figures.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(args: argparse.Namespace) -> int:
    """Starts both workers and prints worker 0's result line; the exit status of the worst."""
    workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", f"--steps={args.steps}",
             f"--rounds={args.rounds}", f"--warmup={args.warmup}"],
            env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
            stdout=subprocess.PIPE if index == 0 else subprocess.DEVNULL, text=True))
    output, _ = processes[0].communicate()
    codes = [processes[0].returncode, processes[1].wait()]
    if output:
        print(output.strip().splitlines()[-1])
    return max(codes)


def worker(args: argparse.Namespace) -> None:
    import numpy as np
    import tensorflow as tf

    from t2t_lite import registry
    from t2t_lite.training import distribution
    from t2t_lite.training.optimizer import make_optimizer
    from t2t_lite.training.train_step import TrainStep

    strategy = distribution.make_strategy()
    hparams = registry.hparams("transformer_tiny", "layer_prepostprocess_dropout=0.0")
    vocab_size, batch, length = 64, 16, 12
    with strategy.scope():
        model = registry.MODELS.get("transformer")(hparams, vocab_size)
        ones = tf.ones([1, 2], tf.int32)
        model({"inputs": ones, "targets": ones})
        optimizer = make_optimizer(hparams)
        optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    ids = rng.integers(2, vocab_size, size=(8, batch, length)).astype(np.int32)
    ids[:, :, -1] = 1  # EOS
    dataset = tf.data.Dataset.from_tensor_slices({"inputs": ids, "targets": ids}).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset.unbatch().batch(batch)))
    step = TrainStep(model, optimizer, strategy, hparams.label_smoothing)

    @tf.function
    def flag_all_reduce(flag):  # the removed per-step collective, for the comparison
        def replica_sum(value):
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.identity(value))
        return strategy.run(replica_sum, args=(flag,))

    def folded() -> None:
        float(step.step(iterator, stop=False)["stop_requests"])

    def separate() -> None:
        float(step.step(iterator)["tokens"])
        float(strategy.experimental_local_results(flag_all_reduce(tf.constant(0.0)))[0])

    variants = {"folded": folded, "separate": separate}
    for run in variants.values():  # trace both
        for _ in range(args.warmup):
            run()
    rounds = {name: [] for name in variants}
    for index in range(args.rounds):
        for name in (("folded", "separate") if index % 2 == 0 else ("separate", "folded")):
            start = time.perf_counter()
            for _ in range(args.steps):
                variants[name]()
            rounds[name].append(1000 * (time.perf_counter() - start) / args.steps)
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    print(json.dumps({"ms_per_step_median": medians,
                      "separate_minus_folded_ms": medians["separate"] - medians["folded"],
                      "rounds_ms_per_step": rounds, "steps_per_round": args.steps}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100, help="steps per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per variant")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
