"""The actor: plays episodes in a batch of environments with one policy and saves each one.

Episodes use PlaNet's aligned layout (see ``planet_sac.episodes.storage``): arrays of length
``T + 1`` where index 0 is the reset observation with a zero action, zero reward and discount 1,
and index ``t + 1`` is the observation after action ``t`` together with that action and its
reward. The discount is 0 only after a true termination; a time limit (truncation) keeps 1 so
that value targets still bootstrap there.

The policy acts for all environments of the batch at once (one call of the compiled policy per
step). An environment whose episode ends is saved right away and restarts while the others go
on; its slice of the policy's recurrent state is reset. An environment whose process crashed
loses its partial episode (with a warning) and starts a new one.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Protocol, Sequence

import gymnasium
import numpy as np
import tensorflow as tf
from tqdm import tqdm

from planet_sac.envs import EnvBatch, LocalEnvs, resize_image
from planet_sac.episodes.folder import EpisodeFolder
from planet_sac.errors import SetupError

log = logging.getLogger("planet_sac")

TRAIN, TEST = "train", "test"


class ActingPolicy(Protocol):
    """Maps batched observations and a recurrent state to actions in [-1, 1] (e.g. `control.policy.Policy`)."""

    def initial_state(self, batch_size: int) -> Any:
        """The recurrent state at the start of `batch_size` episodes (a nest of [B, ...] tensors, or None)."""
        ...

    def act(self, obs: Mapping[str, np.ndarray], state: Any, phase: str) -> tuple[Any, Any]:
        """Actions [B, A] for observations [B, ...] in `phase` (train or test), and the next state."""
        ...


class RandomPolicy:
    """Uniform random actions in [-1, 1] from its own seeded generator (seed episodes, baselines)."""

    def __init__(self, action_size: int, seed: int | None = None) -> None:
        self.action_size = action_size
        self._rng = np.random.default_rng(seed)

    def initial_state(self, batch_size: int) -> None:
        return None

    def act(self, obs: Mapping[str, np.ndarray], state: None, phase: str) -> tuple[np.ndarray, None]:
        batch_size = len(next(iter(obs.values())))
        return self._rng.uniform(-1.0, 1.0, (batch_size, self.action_size)).astype(np.float32), None


class Actor:
    """Environments + a policy + an episode writer.

    `run(n)` plays `n` episodes spread over the batch's environments and, when `outdir` is
    set (an `EpisodeFolder` or its directory), writes each finished episode to its own file
    there (`EpisodeFolder.write`: atomically).
    """

    def __init__(self, envs: EnvBatch | gymnasium.Env, policy: ActingPolicy, phase: str = TRAIN,
                 outdir: str | EpisodeFolder | None = None):
        if phase not in (TRAIN, TEST):
            raise ValueError(f"phase must be {TRAIN!r} or {TEST!r}, got {phase!r}")
        self.envs: EnvBatch = LocalEnvs(envs) if isinstance(envs, gymnasium.Env) else envs
        self.policy = policy
        self.phase = phase
        if isinstance(outdir, str):
            outdir = EpisodeFolder(outdir) if outdir else None
        self.folder: EpisodeFolder | None = outdir
        self.outdir = outdir.directory if outdir is not None else None  # the folder's directory
        self.crashes = 0

    def run(self, num_episodes: int, progress: bool = False, seeds: Sequence[int] | None = None) -> list[dict]:
        """Plays `num_episodes` episodes; returns `{"path", "length", "return", "env"}` per episode, in finishing order.

        `seeds`: the reset seed of each episode in the order they start (an episode redone after its
        environment crashed keeps its seed); without, environments reset from their own generators.
        """
        if seeds is not None and len(seeds) < num_episodes:
            raise ValueError(f"{len(seeds)} reset seeds for {num_episodes} episodes")
        envs = self.envs
        count = envs.num_envs
        action_size = int(np.prod(envs.action_space.shape))
        summaries: list[dict] = []
        steps: list[dict[str, list] | None] = [None] * count
        obs: list[dict[str, np.ndarray] | None] = [None] * count
        started = 0
        playing = [0] * count  # which episode (in starting order) each environment plays: its reset seed's index

        def start(index: int, redo: bool = False) -> None:
            """Starts the next episode in environment `index`, or with `redo` its episode again, from the same seed."""
            nonlocal started
            if not redo:
                playing[index] = started
                started += 1
            first = envs.reset(index, None if seeds is None else int(seeds[playing[index]]))
            obs[index] = first
            steps[index] = {**{key: [value] for key, value in first.items()},
                            "action": [np.zeros(action_size, np.float32)], "reward": [0.0], "discount": [1.0]}

        for index in range(min(count, num_episodes)):
            start(index)
        state = self.policy.initial_state(count)
        with tqdm(total=num_episodes, unit="episode", disable=None if progress else True) as bar:
            while any(record is not None for record in steps):
                actions, state = self.policy.act(_stack(obs), state, self.phase)
                actions = np.clip(np.asarray(actions, np.float32).reshape(count, action_size), -1.0, 1.0)
                active = [index for index in range(count) if steps[index] is not None]
                results = envs.step({index: actions[index] for index in active})
                restarted = np.zeros(count, bool)
                for index in active:
                    result = results[index]
                    record = steps[index]
                    assert record is not None  # `active` holds the environments with an episode
                    if result.crashed or result.obs is None:
                        self.crashes += 1
                        log.warning("environment %d crashed: its partial episode (%d steps) is dropped", index,
                                    len(record["action"]) - 1)
                        start(index, redo=True)
                        restarted[index] = True
                        continue
                    for key, value in result.obs.items():
                        record[key].append(value)
                    record["action"].append(actions[index])
                    record["reward"].append(result.reward)
                    record["discount"].append(0.0 if result.terminated else 1.0)
                    obs[index] = result.obs
                    if not (result.terminated or result.truncated):
                        continue
                    summaries.append(self._finish(record, index))
                    bar.set_postfix(length=summaries[-1]["length"], last_return=f"{summaries[-1]['return']:.1f}")
                    bar.update(1)
                    steps[index] = None
                    if started < num_episodes:
                        start(index)
                        restarted[index] = True
                if restarted.any():
                    state = _reset_where(state, self.policy.initial_state(count), restarted)
        return summaries

    def _finish(self, record: dict[str, list], index: int) -> dict:
        episode = {key: np.stack(values) for key, values in record.items() if key not in ("action", "reward", "discount")}
        for key in ("action", "reward", "discount"):
            episode[key] = np.asarray(record[key], np.float32)
        summary: dict[str, Any] = {"length": len(episode["action"]) - 1, "return": float(episode["reward"].sum()),
                                   "env": index, "path": self.folder.write(episode) if self.folder is not None else None}
        if self.folder is None:
            summary["episode"] = episode
        return summary

    def close(self) -> None:
        self.envs.close()


def _stack(obs: list[dict[str, np.ndarray] | None]) -> dict[str, np.ndarray]:
    """Batched observations; environments without an episode repeat a running one's (their actions are unused)."""
    some = next(item for item in obs if item is not None)
    return {key: np.stack([(item or some)[key] for item in obs]) for key in some}


def _reset_where(state: Any, fresh: Any, mask: np.ndarray) -> Any:
    """`state` with the batch entries selected by `mask` replaced by those of `fresh`."""
    if state is None:
        return None
    mask = tf.constant(mask)

    def select(old: tf.Tensor, new: tf.Tensor) -> tf.Tensor:
        return tf.where(tf.reshape(mask, [-1] + [1] * (len(old.shape) - 1)), new, old)

    return tf.nest.map_structure(select, state, fresh)


def run_episode(env: gymnasium.Env, policy: ActingPolicy, phase: str = TRAIN) -> dict[str, np.ndarray]:
    """Plays one episode in `env` and returns it in the aligned layout (not saved).

    Recorded actions are clipped to [-1, 1], i.e. they are the actions the environment executed.
    """
    (summary,) = Actor(env, policy, phase).run(1)
    return summary["episode"]


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
