"""Acting for a training run: its environments, and the episodes it collects into its episode folders.

`RunEnvironments` owns the run's environments: the batch of `env.num_envs` training environments and the
`env.test_envs` test environments, each made at its first use with this worker's seed (`distribute.worker_seed`) and
closed by `close()`. `Collection` fills the run's episode folders with random seed episodes and collects
training episodes with the agent's policy. Every episode's reset seed comes from `reset_seeds` and the
counters of episodes already on disk or collected, so a resumed run starts its episodes as the uninterrupted
run started them.
"""

from __future__ import annotations

import logging
from typing import Callable, cast

import gymnasium
import numpy as np
import tensorflow as tf
from gymnasium import spaces

from planet_sac.acting.actor import TRAIN, Actor, RandomPolicy
from planet_sac.config import Config, EnvConfig
from planet_sac.control.policy import Policy
from planet_sac.envs import EnvBatch, make_envs, restarting_env
from planet_sac.episodes.folder import EpisodeFolder
from planet_sac.training import distribute
from planet_sac.training.logger import untracked
from planet_sac.training.run_state import TEST_SEED_OFFSET, TEST_STREAM, TRAIN_STREAM, Counters

log = logging.getLogger("planet_sac")


def action_size(env: EnvBatch | gymnasium.Env) -> int:
    """The size of the actions of `env` (made by `make_env` or `make_envs`: a Box of actions in [-1, 1])."""
    return int(cast(spaces.Box, env.action_space).shape[0])


class RunEnvironments:
    """The run's environments for `env`, each made at its first use and kept until `close()`.

    `train_envs()` is the batch of `env.num_envs` training environments, seeded `worker_seed(env.seed)`;
    `test_envs()` is one environment (replaced when it fails, `envs.restarting_env`), or with `env.test_envs` > 1 a
    batch of that many (each in its own process), seeded `worker_seed(env.seed + TEST_SEED_OFFSET)`, so test
    episodes never repeat training ones. Both return
    the same object on every call until `close()` closes them (idempotent).
    """

    def __init__(self, env: EnvConfig, strategy: tf.distribute.Strategy):
        self.env, self.strategy = env, strategy
        self._train: EnvBatch | None = None
        self._test: gymnasium.Env | EnvBatch | None = None

    def train_envs(self) -> EnvBatch:
        if self._train is None:
            self._train = make_envs(self.env, seed=distribute.worker_seed(self.env.seed, self.strategy))
        return self._train

    def test_envs(self) -> gymnasium.Env | EnvBatch:
        if self._test is None:
            seed = distribute.worker_seed(self.env.seed + TEST_SEED_OFFSET, self.strategy)
            self._test = (restarting_env(self.env, seed) if self.env.test_envs == 1
                          else make_envs(self.env, seed=seed, num_envs=self.env.test_envs))
        return self._test

    def shapes(self, train: bool) -> tuple[tuple[int, ...], int]:
        """(observation shape of `env.obs`, action size) of the task, from the training environments' spaces if
        `train`, else from the test environment's (making it if needed)."""
        env = self.train_envs() if train else self.test_envs()
        obs_space = cast(spaces.Dict, env.observation_space)[self.env.obs]  # make_env's: a Dict of Boxes
        return tuple(cast(spaces.Box, obs_space).shape), action_size(env)

    def made(self) -> list:
        """The environments made and not closed since."""
        return [env for env in (self._train, self._test) if env is not None]

    def close(self) -> None:
        """Closes the environments made so far; a later call makes new ones."""
        for env in self.made():
            env.close()
        self._train = self._test = None


class Collection:
    """The run's collection: random seed episodes into both folders, and training episodes with the agent's policy.

    Inputs: the run's `config` (`data.seed_episodes`, `data.test_seed_episodes`, `env.seed`,
    `env.action_repeat`, `policy.train`); `envs`, the run's environments; `policy`, the agent's policy, whose
    train phase acts in training episodes; `counters`, whose `train_episodes` and `env_steps` advance with
    every training episode (seed episodes leave them to the caller, who counts the files); `train_folder` and
    `test_folder`, the run's episode folders; `reset_seeds(stream, first, count)`, the reset seeds of episodes
    `first`.. of a stream; `progress`: a progress bar while seed episodes are collected.
    """

    def __init__(self, config: Config, envs: RunEnvironments, policy: Policy, counters: Counters,
                 train_folder: EpisodeFolder, test_folder: EpisodeFolder,
                 reset_seeds: Callable[[int, int, int], list[int]], progress: bool = True):
        self.config, self.envs, self.policy, self.counters = config, envs, policy, counters
        self.train_folder, self.test_folder = train_folder, test_folder
        self.reset_seeds, self.progress = reset_seeds, progress

    def seed_episodes(self) -> None:
        """Random episodes until `train_folder` holds `data.seed_episodes` episodes (from the training
        environments) and `test_folder` `data.test_seed_episodes` (from the test environment).

        The episodes already in a folder count: only the missing ones are collected, as episodes
        `on_disk`.. of the folder's stream (`TRAIN_STREAM`, `TEST_STREAM`), with actions from a RandomPolicy
        seeded `env.seed + on_disk` (test: `env.seed + TEST_SEED_OFFSET + on_disk`). A full folder makes no
        environment. The counters are not changed. Each folder's new episodes' returns are logged in one line (mean,
        std, min and max): the random policy's level on the task.
        """
        data, env = self.config.data, self.config.env
        for folder, wanted, seed in ((self.train_folder, data.seed_episodes, env.seed),
                                     (self.test_folder, data.test_seed_episodes, env.seed + TEST_SEED_OFFSET)):
            missing = wanted - folder.counts()[0]
            if missing > 0:
                envs = self.envs.train_envs() if folder is self.train_folder else self.envs.test_envs()
                on_disk = folder.counts()[0]
                policy = RandomPolicy(action_size(envs), seed=seed + on_disk)
                log.info("collecting %d random seed episodes into %s", missing, folder.directory)
                stream = TRAIN_STREAM if folder is self.train_folder else TEST_STREAM
                episodes = Actor(envs, policy, TRAIN, folder).run(missing, progress=self.progress,
                                                                  seeds=self.reset_seeds(stream, on_disk, missing))
                returns = np.array([episode["return"] for episode in episodes])
                log.info("%d random seed episodes: return %.1f ± %.1f (min %.1f, max %.1f)", len(returns),
                         returns.mean(), returns.std(), returns.min(), returns.max())

    def train_episodes(self, policy: str | None = None, count: int | None = None, explore: bool = True) -> list[dict]:
        """`count` episodes (default one per training environment) with `policy` (default `policy.train`) acting in
        the train phase, saved to `train_folder`; returns their summaries (`Actor.run`).

        The head's exploration noise is `sac.exploration_at` the run's env steps before them (a schedule steps per
        collection), or 0 where not `explore` (the collections outside `sac.exploration_share`); each summary holds
        it as `sac_exploration`. They are the `TRAIN_STREAM`'s episodes from `counters.train_episodes` on;
        afterwards `counters.train_episodes` has grown by their number and `counters.env_steps` by their lengths
        times `env.action_repeat`. The policy's train phase is `policy.train` again afterwards, also on an error.
        """
        envs = self.envs.train_envs()
        self.policy.set_policies(train=policy or self.config.policy.train)
        sac_exploration = self.config.sac.exploration_at(int(self.counters.env_steps.numpy())) if explore else 0.0
        self.policy.set_sac_exploration(sac_exploration)
        try:
            count = count or envs.num_envs
            episodes = Actor(envs, self.policy, TRAIN, self.train_folder).run(
                count, seeds=self.reset_seeds(TRAIN_STREAM, int(self.counters.train_episodes.numpy()), count))
        finally:
            self.policy.set_policies(train=self.config.policy.train)
        for episode in episodes:
            episode["sac_exploration"] = sac_exploration
        self.counters.train_episodes.assign_add(len(episodes))
        self.counters.env_steps.assign_add(untracked(sum(episode["length"] for episode in episodes) * self.config.env.action_repeat,
                                                     np.int64))
        return episodes
