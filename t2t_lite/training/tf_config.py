"""``TF_CONFIG``, read and checked without TensorFlow (the trainer checks it before
TensorFlow starts).

``read_tf_config()`` is None without ``TF_CONFIG``; otherwise its cluster and this
process's task. A ``TF_CONFIG`` that is not JSON, has no cluster, or names a task that is
not in its cluster is a ``UserError``: such a worker would otherwise train alone.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

from t2t_lite.errors import UserError

WORKER_JOBS = ("chief", "worker")


@dataclasses.dataclass(frozen=True)
class TFConfig:
    cluster: Dict[str, List[str]]   # job -> addresses ("host:port")
    task_type: str
    task_index: int

    @property
    def num_workers(self) -> int:
        """Workers that train, the chief included."""
        return sum(len(self.cluster.get(job, [])) for job in WORKER_JOBS)


def read_tf_config() -> Optional[TFConfig]:
    """This process's ``TF_CONFIG`` (None when unset or empty); ``UserError`` when it is
    malformed."""
    raw = os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return None
    try:
        values = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UserError(f"TF_CONFIG is not valid JSON: {error}") from None
    if not isinstance(values, dict):
        raise UserError("TF_CONFIG must be a JSON object with \"cluster\" and \"task\"")
    cluster = values.get("cluster")
    if not isinstance(cluster, dict) or not any(cluster.get(job) for job in WORKER_JOBS):
        raise UserError("TF_CONFIG has no \"cluster\" with \"worker\" (or \"chief\") "
                        "addresses; give every worker the same cluster, e.g. "
                        "{\"cluster\": {\"worker\": [\"host1:2222\", \"host2:2222\"]}, "
                        "\"task\": {\"type\": \"worker\", \"index\": 0}}")
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise UserError(f"TF_CONFIG's cluster job {job!r} must be a list of "
                            f"\"host:port\" strings")
    task = values.get("task") or {}
    task_type, task_index = task.get("type"), task.get("index", 0)
    if task_type not in WORKER_JOBS:
        raise UserError(f"TF_CONFIG's task type is {task_type!r}; the trainer runs as "
                        f"\"worker\" or \"chief\"")
    jobs = cluster.get(task_type) or []
    if not isinstance(task_index, int) or isinstance(task_index, bool) \
            or not 0 <= task_index < len(jobs):
        raise UserError(f"TF_CONFIG's task {task_type} {task_index!r} is not in its cluster, "
                        f"which has {len(jobs)} {task_type} address(es) (indices 0 to "
                        f"{len(jobs) - 1}); give each worker its own index in that range"
                        if jobs else
                        f"TF_CONFIG's task type {task_type!r} has no addresses in its cluster")
    return TFConfig({job: list(cluster[job]) for job in cluster}, task_type, task_index)
