"""PlaNet's test phase: evaluation without gradients between train phases.

A test phase logs, in one record: the world model's loss on held-out chunks of `test_episodes/`
(`test/loss/*`), the return of `policy.test` over `schedule.test_episodes` episodes (`test/return`,
saved to `test_episodes/`), the SAC critic's Q beside the real returns of its first episode, and the
return of every policy of `policy.compare` on the same model (`test/return/<name>`, not saved). The
phase's episodes are staged in `test_episodes/.test_phase-K/` until its checkpoint, then settled
(`EpisodeFolder.settle`), so a phase killed midway is redone without its first attempt joining the
held-out data. Its video (`eval/video`) is the last episode of `policy.test`.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Callable, Iterator, cast

import gymnasium
import numpy as np
import tensorflow as tf

from planet_sac.acting.actor import TEST, Actor, RecordFrames
from planet_sac.agent import Agent
from planet_sac.config import Config
from planet_sac.diagnostics import critic_vs_returns
from planet_sac.envs import EnvBatch
from planet_sac.episodes.folder import EpisodeFolder
from planet_sac.episodes.loader import EpisodeReplay
from planet_sac.episodes.storage import EpisodeSpec, load_episode
from planet_sac.training.learner import Learner
from planet_sac.training.run_state import COMPARE_STREAM, TEST_STREAM, Counters, RunState

log = logging.getLogger("planet_sac")

EVAL_VIDEO_SIZE = 128
"""Height and width of the rendered frames of state-observation tasks in TensorBoard's eval/video."""


class TestPhase:
    """The test phase of one run: `run()` evaluates, logs one `test` record, checkpoints and settles the folder.

    Inputs: the run's `config`, `agent` and `learner`; `folder`, the run's test episodes; `make_env()`, the test
    environment, or with `env.test_envs` > 1 the batch of them (made once by the caller, which closes it);
    `counters` (`test_phases`, `test_episodes` advance here; `step` is read); `run_state`, whose `held_out_replay`
    restores the held-out replay of a resumed run; `spec`, the episode format; `reset_seeds(stream, first,
    count)`; `log(values, phase)` writes a record and returns it; `video(step, tag, frames)`; `checkpoint()` saves
    the run (with `held_out_replay`'s state).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, config: Config, agent: Agent, learner: Learner, folder: EpisodeFolder,
                 make_env: Callable[[], gymnasium.Env | EnvBatch], counters: Counters, run_state: RunState, spec: EpisodeSpec,
                 reset_seeds: Callable[[int, int, int], list[int]], log: Callable[[dict, str], dict],
                 video: Callable[[int, str, np.ndarray], None], checkpoint: Callable[[], str]):
        self.config, self.agent, self.learner, self.folder = config, agent, learner, folder
        self.make_env, self.counters, self.run_state, self.spec = make_env, counters, run_state, spec
        self.reset_seeds, self.log, self.video, self.checkpoint = reset_seeds, log, video, checkpoint
        self.held_out_replay: EpisodeReplay | None = None  # made at the first held-out loss
        self._chunks: Iterator[dict] | None = None  # chunks of test_episodes/ for the held-out loss
        self._can_render = True

    def run(self, extra: dict | None = None) -> dict:
        """Evaluates the model on held-out episodes and each test policy on `schedule.test_episodes` episodes.

        `extra` values (e.g. the catch-up's metrics) are logged in the same record.

        `policy.test`'s episodes are saved to `test_episodes/` and logged as `test/return`;
        every policy, including those in `policy.compare`, is logged as `test/return/<name>`,
        so the policies can be compared on the same world model at every test phase.
        """
        start = time.perf_counter()
        values = {**(extra or {}), **self.held_out_loss()}
        recorder = self.video_recorder()
        # Saved to a folder of their own, moved in once the phase is checkpointed: a phase killed midway is redone,
        # and its earlier episodes would otherwise join the held-out data twice.
        staging = self.folder.stage(int(self.counters.test_phases.numpy()) + 1)
        count = self.config.schedule.test_episodes
        episodes = Actor(recorder or self.make_env(), self.agent.policy, TEST, staging).run(
            count, seeds=self.reset_seeds(TEST_STREAM, int(self.counters.test_episodes.numpy()), count))
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
                values[f"test/return/{name}"] = self.compare_return(name)
        values["time/test_seconds"] = time.perf_counter() - start
        self.counters.test_phases.assign_add(1)
        record = self.log(values, TEST)
        if recorder is not None and recorder.error is not None:  # a failed render never stops training
            log.warning("no eval/video in TensorBoard: %s", recorder.error)
            self._can_render = False
        elif recorder is not None and len(recorder.frames) > 1:  # the last test episode of policy.test
            self.video(int(self.counters.step.numpy()), "eval/video", np.stack(recorder.frames))
        elif self.config.env.obs == "image" and episodes:  # the frames the agent saw in the last test episode
            self.video(int(self.counters.step.numpy()), "eval/video", load_episode(episodes[-1]["path"])["image"])
        self.checkpoint()
        self.folder.settle(int(self.counters.test_phases.numpy()))
        return record

    def video_recorder(self) -> RecordFrames | None:
        """Records the rendered frames of a state task's test episodes; None for image tasks, whose video is the
        last test episode's saved observations, and for an environment that cannot render."""
        env = self.make_env()
        if self.config.env.obs == "image" or not isinstance(env, gymnasium.Env):
            return None
        if getattr(env, "render_mode", None) != "rgb_array" or not self._can_render:
            return None
        return RecordFrames(env, size=EVAL_VIDEO_SIZE, optional=True)

    def compare_return(self, name: str) -> float:
        """Mean return of policy `name` over `schedule.test_episodes` test episodes (not saved)."""
        self.agent.policy.set_policies(test=name)
        count = self.config.schedule.test_episodes
        first = (int(self.counters.test_phases.numpy()) * len(self.config.policy.compare)
                 + list(map(str, self.config.policy.compare)).index(name)) * count
        try:
            episodes = Actor(self.make_env(), self.agent.policy, TEST).run(
                count, seeds=self.reset_seeds(COMPARE_STREAM, first, count))
        finally:
            self.agent.policy.set_policies(test=self.config.policy.test)
        return float(np.mean([episode["return"] for episode in episodes]))

    def held_out_loss(self) -> dict:
        """`test/loss/*`: the world model's loss on one batch of chunks from `test_episodes/` (as PlaNet's test phase).

        Empty (with one log line) when the test directory holds no episode as long as a chunk.
        """
        if self._chunks is None:
            replay = EpisodeReplay(self.folder.directory, self.config.data.chunk_length, every=self.config.data.every,
                                   keys=(self.config.env.obs, "action", "reward", "discount"),
                                   wait_seconds=0.0, seed=self.config.seed + 20_000, spec=self.spec,
                                   absorbing_steps=self.config.sac.n_step - 1)
            state = RunState.read(self.run_state.held_out_replay)
            if state is not None:
                replay.restore(cast(dict, state))
            self.held_out_replay = replay
            self._chunks = iter(replay)
        try:
            chunks = list(itertools.islice(self._chunks, self.config.data.batch_size))
        except TimeoutError as error:  # no test episode as long as a chunk yet: try again next test phase
            self._chunks = None
            log.info("no held-out model loss this test phase: %s", str(error).split(" (")[0])
            return {}
        batch = {key: tf.convert_to_tensor(np.stack([chunk[key] for chunk in chunks])) for key in chunks[0]}
        metrics = self.learner.evaluate(batch)
        return {f"test/{key}": float(value) for key, value in metrics.items()}
