"""A run's episode folder: which files are its episodes, what their names say, where the others are kept.

The contract of a folder (`EpisodeFolder`):

- **Its episodes** are the files directly inside it whose name ends in `.npz` and does not start with
  "." (`list_episodes`), oldest first: file names sort by the UTC second they were written in. Hidden
  names are a writer's temporary files (`storage.save_episode` writes `.tmp-*.npz.part`, then renames)
  and the staging folders of test phases (`.test_phase-K/`); subfolders such as `interrupted/` are not
  looked into. This is what a replay reads (`EpisodeReplay` lists every folder it reads this way,
  offline data and collectors' shared folders included).
- **The run's collections** are those of its episodes whose name ends in the length suffix that
  `storage.episode_filename` writes (`-<agent steps>.npz`, read back by `storage.episode_length`): they
  are what a run counts as episodes and environment steps (`counts`), from the names alone, without
  opening a file. Other `.npz` files (copied in by hand, say) are still trained on, but are no
  collection of the run.
- **`interrupted/`** holds episodes of work that a resumed run redoes (`set_aside`): kept, never read.
- **`.test_phase-K/`** holds the episodes of test phase K until the phase is checkpointed (`stage`);
  `settle` then moves them up into the folder, or into `interrupted/` when the checkpoint does not
  hold the phase.

What is atomic: writing one episode (`write`: a temporary name, then a rename), and moving one file
(`tf.io.gfile.rename`, atomic on a local filesystem). Setting aside and settling move files one by one:
a process killed midway leaves some moved and some not, and the next `settle` finishes the job (it
removes a staging folder only once its files are moved). All I/O goes through `tf.io.gfile`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

import numpy as np
import tensorflow as tf

from planet_sac.config import ConfigError
from planet_sac.episodes.storage import episode_length, save_episode

log = logging.getLogger("planet_sac")

INTERRUPTED = "interrupted"
"""<folder>/interrupted/: episodes of work a resumed run redoes (kept, never read)."""
TEST_PHASE_FOLDER = ".test_phase-"
"""test_episodes/.test_phase-K/: the episodes of test phase K until it is checkpointed."""


def list_episodes(directory: str) -> list[str]:
    """Paths of the finished episode files directly inside `directory`, oldest first (sorted by name).

    Names ending in `.npz`; hidden names (temporary files, staging folders) are left out and subfolders are
    not looked into. A missing directory gives `[]`.
    """
    if not tf.io.gfile.isdir(directory):
        return []
    names = [name for name in tf.io.gfile.listdir(directory) if name.endswith(".npz") and not name.startswith(".")]
    return [os.path.join(directory, name) for name in sorted(names)]


class EpisodeFolder:
    """The episode folder `directory` (any `tf.io.gfile` path; it need not exist yet): see the module's contract."""

    def __init__(self, directory: str):
        if not directory.strip():  # "" would write episodes at the file system's root ("/<name>.npz")
            raise ConfigError(f"episode folder {directory!r} is empty; give a folder")
        self.directory = directory

    def __repr__(self) -> str:
        return f"EpisodeFolder({self.directory!r})"

    def _sub(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}"

    def write(self, episode: Mapping[str, np.ndarray]) -> str:
        """Validates `episode` and writes it atomically as a new episode of the folder (`storage.save_episode`);
        returns its path, named `episode_filename(T)`."""
        return save_episode(self.directory, episode)

    def paths(self) -> list[str]:
        """Every episode file of the folder, oldest first (`list_episodes`): what a replay reads."""
        return list_episodes(self.directory)

    def collected(self) -> list[str]:
        """The run's collections, oldest first: the episode files named with `episode_filename`'s length suffix."""
        return [path for path in self.paths() if episode_length(path) is not None]

    def counts(self, oldest: int | None = None) -> tuple[int, int]:
        """(episodes, agent steps) of the run's collections, or of the `oldest` ones, from their names' length
        suffix (environment steps are agent steps x the action repeat)."""
        paths = self.collected()[:oldest]
        return len(paths), sum(episode_length(path) or 0 for path in paths)

    @property
    def interrupted(self) -> EpisodeFolder:
        """`<folder>/interrupted/`: episodes set aside (kept, never read by a replay of this folder)."""
        return EpisodeFolder(self._sub(INTERRUPTED))

    def set_aside(self, paths: Iterable[str]) -> int:
        """Moves the episode files `paths` of this folder into `interrupted/` (a file of the same name there is
        replaced); returns how many moved."""
        paths = list(paths)
        if paths:
            target = self.interrupted.directory
            tf.io.gfile.makedirs(target)
            for path in paths:
                tf.io.gfile.rename(path, f"{target}/{os.path.basename(path)}", overwrite=True)
        return len(paths)

    def stage(self, phase: int) -> EpisodeFolder:
        """The staging folder of test phase `phase` (`.test_phase-<phase>/`, made when its first episode is written):
        its episodes join this folder at the `settle` after the phase's checkpoint."""
        return EpisodeFolder(self._sub(f"{TEST_PHASE_FOLDER}{phase}"))

    def settle(self, committed: int) -> None:
        """Moves the episodes of staged test phases 1..`committed` (those a checkpoint holds) into the folder and
        those of later phases (killed midway, redone after the resume) into `interrupted/`, kept but not read;
        then removes the staging folders. Does nothing for a folder that does not exist."""
        if not tf.io.gfile.isdir(self.directory):
            return
        for name in tf.io.gfile.listdir(self.directory):
            name = name.rstrip("/")
            if not name.startswith(TEST_PHASE_FOLDER) or not name[len(TEST_PHASE_FOLDER):].isdigit():
                continue
            phase = name[len(TEST_PHASE_FOLDER):]
            folder = self._sub(name)
            target = self.directory if int(phase) <= committed else self.interrupted.directory
            paths = list_episodes(folder)
            if paths and target != self.directory:
                log.info("%d test episode(s) of test phase %s, which the checkpoint does not hold, moved to %s; the "
                         "phase is redone", len(paths), phase, target)
            tf.io.gfile.makedirs(target)
            for path in paths:
                tf.io.gfile.rename(path, f"{target}/{os.path.basename(path)}", overwrite=True)
            tf.io.gfile.rmtree(folder)
