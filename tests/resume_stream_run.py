"""Prints, as JSON, the training examples each replica gets at each step under
``--cpu_devices=2``: once from the start, once resumed after ``--resume_at`` steps (the
stream ``Trainer`` builds when it resumes). An example is named by its source tokens,
unique in translate_ende_numbers' train split. Run as a subprocess by
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

    def stream(start_step: int, steps: int) -> list:
        """Per micro-batch, per replica: the example names, as TrainStep would get them."""
        iterator = iter(trainer._train_dataset(batches_done=start_step * args.accumulate))
        out = []
        for _ in range(steps * args.accumulate):
            features = next(iterator)
            out.append([names(part) for part in
                        trainer.strategy.experimental_local_results(features["inputs"])])
        return out

    uninterrupted = stream(0, args.steps)
    resumed = stream(0, args.resume_at) + stream(args.resume_at, args.steps - args.resume_at)
    print(json.dumps({"replicas": replicas, "uninterrupted": uninterrupted,
                      "resumed": resumed}))
    del tf


if __name__ == "__main__":
    main()
