"""Checks of a run's config against the data it will learn from, made before (or, for replayed episodes, while) it trains.

Each takes what it checks explicitly: the config, and the episode directory or the replay's statistics.
"""

from __future__ import annotations

import logging
from typing import Sequence

import tensorflow as tf

from planet_sac.checkpoints import compile_patterns, latest_checkpoint, resolve
from planet_sac.config import Config, ConfigError
from planet_sac.envs import episode_limit
from planet_sac.episodes.loader import EpisodeReplay
from planet_sac.episodes.storage import EpisodeSpec
from planet_sac.training.schedule import SAC_ACTING

log = logging.getLogger("planet_sac")


def check_start(config: Config, logdir: str, offline_data: str | None, collects: bool, restore_from: str | None,
                include: Sequence[str], exclude: Sequence[str]) -> None:
    """Raises ConfigError (or the checkpoints' CheckpointError) for what a run in `logdir` is given that cannot work,
    before anything is written: a failed start leaves nothing behind.

    When the run `collects`, `check_chunk_length`; `offline_data`, when given, must be a directory; and unless the run
    resumes from a checkpoint of its own (which ignores them), `restore_from` must name a checkpoint and the
    `include` and `exclude` patterns must compile.
    """
    if collects:
        check_chunk_length(config)
        if episode_limit(config.env.task, config.env.action_repeat, config.env.time_limit) is None:
            log.warning("%s has no episode length of its own (no max_episode_steps) and env.time_limit is null: an "
                        "episode that never ends holds up training without a word; set env.time_limit",
                        config.env.task)
    untrained = untrained_head_policies(config)
    if untrained and not restore_from:
        log.warning("%s act%s with the SAC head, which this run never trains (sac.updates_per_step=0): it acts with "
                    "its first random weights", ", ".join(untrained), "s" if len(untrained) == 1 else "")
    if offline_data is not None and not tf.io.gfile.isdir(offline_data):
        raise ConfigError(f"--offline-data {offline_data} is not a directory of episodes")
    if restore_from and latest_checkpoint(logdir) is None:  # a run that resumes ignores --restore-from
        resolve(restore_from)
        compile_patterns(include, "--include")
        compile_patterns(exclude, "--exclude")


def untrained_head_policies(config: Config) -> list[str]:
    """The config's policy settings that act with the SAC head (`sac`, `sac_guided_cem`) when the run never
    trains it (`sac.updates_per_step=0`); [] otherwise."""
    if config.sac.updates_per_step > 0:
        return []
    policy = config.policy
    settings = [f"policy.{key}={value}" for key, value in (("train", policy.train), ("test", policy.test))
                if value in SAC_ACTING]
    settings += [f"policy.compare={name}" for name in policy.compare if name in SAC_ACTING]
    if policy.sac_share > 0:
        settings.append(f"policy.sac_share={policy.sac_share:g}")
    return settings


def check_chunk_length(config: Config) -> None:
    """Raises ConfigError if `data.chunk_length` is longer than the episodes of `env` (their agent steps plus the
    first observation), which the replay could never cut a chunk from. Nothing to check for a task without a
    limit on its episodes; no environment is built."""
    env = config.env
    limit = episode_limit(env.task, env.action_repeat, env.time_limit)
    if limit is not None and config.data.chunk_length > limit + 1:
        source = (f"env.time_limit={limit}" if env.time_limit is not None else
                  f"env.time_limit=null: the task's own episodes, {limit} agent steps at action repeat "
                  f"{env.action_repeat}")
        raise ConfigError(f"data.chunk_length={config.data.chunk_length} is longer than the episodes the run collects "
                          f"({source}: {limit + 1} steps with the first observation); lower "
                          "data.chunk_length or raise env.time_limit")


def check_offline_data(directory: str, config: Config, spec: EpisodeSpec) -> None:
    """Raises the replay's own NoEpisodesError (what was skipped and why, what the task expects) unless `directory`
    holds an episode of format `spec` that the replay can cut a `data.chunk_length` chunk from, waiting up to
    `data.wait_seconds` for one; capped at one episode, the replay reads the newest files only until it finds one."""
    # Its warnings about unusable files are held back: if a usable episode is found, the training replay warns
    # about each such file itself (once, not twice); if none is, they are let through before the error.
    held = _HeldWarnings()
    logger = logging.getLogger("planet_sac")
    logger.addFilter(held)
    try:
        probe = EpisodeReplay(directory, config.data.chunk_length, max_episodes=1,
                              wait_seconds=config.data.wait_seconds, spec=spec)
        _ = probe.spec  # waits up to data.wait_seconds for a usable episode
    except BaseException:
        logger.removeFilter(held)
        for record in held.records:
            logger.handle(record)
        raise
    finally:
        logger.removeFilter(held)


class _HeldWarnings(logging.Filter):
    """Keeps the records of level WARNING and below instead of passing them on."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.WARNING:
            self.records.append(record)
            return False
        return True


def imagination_termination_warning(config: Config, replay_stats: dict) -> str | None:
    """The warning for a run that imagines SAC transitions on a task that terminates, without a continuation head.

    Without one (`model.continuation_scale: 0`, PlaNet's model) imagined discounts are 1 (right for
    dm_control, which only truncates), so where real episodes end in a termination the head's
    imagined targets bootstrap through it. None when `sac.real_ratio` is 1, the replay's
    `terminated_episodes` is 0 or missing, or the model has a continuation head.
    """
    terminated = replay_stats.get("terminated_episodes", 0)
    if config.sac.real_ratio >= 1.0 or not terminated or config.model.continuation_scale > 0:
        return None
    return (f"{terminated} replayed episode(s) end in a termination, but imagined SAC transitions "
            f"(sac.real_ratio={config.sac.real_ratio}) bootstrap through it without a continuation head; "
            "set model.continuation_scale: 10 (Dreamer's pcont_scale) or sac.real_ratio: 1.0 for this task")
