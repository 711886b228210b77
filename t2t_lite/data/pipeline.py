"""The input pipeline: TFRecord shards -> token-budgeted, length-bucketed batches.

``make_dataset`` yields ``{"inputs": int32 [b, L], "targets": int32 [b, L]}``: each
sequence ends with EOS (1) and is padded with 0 to its bucket's length ``L``, one of a
small fixed set of ``bucket_boundaries``; the batch size of a bucket is
``per-replica budget // L`` so that each side carries at most the budget in (padded)
tokens. ``hparams.batch_size`` counts tokens per side per step over all replicas (the
paper's ~25,000 source + 25,000 target tokens); under a distribution strategy each
replica's pipeline gets ``batch_size // num_replicas_in_sync``.

Training: shards and examples shuffled, examples longer than ``hparams.max_length``
(with EOS) dropped, repeated forever. Evaluation: corpus-file order, deterministic, one
pass, nothing dropped (buckets extend to the split's longest example).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Union

import tensorflow as tf

from t2t_lite.data import datagen
from t2t_lite.data.problem import Problem, eval_text
from t2t_lite.data.records import parse_example
from t2t_lite.data.vocab import EOS_ID
from t2t_lite.errors import UserError

__all__ = ["bucket_boundaries", "bucket_batch_sizes", "make_dataset", "eval_text",
           "per_replica_budget"]

MIN_BUCKET = 8

# tf.data traces every function it is given with AutoGraph unless told otherwise; these
# have no Python control flow on tensors, so they are traced as written (as every
# tf.function of the package is, with autograph=False) and AutoGraph never re-reads them.
_traced_as_written = tf.autograph.experimental.do_not_convert


def bucket_boundaries(max_length: int, min_length: int = MIN_BUCKET,
                      step: float = 1.1) -> List[int]:
    """Padded lengths: multiples of 8 up to 64, then growing ~10% (rounded up to 8), the
    last one ``max_length`` itself. E.g. 256 -> [8, 16, ..., 64, 72, 80, 88, 104, ..., 256]."""
    boundaries = []
    length = min_length
    while length < max_length:
        boundaries.append(length)
        length = max(length + MIN_BUCKET, -(-int(length * step) // MIN_BUCKET) * MIN_BUCKET)
    boundaries.append(max_length)
    return boundaries


def bucket_batch_sizes(boundaries: List[int], token_budget: int) -> List[int]:
    """Examples per batch of each bucket: ``token_budget // length`` (at least 1)."""
    return [max(1, token_budget // length) for length in boundaries]


def per_replica_budget(batch_size: int,
                       input_context: Optional[tf.distribute.InputContext]) -> int:
    """Tokens per side per step for one replica."""
    replicas = input_context.num_replicas_in_sync if input_context else 1
    budget = batch_size // replicas
    if budget <= 0:
        raise UserError(f"hparam batch_size={batch_size} tokens is smaller than the "
                        f"{replicas} replicas in sync; raise batch_size")
    return budget


def _add_eos(example: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    eos = tf.constant([EOS_ID], tf.int32)
    return {name: tf.concat([ids, eos], axis=0) for name, ids in example.items()}


def _length(example: Dict[str, tf.Tensor]) -> tf.Tensor:
    return tf.maximum(tf.size(example["inputs"]), tf.size(example["targets"]))


def make_dataset(problem: Problem, data_dir: Union[str, Path], split: str, hparams, *,
                 training: bool,
                 input_context: Optional[tf.distribute.InputContext] = None,
                 seed: Optional[int] = None,
                 shuffle_buffer: int = 10_000) -> tf.data.Dataset:
    """Batches of ``split`` of ``problem`` from ``data_dir``; see the module docstring.

    Args:
      hparams: uses ``batch_size`` (tokens per side per step, all replicas) and
        ``max_length`` (longest kept training sequence, EOS included).
      input_context: from ``strategy.distribute_datasets_from_function``; sets the
        per-replica budget and shards the data by ``input_pipeline_id``.
      seed: makes training order reproducible.
    Raises:
      ValueError: the per-replica budget cannot hold one ``max_length`` example.
      FileNotFoundError: the split has not been generated (names the datagen command).
    """
    files = [str(path) for path in problem.shard_files(data_dir, split)]
    budget = per_replica_budget(hparams.batch_size, input_context)
    if training:
        max_length = hparams.max_length
        if budget < max_length:
            replicas = input_context.num_replicas_in_sync if input_context else 1
            raise UserError(
                f"per-replica token budget {budget} (hparam batch_size={hparams.batch_size} "
                f"over {replicas} replica(s)) cannot hold one example of max_length="
                f"{max_length}; raise batch_size or lower max_length")
    else:
        summary = datagen.load_split_summary(data_dir, problem.name, split)
        longest = max(summary.max_input_length, summary.max_target_length) + 1
        max_length = max(hparams.max_length, longest)
    boundaries = bucket_boundaries(max_length)
    batch_sizes = bucket_batch_sizes(boundaries, budget)

    dataset = tf.data.Dataset.from_tensor_slices(files)
    pipelines = input_context.num_input_pipelines if input_context else 1
    shard_records = pipelines > 1 and len(files) < pipelines
    if pipelines > 1 and not shard_records:
        dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
    if training:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    deterministic = not training or seed is not None
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
                                 num_parallel_calls=tf.data.AUTOTUNE,
                                 deterministic=deterministic)
    if shard_records:
        dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
    dataset = dataset.map(_traced_as_written(lambda record: _add_eos(parse_example(record))),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if training:
        dataset = dataset.filter(
            _traced_as_written(lambda example: _length(example) <= max_length))
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()

    boundaries_t = tf.constant(boundaries, tf.int32)
    batch_sizes_t = tf.constant(batch_sizes, tf.int64)

    @_traced_as_written
    def bucket_id(example):
        return tf.cast(tf.searchsorted(boundaries_t, tf.reshape(_length(example), [1]),
                                       side="left")[0], tf.int64)

    @_traced_as_written
    def batch_bucket(key, window):
        length = tf.cast(tf.gather(boundaries_t, key), tf.int64)
        shape = tf.reshape(length, [1])
        return window.padded_batch(tf.gather(batch_sizes_t, key),
                                   padded_shapes={"inputs": shape, "targets": shape},
                                   padding_values=0)

    dataset = dataset.group_by_window(bucket_id, batch_bucket,
                                      window_size_func=_traced_as_written(
                                          lambda key: tf.gather(batch_sizes_t, key)))
    options = tf.data.Options()
    options.deterministic = deterministic
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
