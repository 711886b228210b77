"""Which runs and checkpoints an ensemble is made of, checked without TensorFlow.

The decoder's flags name an ensemble in one of two ways:

* ``--output_dir=RUN --checkpoint_path=A,B,...``: several checkpoints of one run, each
  item what ``--checkpoint_path`` accepts alone (``RUN/ckpt-N``, ``RUN/best``,
  ``RUN/averaged/ckpt-avg``, a directory of checkpoints);
* ``--ensemble_dirs=RUN1,RUN2,...`` (in place of ``--output_dir``): several runs, each
  member that run's default checkpoint (its newest readable one). The first run gives the
  problem, its decode defaults and the vocabulary.

A list of one item is that one model, decoded as without a list. ``ensemble_members``
turns the flags into ``Member``s; ``check_members`` reads what needs no TensorFlow (each
run's ``run_config.json``, that each named checkpoint exists, and that the members share
the problem and the vocabulary file's bytes), so that a mistake is one ``error:`` line
before any model is built. Nothing here imports TensorFlow.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Sequence

from t2t_lite.errors import UserError
from t2t_lite.runs.config import RunConfig


@dataclasses.dataclass(frozen=True)
class Member:
    """One model of an ensemble: the run directory whose config builds it, the checkpoint
    to restore ("" = the run's default) and the flag item that named it (for messages)."""

    run_dir: str
    checkpoint_path: str
    name: str


def split_items(value: str, flag: str) -> List[str]:
    """The comma-separated items of ``--flag=value``; an empty item is a ``UserError``."""
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise UserError(f"{flag}={value} has an empty item; separate paths by single commas, "
                        f"with none at either end")
    return items


def ensemble_members(output_dir: str, checkpoint_path: str, ensemble_dirs: str
                     ) -> List[Member]:
    """The models the decoder's flags name, in order (one ``Member`` without a list).

    ``--ensemble_dirs`` takes the place of ``--output_dir`` and of ``--checkpoint_path``:
    giving either beside it is a ``UserError`` (which run, which checkpoint, would be
    ambiguous)."""
    if ensemble_dirs:
        if checkpoint_path:
            raise UserError("--checkpoint_path and --ensemble_dirs both given; each run of "
                            "--ensemble_dirs decodes with its default checkpoint. To "
                            "choose checkpoints of one run, use --output_dir=RUN "
                            "--checkpoint_path=A,B; else drop --checkpoint_path")
        if output_dir:
            raise UserError("--output_dir and --ensemble_dirs both given; --ensemble_dirs "
                            "names every run (the first gives the problem and the "
                            "vocabulary), so drop --output_dir or list it in --ensemble_dirs")
        return [Member(run_dir, "", run_dir)
                for run_dir in split_items(ensemble_dirs, "--ensemble_dirs")]
    if "," not in checkpoint_path:
        return [Member(output_dir, checkpoint_path, checkpoint_path or output_dir)]
    return [Member(output_dir, path, path)
            for path in split_items(checkpoint_path, "--checkpoint_path")]


def check_members(members: Sequence[Member]) -> List[RunConfig]:
    """Each member's ``RunConfig``, after checking without TensorFlow that its run directory
    holds one, that its named checkpoint exists (a prefix with its ``.index`` or data
    files, or a directory), and that every member has the first one's problem and
    vocabulary (the files compared byte for byte, as warm-starting does): a ``UserError``
    naming the two members that differ and what differs."""
    configs = [RunConfig.load(member.run_dir) for member in members]
    for member in members:
        if member.checkpoint_path:
            check_checkpoint_exists(member.checkpoint_path)
    first, first_config = members[0], configs[0]
    first_vocab = vocab_bytes(first, first_config)
    for member, config in zip(members[1:], configs[1:]):
        if config.problem != first_config.problem:
            raise UserError(f"ensemble members {first.name} and {member.name} differ in "
                            f"their problem ({first_config.problem} vs {config.problem}); "
                            f"an ensemble decodes one problem: list runs of the same one")
        if Path(member.run_dir) == Path(first.run_dir):
            continue
        if vocab_bytes(member, config) != first_vocab:
            raise UserError(
                f"ensemble members {first.name} and {member.name} differ in their "
                f"vocabulary ({Path(first.run_dir) / first_config.vocab_file} and "
                f"{Path(member.run_dir) / config.vocab_file} are not the same file); an "
                f"ensemble needs one vocabulary, since its members' token ids must mean "
                f"the same: list runs trained on the same data")
    return configs


def vocab_bytes(member: Member, config: RunConfig) -> bytes:
    """The bytes of the member's run vocabulary file; an unreadable one is a ``UserError``."""
    path = Path(member.run_dir) / config.vocab_file
    try:
        return path.read_bytes()
    except OSError as error:
        raise UserError(f"ensemble member {member.name}: cannot read its vocabulary {path} "
                        f"({error.strerror or error}); restore the run's vocabulary") from None


def check_checkpoint_exists(checkpoint_path: str) -> None:
    """A ``UserError`` unless ``checkpoint_path`` is a directory or a checkpoint prefix
    with an index or data file (whether it can be read is checked when it is restored)."""
    path = Path(checkpoint_path)
    if path.is_dir() or Path(checkpoint_path + ".index").is_file() \
            or list(path.parent.glob(path.name + ".data-*")):
        return
    raise UserError(f"--checkpoint_path item {checkpoint_path}: no checkpoint there "
                    f"(expected {checkpoint_path}.index); pass prefixes such as "
                    f"RUN/ckpt-N, RUN/best or RUN/averaged/ckpt-avg, separated by commas")
