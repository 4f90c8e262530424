"""The actor: the aligned episode layout, saving episodes, and a batch of environments with per-environment resets."""

from __future__ import annotations

import logging
import os
import re

import numpy as np

from planet_sac.acting.actor import Actor, RandomPolicy, run_episode
from planet_sac.envs import StepResult, make_env

NAME = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{32}-(\d+)\.npz$")


class RecordingPolicy:
    """Constant action 2.0 (out of range on purpose); records observation batches and states it sees."""

    def __init__(self) -> None:
        self.batches: list[dict[str, np.ndarray]] = []
        self.states: list[np.ndarray] = []

    def initial_state(self, batch_size: int) -> np.ndarray:
        return np.zeros(batch_size, np.int64)

    def act(self, obs, state, phase):
        self.batches.append(obs)
        self.states.append(np.asarray(state))
        batch = len(state)
        return np.full((batch, 1), 2.0, np.float32), np.asarray(state) + 1


def test_run_episode_layout():
    env = make_env("gym:Pendulum-v1", obs="state", time_limit=10, seed=0)
    reset_obs = make_env("gym:Pendulum-v1", obs="state", seed=0).reset()[0]["state"]
    policy = RecordingPolicy()
    episode = run_episode(env, policy)
    assert sorted(episode) == ["action", "discount", "reward", "state"]
    assert {key: value.shape for key, value in episode.items()} == {
        "state": (11, 3), "action": (11, 1), "reward": (11,), "discount": (11,)
    }
    assert all(value.dtype == np.float32 for value in episode.values())
    np.testing.assert_array_equal(episode["state"][0], reset_obs)
    assert episode["action"][0, 0] == 0.0 and episode["reward"][0] == 0.0
    assert np.all(episode["discount"] == 1.0)
    np.testing.assert_array_equal(episode["action"][1:], 1.0)  # clipped: the action the environment executed
    assert np.all(episode["reward"][1:] < 0.0)
    assert len(policy.batches) == 10
    assert policy.batches[0]["state"].shape == (1, 3)
    np.testing.assert_array_equal(policy.batches[1]["state"][0], episode["state"][1])
    assert [int(s[0]) for s in policy.states] == list(range(10))  # the recurrent state is carried step to step


def test_run_episode_images_are_uint8():
    env = make_env("gym:Pendulum-v1", obs="image", time_limit=3, seed=0)
    episode = run_episode(env, RandomPolicy(1, seed=0))
    assert episode["image"].shape == (4, 64, 64, 3) and episode["image"].dtype == np.uint8


def test_run_episode_is_reproducible():
    episodes = [run_episode(make_env("gym:Pendulum-v1", obs="state", time_limit=5, seed=9), RandomPolicy(1, seed=2))
                for _ in range(2)]
    for key in episodes[0]:
        np.testing.assert_array_equal(episodes[0][key], episodes[1][key])


def test_actor_writes_each_episode_to_its_own_file(tmp_path):
    env = make_env("gym:Pendulum-v1", obs="state", time_limit=7, seed=0)
    outdir = str(tmp_path / "episodes")
    summaries = Actor(env, RandomPolicy(1, seed=0), "train", outdir).run(3)
    assert len(summaries) == 3
    assert sorted(os.listdir(outdir)) == sorted(os.path.basename(s["path"]) for s in summaries)
    for summary in summaries:
        match = NAME.match(os.path.basename(summary["path"]))
        assert match and int(match.group(1)) == 7 == summary["length"]
        with np.load(summary["path"]) as data:
            assert data["action"].shape == (8, 1)
            assert float(data["reward"].sum()) == summary["return"]
    first_states = [np.load(s["path"])["state"][0] for s in summaries]
    assert not np.array_equal(first_states[0], first_states[1])


class CountingEnvs:
    """A fake batch of environments: env i's episodes last lengths[i] steps; observation = [env, step, episode].

    `crash_at` = (env, step): that env's process "dies" once at that step of its first episode.
    """

    def __init__(self, lengths, crash_at=None):
        from gymnasium import spaces

        self.num_envs = len(lengths)
        self.lengths = lengths
        self.observation_space = spaces.Dict({"state": spaces.Box(-np.inf, np.inf, (3,), np.float32)})
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.t = [0] * self.num_envs
        self.episode = [-1] * self.num_envs
        self.crash_at = crash_at
        self.stepped: list[list[int]] = []
        self.resets: list[tuple[int, int | None]] = []  # (env, reset seed), in order

    def _obs(self, i):
        return {"state": np.array([i, self.t[i], self.episode[i]], np.float32)}

    def reset(self, index, seed=None):
        self.resets.append((index, seed))
        self.t[index] = 0
        self.episode[index] += 1
        return self._obs(index)

    def step(self, actions):
        self.stepped.append(sorted(actions))
        results = {}
        for i, action in actions.items():
            self.t[i] += 1
            if self.crash_at == (i, self.t[i]) and self.episode[i] == 0:
                results[i] = StepResult(None, 0.0, False, False, crashed=True)
                continue
            results[i] = StepResult(self._obs(i), float(action[0]) + 10 * i, False, self.t[i] >= self.lengths[i])
        return results

    def close(self):
        pass


class EchoPolicy:
    """Action = 0.1 * step count since the env's episode started (from the recurrent state, reset per env)."""

    def initial_state(self, batch_size):
        return np.zeros(batch_size, np.float32)

    def act(self, obs, state, phase):
        return (0.1 * state)[:, None], state + 1


def test_batch_of_environments_restarts_each_one_alone(tmp_path):
    envs = CountingEnvs([3, 5])
    summaries = Actor(envs, EchoPolicy(), "train", str(tmp_path)).run(4)
    # By hand: env 0 ends at t=3 and restarts (3rd episode), env 1 ends at t=5 and restarts (4th),
    # env 0 ends again at t=6 and stays idle, env 1 ends at t=10.
    assert [(s["env"], s["length"]) for s in summaries] == [(0, 3), (1, 5), (0, 3), (1, 5)]
    assert envs.stepped == [[0, 1]] * 6 + [[1]] * 4  # an env with no episode left to play is not stepped
    first = np.load(summaries[0]["path"])
    np.testing.assert_array_equal(first["state"][:, 0], 0)  # every step of the file comes from env 0
    np.testing.assert_array_equal(first["state"][:, 1], [0, 1, 2, 3])
    # The restarted env's recurrent state was reset: its second episode's actions start again from 0.
    second = np.load(summaries[2]["path"])
    np.testing.assert_allclose(second["action"][1:, 0], [0.0, 0.1, 0.2])
    np.testing.assert_array_equal(second["state"][:, 2], 1)  # second episode of env 0
    longer = np.load(summaries[1]["path"])
    np.testing.assert_allclose(longer["action"][1:, 0], [0.0, 0.1, 0.2, 0.3, 0.4])  # env 1 was not reset meanwhile
    np.testing.assert_allclose(longer["reward"][1:], 10 + longer["action"][1:, 0])


def test_a_crashed_environment_loses_only_its_partial_episode(tmp_path, caplog):
    envs = CountingEnvs([4, 4, 4], crash_at=(1, 2))
    actor = Actor(envs, EchoPolicy(), "train", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="planet_sac"):
        summaries = actor.run(3, seeds=[100, 101, 102])
    assert sorted(s["env"] for s in summaries) == [0, 1, 2] and actor.crashes == 1
    assert envs.resets == [(0, 100), (1, 101), (2, 102), (1, 101)]  # the episode redone keeps its start state
    assert any("environment 1 crashed" in r.getMessage() for r in caplog.records)
    (crashed,) = [np.load(s["path"]) for s in summaries if s["env"] == 1]
    np.testing.assert_array_equal(crashed["state"][:, 2], 1)  # only the episode after the crash was saved
    np.testing.assert_allclose(crashed["action"][1:, 0], [0.0, 0.1, 0.2, 0.3])  # its recurrent state restarted
    assert len(os.listdir(tmp_path)) == 3


def test_actor_with_parallel_processes_survives_a_killed_environment(tmp_path, caplog):
    import signal

    from planet_sac.config import EnvConfig
    from planet_sac.envs import make_envs

    envs = make_envs(EnvConfig(task="gym:Pendulum-v1", obs="state", action_repeat=1, time_limit=6), seed=0, num_envs=2)

    class KillOnce(RandomPolicy):
        calls = 0

        def act(self, obs, state, phase):
            KillOnce.calls += 1
            if KillOnce.calls == 3:
                os.kill(envs.pids()[1], signal.SIGKILL)
            return super().act(obs, state, phase)

    actor = Actor(envs, KillOnce(1, seed=0), "train", str(tmp_path))
    try:
        with caplog.at_level(logging.WARNING, logger="planet_sac"):
            summaries = actor.run(2)
    finally:
        actor.close()
    assert actor.crashes == 1 and sorted(s["env"] for s in summaries) == [0, 1]
    assert all(s["length"] == 6 for s in summaries) and len(os.listdir(tmp_path)) == 2  # whole episodes only


def test_evaluation_seeds_every_episode_so_each_policy_meets_the_same_start_states():
    """An environment that draws from its generator while stepping (as LunarLander does): with only the first
    reset seeded, the second episode's start would depend on the first episode's actions."""
    import gymnasium

    from planet_sac.acting.evaluation import SeededResets

    class DrawsWhileStepping(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,))
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,))

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.np_random.uniform(-1, 1, (1,)), {}

        def step(self, action):
            if action[0] > 0:
                self.np_random.uniform()  # wind, debris, ...
            return np.zeros(1), 0.0, False, True, {}

    def starts(action: float) -> list[float]:
        env = SeededResets(DrawsWhileStepping(), seed=7)
        values = []
        for _ in range(3):
            obs, _ = env.reset()
            values.append(float(obs[0]))
            env.step(np.array([action]))
        return values

    by_hand = [float(np.random.default_rng(seed).uniform(-1, 1, (1,))[0]) for seed in (7, 8, 9)]  # gymnasium's PCG64
    assert starts(-1.0) == starts(1.0) == by_hand
