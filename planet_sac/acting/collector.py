"""Collecting episodes to `.npz`: with a random policy, or with a trained run's policy that follows the run.

`Collector` is an independent process's main loop: a run's agent acting in its own
environments (`env.num_envs` of them), writing every finished episode to an episode
directory, which may be the training run's own `train_episodes/` on a shared filesystem
(any `tf.io.gfile` path). With `reload_every`, it reloads the run's newest checkpoint when
one has appeared, checked after each round of episodes, so a learner started with
`schedule.collect=false` and N collectors together form PlaNet's collect/train loop. With
`per_checkpoint`, it plays one round of episodes per new checkpoint and waits in between:
the learner checkpoints every `schedule.collect_every` updates, so the ratio of updates to
environment steps is PlaNet's and an idle collector leaves the cores to the learner.

Checkpoints are read through `Agent.restore` (the same verified reader as evaluation and
resume): one that cannot be read completely (being deleted by the trainer's rotation, damaged,
or an incomplete copy) is never half-applied, and the newest readable one is used instead, with
a warning naming the damaged one; when none is readable, a running collector keeps its current
weights (with a warning) and a starting one fails with one line. Collectors never write into
the run's checkpoints and take no lock on the run: any number may read one run.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Literal, Sequence, cast

import tensorflow as tf
from gymnasium import spaces

from planet_sac.acting.actor import TRAIN, Actor, RandomPolicy
from planet_sac.agent import Agent, overrides_that_change_the_model
from planet_sac.checkpoints import CheckpointError, find_run_config, latest_checkpoint, resolve
from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import apply_overrides
from planet_sac.envs import make_envs
from planet_sac.episodes.folder import EpisodeFolder

log = logging.getLogger("planet_sac")


def collect_random(outdir: str, episodes: int, task: str, obs: str = "image", action_repeat: int = 1,
                   time_limit: int | None = None, seed: int = 0, overrides: Sequence[str] = (),
                   progress: bool = True) -> list[dict]:
    """Uniform random episodes of `task` into `outdir` (`overrides` may set env.image_size, env.num_envs, env.shadow_size)."""
    env = apply_overrides(Config(), list(overrides)).env
    env = dataclasses.replace(env, task=task, obs=cast(Literal["image", "state"], obs), action_repeat=action_repeat,
                              time_limit=time_limit, num_envs=min(env.num_envs, episodes))  # no process without an episode
    folder = EpisodeFolder(outdir)  # checked before an environment starts
    envs = make_envs(env, seed=seed)
    actor = Actor(envs, RandomPolicy(envs.action_space.shape[0], seed=seed), TRAIN, folder)
    try:
        return actor.run(episodes, progress=progress)
    finally:
        actor.close()


COLLECTOR_SEED_OFFSET = 1_000_003  # a collector's policy noise stream: apart from the learner's (config.seed + 1)


class Collector:
    """A trained run's policy (train phase, with exploration) collecting into `outdir`, reloading the run's checkpoints."""

    def __init__(self, checkpoint: str, outdir: str, policy: str = "cem", seed: int = 0,
                 overrides: Sequence[str] = (), reload_every: float | None = None, wait_seconds: float = 0.0,
                 per_checkpoint: bool = False):
        if reload_every is not None and not 0 < reload_every < math.inf:
            raise ConfigError(f"--reload-every={reload_every:g}: must be a finite number of seconds > 0")
        if per_checkpoint and reload_every is None:
            raise ConfigError("--per-checkpoint needs --reload-every SECONDS (how often to look for the next checkpoint)")
        if per_checkpoint and _newest_prefix(checkpoint) == checkpoint:  # a prefix, not a run
            raise ConfigError(f"--per-checkpoint waits for each new checkpoint of a run; {checkpoint} is one checkpoint "
                              "(pass the run's logdir)")
        self.checkpoint = checkpoint
        self.reload_every = reload_every
        self.per_checkpoint = per_checkpoint
        run_config = self._wait_for_run(checkpoint, wait_seconds)
        self.config = apply_overrides(run_config, list(overrides))
        env = self.config.env
        self.envs = make_envs(env, seed=seed)
        try:
            obs_space = cast(spaces.Box, self.envs.observation_space[env.obs])  # make_env's: a Dict of Boxes
            self.agent = Agent.build(self.config, env.obs, obs_space.shape,
                                     self.envs.action_space.shape[0], [policy])
            self.agent.policy.set_policies(train=policy)
            # The policy's noise (exploration, CEM's samples, the latent samples) from --seed, as the environments:
            # collectors with other seeds explore differently, not in lockstep with one another and the learner.
            self.agent.policy.rng.reset_from_seed(COLLECTOR_SEED_OFFSET + seed)
            self.variables = self.agent.acting_variables()
            self.prefix: str | None = None  # the checkpoint acted with
            self._seen: str | None = None  # the newest checkpoint reload() last looked at
            self.step = -1
            try:
                self.reload(strict=True)
            except CheckpointError as error:
                raise overrides_that_change_the_model(error, checkpoint, run_config, self.config) from None
        except BaseException:
            self.envs.close()
            raise
        self.folder = EpisodeFolder(outdir)  # the episodes' folder: may be a learner's train_episodes/, shared
        self.actor = Actor(self.envs, self.agent.policy, TRAIN, self.folder)
        self.collected: list[dict] = []  # every episode written so far, also when `run` is interrupted
        self._checked = time.monotonic()

    def _wait_for_run(self, checkpoint: str, wait_seconds: float) -> Config:
        """The run's config, waiting up to `wait_seconds` for the run to write its config and first checkpoint."""
        deadline = time.monotonic() + wait_seconds
        if wait_seconds > 0:
            log.info("waiting for %s to hold a run's config.yaml and a checkpoint", checkpoint)
        while True:
            try:
                config = find_run_config(checkpoint)
                if _newest_prefix(checkpoint):
                    return config
            except ConfigError:
                if time.monotonic() >= deadline:
                    raise
            if time.monotonic() >= deadline:
                if not tf.io.gfile.exists(f"{checkpoint.rstrip('/')}/config.yaml"):
                    resolve(checkpoint)  # not a run's logdir (a file, an episode folder): says what to pass
                raise CheckpointError(f"no checkpoint in {checkpoint} yet; start the trainer first")
            time.sleep(min(5.0, max(0.1, wait_seconds / 10)))

    def reload(self, strict: bool = False) -> bool:
        """Loads the run's newest readable checkpoint if a new one has appeared since the last look.

        Returns whether the collector has weights to act with. When none is readable, `strict` (at
        start) raises CheckpointError; otherwise the previous weights are kept, with a warning.
        """
        newest = _newest_prefix(self.checkpoint)
        if newest is None or newest == self._seen:
            return self.prefix is not None
        self._seen = newest
        try:
            report = self.agent.restore(self.checkpoint)
        except CheckpointError as error:
            if strict or self.prefix is None:
                raise
            log.warning("%s; acting with the previous weights (%s)", error, self.prefix)
            return True
        if report.prefix != self.prefix:
            self.prefix, self.step = report.prefix, -1 if report.step is None else report.step
            log.info("acting with %s (step %d)", self.prefix, self.step)
        return True

    def run(self, episodes: int | None = None) -> list[dict]:
        """Collects `episodes` episodes (None: until interrupted), reloading between rounds of `env.num_envs` episodes."""
        summaries: list[dict] = []
        while episodes is None or len(summaries) < episodes:
            if summaries and self.per_checkpoint:  # one round per learner checkpoint: PlaNet's updates per env step
                acted_with = self.prefix
                while self.reload() and self.prefix == acted_with:
                    assert self.reload_every is not None  # per_checkpoint needs it (checked in __init__)
                    time.sleep(self.reload_every)
                self._checked = time.monotonic()
            elif self.reload_every is not None and time.monotonic() - self._checked >= self.reload_every:
                self.reload()
                self._checked = time.monotonic()
            count = self.envs.num_envs if episodes is None else min(self.envs.num_envs, episodes - len(summaries))
            for summary in self.actor.run(count, progress=False):
                summary["checkpoint_step"] = self.step
                summaries.append(summary)
                self.collected.append(summary)
                log.info("episode %d: return %.1f, length %d (checkpoint step %d)", len(summaries), summary["return"],
                         summary["length"], self.step)
        return summaries

    def close(self) -> None:
        self.actor.close()


def _newest_prefix(checkpoint: str) -> str | None:
    """The newest checkpoint of a run (its logdir or checkpoints/ folder), or `checkpoint` itself when it is a
    checkpoint prefix (acted with throughout: a prefix never changes), or None when there is none yet."""
    newest = latest_checkpoint(checkpoint)
    if newest is None and tf.io.gfile.exists(checkpoint + ".index"):
        return checkpoint
    return newest
