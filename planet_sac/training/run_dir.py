"""A run's directory: its saved config, the check of a changed one, and making or removing the folder.

Everything a run writes lives under its logdir: `config.yaml`, `train_episodes/`,
`test_episodes/`, `checkpoints/`, `metrics.jsonl`, TensorBoard event files and `run.lock` (`run_lock.RunLock`).
What the episode folders hold is `episodes.folder.EpisodeFolder`'s contract.
"""

from __future__ import annotations

import logging
import uuid
from typing import Sequence

import tensorflow as tf

from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import apply_overrides, diff, load_config, read_config_file
from planet_sac.training.run_lock import LOCK_FILE

log = logging.getLogger("planet_sac")


def resolve_run_config(logdir: str, config_path: str | None = None, overrides: Sequence[str] = (),
                       force: bool = False) -> Config:
    """The config of a new or resumed run.

    A new logdir takes `config_path` (or the defaults) plus `overrides`. An existing
    run keeps its saved `config.yaml`; overrides that change it are refused unless
    `force`, because a resumed run with another config is a different experiment.
    """
    saved_path = f"{logdir}/config.yaml"
    if not tf.io.gfile.exists(saved_path):
        config = load_config(config_path, list(overrides))
        if config_path is None:  # say so: the defaults are PlaNet's full pixel run, not a quick one
            log.warning("no --config for the new run %s: PlaNet's defaults (%s from %s, %d updates; docs/config.md)",
                        logdir, config.env.task, config.env.obs, config.schedule.train_steps)
        return config
    saved = read_config_file(saved_path)
    requested = load_config(config_path, list(overrides)) if config_path else apply_overrides(saved, list(overrides))
    return requested if check_config_change(logdir, requested, force, saved) else saved


def check_config_change(logdir: str, config: Config, force: bool, saved: Config | None = None) -> list[str]:
    """The keys where `config` differs from the run's saved `config.yaml` ([] for a new run).

    The one check of a conflicting config (the CLI's and `Trainer`'s): any change is refused
    with ConfigError unless `force`.
    """
    if saved is None:
        saved_path = f"{logdir}/config.yaml"
        if not tf.io.gfile.exists(saved_path):
            return []
        saved = read_config_file(saved_path)
    changed = diff(saved, config)
    if changed and not force:
        untrained = _has_not_trained(logdir)
        raise ConfigError(
            f"{logdir} was started with another config (changed: {', '.join(changed[:5])}); "
            + (f"it has made no update yet: delete {logdir} and start again with the new config"
               if untrained else "drop the conflicting --set/--config, use a new --logdir, or pass --force (force=True)")
        )
    return changed


def _has_not_trained(logdir: str) -> bool:
    """True when the run's newest checkpoint is its first (step 0): a start that failed before any update."""
    from planet_sac.checkpoints import checkpoint_step, newest_checkpoint

    try:
        prefix = newest_checkpoint(f"{logdir}/checkpoints")
        return prefix is not None and checkpoint_step(prefix) == 0
    except (tf.errors.OpError, ValueError, KeyError):
        return False  # an unreadable checkpoint: say nothing more than the usual advice


def prepare_logdir(logdir: str, flag: str = "--logdir") -> None:
    """Creates the directory, failing early with a clear message if it cannot be used.

    The write test uses a hidden probe file of its own name, so that processes preparing one folder at once
    (collectors sharing an episode folder) never remove one another's probe."""
    if tf.io.gfile.exists(logdir) and not tf.io.gfile.isdir(logdir):
        raise ConfigError(f"{flag} {logdir} is a file, not a directory; choose another path")
    try:
        tf.io.gfile.makedirs(logdir)
        probe = f"{logdir}/.write_test-{uuid.uuid4().hex}"
        with tf.io.gfile.GFile(probe, "w") as file:
            file.write("ok")
        tf.io.gfile.remove(probe)
    except (tf.errors.OpError, OSError) as error:
        raise ConfigError(f"{flag} {logdir} is not writable ({error.__class__.__name__}); choose another path") from None


def remove_unused_logdir(logdir: str) -> None:
    """Removes `logdir` if it holds nothing but its lock file (and empty folders): a start that failed before
    writing anything (e.g. a missing package) leaves no folder behind."""
    for _, _, files in tf.io.gfile.walk(logdir):
        if set(files) - {LOCK_FILE}:
            return
    tf.io.gfile.rmtree(logdir)
