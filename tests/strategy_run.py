"""Trains a tiny Transformer for a few steps on fixed global batches, once per variant
named on the command line, and prints, as one JSON object keyed by variant, each run's
per-step losses, its ``stop_requests`` (step 2 passes ``stop=True``, as a worker that got
SIGTERM does) and a checksum of the final weights. Run as a subprocess by
tests/test_trainer.py, because logical CPU devices must be set before TensorFlow starts;
the variants share that one start (each builds its model from the same seed).

    python tests/strategy_run.py devices=1 devices=2 devices=2,jit devices=2,jit,accumulate=2
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def parse_variant(text: str) -> argparse.Namespace:
    """``devices=N[,jit][,accumulate=K]`` as a namespace of devices, jit, accumulate."""
    variant = argparse.Namespace(devices=1, jit=False, accumulate=1)
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key == "jit" and not value:
            variant.jit = True
        elif key in ("devices", "accumulate"):
            setattr(variant, key, int(value))
        else:
            raise SystemExit(f"unknown variant part {part!r} in {text!r}")
    return variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+", help="e.g. devices=2,jit,accumulate=2")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()

    from t2t_lite.training import distribution
    variants = {text: parse_variant(text) for text in args.variants}
    distribution.split_cpu(max(variant.devices for variant in variants.values()))
    print(json.dumps({text: train(variant, args.steps) for text, variant in variants.items()}))


def train(args: argparse.Namespace, steps: int) -> dict:
    """One variant's run: losses, stop_requests, checksum, replicas, step."""
    import keras
    import numpy as np
    import tensorflow as tf

    from t2t_lite import registry
    from t2t_lite.training import distribution
    from t2t_lite.training.optimizer import make_optimizer
    from t2t_lite.training.stream import open_stream
    from t2t_lite.training.train_step import TrainStep

    keras.utils.set_random_seed(7)
    strategy = distribution.make_strategy(cpu_devices=args.devices)
    hparams = registry.hparams("transformer_tiny", "layer_prepostprocess_dropout=0.0,"
                               "learning_rate_warmup_steps=10")
    vocab_size, batch, length = 40, 8, 7
    with strategy.scope():
        model = registry.MODELS.get("transformer")(hparams, vocab_size)
        ones = tf.ones([1, 2], tf.int32)
        model({"inputs": ones, "targets": ones})
        optimizer = make_optimizer(hparams)
        optimizer.build(model.trainable_variables)

    rng = np.random.default_rng(0)
    # Global batches with ragged lengths (0-padded, EOS=1 at the end), the same on every run.
    def random_ids():
        ids = rng.integers(2, vocab_size, size=(batch, length)).astype(np.int32)
        lengths = rng.integers(2, length + 1, size=batch)
        for row, n in enumerate(lengths):
            ids[row, n - 1] = 1
            ids[row, n:] = 0
        return ids
    inputs = np.stack([random_ids() for _ in range(steps)])
    targets = np.stack([random_ids() for _ in range(steps)])
    # Split every global batch into ``accumulate`` micro-batches of the same rows.
    micro_shape = (steps * args.accumulate, batch // args.accumulate, length)
    inputs, targets = inputs.reshape(micro_shape), targets.reshape(micro_shape)
    dataset = tf.data.Dataset.from_tensor_slices({"inputs": inputs, "targets": targets})
    # The trainer's stream: R consecutive batches a micro-batch, batch r for replica r,
    # so replica r gets the r-th R-th of every micro-batch's rows.
    replica_rows = inputs.shape[1] // strategy.num_replicas_in_sync
    stream = open_stream(strategy, lambda context: dataset.unbatch().batch(replica_rows),
                         tf.train.Checkpoint(), restored=None, batches_done=0,
                         multi_worker=False)
    step = TrainStep(model, optimizer, strategy, hparams.label_smoothing,
                     accumulation_steps=args.accumulate, jit_compile=args.jit,
                     take=stream.take)
    losses, stop_requests = [], []
    for index in range(steps):
        stats = step.step(stream.iterator, stop=index == 1)
        losses.append(float(stats["loss_sum"]) / float(stats["tokens"]))
        stop_requests.append(float(stats["stop_requests"]))
    checksum = float(sum(np.abs(v.numpy()).sum() for v in model.trainable_variables))
    return {"losses": losses, "checksum": checksum, "stop_requests": stop_requests,
            "replicas": strategy.num_replicas_in_sync,
            "step": int(optimizer.iterations.numpy())}


if __name__ == "__main__":
    main()
