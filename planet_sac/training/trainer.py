"""The training loop: PlaNet's phases over replay, learner and environment loop.

Data flows one way: environment -> episodes on disk -> replay loader -> learner
(world model + SAC) -> policy -> environment. A run is a sequence of phases derived
from the global step: `train` phases of `schedule.train_phase_steps` updates (one
episode collected every `schedule.collect_every` updates), each followed by a `test`
phase that evaluates without gradients. Because the phase is a function of the
checkpointed counters, a resumed run continues in the right phase.

Everything a run writes lives under its logdir: `config.yaml`, `train_episodes/`,
`test_episodes/`, `checkpoints/`, `metrics.jsonl` and TensorBoard event files.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
import signal
import threading
import time
from typing import Any, Iterator, Sequence

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from planet_sac import collect
from planet_sac.config import Config, ConfigError, apply_overrides, diff, load_config, read_config_file, save_config
from planet_sac.control.policy import Policy
from planet_sac.control.sac import SAC
from planet_sac.diagnostics import critic_vs_returns
from planet_sac.envs import make_env
from planet_sac.episodes.loader import EpisodeReplay, make_dataset
from planet_sac.episodes.storage import BadEpisodeError, EpisodeSpec, list_episodes, load_episode
from planet_sac.models.world_model import WorldModel
from planet_sac.training.checkpoints import Checkpointer, named_variables, restore_filtered
from planet_sac.training.learner import Learner
from planet_sac.training.logger import Logger

log = logging.getLogger("planet_sac")

TRAIN, TEST = "train", "test"
EVAL_VIDEO_SIZE = 128
"""Height and width of the rendered frames of state-observation tasks in TensorBoard's eval/video."""


class NonFiniteError(RuntimeError):
    """Too many consecutive updates had a NaN/inf loss or gradient."""


# ----------------------------------------------------------------------------- the agent


@dataclasses.dataclass
class Agent:
    """The learnable parts of a run, built from a config and the data's shapes."""

    world_model: WorldModel
    sac: SAC
    policy: Policy

    @classmethod
    def build(cls, config: Config, obs_key: str, obs_shape: Sequence[int], action_size: int) -> "Agent":
        world_model = WorldModel(config.model, obs_key, tuple(obs_shape), action_size, seed=config.seed,
                                 precision=config.optim.precision)
        sac = SAC(config.sac, world_model.rssm.feature_size, action_size, seed=config.seed)
        policy = Policy(world_model, sac, config.cem, config.policy.train, config.policy.test,
                        seed=config.seed + 1)
        return cls(world_model, sac, policy)

    def actor(self, phase: str) -> "PolicyActor":
        return PolicyActor(self.policy, phase)


class PolicyActor:
    """Adapts the compiled policy to the environment loop's `collect.Agent` protocol for one phase."""

    def __init__(self, policy: Policy, phase: str):
        self.policy = policy
        self.phase = phase

    def reset(self, batch_size: int) -> Any:
        return self.policy.initial_state(batch_size)

    def act(self, obs: dict[str, np.ndarray], state: Any, training: bool) -> tuple[np.ndarray, Any]:
        action, state = self.policy.act(obs, state, self.phase)
        return action.numpy(), state


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


def episode_stats(directory: str) -> tuple[int, int]:
    """(episodes, environment steps) of a directory, read from the file names' length suffix."""
    paths = list_episodes(directory)
    steps = 0
    for path in paths:
        match = re.search(r"-(\d+)\.npz$", path)
        steps += int(match.group(1)) if match else 0
    return len(paths), steps


def first_episode_spec(directory: str) -> EpisodeSpec:
    """Shapes and dtypes of the first readable episode in `directory` (reads one file, not all)."""
    for path in list_episodes(directory):
        try:
            return EpisodeSpec.from_episode(load_episode(path))
        except BadEpisodeError:
            continue
    raise ConfigError(f"{directory} holds no readable episode (.npz); collect some with: planet-sac collect ... --outdir {directory}")


# ----------------------------------------------------------------------------- run config


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


# ----------------------------------------------------------------------------- the loop


class Trainer:
    """Runs PlaNet's phase schedule for one logdir. Use `train(...)` for the one-call version.

    Construction restores the run: it resumes from the logdir's latest checkpoint if there is
    one, else starts from a filtered restore of `restore_from` (`include` / `exclude` name
    patterns), else from scratch. So `run()` always continues the run in `logdir` and never
    starts over inside it (which would let the checkpoint manager delete its checkpoints).
    `start_message` says which of the three happened.
    """

    def __init__(self, config: Config, logdir: str, offline_data: str | None = None, progress: bool = True,
                 force: bool = False, restore_from: str | None = None, include: Sequence[str] = (),
                 exclude: Sequence[str] = ()):
        self.config = config
        self.logdir = logdir.rstrip("/")
        saved_path = f"{self.logdir}/config.yaml"
        if tf.io.gfile.exists(saved_path) and not force:
            changed = diff(read_config_file(saved_path), config)
            if changed:
                raise ConfigError(f"{self.logdir} was started with another config (changed: {', '.join(changed[:5])}); "
                                  "use a new logdir or pass force=True / --force")
        self.offline = offline_data is not None
        self.progress = progress
        self.train_dir = offline_data or f"{self.logdir}/train_episodes"
        self.test_dir = f"{self.logdir}/test_episodes"
        prepare_logdir(self.logdir)

        self.env = self.test_env = None
        self._can_render = True
        if self.offline:
            if not tf.io.gfile.isdir(self.train_dir):
                raise ConfigError(f"--offline-data {self.train_dir} is not a directory of episodes")
            spec = first_episode_spec(self.train_dir)
            shapes = spec.step_shapes()
            if config.env.obs not in shapes:
                raise ConfigError(f"{self.train_dir} holds {', '.join(spec.keys[:-3])} observations but "
                                  f"env.obs={config.env.obs}; pass --set env.obs=... to match the data")
            obs_shape, action_size = shapes[config.env.obs], spec.action_dim
        else:
            self.env = self._make_env(config.env.seed)
            obs_shape = self.env.observation_space[config.env.obs].shape
            action_size = self.env.action_space.shape[0]

        self.agent = Agent.build(config, config.env.obs, obs_shape, action_size)
        self.learner = Learner(config, self.agent.world_model, self.agent.sac, seed=config.seed)
        self.counters = Counters()
        self.variables = named_variables(
            [self.agent.world_model, self.agent.sac, self.learner.optimizer, self.learner, self.counters],
            extra={"learner/rng_state": self.learner.rng.state, "policy/rng_state": self.agent.policy.rng.state},
        )
        self.variables.pop("policy/phase_policy", None)
        self.checkpointer = Checkpointer(f"{self.logdir}/checkpoints", self.variables)
        self.logger = Logger(self.logdir)
        self._test_chunks: Iterator[dict] | None = None  # chunks of test_episodes/ for the held-out loss
        self._stop = threading.Event()
        try:
            self.start_message = self._restore(restore_from, include, exclude)
        except BaseException:
            self.close()
            raise

    def _make_env(self, seed: int):
        env = self.config.env
        return make_env(env.task, env.obs, env.action_repeat, env.time_limit, seed, env.image_size)

    # ------------------------------------------------------------------ setup

    def _restore(self, restore_from: str | None, include: Sequence[str], exclude: Sequence[str]) -> str:
        """Resumes from this logdir's latest checkpoint, or starts from a filtered restore of another run."""
        resumed = self.checkpointer.restore_latest()
        if resumed:
            message = f"resumed {resumed} at step {int(self.counters.step.numpy())}"
        elif restore_from:
            # A new run keeps its own progress: counters (steps, test phases, ...) are never taken from another run.
            report = restore_filtered(self.variables, restore_from, include or [".*"], [*exclude, r"counters/"])
            message = f"from {restore_from}: {report.summary()}"
        else:
            message = "started from scratch"
        self._sync_episode_counters()
        # Written only once the run is built and restored, so a failed start never blocks a corrected retry.
        save_config(self.config, f"{self.logdir}/config.yaml")
        log.info(message)
        return message

    def _sync_episode_counters(self) -> None:
        """Episode counters follow the files on disk: episodes written after the last checkpoint are kept and counted once."""
        episodes, steps = episode_stats(self.train_dir)
        self.counters.train_episodes.assign(episodes)
        self.counters.env_steps.assign(steps * self.config.env.action_repeat)
        self.counters.test_episodes.assign(episode_stats(self.test_dir)[0])

    def collect_seed_episodes(self) -> None:
        """Random episodes until each directory holds the configured number of seed episodes."""
        if self.offline:
            return
        data = self.config.data
        for directory, wanted, seed in ((self.train_dir, data.seed_episodes, self.config.env.seed),
                                        (self.test_dir, data.test_seed_episodes, self.config.env.seed + 10_000)):
            missing = wanted - episode_stats(directory)[0]
            if missing > 0:
                env = self.env if directory == self.train_dir else self._test_env()
                agent = collect.RandomAgent(env.action_space.shape[0], seed=seed + episode_stats(directory)[0])
                log.info("collecting %d random seed episodes into %s", missing, directory)
                collect.collect_episodes(env, agent, missing, directory, training=True, progress=self.progress)
        self._sync_episode_counters()

    def _test_env(self):
        if self.test_env is None:
            self.test_env = self._make_env(self.config.env.seed + 10_000)
        return self.test_env

    # ------------------------------------------------------------------ phases

    def phase(self) -> str:
        """`test` when a train phase has just been completed and not yet evaluated, else `train`."""
        if self.offline or self.config.schedule.test_episodes == 0:
            return TRAIN
        done = int(self.counters.step.numpy()) // self.config.schedule.train_phase_steps
        return TEST if done > int(self.counters.test_phases.numpy()) else TRAIN

    def run_test_phase(self) -> dict:
        """Evaluates the model on held-out episodes and each test policy on `schedule.test_episodes` episodes.

        `policy.test`'s episodes are saved to `test_episodes/` and logged as `test/return`;
        every policy, including those in `policy.compare`, is logged as `test/return/<name>`,
        so the policies can be compared on the same world model at every test phase.
        """
        values = self.held_out_loss()
        recorder = self._video_recorder()
        episodes = collect.collect_episodes(recorder or self._test_env(), self.agent.actor(TEST),
                                            self.config.schedule.test_episodes, self.test_dir, training=False, progress=False)
        self.counters.test_episodes.assign_add(len(episodes))
        returns = [episode["return"] for episode in episodes]
        values.update({"test/return": float(np.mean(returns)), "test/return_std": float(np.std(returns)),
                       f"test/return/{self.config.policy.test}": float(np.mean(returns))})
        if episodes:  # the SAC critic's Q beside the real discounted returns of the first test episode
            episode = load_episode(episodes[0]["path"])
            values.update({f"test/{key}": value for key, value in
                           critic_vs_returns(self.agent.world_model, self.agent.sac, episode, self.config.sac.discount).items()})
        for name in self.config.policy.compare:
            if name != self.config.policy.test:
                values[f"test/return/{name}"] = self._compare_return(name)
        self.counters.test_phases.assign_add(1)
        record = self._log(values, TEST)
        if recorder is not None and recorder.error is not None:  # a failed render never stops training
            log.warning("no eval/video in TensorBoard: %s", recorder.error)
            self._can_render = False
        elif recorder is not None and len(recorder.frames) > 1:  # the last test episode of policy.test
            self.logger.video(int(self.counters.step.numpy()), "eval/video", np.stack(recorder.frames))
        self.checkpointer.save(int(self.counters.step.numpy()))
        return record

    def _video_recorder(self) -> collect.RecordFrames | None:
        """Records test episodes: the image observations, or rendered frames of state tasks (None if it cannot render)."""
        env = self._test_env()
        if self.config.env.obs == "image":
            return collect.RecordFrames(env, from_observation=True)
        if getattr(env, "render_mode", None) != "rgb_array" or not self._can_render:
            return None
        return collect.RecordFrames(env, size=EVAL_VIDEO_SIZE, optional=True)

    def _compare_return(self, name: str) -> float:
        """Mean return of policy `name` over `schedule.test_episodes` test episodes (not saved)."""
        self.agent.policy.set_policies(test=name)
        try:
            returns = [float(collect.run_episode(self._test_env(), self.agent.actor(TEST), training=False)["reward"].sum())
                       for _ in range(self.config.schedule.test_episodes)]
        finally:
            self.agent.policy.set_policies(test=self.config.policy.test)
        return float(np.mean(returns))

    def held_out_loss(self) -> dict:
        """`test/loss/*`: the world model's loss on one batch of chunks from `test_episodes/` (as PlaNet's test phase).

        Empty (with one log line) when the test directory holds no episode as long as a chunk.
        """
        if self._test_chunks is None:
            replay = EpisodeReplay(self.test_dir, self.config.data.chunk_length, every=self.config.data.every,
                                   keys=(self.config.env.obs, "action", "reward", "discount"),
                                   wait_seconds=0.0, seed=self.config.seed + 20_000)
            self._test_chunks = iter(replay)
        try:
            chunks = list(itertools.islice(self._test_chunks, self.config.data.batch_size))
        except TimeoutError as error:  # no test episode as long as a chunk yet: try again next test phase
            self._test_chunks = None
            log.info("no held-out model loss this test phase: %s", str(error).split(" (")[0])
            return {}
        batch = {key: tf.convert_to_tensor(np.stack([chunk[key] for chunk in chunks])) for key in chunks[0]}
        metrics = self.learner.evaluate(batch)
        return {f"test/{key}": float(value) for key, value in metrics.items() if key.startswith("loss/")}

    def collect_train_episode(self) -> dict:
        (episode,) = collect.collect_episodes(self.env, self.agent.actor(TRAIN), 1, self.train_dir,
                                              training=True, progress=False)
        self.counters.train_episodes.assign_add(1)
        self.counters.env_steps.assign_add(episode["length"] * self.config.env.action_repeat)
        return episode

    def _log(self, values: dict, phase: str) -> dict:
        return self.logger.scalars(int(self.counters.step.numpy()), values, phase=phase,
                                   env_steps=int(self.counters.env_steps.numpy()),
                                   episodes=int(self.counters.train_episodes.numpy()))

    # ------------------------------------------------------------------ main loop

    def run(self, train_steps: int | None = None) -> dict:
        """Trains until `train_steps` updates in total (default: schedule.train_steps); returns the last metrics."""
        schedule = self.config.schedule
        total = schedule.train_steps if train_steps is None else train_steps
        self.collect_seed_episodes()
        dataset, replay = make_dataset(self.train_dir, self.config.data.batch_size, self.config.data.chunk_length,
                                       every=self.config.data.every, max_episodes=self.config.data.max_episodes,
                                       keys=(self.config.env.obs, "action", "reward", "discount"),
                                       wait_seconds=self.config.data.wait_seconds,
                                       seed=self.config.seed + int(self.counters.step.numpy()))
        batches = iter(dataset)
        step = int(self.counters.step.numpy())
        last: dict = {}
        metrics = None
        bar = tqdm(total=total, initial=min(step, total), disable=None if self.progress else True,
                   unit="step", dynamic_ncols=True, mininterval=1.0)  # None: off when not a terminal
        window_start, window_steps = time.perf_counter(), 0
        with _graceful_stop(self._stop):
            while not self._stop.is_set():
                if self.phase() == TEST:
                    bar.set_description(TEST)
                    last = self.run_test_phase()
                    log.info("step %d: test return %.1f", step, last["test/return"])
                    continue
                if step >= total:
                    break
                bar.set_description(TRAIN)
                metrics = self.learner.update(next(batches))
                step = int(self.counters.step.assign_add(1).numpy())
                window_steps += 1
                bar.update(1)
                if int(self.learner.consecutive_skips.numpy()) >= self.config.optim.max_nonfinite_updates:
                    raise NonFiniteError(
                        f"{self.config.optim.max_nonfinite_updates} consecutive updates had a NaN/inf loss or gradient "
                        f"at step {step}; the last good checkpoint ({self.checkpointer.latest}) is intact. "
                        "Lower optim.learning_rate or check the data."
                    )
                values = {}
                if not self.offline and step % schedule.collect_every == 0:
                    episode = self.collect_train_episode()
                    values["train/return"] = episode["return"]
                    values["train/episode_length"] = episode["length"]
                    log.info("step %d: episode %d return %.1f (env steps %d)", step, int(self.counters.train_episodes.numpy()),
                             episode["return"], int(self.counters.env_steps.numpy()))
                if step % schedule.log_every == 0 or values:
                    elapsed = time.perf_counter() - window_start
                    values.update({key: float(value) for key, value in metrics.items()})
                    values["train/steps_per_second"] = window_steps / max(elapsed, 1e-9)
                    values.update({f"replay/{key}": float(value) for key, value in replay.stats.items()
                                   if isinstance(value, (int, float))})
                    window_start, window_steps = time.perf_counter(), 0
                    last = self._log(values, TRAIN)
                    bar.set_postfix(loss=f"{values['loss/total']:.2f}", kl=f"{values['loss/kl']:.2f}",
                                    sps=f"{values['train/steps_per_second']:.1f}")
                if step % schedule.video_every == 0:
                    self.log_open_loop(next(batches))
                if step % schedule.checkpoint_every == 0 and int(self.learner.consecutive_skips.numpy()) == 0:
                    self.checkpointer.save(step)  # only after a good update: the last checkpoint is always a good one
        bar.close()
        if metrics is not None and last.get("step") != step:  # the final state is always in metrics.jsonl
            last = self._log({key: float(value) for key, value in metrics.items()}, TRAIN)
        self.checkpointer.save(int(self.counters.step.numpy()))
        self.logger.flush()
        return last

    def log_open_loop(self, batch: dict) -> None:
        """Open-loop prediction summary: 5 context frames from data, then the model's predictions beside the truth."""
        truth, prediction = open_loop(self.agent.world_model, batch, context=min(5, self.config.data.chunk_length - 1))
        step = int(self.counters.step.numpy())
        if self.agent.world_model.obs_key == "image":
            frames = np.concatenate([truth, prediction, np.abs(truth - prediction)], axis=2)  # [T, H, 3W, 3]
            self.logger.video(step, "openloop/truth_model_error", frames)
        error = float(np.mean(np.square(truth - prediction)))
        self._log({"model/open_loop_mse": error}, TRAIN)

    def close(self) -> None:
        self.logger.close()
        for env in (self.env, self.test_env):
            if env is not None:
                env.close()


def open_loop(world_model: WorldModel, batch: dict, context: int) -> tuple[np.ndarray, np.ndarray]:
    """Filters `context` steps of the first sequence, then predicts the rest open-loop from its actions."""
    obs = tf.convert_to_tensor(batch[world_model.obs_key][:1])
    action = tf.convert_to_tensor(batch["action"][:1])
    stoch = world_model.rssm.stoch_size
    context_obs = obs[:, :context]
    noise = world_model.observation_noise(tf.random.Generator.from_seed(0), context_obs)  # as in training
    posts, _ = world_model.rssm.observe(world_model.embed(context_obs, noise), action[:, :context], tf.zeros([1, context, stoch]))
    last = tf.nest.map_structure(lambda t: t[:, -1], posts)
    length = action.shape[1]
    imagined = world_model.rssm.imagine(last, action[:, context:], tf.zeros([1, length - context, stoch]))
    predicted = tf.concat([world_model.decode(posts), world_model.decode(imagined)], 1)[0].numpy()
    truth = obs[0].numpy()
    if world_model.obs_key == "image":
        truth = truth.astype(np.float32) / 255.0
    return truth, predicted


class _graceful_stop:
    """SIGINT/SIGTERM set `event` (the loop then checkpoints and exits) instead of killing mid-write."""

    def __init__(self, event: threading.Event):
        self.event = event
        self.previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.event.is_set():  # a second signal: stop now
            raise KeyboardInterrupt
        log.warning("received %s: finishing the current step, then checkpointing", signal.Signals(signum).name)
        self.event.set()

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False


def train(config: Config | str, logdir: str, offline_data: str | None = None, restore_from: str | None = None,
          include: Sequence[str] = (), exclude: Sequence[str] = (), train_steps: int | None = None,
          progress: bool = True, force: bool = False) -> dict:
    """Trains (or resumes) a run in `logdir` and returns the last logged metrics.

    `config` is a Config or a path to a YAML config. With `offline_data`, the world
    model trains from that episode directory only, without an environment.
    """
    if isinstance(config, str):
        config = load_config(config)
    trainer = Trainer(config, logdir, offline_data=offline_data, progress=progress, force=force,
                      restore_from=restore_from, include=include, exclude=exclude)
    try:
        return trainer.run(train_steps)
    finally:
        trainer.close()
