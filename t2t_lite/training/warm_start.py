"""Fine-tuning: a new run that starts from another run's model weights.

``--warm_start_from`` names a run directory (its latest checkpoint), a directory inside
one such as ``RUN/best`` or ``RUN/averaged`` (the checkpoint it holds), or a checkpoint
prefix (``RUN/ckpt-N``). ``resolve_warm_start`` finds the checkpoint and the run that wrote
it and checks, before any model is built, that the new run's vocabulary file has the same
content as that run's: the embedding and softmax rows belong to the token ids of one
vocabulary. ``restore_weights`` restores the model's variables only: the optimizer's state
and step are not taken, so the new run counts steps and runs its learning-rate schedule
(warm-up included) from 0 with its own hparams.

Only a run's first start is warm: once it has a checkpoint, re-running the command resumes
it. The checkpoint used is recorded in ``run_config.json`` (``warm_start_from``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Union

from t2t_lite.errors import UserError
from t2t_lite.runs.config import RUN_CONFIG_FILE, RunConfig
from t2t_lite.runs.loading import CheckpointError, resolve_checkpoint, restore_model

FLAG = "--warm_start_from"


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """The checkpoint to start from (an absolute prefix) and the run that wrote it."""

    checkpoint: str
    run_dir: Path
    run_config: RunConfig

    @property
    def vocab_path(self) -> Path:
        return self.run_dir / self.run_config.vocab_file


def resolve_warm_start(path: Union[str, Path]) -> WarmStart:
    """The checkpoint and run ``path`` names (see the module doc); ``UserError`` when it
    names neither a run, a checkpoint directory in one, nor a checkpoint of one."""
    given = Path(path).absolute()
    if given.is_dir() and (given / RUN_CONFIG_FILE).is_file():
        run_dir, checkpoint_path = given, None
    elif given.is_dir() or Path(f"{given}.index").is_file():
        candidates = [given.parent, given.parent.parent] if not given.is_dir() else [given.parent]
        run_dirs = [d for d in candidates if (d / RUN_CONFIG_FILE).is_file()]
        if not run_dirs:
            raise UserError(f"{FLAG}={path}: no {RUN_CONFIG_FILE} in "
                            f"{' or '.join(map(str, candidates))}; name a run directory "
                            f"written by t2t-lite-trainer, RUN/best or RUN/ckpt-N")
        run_dir, checkpoint_path = run_dirs[0], given
    else:
        raise UserError(f"{FLAG}={path}: neither a run directory nor a checkpoint prefix "
                        f"(no {path}.index); name a run directory, RUN/best or RUN/ckpt-N")
    try:
        checkpoint = resolve_checkpoint(run_dir, checkpoint_path)
    except CheckpointError as error:
        raise UserError(f"{FLAG}={path}: {error}") from None
    return WarmStart(str(Path(checkpoint).absolute()), run_dir, RunConfig.load(str(run_dir)))


def check_same_vocabulary(warm_start: WarmStart, vocab_path: Union[str, Path],
                          given: str) -> None:
    """``UserError`` naming both files unless ``vocab_path`` (the new run's vocabulary) has
    the content of the vocabulary of the run ``warm_start`` comes from."""
    source, target = warm_start.vocab_path, Path(vocab_path)
    if source.read_bytes() == target.read_bytes():
        return
    raise UserError(
        f"{FLAG}={given}: its vocabulary {source} differs from this run's {target}; "
        f"fine-tuning needs the same vocabulary, because the model's embedding and softmax "
        f"rows belong to the token ids of its own. Copy {source} to {target} before "
        f"t2t-lite-datagen writes the new data (it reuses a vocabulary it finds), or train "
        f"without {FLAG}")


def restore_weights(model, warm_start: WarmStart, given: str) -> None:
    """Restores ``model``'s variables (not the optimizer's) from the warm-start checkpoint;
    ``UserError`` when they do not fit (another model or shape hparams)."""
    try:
        restore_model(model, warm_start.checkpoint)
    except (CheckpointError, ValueError) as error:
        raise UserError(
            f"{FLAG}={given}: {warm_start.checkpoint} does not fit this run's model; "
            f"fine-tuning needs the model and the hparams that shape it (hidden_size, "
            f"filter_size, num_heads, num_hidden_layers, ...) of {warm_start.run_dir}: "
            f"{' '.join(str(error).split())[:300]}") from None
