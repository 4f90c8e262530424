"""Evaluating a trained run: test-phase episodes with returns, and an optional video."""

from __future__ import annotations

import posixpath
from typing import Sequence

import numpy as np
import tensorflow as tf

from planet_sac.acting.actor import TEST, Actor, RecordFrames
from planet_sac.agent import load_agent
from planet_sac.checkpoints import find_run_config, resolve
from planet_sac.config import ConfigError


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


def evaluate(logdir: str, episodes: int, policy: str, seed: int = 12345, video: str | None = None,
             overrides: Sequence[str] = ()) -> dict:
    """Runs `episodes` test-phase episodes with `policy`; returns mean/std/min/max return."""
    check_run(logdir, video)
    _, agent, env, step = load_agent(logdir, overrides, seed)
    agent.policy.set_policies(test=policy)
    recorder = RecordFrames(env) if video else None
    actor = Actor(recorder or env, agent.policy, TEST)
    returns = []
    try:
        for index in range(episodes):
            (summary,) = actor.run(1)
            returns.append(summary["return"])
            if video and index == 0:
                write_video(video, recorder.frames)
    finally:
        actor.close()
    return {"mean": float(np.mean(returns)), "std": float(np.std(returns)), "min": float(np.min(returns)),
            "max": float(np.max(returns)), "returns": returns, "step": step}


def write_video(path: str, frames: Sequence[np.ndarray], fps: int = 30) -> None:
    import imageio.v2 as imageio

    frames = [np.asarray(frame, np.uint8) for frame in frames]
    if path.endswith(".gif"):
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    else:
        imageio.mimsave(path, frames, fps=fps, macro_block_size=1)
