"""Runs one distributed scenario in its own process, for tests/training/test_distribute.py.

A process can split its CPU into logical devices, or join a MultiWorkerMirroredStrategy
cluster, only before TensorFlow initialises its runtime, so these scenarios never run inside
the pytest process; each computes as a run does (`startup.make_tensorflow_deterministic`).
Usage: `python -m tests.distributed_worker SCENARIO OUT [ARG]` from the repository root; each
writes its results to OUT (an .npz file) and asserts nothing itself.

- `mirrored OUT`: 2 logical CPU devices. A learner under MirroredStrategy (2 replicas) and one
  under the default strategy start from the same weights and make the same `UPDATES` updates on
  the same global batches, the SAC head reset after `RESET_AFTER`; OUT holds both learners' variables and metrics (the default strategy's
  are also the one-device reference of the `worker` scenario).
- `worker OUT`: one worker of the cluster in TF_CONFIG (optim.strategy=multi_worker), making
  `UPDATES` updates on its share of the global batches (the SAC head reset after `RESET_AFTER`); OUT holds its
  initial and final variables.
- `trainer OUT LOGDIR`: 2 logical CPU devices. Resumes the run in LOGDIR (written without a
  strategy) with optim.strategy=mirrored, collects an episode and makes 2 more updates;
  OUT holds every replica's restored values and the variables after the updates.
"""

from __future__ import annotations

import sys

import numpy as np

UPDATES = 3
RESET_AFTER = 2  # the SAC head starts over after this update (sac.reset_every), in every scenario alike
OVERRIDES = [  # of configs/smoke.yaml: every kind of noise (overshooting's is split on axis 1), micro-batches, SAC on
    "model.overshooting_distance=2", "model.overshooting_scale=0.5", "model.free_nats=1.0", "optim.accumulate=2",
    "sac.batch_size=32", "sac.real_ratio=0.5", "sac.imagination_horizon=3", "model.value_scale=0.5",
]


def global_batch(step: int, batch: int = 4) -> dict:
    from tests.conftest import state_batch

    return state_batch(batch=batch, seed=step)


def split_cpu(devices: int = 2) -> None:
    """Splits the CPU into `devices` logical devices, and computes as a run does (`make_tensorflow_deterministic`)."""
    import tensorflow as tf

    from planet_sac.startup import make_tensorflow_deterministic

    make_tensorflow_deterministic()
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)


def build(config, strategy, seed: int = 0):
    from planet_sac.control.sac import SAC
    from planet_sac.models.world_model import WorldModel
    from planet_sac.training.learner import Learner

    with strategy.scope():
        model = WorldModel(config.model, "state", (3,), 1, seed=seed)
        sac = SAC(config.sac, model.rssm.feature_size, 1, seed=seed)
        return Learner(config, model, sac, seed=seed, strategy=strategy)


def variables(learner) -> dict:
    """Every variable the update touches, by checkpoint name (as the trainer names them)."""
    from planet_sac.checkpoints import named_variables

    return named_variables([learner.world_model, learner.sac, learner.optimizer, learner],
                           extra={"learner/rng_state": learner.rng.state})


def values(learner) -> dict[str, np.ndarray]:
    return {name: variable.numpy() for name, variable in variables(learner).items()}


def mirrored(out: str) -> None:
    split_cpu()
    import tensorflow as tf

    from planet_sac.config import ConfigError
    from planet_sac.config_loading import apply_overrides, load_config
    from planet_sac.training import distribute
    from tests.conftest import CONFIGS

    config = apply_overrides(load_config(CONFIGS / "smoke.yaml"), OVERRIDES)
    one = build(config, tf.distribute.get_strategy())
    strategy = distribute.make_strategy(apply_overrides(config, ["optim.strategy=mirrored"]))
    two = build(config, strategy)
    for name, variable in variables(two).items():  # the same start, whatever initialisation does
        variable.assign(variables(one)[name])
    results = {f"init/{name}": value for name, value in values(one).items()}
    for step in range(UPDATES):
        for learner, label in ((one, "one"), (two, "two")):
            metrics = learner.update(global_batch(step))
            results.update({f"{label}/metric{step}/{key}": value.numpy() for key, value in metrics.items()})
            if step + 1 == RESET_AFTER:  # every replica's copy starts over alike, as one device's head
                learner.reset_head(RESET_AFTER)
    results["sac_steps_since_reset"] = two.sac.critic_optimizer.iterations.numpy()
    for learner, label in ((one, "one"), (two, "two")):
        results.update({f"{label}/{name}": value for name, value in values(learner).items()})
    results["replicas"] = np.array(strategy.num_replicas_in_sync)
    results["replicas_agree"] = np.array(all(all(np.array_equal(part.numpy(), variable.values[0].numpy()) for part in variable.values)
                                             for variable in variables(two).values()))
    try:
        distribute.make_strategy(apply_overrides(load_config(CONFIGS / "smoke.yaml"), ["optim.strategy=mirrored", "data.batch_size=5"]))
        results["odd_batch_error"] = np.array("")
    except ConfigError as error:
        results["odd_batch_error"] = np.array(str(error))
    np.savez(out, **results)


def worker(out: str) -> None:
    from planet_sac.config_loading import apply_overrides, load_config
    from planet_sac.startup import make_tensorflow_deterministic
    from planet_sac.training import distribute
    from tests.conftest import CONFIGS

    make_tensorflow_deterministic()  # as a run does, and as the `mirrored` scenario's one-device reference
    config = apply_overrides(load_config(CONFIGS / "smoke.yaml"), [*OVERRIDES, "optim.strategy=multi_worker"])
    strategy = distribute.make_strategy(config)  # first: TensorFlow's runtime starts with the cluster's collectives
    learner = build(config, strategy)
    results = {f"init/{name}": value for name, value in values(learner).items()}
    index, workers = distribute.worker_index(strategy), distribute.num_workers(strategy)
    size = distribute.worker_batch_size(config, strategy)
    results.update({"worker_index": np.array(index), "num_workers": np.array(workers), "worker_batch_size": np.array(size),
                    "worker_seed": np.array(distribute.worker_seed(7, strategy))})
    for step in range(UPDATES):
        batch = global_batch(step, config.data.batch_size)
        learner.update({key: value[index * size:(index + 1) * size] for key, value in batch.items()})
        if step + 1 == RESET_AFTER:
            learner.reset_head(RESET_AFTER)
    results.update({f"final/{name}": value for name, value in values(learner).items()})
    np.savez(out, **results)


def trainer(out: str, logdir: str) -> None:
    split_cpu()
    from planet_sac.config_loading import apply_overrides, read_config_file
    from planet_sac.training.trainer import Trainer

    # policy.jit_compile asks for XLA, which cannot read mirrored variables: the agent must act without it.
    config = apply_overrides(read_config_file(f"{logdir}/config.yaml"), ["optim.strategy=mirrored", "policy.jit_compile=true"])
    run = Trainer(config, logdir, progress=False, force=True)
    results = {"start_message": np.array(run.start_message), "replicas": np.array(run.strategy.num_replicas_in_sync)}
    for name, variable in run.variables.items():
        for replica, part in enumerate(getattr(variable, "values", (variable,))):
            results[f"restored/{replica}/{name}"] = part.numpy()
    results["episode_length"] = np.array(run.collect_train_episodes()[0]["length"])  # the policy acts under the strategy
    results["held_out_loss"] = np.array(run.test_phases.held_out_loss()["test/loss/total"])
    run.run(int(run.counters.step.numpy()) + 2)
    run.close()
    results.update({f"final/{name}": variable.numpy() for name, variable in run.variables.items()})
    np.savez(out, **results)


if __name__ == "__main__":
    scenario, *args = sys.argv[1:]
    {"mirrored": mirrored, "worker": worker, "trainer": trainer}[scenario](*args)
