"""Where a run keeps its best checkpoint, and how later commands find it.

The trainer (``t2t_lite.training.best_checkpoint``) keeps in ``RUN/best/`` the model
weights of the evaluation with the best dev score, ``ckpt-<step>`` (a model-only
checkpoint, as ``t2t-lite-avg-checkpoints`` writes), and ``best.json``: the metric,
its direction, the step, the score, every dev score of that evaluation and the score of
each evaluation so far. ``best.json`` names the checkpoint; the ``checkpoint`` state file
beside it names the same one, for TensorFlow's tools.

``t2t-lite-decoder --checkpoint_path=RUN/best`` and the exporter resolve that directory
with ``best_checkpoint_prefix``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

from t2t_lite.errors import UserError

BEST_DIR = "best"              # RUN/best/
BEST_RECORD = "best.json"      # RUN/best/best.json


def read_best_record(best_dir: Union[str, Path]) -> Optional[Dict[str, Any]]:
    """The parsed ``best.json`` of ``best_dir``, or None when there is none. A file that
    is not a JSON object raises ``UserError`` naming it."""
    path = Path(best_dir) / BEST_RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UserError(f"{path} is not valid JSON ({error}); remove {Path(best_dir)} to "
                        f"start keeping the best checkpoint again") from None
    if not isinstance(record, dict) or not isinstance(record.get("checkpoint"), str):
        raise UserError(f"{path} does not name a checkpoint; remove {Path(best_dir)} to "
                        f"start keeping the best checkpoint again")
    return record


def best_checkpoint_prefix(best_dir: Union[str, Path]) -> Optional[str]:
    """The prefix of the checkpoint ``best_dir/best.json`` names (``best_dir/ckpt-N``),
    or None when ``best_dir`` holds no ``best.json``."""
    record = read_best_record(best_dir)
    return None if record is None else str(Path(best_dir) / record["checkpoint"])
