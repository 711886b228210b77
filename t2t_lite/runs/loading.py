"""Rebuilding a trained model from a run directory: the one model build and checkpoint restore.

A run directory (``output_dir``) holds ``run_config.json``, the vocabulary file named by
``run_config.vocab_file`` and checkpoints written by ``tf.train.CheckpointManager`` over
``tf.train.Checkpoint(model=model, optimizer=optimizer)``. Checkpoints written by
``t2t-lite-avg-checkpoints`` hold the model alone; both restore here.

``build_model(run_config)`` is the only place a run's model is made: the trainer calls it
under its strategy's scope (``training`` imports ``runs``, never the reverse), and the
decoder, exporter and averager call it here, so a checkpoint always meets the model that
wrote it. ``load_trained_run`` resolves the checkpoint once: a named one must be readable;
without one, the run's latest, falling back with a warning past damaged ones
(``restore_newest_readable``). The decoder and the exporter load runs only through it::

    run = load_trained_run("runs/numbers_tiny")   # run.model, run.vocabulary, run.checkpoint
    run_config, problem, model, vocabulary = load_trained_model("runs/numbers_tiny")

An ensemble's members (``t2t_lite.runs.ensemble_members``: several checkpoints of a run, or
several runs) load with ``load_trained_runs``, each through ``load_trained_run``.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import keras
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data.problem import Problem, get_problem
from t2t_lite.data.vocab import Vocabulary, load_vocabulary
from t2t_lite.errors import UserError
from t2t_lite.runs.best import best_checkpoint_prefix
from t2t_lite.runs.config import RunConfig
from t2t_lite.runs.ensemble_members import Member, check_members

PathLike = Union[str, Path]


class CheckpointError(FileNotFoundError):
    """A checkpoint that is missing, unreadable or does not match the run's model."""


class DamagedCheckpointError(CheckpointError):
    """A checkpoint whose files are truncated, fail their checksum or are missing."""


# What TensorFlow raises reading a damaged checkpoint: IndexError for a truncated data
# file ("Read less bytes than requested"), DataLossError for a checksum mismatch,
# NotFoundError for a missing index or data file, a plain OpError for a truncated index.
CHECKPOINT_DAMAGE_ERRORS = (tf.errors.OpError, IndexError)


def damage_reason(error: BaseException) -> str:
    """The useful part of a checkpoint read error, on one line."""
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    if text.startswith("{{function_node"):
        text = text.split("}}", 1)[-1]
    return " ".join(text.split())[:300]


def build_model(run_config: RunConfig) -> keras.Model:
    """The run's model (``run_config.model`` of ``run_config.resolved_hparams()`` over
    ``run_config.vocab_size`` tokens) with its variables created by one call on
    ``inputs`` and ``targets`` of shape [1, 2] int32 (two tokens: a length-1 softmax axis
    would draw Keras's "softmax over size 1" warning; a call, unlike ``build``, also
    records the input structure SavedModel export needs). Variables are created under the
    current ``tf.distribute`` strategy scope and Keras dtype policy (the trainer's)."""
    model = registry.MODELS.get(run_config.model)(run_config.resolved_hparams(),
                                                 run_config.vocab_size)
    two_tokens = tf.ones([1, 2], tf.int32)
    model({"inputs": two_tokens, "targets": two_tokens}, training=False)
    return model


def resolve_checkpoint(output_dir: PathLike, checkpoint_path: Optional[PathLike] = None) -> str:
    """The checkpoint prefix to restore.

    ``checkpoint_path`` may be a prefix (``RUN/ckpt-7``, or one written by
    t2t-lite-avg-checkpoints) or a directory: ``RUN/best`` (the checkpoint its
    ``best.json`` names, see ``t2t_lite.runs.best``) or any other (its latest
    checkpoint); without it, the latest checkpoint of ``output_dir``.
    """
    if checkpoint_path:
        path = Path(checkpoint_path)
        best = best_checkpoint_prefix(path) if path.is_dir() else None
        if best is not None:
            path = Path(best)
        elif path.is_dir():
            latest = tf.train.latest_checkpoint(str(path))
            if latest is None:
                raise CheckpointError(f"--checkpoint_path={path} is a directory with no "
                                      f"checkpoint state file; pass a prefix such as "
                                      f"{path}/ckpt-N")
            return latest
        if not Path(str(path) + ".index").is_file():
            if list(path.parent.glob(path.name + ".data-*")):
                raise DamagedCheckpointError(f"{path} is damaged and cannot be read (its "
                                             f"index {path}.index is missing); use another "
                                             f"checkpoint, e.g. an older ckpt-N of the run")
            raise CheckpointError(f"--checkpoint_path={path}: no checkpoint there (expected "
                                  f"{path}.index); pass a prefix such as RUN/ckpt-N")
        return str(path)
    listed = newest_first(output_dir)
    if not listed:
        raise CheckpointError(f"{output_dir} holds no checkpoint yet (no 'checkpoint' state "
                              f"file); train first, or pass --checkpoint_path")
    return listed[0]  # even when its files are damaged: restoring it then names it


def run_checkpoints(output_dir: PathLike) -> List[str]:
    """Every checkpoint prefix the run's state file lists, oldest first.

    ``get_checkpoint_state`` already joins the file's relative entries to ``output_dir``
    (relative or absolute), so the paths are used as it returns them."""
    state = tf.train.get_checkpoint_state(str(output_dir))
    if state is None:
        return []
    return list(state.all_model_checkpoint_paths)


def untracked_variables(model: keras.Model) -> List[str]:
    """Paths of trainable variables that ``tf.train.Checkpoint(model=model)`` cannot reach
    (e.g. layers kept only in a Keras list): they would be neither saved nor restored."""
    checkpoint = tf.train.Checkpoint(model=model)
    reachable = {id(obj) for obj in tf.train.TrackableView(checkpoint).descendants()}
    return [variable.path for variable in model.trainable_variables
            if id(variable) not in reachable]


def restore_model(model: keras.Model, checkpoint_path: str) -> None:
    """Restores every variable of ``model`` from ``checkpoint_path`` (a prefix).

    Optimizer state in the checkpoint is ignored; a model variable that the checkpoint
    does not hold, or holds with another shape, raises ``CheckpointError`` (a
    checkpoint of another model or size).
    """
    missing = untracked_variables(model)
    if missing:
        raise CheckpointError(f"{len(missing)} variables of the model are not tracked for "
                              f"checkpoints and cannot be restored (a model bug: track "
                              f"layers as attributes), e.g. {missing[:3]}")
    logger, level = tf.get_logger(), tf.get_logger().level
    try:
        status = tf.train.Checkpoint(model=model).restore(checkpoint_path).expect_partial()
    except CHECKPOINT_DAMAGE_ERRORS as error:
        raise DamagedCheckpointError(f"{checkpoint_path} is damaged and cannot be read "
                                     f"({damage_reason(error)}); use another checkpoint, "
                                     f"e.g. an older ckpt-N of the run") from None
    except ValueError as error:   # a variable of another shape: another run's checkpoint
        if "incompatible" not in str(error):
            raise
        # The failed restore stays attached to the model and, when the model is collected
        # (at exit, at the latest), warns about every value it did not restore: ~100
        # lines after the one error line. Keep TensorFlow's Python warnings off from here.
        level = "ERROR"
        raise CheckpointError(f"{checkpoint_path} does not fit the run's model: "
                              f"{' '.join(str(error).split())} (a checkpoint of another "
                              f"run, or a changed run_config.json?)") from None
    finally:
        logger.setLevel(level)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as error:
        raise CheckpointError(f"{checkpoint_path} does not hold every variable of the run's "
                              f"model (another model, hparams or vocabulary size?): "
                              f"{str(error)[:500]}") from None


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """A run loaded for use: its config, problem, restored model, vocabulary, and the
    checkpoint prefix the model was restored from."""

    run_config: RunConfig
    problem: Problem
    model: keras.Model
    vocabulary: Vocabulary
    checkpoint: str


def load_trained_run(output_dir: PathLike, checkpoint_path: Optional[PathLike] = None
                     ) -> TrainedRun:
    """The run in ``output_dir`` with its model restored from ``checkpoint_path`` (a prefix
    or a directory; ``DamagedCheckpointError`` when it cannot be read) or, without it,
    from the newest readable checkpoint (warning on stderr about each damaged one)."""
    run_config = RunConfig.load(str(output_dir))
    problem = get_problem(run_config.problem)
    vocabulary = load_vocabulary(Path(output_dir) / run_config.vocab_file)
    if vocabulary.vocab_size != run_config.vocab_size:
        raise UserError(f"{Path(output_dir) / run_config.vocab_file} has "
                        f"{vocabulary.vocab_size} tokens but run_config.json says "
                        f"vocab_size={run_config.vocab_size}; restore the run's vocabulary")
    model = build_model(run_config)
    if checkpoint_path:
        checkpoint = resolve_checkpoint(output_dir, checkpoint_path)
        restore_model(model, checkpoint)
    else:
        checkpoint = restore_newest_readable(model, output_dir)
    return TrainedRun(run_config, problem, model, vocabulary, checkpoint)


def load_trained_model(output_dir: PathLike, checkpoint_path: Optional[PathLike] = None
                       ) -> Tuple[RunConfig, Problem, keras.Model, Vocabulary]:
    """(run_config, problem, model restored from the checkpoint, vocabulary) of a run,
    loaded by ``load_trained_run`` (which also says which checkpoint it restored)."""
    run = load_trained_run(output_dir, checkpoint_path)
    return run.run_config, run.problem, run.model, run.vocabulary


def load_trained_runs(members: Sequence[Member]) -> List[TrainedRun]:
    """Each member (``t2t_lite.runs.ensemble_members.Member``) loaded by
    ``load_trained_run`` from its run directory and checkpoint ("": the run's default), in
    order. ``check_members`` runs first (problem and vocabulary shared, named checkpoints
    present) and every named checkpoint is resolved before any model is built, so a wrong
    member fails before the others are loaded."""
    check_members(members)
    for member in members:
        if member.checkpoint_path:
            resolve_checkpoint(member.run_dir, member.checkpoint_path)
    return [load_trained_run(member.run_dir, member.checkpoint_path or None)
            for member in members]


def restore_newest_readable(model: keras.Model, output_dir: PathLike) -> str:
    """Restores the run's latest checkpoint into ``model``; when it is damaged, warns
    naming it and falls back to the newest readable one the state file lists. Returns
    the restored prefix; raises ``CheckpointError`` when none is readable."""
    candidates = newest_first(output_dir)
    if not candidates:
        resolve_checkpoint(output_dir)  # raises the "no checkpoint yet" error
    damaged = []
    for path in candidates:
        try:
            restore_model(model, path)
        except DamagedCheckpointError as error:
            print(f"warning: {error}", file=sys.stderr)
            damaged.append(path)
            continue
        if damaged:
            print(f"warning: using {path}, the newest readable checkpoint of {output_dir}, "
                  f"instead of the damaged {', '.join(damaged)}", file=sys.stderr)
        return path
    raise DamagedCheckpointError(f"no readable checkpoint in {output_dir}: "
                                 f"{', '.join(damaged)} are all damaged")


def newest_first(output_dir: PathLike) -> List[str]:
    """The checkpoints the run's state file lists, newest first, whether or not their
    files are all there (``tf.train.latest_checkpoint`` skips an index-less latest
    silently; this lists it so that the caller can say it is damaged)."""
    state = tf.train.get_checkpoint_state(str(output_dir))
    if state is None:
        return []
    paths = [state.model_checkpoint_path, *reversed(state.all_model_checkpoint_paths)]
    return list(dict.fromkeys(path for path in paths if path))
