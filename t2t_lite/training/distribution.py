"""Choosing the tf.distribute strategy: one device, Mirrored over GPUs or logical CPUs,
or MultiWorkerMirrored when ``TF_CONFIG`` describes several workers.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.training import rendezvous
from t2t_lite.training.tf_config import read_tf_config


def split_cpu(num_devices: int) -> None:
    """Splits the host CPU into ``num_devices`` logical devices.

    Must run before TensorFlow initialises its devices (before any op runs).
    """
    if num_devices <= 1:
        return
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])
    except RuntimeError as error:
        raise RuntimeError(f"--cpu_devices={num_devices} must be applied before TensorFlow "
                           f"starts its runtime ({error})") from None


def num_workers_in_tf_config() -> int:
    """Workers (chief included) described by the ``TF_CONFIG`` environment variable
    (``UserError`` when it is malformed: ``tf_config.read_tf_config``)."""
    config = read_tf_config()
    return config.num_workers if config is not None else 1


def make_strategy(worker_gpu: Optional[int] = None, cpu_devices: int = 1,
                  worker_timeout_secs: int = 0) -> tf.distribute.Strategy:
    """The strategy for this process.

    * ``TF_CONFIG`` with several workers: ``MultiWorkerMirroredStrategy``, whose
      collectives and peer heartbeats time out after ``worker_timeout_secs`` (0:
      TensorFlow's defaults; see ``multi_worker_strategy``).
    * otherwise ``MirroredStrategy`` over ``worker_gpu`` GPUs (default: all visible), or
      over ``cpu_devices`` logical CPUs when there is no GPU and ``cpu_devices > 1``;
    * otherwise the default (single-device) strategy.
    """
    if num_workers_in_tf_config() > 1:
        return multi_worker_strategy(worker_timeout_secs)
    gpus = tf.config.list_logical_devices("GPU")
    if worker_gpu is not None:
        if worker_gpu > len(gpus):
            raise UserError(f"--worker_gpu={worker_gpu} but only {len(gpus)} GPU(s) are visible")
        gpus = gpus[:worker_gpu]
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy([gpu.name for gpu in gpus])
    if len(gpus) == 1:
        return tf.distribute.OneDeviceStrategy(gpus[0].name)
    cpus = tf.config.list_logical_devices("CPU")
    if cpu_devices > 1:
        if len(cpus) < cpu_devices:
            raise UserError(f"--cpu_devices={cpu_devices} but only {len(cpus)} logical CPU "
                            f"device(s) exist; split_cpu() must run first")
        return tf.distribute.MirroredStrategy([cpu.name for cpu in cpus[:cpu_devices]])
    return tf.distribute.get_strategy()


def multi_worker_strategy(worker_timeout_secs: int = 0
                          ) -> tf.distribute.MultiWorkerMirroredStrategy:
    """``MultiWorkerMirroredStrategy`` from ``TF_CONFIG`` that gives up on a lost worker.

    With ``worker_timeout_secs`` > 0, a collective (all-reduce) that waits longer than
    that for the other workers fails with ``DeadlineExceededError`` (a worker that is
    alive but stuck), and the coordination service declares a worker dead once it has
    sent no heartbeat for that long (a killed, frozen or unreachable worker). With 0,
    TensorFlow's defaults apply: no collective timeout, 10 s heartbeat timeout.
    TensorFlow keeps one sleeping thread per collective for the length of the timeout.

    First the workers meet in Python (``rendezvous.wait_for_peers``): it names the
    workers it waits for, gives up after ``worker_timeout_secs`` (> 0) with
    ``rendezvous.WorkersMissingError``, and ends on SIGTERM or SIGINT
    (``rendezvous.SetupInterrupted``).
    """
    config = read_tf_config()
    peers = rendezvous.peer_addresses(config.cluster, config.task_type, config.task_index)
    rendezvous.wait_for_peers(config.cluster[config.task_type][config.task_index], peers,
                              worker_timeout_secs)
    if worker_timeout_secs <= 0:
        return tf.distribute.MultiWorkerMirroredStrategy()
    _configure_heartbeat_timeout(worker_timeout_secs)
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=float(worker_timeout_secs))
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def _configure_heartbeat_timeout(seconds: int) -> None:
    """Sets up the coordination service as ``MultiWorkerMirroredStrategy`` does (it keeps
    a service configured before it), with this heartbeat timeout. TensorFlow has no public
    API for it."""
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    if resolver.task_type not in ("chief", "worker") or context.context().coordination_service:
        return
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=cluster.num_tasks(job))
            for job in ("chief", "worker") if job in cluster.jobs]
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(cluster),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=seconds * 1000)


def is_multi_worker() -> bool:
    """True when ``TF_CONFIG`` describes several workers (``MultiWorkerMirroredStrategy``)."""
    return num_workers_in_tf_config() > 1


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes checkpoints and summaries."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())
