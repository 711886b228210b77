"""The training data stream, and its position saved in every checkpoint.

A step of R replicas takes R consecutive batches of the seeded stream, batch r for
replica r (the order ``strategy.distribute_datasets_from_function`` gives one input
pipeline feeding R replicas), once per micro-batch.

One process (the default strategy, ``OneDeviceStrategy``, ``MirroredStrategy`` over GPUs
or logical CPUs) reads the stream through one host iterator, and every checkpoint holds
that iterator's state as ``data_position``: the shuffle buffer, the batches being filled
and those prefetched (a few MB). Resuming restores it, so the first step trains on the
batch an uninterrupted run would, at once, however many steps were done.

The stream is read past the batches of the steps done instead (one pass over every batch
already trained on: minutes for a long run) where no position can be restored:
* with several workers (``MultiWorkerMirroredStrategy``), where each worker reads its own
  shard and every worker restores the chief's checkpoint, which holds no other worker's
  position; their checkpoints hold none;
* when the checkpoint holds no position (written by an earlier version), or one that
  does not fit this version's input pipeline (a warning says so).
Both ways train on exactly the batches an uninterrupted run would, none twice.
"""
from __future__ import annotations

import sys
from typing import Callable, Optional

import tensorflow as tf

from t2t_lite.runs.loading import damage_reason

# The checkpoint attribute holding the host iterator's state.
DATA_POSITION = "data_position"

DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


def has_data_position(checkpoint_path: str) -> bool:
    """True when the checkpoint at ``checkpoint_path`` (a prefix, ``RUN/ckpt-N``) holds a
    data position."""
    return any(name.split("/", 1)[0] == DATA_POSITION
               for name, _ in tf.train.list_variables(checkpoint_path))


def batches_per_pipeline(input_context: tf.distribute.InputContext) -> int:
    """Batches one input pipeline yields per micro-batch: one for each replica it feeds
    (two logical CPUs or GPUs of one worker share one pipeline)."""
    return max(1, input_context.num_replicas_in_sync // input_context.num_input_pipelines)


class TrainingStream:
    """The iterator a ``TrainStep`` reads (``iterator``) and how a step takes one
    micro-batch from it (``take``, traced inside the step's ``tf.function``).

    Build it with ``open_stream``; ``skipped`` is the number of batches read past on
    opening (0 when the saved position was restored or the run is new)."""

    def __init__(self, iterator, strategy: tf.distribute.Strategy, distributed: bool,
                 skipped: int):
        self.iterator = iterator
        self.skipped = skipped
        self._strategy = strategy
        self._distributed = distributed

    def take(self, iterator):
        """One micro-batch: per-replica features (``{"inputs", "targets"}``, int32
        [batch, length] each), replica r's from the stream's r-th batch."""
        if self._distributed:
            return next(iterator)
        replicas = self._strategy.num_replicas_in_sync
        batches = [iterator.get_next() for _ in range(replicas)]
        if replicas == 1:
            return batches[0]
        return self._strategy.experimental_distribute_values_from_function(
            lambda context: batches[context.replica_id_in_sync_group])


def open_stream(strategy: tf.distribute.Strategy, dataset_fn: DatasetFn,
                checkpoint: tf.train.Checkpoint, *, restored: Optional[str],
                batches_done: int, multi_worker: bool) -> TrainingStream:
    """The training stream, positioned after ``batches_done`` batches per replica (the
    micro-batches of the steps done).

    Call it after ``checkpoint`` (the run's checkpoint, whose saves hold the position
    from now on) restored ``restored`` (its prefix; None for a new run). One process: the
    host iterator becomes ``checkpoint.data_position``, which restores the saved position
    when ``restored`` holds one. Several workers (``multi_worker``): each worker's
    pipeline is read past its own batches, and the checkpoint holds no position. Reading
    past is announced in one line on stdout.
    """
    if multi_worker:
        if restored and batches_done:
            _announce_reading_past(batches_done)

        def skipped_dataset(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
            dataset = dataset_fn(input_context)
            skip = batches_done * batches_per_pipeline(input_context)
            return dataset.skip(skip) if skip else dataset

        iterator = iter(strategy.distribute_datasets_from_function(skipped_dataset))
        return TrainingStream(iterator, strategy, distributed=True,
                              skipped=batches_done if restored else 0)

    replicas = strategy.num_replicas_in_sync
    dataset = dataset_fn(tf.distribute.InputContext(num_input_pipelines=1,
                                                    input_pipeline_id=0,
                                                    num_replicas_in_sync=replicas))
    with tf.device("/cpu:0"):
        iterator = iter(dataset)
    positioned = bool(restored) and has_data_position(restored)
    try:
        # The restore of ``restored`` deferred this attribute's state until now.
        setattr(checkpoint, DATA_POSITION, iterator)
    except tf.errors.OpError as error:
        print(f"warning: the data position saved in {restored} does not fit this "
              f"version's input pipeline ({damage_reason(error)}); reading the training "
              f"data past the batches already trained on instead", file=sys.stderr,
              flush=True)
        with tf.device("/cpu:0"):
            iterator = iter(dataset)
        setattr(checkpoint, DATA_POSITION, iterator)
        positioned = False
    skip = 0 if positioned or not restored else batches_done * replicas
    if skip:
        _announce_reading_past(batches_done)
        _advance(iterator, tf.constant(skip, tf.int64))
    return TrainingStream(iterator, strategy, distributed=False,
                          skipped=skip // replicas)


def _announce_reading_past(batches_done: int) -> None:
    print(f"Reading the seeded training data past the batches already trained on "
          f"({batches_done:,} per replica), so that no example is trained twice (minutes "
          f"for a long run)", flush=True)


@tf.function(autograph=False)
def _advance(iterator, count: tf.Tensor) -> None:
    """Reads ``count`` elements of ``iterator`` and drops them (no Skip node in the
    dataset: a position saved later must fit a stream opened without one)."""
    def read_one(done):
        with tf.control_dependencies(tf.nest.flatten(iterator.get_next())):
            return done + 1

    tf.while_loop(lambda done: done < count, read_one,
                  [tf.constant(0, tf.int64)])
