"""The first meeting of the workers of ``TF_CONFIG``: bounded, talkative, interruptible.

``MultiWorkerMirroredStrategy()`` blocks inside TensorFlow's C++ runtime, holding the
interpreter, until every worker of the cluster has started; meanwhile no Python signal
handler runs, and TensorFlow's own SIGTERM handler only takes a note. So the workers meet
first in Python (``wait_for_peers``), before TensorFlow's meeting:

- each worker listens on its own ``TF_CONFIG`` address (a bare TCP listener that accepts
  nothing) and polls the others' addresses until every one answers, then closes its
  listener and lets TensorFlow start its server there;
- after ``NOTICE_SECS`` it prints one line naming the workers that do not answer yet
  (``waiting for worker 0 (127.0.0.1:2222) of TF_CONFIG's cluster to start ...``);
- with ``timeout_secs`` > 0, workers still silent after that long raise
  ``WorkersMissingError`` naming them;
- SIGTERM or SIGINT raises ``SetupInterrupted`` (exit status 143 or 130): nothing has
  been trained, so nothing is saved.
"""
from __future__ import annotations

import contextlib
import signal
import socket
import sys
import time
from typing import Dict, List, Optional, Sequence

NOTICE_SECS = 2.0   # how long the meeting may take before the waiting line is printed
_POLL_SECS = 0.2


class WorkersMissingError(RuntimeError):
    """Some workers of ``TF_CONFIG``'s cluster did not start within the timeout."""


class SetupInterrupted(Exception):
    """SIGTERM or SIGINT while the workers were meeting; nothing to save."""

    def __init__(self, signum: int):
        name = signal.Signals(signum).name
        super().__init__(f"{name} received while waiting for the other workers to start; "
                         f"nothing was trained, nothing saved")
        self.exit_status = 128 + signum


def unanswered(addresses: Dict[str, str], timeout: float = 0.2) -> List[str]:
    """The names (``worker 0``) of ``addresses`` ({name: "host:port"}) where nothing
    accepts a TCP connection."""
    missing = []
    for name, address in addresses.items():
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
        except (OSError, ValueError):
            missing.append(name)
    return missing


def describe(names: Sequence[str], addresses: Dict[str, str]) -> str:
    return ", ".join(f"{name} ({addresses[name]})" for name in names)


def missing_error(missing: Sequence[str], peers: Dict[str, str],
                  timeout_secs: int) -> WorkersMissingError:
    return WorkersMissingError(
        f"{describe(missing, peers)} of TF_CONFIG's cluster did not start within "
        f"--worker_timeout_secs={timeout_secs}; start every worker (same cluster, each its "
        f"own task index), or raise --worker_timeout_secs")


def wait_for_peers(own_address: str, peers: Dict[str, str], timeout_secs: int,
                   out=None) -> None:
    """Returns once every address of ``peers`` ({"worker 1": "host:port"}, the other
    workers) answers; see the module docstring. Call from the main thread."""
    out = out or sys.stderr
    received: List[int] = []

    def on_signal(signum, frame) -> None:
        received.append(signum)

    handlers = {signum: signal.signal(signum, on_signal)
                for signum in (signal.SIGTERM, signal.SIGINT)}
    start = time.monotonic()
    noticed = False
    try:
        with _listening(own_address):
            while True:
                missing = unanswered(peers)
                if not missing:
                    return
                if received:
                    raise SetupInterrupted(received[0])
                waited = time.monotonic() - start
                if timeout_secs > 0 and waited >= timeout_secs:
                    raise missing_error(missing, peers, timeout_secs)
                if not noticed and waited >= NOTICE_SECS:
                    noticed = True
                    limit = (f"up to --worker_timeout_secs={timeout_secs} s"
                             if timeout_secs > 0
                             else "with no limit: set --worker_timeout_secs to bound it")
                    print(f"waiting for {describe(missing, peers)} of TF_CONFIG's cluster to "
                          f"start ({limit})", file=out, flush=True)
                time.sleep(_POLL_SECS)
                if received:
                    raise SetupInterrupted(received[0])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _listening(address: str):
    """A TCP listener on ``address``'s port that accepts nothing (the kernel completes the
    others' probes); none when the port is taken."""
    listener: Optional[socket.socket] = None
    try:
        listener = socket.create_server(("", int(address.rpartition(":")[2])),
                                        family=socket.AF_INET6, dualstack_ipv6=True)
    except (OSError, ValueError):
        try:
            listener = socket.create_server(("", int(address.rpartition(":")[2])))
        except (OSError, ValueError):
            listener = None
    try:
        yield
    finally:
        if listener is not None:
            listener.close()


def peer_addresses(cluster: Dict[str, List[str]], task_type: str,
                   task_index: int) -> Dict[str, str]:
    """The other tasks of ``cluster`` ({"chief": [...], "worker": [...]}) by name."""
    return {f"{job} {index}": address
            for job in ("chief", "worker") for index, address in enumerate(cluster.get(job, []))
            if (job, index) != (task_type, task_index)}
