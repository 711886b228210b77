"""The self-describing run directory: what a run trained, so later commands need only it.

``output_dir/run_config.json`` stores the problem, model, hparams set, overrides, the
resolved hparams, the vocabulary file copied into the run directory and the
``--t2t_usr_dir`` whose modules registered them, if any (absent in older files), and the
checkpoint a fine-tuned run started from (``warm_start_from``, empty otherwise). The decoder,
exporter and checkpoint averager rebuild the model from it alone. Starting a run in a
directory made with a different configuration is refused with the differences shown.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, Optional

from t2t_lite.errors import UserError
from t2t_lite.hparams_lib import HParams
from t2t_lite.user_paths import write_atomically

RUN_CONFIG_FILE = "run_config.json"
RESTORE_HINT = "restore the file t2t-lite-trainer wrote or start a new --output_dir"


class RunConfigMismatch(UserError):
    """An existing run directory was made with a different configuration."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    problem: str
    model: str
    hparams_set: str
    hparams_overrides: str
    hparams: Dict[str, Any]
    vocab_size: int
    vocab_file: str                 # file name inside the run directory
    data_dir: str = ""              # where the training data came from (informative)
    usr_dir: str = ""               # --t2t_usr_dir (absolute), imported again by later commands
    warm_start_from: str = ""       # the checkpoint (absolute prefix) a fine-tuned run started from

    # Fields whose change makes a run a different run (data_dir may move).
    IDENTITY_FIELDS = ("problem", "model", "hparams", "vocab_size")

    def resolved_hparams(self) -> HParams:
        return HParams.from_dict(self.hparams)

    def save(self, output_dir: str) -> None:
        """Writes ``run_config.json`` atomically (write, then rename)."""
        write_atomically(Path(output_dir) / RUN_CONFIG_FILE,
                         json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, output_dir: str) -> "RunConfig":
        """The run's configuration; ``UserError`` naming the file when it is not JSON, has
        unknown or missing keys, or holds hparams that do not validate."""
        path = Path(output_dir) / RUN_CONFIG_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: {output_dir} is not a t2t-lite run directory "
                f"(train one with t2t-lite-trainer --output_dir={output_dir})")
        try:
            values = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise UserError(f"{path} is not valid JSON ({error}); {RESTORE_HINT}") from None
        check_fields(path, values)
        config = cls(**values)
        try:
            config.resolved_hparams()
        except UserError as error:
            raise UserError(f"{path}: {error}; {RESTORE_HINT}") from None
        return config

    @classmethod
    def load_if_present(cls, output_dir: str) -> Optional["RunConfig"]:
        return cls.load(output_dir) if (Path(output_dir) / RUN_CONFIG_FILE).is_file() else None

    def differences(self, other: "RunConfig") -> Dict[str, tuple]:
        """``{field or hparams key: (self value, other value)}`` over identity fields."""
        diff = {}
        for field in self.IDENTITY_FIELDS:
            mine, theirs = getattr(self, field), getattr(other, field)
            if field == "hparams":
                # A key an older run_config.json lacks has its default; the keys that only
                # say how to use the model (HParams.USAGE_KEYS) may change.
                defaults = HParams().to_dict()
                mine, theirs = {**defaults, **mine}, {**defaults, **theirs}
                for key in sorted(set(mine) | set(theirs)):
                    if key not in HParams.USAGE_KEYS and mine.get(key) != theirs.get(key):
                        diff[f"hparams.{key}"] = (mine.get(key), theirs.get(key))
            elif mine != theirs:
                diff[field] = (mine, theirs)
        return diff

    def check_same_run(self, existing: "RunConfig", output_dir: str) -> None:
        """Raises ``RunConfigMismatch`` listing what differs from ``existing``."""
        diff = existing.differences(self)
        if diff:
            lines = "\n".join(f"  {key}: run directory has {old!r}, this command asks for {new!r}"
                              for key, (old, new) in diff.items())
            raise RunConfigMismatch(
                f"{output_dir} holds a run with a different configuration:\n{lines}\n"
                f"Use a new --output_dir, or repeat the original flags to resume.")


def check_fields(path: Path, values: Any) -> None:
    """Raises ``UserError`` naming ``path`` and the key when ``values`` (the parsed
    ``run_config.json``) has a key ``RunConfig`` does not know or lacks a required one."""
    if not isinstance(values, dict):
        raise UserError(f"{path} must hold a JSON object, not {type(values).__name__}; "
                        f"{RESTORE_HINT}")
    fields = dataclasses.fields(RunConfig)
    known = [field.name for field in fields]
    unknown = [key for key in values if key not in known]
    if unknown:
        raise UserError(f"{path} has unknown key {unknown[0]!r}"
                        f"{f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}; "
                        f"valid keys: {', '.join(known)}. Remove it, or {RESTORE_HINT}")
    missing = [field.name for field in fields if field.name not in values
               and field.default is dataclasses.MISSING]
    if missing:
        raise UserError(f"{path} lacks key {missing[0]!r} (required: "
                        f"{', '.join(missing)}); {RESTORE_HINT}")
