"""Which devices and machines the learner's update runs on: `optim.strategy` as a `tf.distribute.Strategy`.

- `default`: one device, TensorFlow's default strategy (no replication).
- `mirrored`: `tf.distribute.MirroredStrategy` over this machine's GPUs, or, without two GPUs,
  over its logical CPU devices (which exist only if they were configured before TensorFlow
  started, as the tests do). One replica per device.
- `multi_worker`: `tf.distribute.MultiWorkerMirroredStrategy` over the machines listed in the
  `TF_CONFIG` environment variable, each with its local devices. Every worker runs the same
  command; the collectives of every update wait for all of them.

Build the model, its optimizers and the `Learner` inside `strategy.scope()`, so every variable
is mirrored on every replica (with the same name as without a strategy: checkpoints are
interchangeable). What the learner splits across replicas is described in `training/learner.py`.
On a multi-worker cluster each worker loads its share of the global batch
(`worker_batch_size`) from its own episodes, which it collects with its own seeds (`worker_seed`).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import tensorflow as tf

from planet_sac.config import Config, ConfigError

TF_CONFIG_EXAMPLE = ('{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                     '"task": {"type": "worker", "index": 0}}')
WORKER_SEED_STRIDE = 100_000
"""Environment seeds of worker i are offset by i * WORKER_SEED_STRIDE, so workers collect different episodes."""


def make_strategy(config: Config, environ: Mapping[str, str] | None = None) -> tf.distribute.Strategy:
    """The strategy `config.optim.strategy` names; a machine or cluster that cannot run it is a ConfigError.

    Call it before anything is written and, for `multi_worker`, before TensorFlow runs any
    operation (MultiWorkerMirroredStrategy configures the runtime's collectives at start-up).
    """
    name = config.optim.strategy
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(devices=mirrored_devices())
    else:
        read_tf_config(os.environ if environ is None else environ)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    check_batch_split(config, strategy)
    return strategy


def mirrored_devices() -> list[str]:
    """The GPUs if there are at least two, else the logical CPU devices if there are at least two."""
    gpus = [device.name for device in tf.config.list_logical_devices("GPU")]
    cpus = [device.name for device in tf.config.list_logical_devices("CPU")]
    for devices in (gpus, cpus):
        if len(devices) >= 2:
            return devices
    found = gpus or cpus
    names = ", ".join(name.split("device:")[-1] for name in found)
    raise ConfigError(f"optim.strategy=mirrored needs at least 2 devices, found {len(found)} ({names}); "
                      "use optim.strategy=default, or run on a machine with 2 or more GPUs")


def read_tf_config(environ: Mapping[str, str]) -> dict[str, Any]:
    """The cluster and task of this worker from `TF_CONFIG`, checked; every problem is one ConfigError line."""
    text = environ.get("TF_CONFIG", "")
    hint = f"; set it on every worker, e.g. TF_CONFIG='{TF_CONFIG_EXAMPLE}'"
    if not text.strip():
        raise ConfigError("optim.strategy=multi_worker reads the cluster from the TF_CONFIG environment variable, "
                          "which is not set" + hint)
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"TF_CONFIG is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
                          + hint) from None
    if not isinstance(spec, dict):
        raise ConfigError(f"TF_CONFIG must be a JSON object with \"cluster\" and \"task\", got {type(spec).__name__}" + hint)
    cluster, task = spec.get("cluster"), spec.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError("TF_CONFIG has no \"cluster\" (a mapping from \"worker\" to a list of host:port addresses)" + hint)
    for job, addresses in cluster.items():
        if job not in ("chief", "worker"):
            raise ConfigError(f"TF_CONFIG cluster has a {job!r} job; MultiWorkerMirroredStrategy takes \"chief\" and "
                              "\"worker\" jobs only" + hint)
        if (not isinstance(addresses, list) or not addresses
                or not all(isinstance(a, str) and a.rpartition(":")[2].isdigit() for a in addresses)):
            raise ConfigError(f"TF_CONFIG cluster {job!r} must be a non-empty list of \"host:port\" strings, "
                              f"got {json.dumps(addresses)}" + hint)
    if len(cluster.get("chief", [])) > 1:
        raise ConfigError(f"TF_CONFIG cluster lists {len(cluster['chief'])} chiefs; there can be one")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ConfigError("TF_CONFIG has no \"task\" with \"type\" and \"index\" (which of the cluster's tasks this "
                          "process is)" + hint)
    job, index = task["type"], task["index"]
    if job not in cluster:
        raise ConfigError(f"TF_CONFIG task type {job!r} is not a job of the cluster ({', '.join(cluster)})")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(cluster[job]):
        raise ConfigError(f"TF_CONFIG task index {index!r} is not in 0..{len(cluster[job]) - 1} "
                          f"(the cluster has {len(cluster[job])} {job!r} addresses)")
    return spec


def local_replicas(strategy: tf.distribute.Strategy) -> int:
    """Replicas on this machine (one per local device)."""
    if isinstance(strategy, (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy)):
        return len(strategy.extended.worker_devices)
    return strategy.num_replicas_in_sync  # the default strategy: one device


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """Machines (processes) that train together."""
    return strategy.num_replicas_in_sync // local_replicas(strategy)


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This worker's position in the cluster: 0 for the chief (or the first worker), as TensorFlow numbers them."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or num_workers(strategy) == 1:
        return 0
    jobs = resolver.cluster_spec().as_dict()
    chiefs = len(jobs.get("chief", []))
    return resolver.task_id if resolver.task_type == "chief" else chiefs + resolver.task_id


def worker_batch_size(config: Config, strategy: tf.distribute.Strategy) -> int:
    """Chunks this worker loads per update: its share of the global batch `data.batch_size`."""
    return config.data.batch_size // num_workers(strategy)


def worker_seed(seed: int, strategy: tf.distribute.Strategy) -> int:
    """An environment seed for this worker: each worker collects its own episodes."""
    return seed + WORKER_SEED_STRIDE * worker_index(strategy)


def check_batch_split(config: Config, strategy: tf.distribute.Strategy) -> None:
    """`data.batch_size` must split into equal shards per replica, and each shard into `optim.accumulate` parts."""
    replicas, k = strategy.num_replicas_in_sync, config.optim.accumulate
    if config.data.batch_size % (replicas * k):
        raise ConfigError(f"data.batch_size={config.data.batch_size} cannot be split into {replicas} replicas x "
                          f"optim.accumulate={k} equal parts; use a multiple of {replicas * k}")
