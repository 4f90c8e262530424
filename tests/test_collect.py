"""Tests for planet_sac.collect: the aligned episode layout and saving episodes to disk."""

from __future__ import annotations

import os
import re

import numpy as np

from planet_sac.collect import RandomAgent, collect_episodes, run_episode
from planet_sac.envs import make_env

NAME = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{32}-(\d+)\.npz$")


class RecordingAgent:
    """Constant action 2.0 (out of range on purpose); records observation batches it sees."""

    def __init__(self) -> None:
        self.batches: list[dict[str, np.ndarray]] = []

    def reset(self, batch_size: int) -> int:
        assert batch_size == 1
        return 0

    def act(self, obs, state, training):
        self.batches.append(obs)
        return np.full((1, 1), 2.0, np.float32), state + 1


def test_run_episode_layout():
    env = make_env("gym:Pendulum-v1", obs="state", time_limit=10, seed=0)
    reset_obs = make_env("gym:Pendulum-v1", obs="state", seed=0).reset()[0]["state"]
    agent = RecordingAgent()
    episode = run_episode(env, agent, training=True)
    assert sorted(episode) == ["action", "discount", "reward", "state"]
    assert {key: value.shape for key, value in episode.items()} == {
        "state": (11, 3), "action": (11, 1), "reward": (11,), "discount": (11,)
    }
    assert all(value.dtype == np.float32 for value in episode.values())
    np.testing.assert_array_equal(episode["state"][0], reset_obs)
    assert episode["action"][0, 0] == 0.0 and episode["reward"][0] == 0.0
    assert np.all(episode["discount"] == 1.0)
    np.testing.assert_array_equal(episode["action"][1:], 1.0)
    assert np.all(episode["reward"][1:] < 0.0)
    assert len(agent.batches) == 10
    assert agent.batches[0]["state"].shape == (1, 3)
    np.testing.assert_array_equal(agent.batches[1]["state"][0], episode["state"][1])


def test_run_episode_images_are_uint8():
    env = make_env("gym:Pendulum-v1", obs="image", time_limit=3, seed=0)
    episode = run_episode(env, RandomAgent(1, seed=0), training=False)
    assert episode["image"].shape == (4, 64, 64, 3) and episode["image"].dtype == np.uint8


def test_run_episode_is_reproducible():
    episodes = []
    for _ in range(2):
        env = make_env("gym:Pendulum-v1", obs="state", time_limit=5)
        episodes.append(run_episode(env, RandomAgent(1, seed=2), training=True, seed=9))
    for key in episodes[0]:
        np.testing.assert_array_equal(episodes[0][key], episodes[1][key])


def test_collect_episodes_writes_files(tmp_path):
    env = make_env("gym:Pendulum-v1", obs="state", time_limit=7, seed=0)
    outdir = str(tmp_path / "episodes")
    summaries = collect_episodes(env, RandomAgent(1, seed=0), 3, outdir, seed=0, progress=False)
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
