"""The environment loop on the actor side: run an agent, record episodes, save them.

Episodes use PlaNet's aligned layout (see ``planet_sac.episodes.storage``): arrays of length
``T + 1`` where index 0 is the reset observation with a zero action, zero reward and discount 1,
and index ``t + 1`` is the observation after action ``t`` together with that action and its
reward. The discount is 0 only after a true termination; a time limit (truncation) keeps 1 so
that value targets still bootstrap there.

Agents see batched observations (a leading batch axis, currently always of size 1) so the same
policy code serves collection and batched evaluation.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium
import numpy as np
from tqdm import tqdm

from planet_sac.envs import resize_image
from planet_sac.episodes.storage import save_episode
from planet_sac.errors import SetupError


class Agent(Protocol):
    """Anything that maps batched observations and a recurrent state to actions in [-1, 1]."""

    def reset(self, batch_size: int) -> Any:
        """Initial recurrent state for ``batch_size`` parallel episodes."""
        ...

    def act(
        self, obs: dict[str, np.ndarray], state: Any, training: bool
    ) -> tuple[np.ndarray, Any]:
        """Actions ``[B, A]`` for observations ``[B, ...]``, and the next recurrent state."""
        ...


class RandomAgent:
    """Uniform random actions in [-1, 1] from its own seeded generator (for seed episodes)."""

    def __init__(self, action_size: int, seed: int | None = None) -> None:
        self.action_size = action_size
        self._rng = np.random.default_rng(seed)

    def reset(self, batch_size: int) -> None:
        return None

    def act(
        self, obs: dict[str, np.ndarray], state: None, training: bool
    ) -> tuple[np.ndarray, None]:
        batch_size = len(next(iter(obs.values())))
        actions = self._rng.uniform(-1.0, 1.0, (batch_size, self.action_size))
        return actions.astype(np.float32), None


class RecordFrames(gymnasium.Wrapper):
    """Keeps a frame after every reset and step, for videos: the rendered frame, or the image observation.

    `from_observation` uses the `image` observation the agent saw (no second render);
    otherwise `env.render()` is kept, resized to `size` x `size` when `size` is given.
    With `optional`, a frame that cannot be rendered (e.g. pygame missing) ends the
    recording and is kept in `error` instead of stopping the episode.
    """

    def __init__(self, env: gymnasium.Env, from_observation: bool = False, size: int | None = None,
                 optional: bool = False):
        super().__init__(env)
        self.from_observation = from_observation
        self.size = size
        self.optional = optional
        self.frames: list[np.ndarray] = []
        self.error: SetupError | None = None

    def _record(self, obs: dict[str, np.ndarray]) -> None:
        if self.error is not None:
            return
        try:
            frame = obs["image"] if self.from_observation else np.asarray(self.env.render())
        except SetupError as error:
            if not self.optional:
                raise
            self.error, self.frames = error, []
            return
        self.frames.append(resize_image(frame, self.size) if self.size else frame)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self.frames = []
        self._record(obs)
        return obs, info

    def step(self, action: np.ndarray):
        result = self.env.step(action)
        self._record(result[0])
        return result


def run_episode(
    env: gymnasium.Env, agent: Agent, training: bool, seed: int | None = None
) -> dict[str, np.ndarray]:
    """Play one episode until termination or truncation and return it in the aligned layout.

    ``seed`` is passed to ``env.reset``. Recorded actions are clipped to [-1, 1], i.e. they are
    the actions the environment actually executed.
    """
    obs, _ = env.reset(seed=seed)
    action_size = int(np.prod(env.action_space.shape))
    steps: dict[str, list] = {key: [value] for key, value in obs.items()}
    steps.update(action=[np.zeros(action_size, np.float32)], reward=[0.0], discount=[1.0])
    state = agent.reset(1)
    done = False
    while not done:
        batched = {key: value[None] for key, value in obs.items()}
        action, state = agent.act(batched, state, training)
        action = np.clip(np.asarray(action, np.float32).reshape(action_size), -1.0, 1.0)
        obs, reward, terminated, truncated, _ = env.step(action)
        for key, value in obs.items():
            steps[key].append(value)
        steps["action"].append(action)
        steps["reward"].append(reward)
        steps["discount"].append(0.0 if terminated else 1.0)
        done = terminated or truncated
    episode = {key: np.stack(values) for key, values in steps.items() if key in obs}
    for key in ("action", "reward", "discount"):
        episode[key] = np.asarray(steps[key], np.float32)
    return episode


def collect_episodes(
    env: gymnasium.Env,
    agent: Agent,
    num_episodes: int,
    outdir: str,
    training: bool = True,
    seed: int | None = None,
    progress: bool = True,
) -> list[dict]:
    """Run ``num_episodes`` episodes, save each to ``outdir`` and return their summaries.

    ``seed`` seeds only the first reset (later episodes continue the environment's random
    stream, so the whole sequence is reproducible without repeating episodes). Each summary is
    ``{"path": str, "length": int, "return": float}`` with ``length`` the number of actions.
    """
    summaries = []
    with tqdm(total=num_episodes, unit="episode", disable=None if progress else True) as bar:  # None: off when not a terminal
        for index in range(num_episodes):
            episode = run_episode(env, agent, training, seed=seed if index == 0 else None)
            path = save_episode(outdir, episode)
            summary = {
                "path": path,
                "length": len(episode["action"]) - 1,
                "return": float(episode["reward"].sum()),
            }
            summaries.append(summary)
            bar.set_postfix(length=summary["length"], last_return=f"{summary['return']:.1f}")
            bar.update(1)
    return summaries
