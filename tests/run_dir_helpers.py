"""Run directories for decoding tests, made without training (shared by several test files).

``tiny_run_dir()`` generates ``translate_ende_numbers`` once per pytest session, builds a
tiny randomly initialised Transformer and writes a run directory exactly as the trainer
does: ``run_config.json``, the vocabulary copied in, and two ``CheckpointManager``
checkpoints of ``Checkpoint(model=model, optimizer=optimizer)`` (the second after the
weights were changed, so that averaging has something to average). Tests must not write
into it; copy it (``copy_run_dir``) first.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data.datagen import generate
from t2t_lite.data.problem import get_problem
from t2t_lite.runs.config import RunConfig
from t2t_lite.runs.loading import build_model

PROBLEM = "translate_ende_numbers"
HPARAMS_SET = "transformer_tiny"
# Small and short: a random model decodes to its maximum length, so keep it short.
OVERRIDES = "num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2,max_length=24"

_cache: dict = {}


def data_dir() -> Path:
    """translate_ende_numbers data (vocabulary, records, dev/test text), made once."""
    if "data" not in _cache:
        root = Path(tempfile.mkdtemp(prefix="t2t_lite_decode_data_"))
        generate(PROBLEM, root / "data", root / "tmp")
        _cache["data"] = root / "data"
    return _cache["data"]


def make_run_dir(output_dir: Path, overrides: str = OVERRIDES, seed: int = 1,
                 checkpoints: int = 2) -> Path:
    """A run directory with ``checkpoints`` checkpoints of a randomly initialised model."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    problem = get_problem(PROBLEM)
    vocab = problem.load_vocab(data_dir())
    copied = vocab.copy_to(output_dir)
    hparams = registry.hparams(HPARAMS_SET, overrides)
    run_config = RunConfig(problem=PROBLEM, model="transformer", hparams_set=HPARAMS_SET,
                           hparams_overrides=overrides, hparams=hparams.to_dict(),
                           vocab_size=vocab.vocab_size, vocab_file=copied.name,
                           data_dir=str(data_dir()))
    run_config.save(str(output_dir))
    keras.utils.set_random_seed(seed)
    model = build_model(run_config)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer),
                                         str(output_dir), max_to_keep=5)
    rng = np.random.default_rng(seed)
    for index in range(checkpoints):
        if index:
            for variable in model.trainable_variables:
                variable.assign_add(rng.normal(0, 0.05, variable.shape).astype(np.float32))
        manager.save()
    return output_dir


def tiny_run_dir() -> Path:
    """The shared read-only run directory (made once per session)."""
    if "run" not in _cache:
        _cache["run"] = make_run_dir(Path(tempfile.mkdtemp(prefix="t2t_lite_run_")) / "run")
    return _cache["run"]


def copy_run_dir(target: Path, source: Optional[Path] = None) -> Path:
    """A writable copy of the shared run directory."""
    shutil.copytree(source or tiny_run_dir(), target)
    return Path(target)
