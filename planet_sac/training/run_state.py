"""A run's progress: its checkpointed counters and run state, kept in step with its episode folders.

What a checkpoint holds beside the model (`Counters`, `RunState`) is what lets a resumed run continue as
the never-stopped one would: the counters place it in its schedule and seed its episodes' resets
(`reset_seeds`), the run state restores its replays and names the training episodes it had collected.
`RunProgress` restores a run (resume, filtered restore or scratch), reconciles the episode folders with the
checkpoint (episodes written after it are set aside, staged test phases settled, counters follow the files),
makes the training replay that continues the checkpointed one (`train_replay`) and writes checkpoints of
`run_variables` (`run_checkpointer`). Variable names (`counters/...`, `run_state/...`) are those of every
checkpoint written so far: filtered restores and old runs depend on them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import TYPE_CHECKING, Callable, Sequence, cast

import numpy as np
import tensorflow as tf

from planet_sac.checkpoints import Checkpointer, named_variables, restore_filtered
from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import save_config
from planet_sac.envs import episode_seed
from planet_sac.episodes.folder import INTERRUPTED, EpisodeFolder
from planet_sac.episodes.loader import EpisodeReplay, make_dataset
from planet_sac.episodes.storage import BadEpisodeError, EpisodeSpec, load_episode
from planet_sac.metrics import read_metrics
from planet_sac.training import distribute
from planet_sac.training.logger import Logger, untracked
from planet_sac.training.schedule import Every

if TYPE_CHECKING:
    from planet_sac.agent import Agent
    from planet_sac.training.learner import Learner

log = logging.getLogger("planet_sac")

TEST_SEED_OFFSET = 10_000
"""The test environment's seed is env.seed + this, so test episodes never repeat training ones."""
# Episode streams whose resets are seeded by counters (`envs.episode_seed`), so a resumed run resets as before.
TRAIN_STREAM, TEST_STREAM, COMPARE_STREAM = 0, 1, 2
# What belongs to a run, not to a model: a filtered restore never takes it from another run. Counters (steps, test
# phases, ...) would skip the new run's schedule; random-number streams would make a seed-7 run draw the source's
# seed-0 noise; the count of consecutive non-finite updates would shorten the new run's stop limit.
RUN_STATE = (r"counters/", r"(learner|policy)/rng_state$", r"learner/(skipped_updates|consecutive_skips)$", r"run_state/")


class RunState(tf.Module):
    """What else a checkpoint holds so that a resumed run continues as the uninterrupted one would: the replays'
    states (`EpisodeReplay.state`), the names of the training episodes on disk, and a collection still owed at the
    checkpoint's step (`OwedCollection`; "" when none), as JSON strings ("" until set)."""

    def __init__(self):
        super().__init__(name="run_state")
        with tf.name_scope("run_state/"):
            self.replay = tf.Variable("", dtype=tf.string, trainable=False, name="replay")
            self.held_out_replay = tf.Variable("", dtype=tf.string, trainable=False, name="held_out_replay")
            self.train_episodes = tf.Variable("", dtype=tf.string, trainable=False, name="train_episodes")
            self.owed_collection = tf.Variable("", dtype=tf.string, trainable=False, name="owed_collection")

    @staticmethod
    def read(variable: tf.Variable) -> object | None:
        text = variable.numpy().decode()
        return json.loads(text) if text else None


class Counters(tf.Module):
    """Checkpointed progress of a run."""

    def __init__(self):
        super().__init__(name="counters")
        with tf.name_scope("counters/"):
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
            self.train_episodes = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_episodes")
            self.test_episodes = tf.Variable(0, dtype=tf.int64, trainable=False, name="test_episodes")
            self.test_phases = tf.Variable(0, dtype=tf.int64, trainable=False, name="test_phases")


@dataclasses.dataclass(frozen=True)
class OwedCollection:
    """A collection that failed (its environment given up, its disk full, ...) after update `step`: what the resumed
    run needs to do it and go on as the run would have gone on.

    `update_metrics`: update `step`'s metrics, which its training record holds; `catch_up`: the SAC head's catch-up
    metrics (`catchup/*`) when it caught up before the collection (the checkpoint holds the head after it).
    """

    step: int
    update_metrics: dict[str, float]
    catch_up: dict[str, float]


def reset_seeds(env_seed: int, strategy: tf.distribute.Strategy, stream: int, first: int, count: int) -> list[int]:
    """Reset seeds of episodes `first` .. `first + count - 1` of an episode stream: functions of checkpointed
    counters, so a resumed run starts its episodes where the uninterrupted run started them."""
    base = distribute.worker_seed(env_seed + (TEST_SEED_OFFSET if stream != TRAIN_STREAM else 0), strategy)
    return [episode_seed(base, stream, index) for index in range(first, first + count)]


def run_variables(agent: Agent, learner: Learner, counters: Counters, run_state: RunState) -> dict[str, tf.Variable]:
    """What a checkpoint of the run holds, by name: the world model, the SAC head, the optimizers, the learner's
    (its counts of skipped updates), `counters/`, `run_state/`, and the learner's and policy's random-number
    streams (`learner/rng_state`, `policy/rng_state`). Not which policy acts in each phase, which the config sets."""
    return named_variables([agent.world_model, agent.sac, learner.optimizer, learner, counters, run_state],
                           extra={"learner/rng_state": learner.rng.state, "policy/rng_state": agent.policy.rng.state})


def run_checkpointer(logdir: str, variables: dict[str, tf.Variable]) -> Checkpointer:
    """The checkpoints of `variables` in `logdir/checkpoints`. Checkpoints from before exact resume have no
    run_state/ (optional here): such a run resumes, with fresh replay streams."""
    return Checkpointer(f"{logdir}/checkpoints", variables,
                        optional=[name for name in variables if name.startswith("run_state/")])


class RunProgress:
    """Restores a run and keeps its counters and run state in step with its episode folders and checkpoints.

    `counters` and `run_state` are variables of `checkpointer`; `train` and `test` the run's episode folders
    (`train` is offline data when the run does not collect: `collects` false). `logger` is the run's
    metrics.jsonl, which a resume trims to the checkpoint.
    """

    def __init__(self, config: Config, logdir: str, counters: Counters, run_state: RunState, checkpointer: Checkpointer,
                 logger: Logger, train: EpisodeFolder, test: EpisodeFolder, collects: bool):
        self.config, self.logdir = config, logdir
        self.counters, self.run_state, self.checkpointer, self.logger = counters, run_state, checkpointer, logger
        self.train, self.test = train, test
        self.collects = collects

    def restore(self, variables: dict[str, tf.Variable], restore_from: str | None, include: Sequence[str],
                exclude: Sequence[str], test_pending: Callable[[], bool]) -> str:
        """Resumes from the logdir's latest checkpoint, or starts from a filtered restore of `restore_from` (its
        `variables` matching `include` and not `exclude`, never RUN_STATE), or from scratch; returns which, as a
        message. `test_pending()` says whether the restored step's test phase is still due (its records go too).

        Then the folders follow the checkpoint: staged test phases settle, the counters count the files, and
        training episodes written after the checkpoint are set aside so that their collections are redone. Writes
        the run's config.yaml, and a first checkpoint for a run that did not resume.
        """
        resumed = self.checkpointer.restore_latest()
        if not resumed:
            self.refuse_a_run_without_checkpoints()
        if resumed:
            step = int(self.counters.step.numpy())
            episodes_at_checkpoint = int(self.counters.train_episodes.numpy())
            message = f"resumed {resumed} at step {step}"
            if restore_from or include or exclude:  # the same command line again resumes: say what it leaves out
                given = " ".join(f"{flag} {' '.join([value] if isinstance(value, str) else value)}" for flag, value
                                 in (("--restore-from", restore_from), ("--include", include), ("--exclude", exclude))
                                 if value)
                log.warning("%s: not applied: %s resumes from its own checkpoint %s (a restore is a new run's start; "
                            "restore into a new --logdir)", given, self.logdir, resumed)
            dropped = self.logger.drop_after(step, test_pending=test_pending())
            if dropped:
                log.info("dropped %d metrics.jsonl records of work after %s; the run redoes it", dropped, resumed)
        elif restore_from:
            report = restore_filtered(variables, restore_from, include or [".*"], exclude, never=RUN_STATE)
            message = f"from {restore_from}: {report.summary()}"
        else:
            message = "started from scratch"
        self.test.settle(int(self.counters.test_phases.numpy()))
        self.sync_episode_counters()
        if resumed and self.collects:
            ahead, unreadable = self.set_aside_episodes_after_checkpoint(episodes_at_checkpoint)
            if ahead:
                message += (f"; {ahead} training episode(s) written after that checkpoint moved to "
                            f"{self.train.directory}/{INTERRUPTED}/ (kept), and their collections are redone")
                if unreadable:
                    message += f" ({len(unreadable)} of those files not a readable episode, e.g. {unreadable[0]})"
                self.sync_episode_counters()
        # Written only once the run is built and restored, so a failed start never blocks a corrected retry.
        save_config(self.config, f"{self.logdir}/config.yaml")
        if not resumed:  # collectors (`planet-sac collect --reload-every`) can act from the first moment
            self.save_checkpoint()
        log.info(message)
        return message

    def refuse_a_run_without_checkpoints(self) -> None:
        """A logdir with metrics but no checkpoint lost its checkpoints (a run saves one before it logs anything):
        starting over there would append a second run to the first one's metrics.jsonl."""
        if not tf.io.gfile.exists(self.logger.metrics_path):
            return
        records = read_metrics(self.logger.metrics_path)
        if records:
            raise ConfigError(
                f"{self.logdir} holds a run's metrics.jsonl (up to step {max(r.get('step', 0) for r in records)}) but no "
                f"checkpoint in {self.checkpointer.manager.directory}; starting over would mix two runs: bring the checkpoints "
                "back, or train into a new --logdir")

    def sync_episode_counters(self) -> None:
        """Episode counters follow the files on disk: episodes written after the last checkpoint, or by collectors, count once."""
        episodes, steps = self.train.counts()
        # As numpy values: TensorFlow caches the tensor of every Python int it converts, for good (see untracked).
        self.counters.train_episodes.assign(untracked(episodes, np.int64))
        self.counters.env_steps.assign(untracked(steps * self.config.env.action_repeat, np.int64))
        self.counters.test_episodes.assign(untracked(self.test.counts()[0], np.int64))

    def set_aside_episodes_after_checkpoint(self, episodes_at_checkpoint: int) -> tuple[int, list[str]]:
        """Moves the training episodes that collections after the restored checkpoint wrote to `train_episodes/
        interrupted/` (kept, never read), so the run redoes those collections as the uninterrupted run did them.

        They are the run's episode files the checkpoint does not name; a checkpoint from before it named them
        (no run_state) sets aside the newest ones beyond its counters (`episodes_collected_after`). Returns how many,
        and for those that are not a readable episode (damaged, or copied in under a collection's name) one line
        each, `<name>: <why>`, also logged as a warning: they move all the same, since a replay would skip them.
        """
        known = RunState.read(self.run_state.train_episodes)
        files = self.train.collected()
        if known is not None:
            names = set(cast(list, known))
            ahead = [path for path in files if os.path.basename(path) not in names]
        else:
            count = self.episodes_collected_after(episodes_at_checkpoint)
            ahead = files[-count:] if count else []
        unreadable = []
        for path in ahead:
            try:
                load_episode(path)
            except (BadEpisodeError, OSError, tf.errors.OpError) as error:  # what a replay would skip
                unreadable.append(f"{os.path.basename(path)}: {error}")
                log.warning("%s is not a readable episode (%s); set aside with the episodes the checkpoint does not "
                            "hold", path, error)
        return self.train.set_aside(ahead), unreadable

    def episodes_collected_after(self, episodes_at_checkpoint: int) -> int:
        """How many training episodes on disk the schedule's collections wrote after the restored checkpoint.

        A run stopped between checkpoints (a killed process) has already written the episodes of the collections
        it will redo. Repeating them would add data the schedule does not have: a 100k-env-step run would end
        with more env steps than its budget, and fewer updates per episode. Seed episodes written after the
        checkpoint (a run stopped during its first updates) are not collections, hence the second bound.
        """
        on_disk = int(self.counters.train_episodes.numpy())
        step = int(self.counters.step.numpy())
        collect_every = Every.of(self.config, self.collects).collect_every  # the schedule's own rule
        scheduled = self.config.data.seed_episodes + step // collect_every * self.config.env.num_envs
        return max(0, min(on_disk - episodes_at_checkpoint, on_disk - scheduled))

    def train_replay(self, batch_size: int, spec: EpisodeSpec) -> tuple[tf.data.Dataset, EpisodeReplay]:
        """The run's training replay of the `train` folder: (batches of `batch_size` chunks, the replay they come from).

        It continues the checkpointed replay's state (`run_state.replay`) when there is one and is seeded by
        `seed` + the step; it reads episodes of format `spec` with `sac.n_step - 1` absorbing steps after a
        termination. Batches are drawn when needed, never ahead, so a run repeats (docs/determinism.md).
        """
        data = self.config.data
        return make_dataset(self.train.directory, batch_size, data.chunk_length, every=data.every,
                            max_episodes=data.max_episodes, keys=(self.config.env.obs, "action", "reward", "discount"),
                            wait_seconds=data.wait_seconds, seed=self.config.seed + int(self.counters.step.numpy()),
                            spec=spec, absorbing_steps=self.config.sac.n_step - 1,  # SAC's n-step starts reach the end
                            prefetch=0,  # deterministic: batches are drawn when needed, not ahead
                            state=cast("dict | None", RunState.read(self.run_state.replay)))

    def save_checkpoint(self, replay: EpisodeReplay | None = None, held_out_replay: EpisodeReplay | None = None,
                        owed: OwedCollection | None = None, episodes: Sequence[str] | None = None) -> str:
        """Checkpoints the run at its current step, with the states of the training `replay` and the test phase's
        `held_out_replay` (those given) and the names of the run's training episodes (when it collects them).

        :param owed: the collection that failed after this step's update (`OwedCollection`), which a resume redoes
            before it updates again; None for a checkpoint with nothing owed.
        :param episodes: the training episode files the checkpoint names (default: those on disk now); a failed
            collection's checkpoint names the ones from before it, so that a resume sets aside what it wrote.
        """
        if replay is not None:
            self.run_state.replay.assign(json.dumps(replay.state()))
        if held_out_replay is not None:
            self.run_state.held_out_replay.assign(json.dumps(held_out_replay.state()))
        if self.collects:
            names = [os.path.basename(path) for path in (self.train.collected() if episodes is None else episodes)]
            self.run_state.train_episodes.assign(json.dumps(names))
        self.run_state.owed_collection.assign(json.dumps(dataclasses.asdict(owed)) if owed is not None else "")
        return self.checkpointer.save(int(self.counters.step.numpy()))

    def owed_collection(self) -> OwedCollection | None:
        """The collection the restored checkpoint owes at its step (its update done, its episodes not), or None."""
        record = RunState.read(self.run_state.owed_collection)  # every other checkpoint clears it
        return OwedCollection(**cast(dict, record)) if record else None

