"""Wrappers `make_env` puts around every environment: actions in [-1, 1], and a time limit in agent steps."""

from __future__ import annotations

from typing import Any, cast

import gymnasium
import numpy as np
from gymnasium import spaces

from planet_sac.config import ConfigError
from planet_sac.envs.base import SimEnv
from planet_sac.envs.process import EnvProcess


class EnvWrapper(gymnasium.Wrapper):
    """Wrapper base that forwards the ``SimEnv`` metadata (gymnasium wrappers do not)."""

    env: SimEnv | EnvProcess | EnvWrapper

    @property
    def obs_key(self) -> str:
        """The single observation key, ``"image"`` or ``"state"``."""
        return self.env.obs_key

    @property
    def action_repeat(self) -> int:
        """Simulator steps per agent action."""
        return self.env.action_repeat


class NormalizeActions(EnvWrapper):
    """Expose actions in [-1, 1]; they are clipped and rescaled to the true bounds."""

    def __init__(self, env: SimEnv | EnvProcess | EnvWrapper) -> None:
        super().__init__(env)
        space = cast(spaces.Box, env.action_space)  # make_env's environments have Box actions
        self._low = space.low.astype(np.float64)
        self._high = space.high.astype(np.float64)
        self._dtype = space.dtype
        self.action_space = spaces.Box(-1.0, 1.0, space.shape, np.float32)

    def step(self, action: np.ndarray):
        """Steps with `action`: the action space's shape, finite; values beyond [-1, 1] are clipped.

        Raises:
            ConfigError (a ValueError): For an action of another shape (numpy would broadcast or cut it) or one
                holding NaN or inf (it would carry into the simulator's state).
        """
        action = np.asarray(action, np.float64)
        if action.shape != self.action_space.shape:
            raise ConfigError(f"an action of shape {action.shape}: this environment takes shape "
                              f"{self.action_space.shape}, values in [-1, 1]")
        if not np.isfinite(action).all():
            raise ConfigError(f"an action holding NaN or inf ({np.array2string(action, precision=3)[:60]}); were the "
                              "observations it was chosen from finite?")
        unit = np.clip(action, -1.0, 1.0)
        scaled = self._low + (unit + 1.0) / 2.0 * (self._high - self._low)
        return self.env.step(scaled.astype(self._dtype))


class TimeLimit(EnvWrapper):
    """Truncate episodes after ``max_episode_steps`` agent steps (None: never)."""

    def __init__(self, env: SimEnv | EnvProcess | EnvWrapper, max_episode_steps: int | None) -> None:
        super().__init__(env)
        self.max_episode_steps = max_episode_steps
        self._steps = 0

    def reset(self, **kwargs: Any):
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        if self.max_episode_steps is not None and self._steps >= self.max_episode_steps:
            truncated = truncated or not terminated
        return obs, reward, terminated, truncated, info
