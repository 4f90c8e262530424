"""A run's directory: its config, and what its episode folders hold.

Everything a run writes lives under its logdir: `config.yaml`, `train_episodes/`,
`test_episodes/`, `checkpoints/`, `metrics.jsonl` and TensorBoard event files.
"""

from __future__ import annotations

import re
from typing import Sequence

import tensorflow as tf

from planet_sac.config import Config, ConfigError, apply_overrides, diff, load_config, read_config_file
from planet_sac.episodes.storage import list_episodes


def resolve_run_config(logdir: str, config_path: str | None = None, overrides: Sequence[str] = (),
                       force: bool = False) -> Config:
    """The config of a new or resumed run.

    A new logdir takes `config_path` (or the defaults) plus `overrides`. An existing
    run keeps its saved `config.yaml`; overrides that change it are refused unless
    `force`, because a resumed run with another config is a different experiment.
    """
    saved_path = f"{logdir}/config.yaml"
    if not tf.io.gfile.exists(saved_path):
        return load_config(config_path, list(overrides))
    saved = read_config_file(saved_path)
    requested = load_config(config_path, list(overrides)) if config_path else apply_overrides(saved, list(overrides))
    changed = diff(saved, requested)
    if changed and not force:
        raise ConfigError(
            f"{logdir} was started with another config (changed: {', '.join(changed[:5])}); "
            "drop the conflicting --set/--config, use a new --logdir, or pass --force"
        )
    return requested if changed else saved


def prepare_logdir(logdir: str, flag: str = "--logdir") -> None:
    """Creates the directory, failing early with a clear message if it cannot be used."""
    if tf.io.gfile.exists(logdir) and not tf.io.gfile.isdir(logdir):
        raise ConfigError(f"{flag} {logdir} is a file, not a directory; choose another path")
    try:
        tf.io.gfile.makedirs(logdir)
        probe = f"{logdir}/.write_test"
        with tf.io.gfile.GFile(probe, "w") as file:
            file.write("ok")
        tf.io.gfile.remove(probe)
    except (tf.errors.OpError, OSError) as error:
        raise ConfigError(f"{flag} {logdir} is not writable ({error.__class__.__name__}); choose another path") from None


def episode_stats(directory: str) -> tuple[int, int]:
    """(episodes, environment steps) of a directory, read from the file names' length suffix."""
    paths = list_episodes(directory)
    steps = 0
    for path in paths:
        match = re.search(r"-(\d+)\.npz$", path)
        steps += int(match.group(1)) if match else 0
    return len(paths), steps
