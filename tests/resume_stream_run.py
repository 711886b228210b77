"""Prints, as JSON, the training examples each replica gets at each step under
``--cpu_devices=2``: once from the start, and resumed after ``--resume_at`` steps in the
three ways ``Trainer`` opens a resumed stream (``t2t_lite/training/stream.py``): from
the data position saved in a checkpoint, by reading past the batches done (a checkpoint
without a position), and as each worker of a multi-worker run does (a distributed
iterator over the skipped pipeline). An example is named by its source tokens, unique in
translate_ende_numbers' train split. Run as a subprocess by
tests/test_trainer_resume.py, because logical CPU devices must be set before TensorFlow
starts.

    python tests/resume_stream_run.py DATA_DIR --steps=6 --resume_at=3
"""
import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--resume_at", type=int, default=3)
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--hparams", default="")
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from t2t_lite.training.trainer import Trainer, TrainerConfig

    config = TrainerConfig(problem="translate_ende_numbers", hparams_set="transformer_tiny",
                           hparams_overrides=args.hparams, data_dir=args.data_dir,
                           output_dir=tempfile.mkdtemp(), cpu_devices=2,
                           gradient_accumulation_steps=args.accumulate)
    trainer = Trainer(config)
    replicas = trainer.strategy.num_replicas_in_sync

    def names(batch) -> list:
        return [" ".join(map(str, row[row != 0].tolist())) for row in np.asarray(batch)]

    from t2t_lite.data.pipeline import make_dataset
    from t2t_lite.training.stream import open_stream

    def dataset_fn(input_context):   # the trainer's stream
        return make_dataset(trainer.problem, args.data_dir, "train", trainer.hparams,
                            training=True, input_context=input_context,
                            seed=config.random_seed)

    def read(stream, steps: int) -> list:
        """Per micro-batch, per replica: the example names, as TrainStep would get them."""
        out = []
        for _ in range(steps * args.accumulate):
            features = stream.take(stream.iterator)
            out.append([names(part) for part in
                        trainer.strategy.experimental_local_results(features["inputs"])])
        return out

    def opened(checkpoint, restored, start_step, multi_worker=False):
        return open_stream(trainer.strategy, dataset_fn, checkpoint, restored=restored,
                           batches_done=start_step * args.accumulate,
                           multi_worker=multi_worker)

    uninterrupted = read(opened(tf.train.Checkpoint(), None, 0), args.steps)
    rest = args.steps - args.resume_at
    # Saved with its position after resume_at steps, then resumed from that checkpoint.
    first = tf.train.Checkpoint()
    before = read(opened(first, None, 0), args.resume_at)
    saved = first.save(os.path.join(tempfile.mkdtemp(), "ckpt"))
    resumed = tf.train.Checkpoint()
    resumed.restore(saved)
    from_position = opened(resumed, saved, args.resume_at)
    # A checkpoint without a position: read past the batches done.
    bare = tf.train.Checkpoint(step=tf.Variable(args.resume_at))
    bare_path = bare.save(os.path.join(tempfile.mkdtemp(), "ckpt"))
    by_reading = opened(tf.train.Checkpoint(), bare_path, args.resume_at)
    # Each worker of several: the distributed iterator over the skipped pipeline.
    as_worker = opened(tf.train.Checkpoint(), bare_path, args.resume_at, multi_worker=True)
    print(json.dumps({
        "replicas": replicas, "uninterrupted": uninterrupted,
        "skipped": [from_position.skipped, by_reading.skipped, as_worker.skipped],
        "from_position": before + read(from_position, rest),
        "by_reading": before + read(by_reading, rest),
        "as_worker": before + read(as_worker, rest)}))
    del tf


if __name__ == "__main__":
    main()
