"""`SimEnv`, the base of the simulators planet_sac builds: dict observations, native action bounds, built-in action repeat.

Action repeat lives inside the base environment rather than in a wrapper so that an image is rendered once per
agent step, not once per simulator step (rendering dominates the cost).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from PIL import Image


class SimEnv(gymnasium.Env):
    """Base environment: dict observations, native action bounds, built-in action repeat.

    Subclasses implement ``_reset``, ``_advance`` (one simulator step) and ``_observe``.
    A seed given at construction is used by the first ``reset`` that is not given its own.
    """

    metadata = {"render_modes": ["rgb_array"]}
    render_mode: str | None = "rgb_array"
    observation_space: spaces.Dict
    action_space: spaces.Box

    def __init__(self, obs_key: str, action_repeat: int, image_size: int, seed: int | None) -> None:
        self.obs_key = obs_key
        self.action_repeat = action_repeat
        self.image_size = image_size
        self._pending_seed = seed

    def _reset(self, seed: int | None) -> None:
        raise NotImplementedError

    def _advance(self, action: np.ndarray) -> tuple[float, bool, bool, dict[str, Any]]:
        """Step the simulator once; returns (reward, terminated, truncated, info)."""
        raise NotImplementedError

    def _observe(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        super().reset(seed=seed)
        self._reset(seed)
        return self._observe(), {}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        total = 0.0
        for _ in range(self.action_repeat):
            reward, terminated, truncated, info = self._advance(action)
            total += reward
            if terminated or truncated:
                break
        return self._observe(), total, terminated, truncated, info


def resize_image(frame: np.ndarray, size: int) -> np.ndarray:
    """Area-average resize of an RGB frame to ``size x size`` uint8."""
    frame = np.asarray(frame, np.uint8)
    if frame.shape[:2] == (size, size):
        return frame
    return np.asarray(Image.fromarray(frame).resize((size, size), Image.Resampling.BOX))
