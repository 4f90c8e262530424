"""The training loop: PlaNet's phases, wiring the agent, learner, replay and actors of one process.

Data flows one way: environments -> episodes on disk -> replay loader -> learner
(world model + SAC) -> agent's policy -> environments. A run is a sequence of phases
derived from the global step: `train` phases of `schedule.train_phase_steps` updates
(an episode collected per `schedule.collect_every` updates; the first phase may be shorter,
`schedule.first_test_phase`), each followed by a `test` phase that evaluates without gradients.
Because the phase is a function of the checkpointed counters, a resumed run continues in the
right phase. `Trainer.run` is that schedule, read as a loop (`when` is `schedule.Every`):

    collect_seed_episodes()
    batches = iter(replay of train_episodes/)
    if the checkpoint owes a collection: collect, log, ... as after its update  # it failed there before
    while not stopped:                                    # SIGINT/SIGTERM: finish the step, then checkpoint
        if phase() == TEST:                               # schedule.test_phases_due(step) > test phases run
            test_phases.run(catch_up_head(batches))       # held-out loss, test episodes, compare, checkpoint
            continue
        if when.done(step): break
        step = update(next(batches))                      # world model + SAC head (+ the head's reset, when due)
        if when.collect(step): collect(collecting_policy(policy, when.collection(step)))  # failing: checkpoint, owed
        if when.log(step, collected): log(update, collection, replay stats)
        if when.video(step): log_open_loop(next(batches))
        if (when.checkpoint(step) or checkpoint_minutes passed) and the update was finite: save_checkpoint()
    save_checkpoint()

The parts live elsewhere and work alone: `Agent` (planet_sac/agent.py), `Learner`
(training/learner.py), the replay loader (episodes/loader.py), `Actor` (acting/actor.py), the
run's episode folders (episodes/folder.py), its environments and collection (training/collection.py),
the schedule (training/schedule.py), the test phase (training/testing.py), the run's counters,
restore, training replay and checkpoints (training/run_state.py), the checks of what a run is given
(training/run_checks.py).
With `schedule.collect: false` the trainer collects nothing itself and learns from the
episodes that `planet-sac collect --reload-every` processes write into `train_episodes/`.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
from typing import Iterator, Sequence, cast

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from planet_sac.acting.actor import TEST, TRAIN
from planet_sac.agent import Agent, run_policies
from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import load_config
from planet_sac.diagnostics import open_loop
from planet_sac.episodes.folder import EpisodeFolder
from planet_sac.episodes.loader import EpisodeReplay
from planet_sac.episodes.storage import EpisodeSpec
from planet_sac.startup import make_tensorflow_deterministic
from planet_sac.training import distribute, schedule
from planet_sac.training.collection import Collection, RunEnvironments
from planet_sac.training.learner import Learner, NonFiniteError
from planet_sac.training.logger import Logger
from planet_sac.training.run_checks import check_offline_data, check_start, imagination_termination_warning
from planet_sac.training.run_dir import check_config_change, prepare_logdir, remove_unused_logdir
from planet_sac.training.run_lock import lock_run
from planet_sac.training.run_state import Counters, OwedCollection, RunProgress, RunState, reset_seeds, run_checkpointer, run_variables
from planet_sac.training.schedule import SAC_ACTING, Every, LogWindow, collecting_policy, evenly_spread
from planet_sac.training.signals import GracefulStop, TrainingStopped
from planet_sac.training.testing import TestPhase

log = logging.getLogger("planet_sac")


class Trainer:
    """Runs PlaNet's phase schedule for one logdir. Use `train(...)` for the one-call version.

    Construction restores the run: it resumes from the logdir's latest checkpoint if there is
    one, else starts from a filtered restore of `restore_from` (`include` / `exclude` name
    patterns), else from scratch. So `run()` always continues the run in `logdir` and never
    starts over inside it (which would let the checkpoint manager delete its checkpoints).
    `start_message` says which of the three happened. A Trainer is the run directory's one
    writer: it holds `LOGDIR/run.lock` (`run_lock.RunLock`) from construction until `close()`,
    and a second one on the same logdir is refused with RunLockedError naming the holder.
    """

    def __init__(self, config: Config, logdir: str, offline_data: str | None = None, progress: bool = True,
                 force: bool = False, restore_from: str | None = None, include: Sequence[str] = (),
                 exclude: Sequence[str] = ()):
        if not logdir.strip():  # "" would put the run's files at the file system's root ("/config.yaml")
            raise ConfigError(f"logdir {logdir!r} is empty; give the run's directory")
        self.config = config
        self.logdir = logdir.rstrip("/")
        make_tensorflow_deterministic()  # with every random stream seeded, a run repeats on one machine
        check_config_change(self.logdir, config, force)
        self.strategy = distribute.make_strategy(config)  # before anything is written: a machine that cannot run it fails here
        self.offline = offline_data is not None
        self.collects = not self.offline and config.schedule.collect
        check_start(config, self.logdir, offline_data, self.collects, restore_from, include, exclude)  # before the logdir is made
        self.progress = progress
        self.train_dir = offline_data or f"{self.logdir}/train_episodes"
        self.test_dir = f"{self.logdir}/test_episodes"
        self.train_folder, self.test_folder = EpisodeFolder(self.train_dir), EpisodeFolder(self.test_dir)
        created = not tf.io.gfile.exists(self.logdir)
        prepare_logdir(self.logdir)
        self.lock = lock_run(self.logdir)  # one learner per run directory, until close()

        self.envs = RunEnvironments(config.env, self.strategy)  # made at first use, closed by close()
        try:
            # Offline data too is read in the task's format: files in another are skipped and counted by the replay.
            obs_shape, action_size = self.envs.shapes(train=self.collects)
            self.episode_spec = EpisodeSpec.for_task(config.env.obs, obs_shape, action_size)  # what replay accepts
            if self.offline:
                self.envs.close()  # no collection and no test phases: the environment was only needed for its spaces
                check_offline_data(self.train_dir, config, self.episode_spec)  # before the config and checkpoint are written
            with self.strategy.scope():  # every variable mirrored on every replica, under its usual name
                self.agent = Agent.build(config, config.env.obs, obs_shape, action_size, run_policies(config))
                self.learner = Learner(config, self.agent.world_model, self.agent.sac, seed=config.seed,
                                       strategy=self.strategy)
            self.counters = Counters()
            self.run_state = RunState()
            self._replay: EpisodeReplay | None = None  # the training replay while `run` runs
            self.variables = run_variables(self.agent, self.learner, self.counters, self.run_state)
            self.checkpointer = run_checkpointer(self.logdir, self.variables)
            self.logger = Logger(self.logdir)
            self.reset_seeds = functools.partial(reset_seeds, config.env.seed, self.strategy)  # (stream, first, count)
            self.run_progress = RunProgress(config, self.logdir, self.counters, self.run_state, self.checkpointer,
                                            self.logger, self.train_folder, self.test_folder, self.collects)
            self.collection = Collection(config, self.envs, self.agent.policy, self.counters, self.train_folder,
                                         self.test_folder, self.reset_seeds, progress)
            self.test_phases = TestPhase(config, self.agent, self.learner, self.test_folder, self.envs.test_envs,
                                         self.counters, self.run_state, self.episode_spec, self.reset_seeds, self._log,
                                         self.logger.video, self.save_checkpoint)
            self._stop = threading.Event()
            # (signal, step, target) when SIGINT/SIGTERM ended the last `run` before its target, else None
            self.stopped: tuple[signal.Signals, int, int] | None = None
            self._warned_terminations = False
            # Workers of one multi-worker run checkpoint at the same steps, which their clocks would not agree on.
            minutes = config.schedule.checkpoint_minutes if distribute.num_workers(self.strategy) == 1 else None
            self.checkpoint_clock = schedule.CheckpointClock(minutes)
            self.start_message = self.run_progress.restore(self.variables, restore_from, include, exclude,
                                                           test_pending=lambda: self.phase() == TEST)
        except BaseException:
            self.close()
            if created:  # a start that failed before writing anything (e.g. a missing package) leaves no folder
                remove_unused_logdir(self.logdir)
            raise

    # ------------------------------------------------------------------ parts of the loop

    def phase(self) -> str:
        """`test` when a train phase has just been completed and not yet evaluated, else `train` (`schedule.phase`)."""
        return schedule.phase(self.config, not self.offline, int(self.counters.step.numpy()),
                              int(self.counters.test_phases.numpy()))

    def save_checkpoint(self) -> str:
        """Checkpoints the run at its current step, with the replays' states and the training episodes' names."""
        path = self.run_progress.save_checkpoint(self._replay, self.test_phases.held_out_replay)
        self.checkpoint_clock.saved()
        return path

    def collect_seed_episodes(self) -> None:
        """Random episodes until each folder holds its configured seed episodes (`Collection.seed_episodes`); then
        the episode counters follow the files. Nothing to do with offline data."""
        if self.offline:
            return
        self.collection.seed_episodes()
        self.run_progress.sync_episode_counters()

    def collect_train_episodes(self, policy: str | None = None, count: int | None = None,
                               explore: bool = True) -> list[dict]:
        """`count` episodes (default one per training environment) with the train phase of `policy` (default
        `policy.train`), into `train_episodes/` (`Collection.train_episodes`; `explore`: with the head's noise)."""
        return self.collection.train_episodes(policy, count, explore)

    def catch_up_head(self, batches: Iterator[dict]) -> dict:
        """`sac.catchup_rounds` rounds of SAC updates on replay batches with the world model frozen (`Learner.catch_up`).

        Run before each test phase and before each episode the head collects, so that the head acts
        on the features of the current model rather than trailing them. Returns the last round's
        metrics as `catchup/sac/*` (empty when off).
        """
        metrics: dict = {}
        for _ in range(self.config.sac.catchup_rounds):
            metrics = self.learner.catch_up(next(batches))
        return {f"catchup/{key}": float(value) for key, value in metrics.items()}

    def reset_head(self, step: int, batches: Iterator[dict]) -> dict:
        """Starts the SAC head over after update `step` (`Learner.reset_head`), then trains it `sac.reset_rounds`
        rounds on replay batches with the world model frozen (`Learner.catch_up`), before it acts again. Returns the
        last round's metrics as `reset/sac/*` (empty without rounds)."""
        self.learner.reset_head(step)
        metrics: dict = {}
        for _ in range(self.config.sac.reset_rounds):
            metrics = self.learner.catch_up(next(batches))
        log.info("step %d: the SAC head starts over (sac.reset_every=%d), then %d rounds on the frozen model", step,
                 self.config.sac.reset_every, self.config.sac.reset_rounds)
        return {f"reset/{key}": float(value) for key, value in metrics.items()}

    def test_phase(self, batches: Iterator[dict]) -> dict:
        """The test phase as one unit: the SAC head catches up with the model, then `TestPhase.run` evaluates and checkpoints."""
        last = self.test_phases.run(self.catch_up_head(batches))
        log.info("step %d: test return %.1f", int(self.counters.step.numpy()), last["test/return"])
        return last

    # ------------------------------------------------------------------ main loop

    def run(self, train_steps: int | None = None) -> dict:
        """Trains until `train_steps` updates in total (default: schedule.train_steps); returns the last metrics.

        The loop reads as its schedule: a pending test phase runs first; otherwise one update, then
        collection, logging, the open-loop video and a checkpoint, each when `Every` says so.
        A run already at `train_steps` trains nothing and returns what its last call returned: the record of its
        final test phase, or of its last update (its losses) where no test phase came after it.
        """
        when = Every.of(self.config, self.collects, train_steps)
        self.collect_seed_episodes()
        dataset, replay = self.run_progress.train_replay(distribute.worker_batch_size(self.config, self.strategy),
                                                         self.episode_spec)
        self._replay = replay
        batches = iter(dataset)
        step = int(self.counters.step.numpy())
        if not when.done(step) and not when.log(step, collected=when.collect(step)):
            # A run stopped at a step its schedule does not log wrote a final record there; going on, the
            # uninterrupted run has none at that step (a finished run keeps it: `train` returns it).
            self.logger.drop_after(step, test_pending=False, unscheduled_train=True)
        last: dict = {}
        metrics: dict | None = None
        bar = tqdm(total=when.total, initial=min(step, when.total), disable=None if self.progress else True,
                   unit="step", dynamic_ncols=True, mininterval=1.0)  # None: off when not a terminal
        window = LogWindow()
        self.checkpoint_clock.saved()  # the checkpoint it resumed from, or its start
        self._stop.clear()  # a signal ends the call it came in (`stopped` says so), not the Trainer
        stop = GracefulStop(self._stop)
        with stop:
            owed = self.run_progress.owed_collection()
            if owed is not None:  # the update is in the checkpoint; what followed it is done now, as it was due then
                log.info("step %d: redoing the collection that failed after this step's update", step)
                metrics = owed.update_metrics
                last = self._after_update(batches, window, when, step, metrics, bar, owed) or last
            while not self._stop.is_set():
                if self.phase() == TEST:
                    bar.set_description(TEST)
                    last = self.test_phase(batches)
                    continue
                if when.done(step):
                    break
                bar.set_description(TRAIN)
                metrics, step = self._update(batches, window)
                bar.update(1)
                last = self._after_update(batches, window, when, step, metrics, bar) or last
        bar.close()
        self.stopped = (stop.received, step, when.total) if stop.received and not when.done(step) else None
        if metrics is not None and last.get("step") != step:  # the final state is always in metrics.jsonl
            last = self._log({key: float(value) for key, value in metrics.items()}, TRAIN)
        self.save_checkpoint()
        self._replay = None
        self.logger.flush()
        if not last:  # nothing left to do: answer with where the run is and what it last logged
            log.info("already at step %d of %d: nothing to train (pass a larger --train-steps to go on)", step, when.total)
            # what the run's last call returned: its final test phase's record or its last update's, not the video's
            last = self.logger.last_record(lambda record: record.get("phase") == TEST or "loss/total" in record) or {"step": step}
        return last

    def _after_update(self, batches: Iterator[dict], window: LogWindow, when: Every, step: int, metrics: dict,
                      bar: tqdm, owed: OwedCollection | None = None) -> dict:
        """What follows update `step` (its `metrics`): collection, logging, the open-loop video and a checkpoint, each
        when `when` says so; returns the training record when one is logged, else {}. `owed`: the collection owed
        after a resume from a failed one (its update done, its head's catch-up too)."""
        record: dict = {}
        values = self._collect(batches, window, step, when.collection(step), metrics, owed) if when.collect(step) else {}
        if when.log(step, collected=bool(values)):
            record = self._log_train(values, metrics, window, cast(EpisodeReplay, self._replay))
            bar.set_postfix(loss=f"{values['loss/total']:.2f}", kl=f"{values['loss/kl']:.2f}",
                            sps=f"{values['train/steps_per_second']:.1f}")
        if when.video(step):
            self.log_open_loop(next(batches))
        if int(self.learner.consecutive_skips.numpy()) == 0:  # only after a good update: the last checkpoint is a good one
            if when.checkpoint(step):
                self.save_checkpoint()
            elif self.checkpoint_clock.due():
                log.info("step %d: checkpointed, %.1f minutes after the last checkpoint", step,
                         self.checkpoint_clock.elapsed_minutes())
                self.save_checkpoint()
        return record

    def _update(self, batches: Iterator[dict], window: LogWindow) -> tuple[dict, int]:
        """One learner update; (its metrics, the new step). Stops the run after too many non-finite updates in a row."""
        update_start = time.perf_counter()
        metrics = self.learner.update(next(batches))
        step = int(self.counters.step.assign_add(1).numpy())
        if self.config.sac.reset_every and step % self.config.sac.reset_every == 0:
            metrics = {**metrics, **self.reset_head(step, batches)}  # before any checkpoint of this step
        window.updated(update_start)
        if int(self.learner.consecutive_skips.numpy()) >= self.config.optim.max_nonfinite_updates:
            raise NonFiniteError(
                f"{self.config.optim.max_nonfinite_updates} consecutive updates had a NaN/inf loss or gradient "
                f"at step {step}; the last good checkpoint ({self.checkpointer.latest}) is intact. "
                "Lower optim.learning_rate or check the data."
            )
        return metrics, step

    def _collect(self, batches: Iterator[dict], window: LogWindow, step: int, collection: int, metrics: dict,
                 owed: OwedCollection | None = None) -> dict:
        """The `collection`-th training episodes (after the SAC head's catch-up when it acts); their return and length.

        If collecting fails (an environment given up, a full disk, ...), the run is checkpointed at `step` with the
        collection owed (`_checkpoint_owed_collection`) and the error raised: a resume loses no update. `owed`: that
        collection, done now after a resume (the catch-up, done before it failed, is not repeated)."""
        collect_start = time.perf_counter()
        collector = collecting_policy(self.config.policy, collection)
        if owed is not None:
            values = dict(owed.catch_up)
        else:
            values = self.catch_up_head(batches) if collector in SAC_ACTING else {}
        explore = evenly_spread(self.config.sac.exploration_share, collection)  # the head's noise on this collection
        policy_rng = self.agent.policy.rng.state.numpy()  # acting draws from it; a failed collection puts it back
        on_disk = self.train_folder.collected()
        try:
            episodes = self.collect_train_episodes(collector, self.config.env.num_envs, explore)
        except Exception:
            self._checkpoint_owed_collection(step, metrics, values, policy_rng, on_disk)
            raise
        window.collected(collect_start)
        if not episodes:  # only unreadable files on disk: nothing to report
            return values
        values["train/return"] = float(np.mean([episode["return"] for episode in episodes]))
        values[f"train/return/{collector}"] = values["train/return"]
        values["train/episode_length"] = float(np.mean([episode["length"] for episode in episodes]))
        if collector == "sac" and self.config.sac.exploration_noise:  # the noise the head acted with (DrQ-v2 logs its std)
            values["train/sac_exploration"] = float(episodes[0]["sac_exploration"])
        log.info("step %d: episode %d (%s) return %.1f (env steps %d)", step, int(self.counters.train_episodes.numpy()),
                 collector, values["train/return"], int(self.counters.env_steps.numpy()))
        return values

    def _checkpoint_owed_collection(self, step: int, metrics: dict, catch_up: dict, policy_rng: np.ndarray,
                                    on_disk: list[str]) -> None:
        """Checkpoints the run as it stood when the failed collection after update `step` began (`policy_rng`, the
        training episodes `on_disk` then), with the collection owed, so that a resume redoes it and loses no update.
        Not after a non-finite update (the last checkpoint stays a good one), and never instead of the error."""
        if int(self.learner.consecutive_skips.numpy()) != 0:
            return
        self.agent.policy.rng.state.assign(policy_rng)
        owed = OwedCollection(step, {key: float(value) for key, value in metrics.items()}, catch_up)
        try:
            path = self.run_progress.save_checkpoint(self._replay, self.test_phases.held_out_replay, owed, on_disk)
        except Exception as error:  # the collection's error is the one to report
            log.warning("step %d: the collection failed, and so did its checkpoint (%s: %s): a resume starts from %s",
                        step, type(error).__name__, error, self.checkpointer.latest)
            return
        log.warning("step %d: the collection failed; checkpointed %s with it owed: the same command redoes it and goes on",
                    step, path)

    def _log_train(self, values: dict, metrics: dict, window: LogWindow, replay: EpisodeReplay) -> dict:
        """A training record: `values` (updated in place) with the update's metrics, the window's timing and replay's counts."""
        if not self.collects and not self.offline:
            self.run_progress.sync_episode_counters()  # episodes arrive from collector processes
        values.update({key: float(value) for key, value in metrics.items()})
        values.update(window.close())
        values.update({f"replay/{key}": float(value) for key, value in replay.stats.items()
                       if isinstance(value, (int, float))})
        warning = imagination_termination_warning(self.config, replay.stats)
        if warning and not self._warned_terminations:
            log.warning(warning)
            self._warned_terminations = True
        return self._log(values, TRAIN)

    def log_open_loop(self, batch: dict) -> None:
        """Open-loop prediction summary: 5 context frames from data, then the model's predictions beside the truth."""
        truth, prediction = open_loop(self.agent.world_model, batch, context=min(5, self.config.data.chunk_length - 1))
        step = int(self.counters.step.numpy())
        if self.agent.world_model.obs_key == "image":
            frames = np.concatenate([truth, prediction, np.abs(truth - prediction)], axis=2)  # [T, H, 3W, 3]
            self.logger.video(step, "openloop/truth_model_error", frames)
        error = float(np.mean(np.square(truth - prediction)))
        self._log({"model/open_loop_mse": error}, TRAIN)

    def _log(self, values: dict, phase: str) -> dict:
        return self.logger.scalars(int(self.counters.step.numpy()), values, phase=phase,
                                   env_steps=int(self.counters.env_steps.numpy()),
                                   episodes=int(self.counters.train_episodes.numpy()))

    def close(self) -> None:
        """Closes the logger and environments and releases the run directory's lock (idempotent)."""
        try:
            if getattr(self, "logger", None) is not None:
                self.logger.close()
            self.envs.close()
        finally:
            if getattr(self, "lock", None) is not None:
                self.lock.release()


def train(config: Config | str | os.PathLike, logdir: str | os.PathLike, offline_data: str | os.PathLike | None = None,
          restore_from: str | None = None, include: Sequence[str] = (), exclude: Sequence[str] = (),
          train_steps: int | None = None, progress: bool = True, force: bool = False) -> dict:
    """Trains (or resumes) a run in `logdir` to `train_steps` and returns the last logged metrics.

    SIGINT or SIGTERM end it early: the step under way finishes, a checkpoint is written, and `TrainingStopped`
    (a KeyboardInterrupt) says where it stopped; the same call resumes from there.

    `config` is a Config, or a YAML config's path or shipped name (as `load_config` takes). With `offline_data`, the world
    model trains from that episode directory only: nothing is collected and there are no test phases (the
    task's environment is built once for its observation and action shapes, and closed).
    """
    if isinstance(config, (str, os.PathLike)):
        config = load_config(os.fspath(config))
    if not isinstance(config, Config):
        raise ConfigError(f"config is a {type(config).__name__}: pass a Config, or a YAML file's path or a shipped "
                          "config's name (load_config builds a Config from a dict's sections with from_dict)")
    if train_steps is not None and (isinstance(train_steps, bool) or not isinstance(train_steps, int) or train_steps < 0):
        raise ConfigError(f"train_steps={train_steps!r}: a number of updates >= 0, or None for schedule.train_steps")
    logdir = os.fspath(logdir)
    offline_data = None if offline_data is None else os.fspath(offline_data)
    trainer = Trainer(config, logdir, offline_data=offline_data, progress=progress, force=force,
                      restore_from=restore_from, include=include, exclude=exclude)
    try:
        last = trainer.run(train_steps)
    finally:
        trainer.close()
    if trainer.stopped is not None:
        raise TrainingStopped(*trainer.stopped)
    return last
