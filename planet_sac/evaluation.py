"""Acting with a trained run: evaluation with returns and video, and collection to .npz."""

from __future__ import annotations

import posixpath
from typing import Sequence

import gymnasium
import numpy as np
import tensorflow as tf

from planet_sac import collect
from planet_sac.config import Config, ConfigError, apply_overrides, read_config_file
from planet_sac.envs import make_env
from planet_sac.training.checkpoints import named_variables, resolve, restore_filtered
from planet_sac.training.trainer import TEST, TRAIN, Agent


def find_run_config(checkpoint: str) -> Config:
    """The config.yaml of the run that wrote `checkpoint` (a logdir, its checkpoints/ or a prefix)."""
    path = checkpoint.rstrip("/")
    for _ in range(3):
        if tf.io.gfile.exists(f"{path}/config.yaml"):
            return read_config_file(f"{path}/config.yaml")
        path = posixpath.dirname(path)
    raise ConfigError(f"{checkpoint} is not a training run (it has no config.yaml); pass the --logdir of a run")


def check_run(logdir: str, video: str | None = None) -> None:
    """Fails fast, before any episode runs, if `logdir` has no usable run or `video` cannot be written."""
    find_run_config(logdir)
    resolve(logdir)
    if video:
        if not video.endswith((".mp4", ".gif")):
            raise ConfigError(f"--video {video}: the file name must end in .mp4 or .gif")
        folder = posixpath.dirname(video) or "."
        if not tf.io.gfile.isdir(folder):
            raise ConfigError(f"--video {video}: the folder {folder} does not exist")


def load_agent(checkpoint: str, overrides: Sequence[str] = (), seed: int = 0) -> tuple[Config, Agent, gymnasium.Env, int]:
    """Builds the run's agent and environment and restores the world model and SAC head.

    Returns (config, agent, env, checkpoint step).
    """
    config = apply_overrides(find_run_config(checkpoint), list(overrides))
    prefix = resolve(checkpoint)
    env = make_env(config.env.task, config.env.obs, config.env.action_repeat, config.env.time_limit, seed, config.env.image_size)
    agent = Agent.build(config, config.env.obs, env.observation_space[config.env.obs].shape, env.action_space.shape[0])
    restore_filtered(named_variables([agent.world_model, agent.sac]), prefix, include=["world_model/", "sac/"])
    step = int(tf.train.load_checkpoint(prefix).get_tensor("variables/counters/step/.ATTRIBUTES/VARIABLE_VALUE"))
    return config, agent, env, step


def evaluate(logdir: str, episodes: int, policy: str, seed: int = 12345, video: str | None = None,
             overrides: Sequence[str] = ()) -> dict:
    """Runs `episodes` test-phase episodes with `policy`; returns mean/std/min/max return."""
    check_run(logdir, video)
    _, agent, env, step = load_agent(logdir, overrides, seed)
    agent.policy.set_policies(test=policy)
    recorder = collect.RecordFrames(env) if video else env
    actor = agent.actor(TEST)
    returns = []
    for index in range(episodes):
        episode = collect.run_episode(recorder, actor, training=False, seed=seed if index == 0 else None)
        returns.append(float(episode["reward"].sum()))
        if video and index == 0:
            write_video(video, recorder.frames)
    env.close()
    return {"mean": float(np.mean(returns)), "std": float(np.std(returns)), "min": float(np.min(returns)),
            "max": float(np.max(returns)), "returns": returns, "step": step}


def write_video(path: str, frames: Sequence[np.ndarray], fps: int = 30) -> None:
    import imageio.v2 as imageio

    frames = [np.asarray(frame, np.uint8) for frame in frames]
    if path.endswith(".gif"):
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    else:
        imageio.mimsave(path, frames, fps=fps, macro_block_size=1)


def collect_with_policy(outdir: str, episodes: int, policy: str = "random", checkpoint: str | None = None,
                        task: str | None = None, obs: str | None = None, action_repeat: int | None = None,
                        time_limit: int | None = None, seed: int = 0, overrides: Sequence[str] = (),
                        progress: bool = True) -> list[dict]:
    """Collects episodes into `outdir` with a random policy or a trained run's policy (train phase, with exploration).

    Without a checkpoint, `overrides` are checked against the default config and `env.image_size` applies.
    """
    if policy == "random" and checkpoint is None:
        if not task:
            raise ConfigError("--task is required for random collection, e.g. --task gym:Pendulum-v1")
        image_size = apply_overrides(Config(), list(overrides)).env.image_size
        env = make_env(task, obs or "image", action_repeat or 1, time_limit, seed, image_size)
        agent = collect.RandomAgent(env.action_space.shape[0], seed=seed)
        return collect.collect_episodes(env, agent, episodes, outdir, training=True, seed=seed, progress=progress)
    settings = list(overrides)
    run = find_run_config(checkpoint)
    for key, value, current in (("env.task", task, run.env.task), ("env.obs", obs, run.env.obs),
                                ("env.action_repeat", action_repeat, run.env.action_repeat)):
        if value is not None and value != current:
            raise ConfigError(f"{key}={value} differs from the checkpoint's {current}; the agent only acts in its own task")
    if time_limit is not None:
        settings.append(f"env.time_limit={time_limit}")
    _, agent, env, _ = load_agent(checkpoint, settings, seed)
    agent.policy.set_policies(train=policy)
    return collect.collect_episodes(env, agent.actor(TRAIN), episodes, outdir, training=True, seed=seed, progress=progress)
