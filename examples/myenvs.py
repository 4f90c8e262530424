"""Your own environment: a 2-D reach task, registered as MyReach-v0 when imported (docs/own_environment.md)."""

import gymnasium
import numpy as np
from gymnasium import spaces


class MyReach(gymnasium.Env):
    """Move a point by velocity actions in [-1, 1]^2 towards a goal; the reward is minus their distance."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode: str | None = None):
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(position=spaces.Box(-1, 1, (2,)), goal=spaces.Box(-1, 1, (2,)))
        self.action_space = spaces.Box(-1, 1, (2,))

    def _obs(self) -> dict:
        return {"position": self.position.astype(np.float32), "goal": self.goal.astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position, self.goal = self.np_random.uniform(-1, 1, (2, 2))
        return self._obs(), {}

    def step(self, action):
        self.position = np.clip(self.position + 0.1 * np.clip(action, -1, 1), -1, 1)
        return self._obs(), -float(np.linalg.norm(self.position - self.goal)), False, False, {}

    def render(self) -> np.ndarray:
        frame = np.full((64, 64, 3), 255, np.uint8)
        for (x, y), color in ((self.goal, (0, 160, 0)), (self.position, (200, 0, 0))):
            column, row = int((x + 1) * 28) + 2, int((1 - y) * 28) + 2
            frame[row - 2:row + 3, column - 2:column + 3] = color
        return frame


gymnasium.register("MyReach-v0", entry_point=MyReach, max_episode_steps=100)
