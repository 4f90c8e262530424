"""`planet-sac export`: a trained run's acting path as a TensorFlow SavedModel, in TF-Agents' `PolicySaver` conventions.

The SavedModel holds the encoder, the RSSM filter and the chosen policy (`sac`, `cem` or
`sac_guided_cem`) in its test phase, exactly the function `evaluate` acts with: the agent's
compiled policy with its variables and its random generator. It is loaded with
`tf.saved_model.load(DIR)` alone, without planet_sac:

    policy = tf.saved_model.load(DIR)
    state = policy.get_initial_state(batch_size)      # {"deter", "mean", "std", "stoch", "previous_action", "plan"}
    step = policy.action(observation, state)          # PolicyStep(action, state, info)
    policy.get_train_step(), policy.get_metadata()    # checkpoint step; task, specs, action repeat, config, ...

As TF-Agents' saved policies: `get_initial_state(batch_size)` gives the recurrent state, `action`
maps a batch of observations and that state to a `PolicyStep(action, state, info)`, and
`get_train_step()` / `get_metadata()` return variables. Where it differs: `action` takes the
observation itself instead of a `TimeStep` (the policy needs no reward or step type: call
`get_initial_state` at the start of every episode), and `step.action` is in the environment's own
action bounds (`info["normalized_action"]` is the policy's action in [-1, 1], as planet_sac records it).

Observations are raw: uint8 frames `[B, H, W, 3]` (any size; frames that are not `image_size`
square are resized by area averaging inside) or float32 state vectors `[B, D]` (a `Dict`
observation mapped as `planet_sac.envs.GymEnv` documents). The preprocessing (PlaNet's
5-bit quantisation and the uniform dequantisation noise the policy adds when it acts) lives in
the SavedModel, drawn from the exported random generator, so equal generator states give equal
actions. The caller repeats each action `action_repeat` times (metadata), as planet_sac's
environments do.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf
import yaml

from planet_sac.agent import Agent, load_agent
from planet_sac.checkpoints import find_run_config
from planet_sac.config import Config, ConfigError

EXPORT_POLICIES = ("sac", "cem", "sac_guided_cem")
PolicyStep = collections.namedtuple("PolicyStep", ["action", "state", "info"])
"""What the exported `action` returns, named as TF-Agents' `PolicyStep`."""

STATE_KEYS = ("deter", "mean", "std", "stoch", "previous_action", "plan")
"""Names of the recurrent state's tensors: the RSSM posterior, the last action ([-1, 1]) and CEM's plan."""


def check_policy(config: Config, policy: str) -> None:
    """Refuses, in one line, a policy the run cannot act with."""
    if policy not in EXPORT_POLICIES:
        raise ConfigError(f"--policy {policy}: export one of {', '.join(EXPORT_POLICIES)}")
    if policy != "cem" and config.sac.updates_per_step == 0:
        raise ConfigError(f"--policy {policy}: this run never trained its SAC head (sac.updates_per_step=0); "
                          "export --policy cem")


def export_run(logdir: str, policy: str, out: str | None = None) -> dict:
    """Writes the SavedModel of `logdir`'s latest checkpoint acting by `policy` to `out` (default LOGDIR/export/POLICY).

    The directory appears complete or not at all: it is written to a temporary sibling and
    renamed. Returns {"path", "step", "bytes"}.

    Raises:
        CheckpointError: The run has no readable checkpoint.
        ConfigError: `out` exists already, or the run cannot act with `policy`.
    """
    out = out or os.path.join(logdir, "export", policy)
    check_export_folder(out)  # before the minutes of building the agent
    check_policy(find_run_config(logdir), policy)
    config, agent, env, step = load_agent(logdir, policies=[policy])
    try:
        low = np.asarray(env.unwrapped.action_space.low, np.float32)
        high = np.asarray(env.unwrapped.action_space.high, np.float32)
    finally:
        env.close()
    return export_agent(agent, config, policy, out, step, low, high)


def export_agent(agent: Agent, config: Config, policy: str, out: str, step: int = -1,
                 action_low: np.ndarray | None = None, action_high: np.ndarray | None = None) -> dict:
    """Writes `agent`'s acting path (test phase of `policy`) as a SavedModel to `out`, atomically.

    `action_low` / `action_high` are the environment's own action bounds (default [-1, 1]).
    """
    check_policy(config, policy)
    check_export_folder(out)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    module = _saved_policy(agent, config, policy, step, action_low, action_high)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=parent)
    try:
        tf.saved_model.save(module, staging, signatures={
            "action": module.action_signature, "get_initial_state": module.get_initial_state,
            "get_train_step": module.get_train_step, "get_metadata": module.get_metadata})
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp's folder is private; the export is an ordinary folder
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"path": out, "step": step, "bytes": directory_bytes(out)}


def check_export_folder(out: str) -> None:
    """Fails (ConfigError, one line) unless the new folder `out` can be made: a local path that does not exist yet,
    whose nearest existing ancestor is a writable folder (the folders between are made by the export)."""
    if "://" in out:
        raise ConfigError(f"--out {out}: an export is written to a local folder (copy it to {out.split('://')[0]}:// "
                          "afterwards)")
    if os.path.lexists(out):
        raise ConfigError(f"--out {out} exists already; choose another folder or remove it")
    ancestor = os.path.dirname(os.path.abspath(out))
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ConfigError(f"--out {out}: {ancestor} is a file, not a folder; choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: the folder {ancestor} is not writable; choose another path")


def directory_bytes(path: str) -> int:
    """Total size of the files under `path`."""
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def _saved_policy(agent: Agent, config: Config, policy: str, step: int, action_low: np.ndarray | None,
                  action_high: np.ndarray | None) -> tf.Module:
    """The module `tf.saved_model.save` writes: functions over the policy, and the variables they use."""
    from planet_sac import __version__

    model = agent.world_model
    acting = agent.policy
    acting.set_policies(test=policy)
    action_size = model.action_size
    low = tf.constant(np.full(action_size, -1.0, np.float32) if action_low is None else action_low, tf.float32)
    high = tf.constant(np.full(action_size, 1.0, np.float32) if action_high is None else action_high, tf.float32)
    image = model.obs_key == "image"
    size = model.obs_shape[0] if image else None
    obs_spec = (tf.TensorSpec([None, None, None, 3], tf.uint8, name="observation") if image
                else tf.TensorSpec([None, *model.obs_shape], tf.float32, name="observation"))
    state_spec = {key: tf.TensorSpec(spec.shape, spec.dtype, name=key) for key, spec in
                  zip(STATE_KEYS, _flat_state_spec(acting.initial_state(1)))}
    test_phase = tf.constant(1, tf.int32)

    def initial_state(batch_size: tf.Tensor) -> dict[str, tf.Tensor]:
        return _flat(acting.initial_state(batch_size))

    def act(observation: tf.Tensor, state: dict[str, tf.Tensor]) -> PolicyStep:
        same_batch = tf.debugging.assert_equal(  # else an error deep inside the policy ("ConcatOp : Dimension 0 ...")
            tf.shape(observation)[0], tf.shape(state["deter"])[0],
            message="the observation and the state hold different batch sizes: make the state with "
                    "get_initial_state(batch_size) for as many episodes as the observation holds")
        # The policy's ops read the inputs after the check: alone, the check was ordered after the function call
        # only, whose ops may run first once it is inlined (the policy's own error then came first, now and then).
        with tf.control_dependencies([same_batch]):
            observation = tf.identity(observation)
            state = {key: tf.identity(value) for key, value in state.items()}
        if image:  # frames of another size: area-averaged to image_size, rounded back to uint8
            observation = tf.cond(
                tf.reduce_all(tf.equal(tf.shape(observation)[1:3], [size, size])),
                lambda: observation,
                lambda: tf.cast(tf.round(tf.image.resize(observation, [size, size], method="area")), tf.uint8))
            observation = tf.ensure_shape(observation, [None, size, size, 3])
        unit, next_state = acting(observation, _nested(state), test_phase)
        action = low + (tf.clip_by_value(unit, -1.0, 1.0) + 1.0) / 2.0 * (high - low)
        return PolicyStep(action, _flat(next_state), {"normalized_action": unit})

    module = tf.Module()
    module.get_initial_state = tf.function(initial_state, input_signature=[
        tf.TensorSpec([], tf.int32, name="batch_size")])
    module.action = tf.function(act, input_signature=[obs_spec, state_spec])

    def action_signature(observation: tf.Tensor, **state: tf.Tensor) -> dict[str, tf.Tensor]:
        """The flat signature (serving APIs): inputs and outputs by name, as PolicySaver's `action` signature."""
        step = act(observation, state)
        return {"action": step.action, "normalized_action": step.info["normalized_action"],
                **{f"state/{key}": value for key, value in step.state.items()}}

    module.action_signature = tf.function(action_signature).get_concrete_function(obs_spec, **state_spec)
    module.train_step = tf.Variable(step, dtype=tf.int64, trainable=False, name="train_step")
    module.metadata = {key: tf.Variable(value, trainable=False, name=key) for key, value in _metadata(
        agent, config, policy, step, low.numpy(), high.numpy(), __version__).items()}
    module.get_train_step = tf.function(lambda: module.train_step, input_signature=[])
    module.get_metadata = tf.function(lambda: module.metadata, input_signature=[])
    # Only the variables the functions read are kept (no decoder, target critics or optimizer slots), as
    # PolicySaver keeps `policy.variables()`; tracing here also checks the functions before anything is written.
    used = module.action.get_concrete_function().variables
    module.get_initial_state.get_concrete_function()
    module.model_variables = list(used)
    return module


def _metadata(agent: Agent, config: Config, policy: str, step: int, low: np.ndarray, high: np.ndarray,
              version: str) -> dict[str, object]:
    model = agent.world_model
    image = model.obs_key == "image"
    preprocessing = (f"uint8 frames [B, H, W, 3], area-resized to {model.obs_shape[0]}x{model.obs_shape[1]} if "
                     f"another size; floor(x / 2^{8 - config.model.image_bits}) ({config.model.image_bits}-bit bins), "
                     f"plus uniform [0, 1) dequantisation noise, / 2^{config.model.image_bits} - 0.5"
                     if image else "float32 state vectors [B, D], as they are")
    return {
        "task": config.env.task,
        "policy": policy,
        "observation_key": model.obs_key,
        "observation_shape": np.asarray(model.obs_shape, np.int64),
        "observation_dtype": "uint8" if image else "float32",
        "image_size": np.int64(config.env.image_size),
        "preprocessing": preprocessing,
        "action_shape": np.asarray([model.action_size], np.int64),
        "action_low": low,
        "action_high": high,
        "action_repeat": np.int64(config.env.action_repeat),
        "time_limit": np.int64(-1 if config.env.time_limit is None else config.env.time_limit),
        "checkpoint_step": np.int64(step),
        "planet_sac_version": version,
        "config": yaml.safe_dump(config.to_dict(), sort_keys=False),
    }


def _flat_state_spec(state) -> list[tf.TensorSpec]:
    flat = _flat(state)
    return [tf.TensorSpec([None, *value.shape[1:]], value.dtype) for value in (flat[key] for key in STATE_KEYS)]


def _flat(state) -> dict[str, tf.Tensor]:
    latent, previous_action, plan = state
    return {**{key: latent[key] for key in ("deter", "mean", "std", "stoch")}, "previous_action": previous_action,
            "plan": plan}


def _nested(flat: dict[str, tf.Tensor]):
    latent = {key: flat[key] for key in ("mean", "std", "stoch", "deter")}
    return latent, flat["previous_action"], flat["plan"]
