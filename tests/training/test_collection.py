"""What the run's collection guarantees on its own (training/collection.py): seed episodes fill each folder to the
configured counts from its own environment and episode stream, and training episodes advance the counters by exactly
what they wrote. Checked against the files on disk and freshly made environments, without a Trainer."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.acting.actor import TRAIN
from planet_sac.config_loading import apply_overrides
from planet_sac.envs import make_env
from planet_sac.episodes.folder import EpisodeFolder
from planet_sac.episodes.storage import load_episode
from planet_sac.training.collection import Collection, RunEnvironments
from planet_sac.training.run_state import TEST_SEED_OFFSET, TEST_STREAM, TRAIN_STREAM, Counters, reset_seeds

# Episodes of 5 agent steps (10 env steps); 3 seed episodes to train on, 2 held out.
SHORT = ["env.time_limit=5", "data.seed_episodes=3", "data.test_seed_episodes=2"]


class ScriptedPolicy:
    """A stand-in for the agent's policy: actions from its own generator; records the phases it acts in and the
    policies it is set to."""

    def __init__(self, fail: bool = False):
        self.rng = np.random.default_rng(5)
        self.fail = fail
        self.acted_in: set[str] = set()
        self.train_policy = "cem"
        self.sac_exploration: list[float] = []  # what each collection set the head's exploration noise to

    def set_sac_exploration(self, noise: float) -> None:
        self.sac_exploration.append(noise)

    def set_policies(self, train: str | None = None, test: str | None = None) -> None:
        self.train_policy = train or self.train_policy

    def initial_state(self, batch_size: int) -> None:
        return None

    def act(self, obs, state, phase):
        if self.fail:
            raise RuntimeError("policy failed")
        self.acted_in.add(f"{phase}:{self.train_policy}")
        return self.rng.uniform(-1.0, 1.0, (len(obs["state"]), 1)).astype(np.float32), None


def collection_for(config, tmp_path, policy=None, counters=None):
    strategy = tf.distribute.get_strategy()
    envs = RunEnvironments(config.env, strategy)
    collection = Collection(config, envs, policy or ScriptedPolicy(), counters or Counters(),
                            EpisodeFolder(str(tmp_path / "train_episodes")), EpisodeFolder(str(tmp_path / "test_episodes")),
                            functools.partial(reset_seeds, config.env.seed, strategy), progress=False)
    return collection, envs


def episodes_in(folder: EpisodeFolder) -> list[dict]:
    return [load_episode(path) for path in folder.paths()]


def first_observation(config, seed: int) -> np.ndarray:
    """The first observation of an episode reset with `seed`, in an environment of its own."""
    env = make_env(config.env, seed=0)
    try:
        return env.reset(seed=seed)[0]["state"]
    finally:
        env.close()


def by_reset_seed(config, episodes: list[dict], seeds: list[int]) -> dict[int, dict]:
    """Each episode keyed by the position of its reset seed in `seeds` (found by its first observation)."""
    starts = [first_observation(config, seed) for seed in seeds]
    found: dict[int, dict] = {}
    for episode in episodes:
        matches = [index for index, start in enumerate(starts) if np.array_equal(episode["state"][0], start)]
        assert len(matches) == 1, "an episode that no expected reset seed starts"
        found[matches[0]] = episode
    return found


def test_seed_episodes_fill_each_folder_from_its_environment_and_stream(smoke_config, tmp_path, caplog):
    """Train: data.seed_episodes episodes reset with the train stream's seeds, random actions seeded env.seed;
    test: data.test_seed_episodes with the test stream's, seeded env.seed + TEST_SEED_OFFSET. The counters stay.
    Each folder's returns are logged in one line, as the files' rewards sum."""
    config = apply_overrides(smoke_config, SHORT)
    collection, envs = collection_for(config, tmp_path)
    try:
        with caplog.at_level("INFO", logger="planet_sac"):
            collection.seed_episodes()
    finally:
        envs.close()
    logged = [record.getMessage() for record in caplog.records if "random seed episodes: return" in record.getMessage()]
    for line, folder in zip(logged, (collection.train_folder, collection.test_folder), strict=True):
        returns = np.array([float(np.sum(episode["reward"], dtype=np.float64)) for episode in episodes_in(folder)])
        assert line == (f"{len(returns)} random seed episodes: return {returns.mean():.1f} ± {returns.std():.1f} "
                        f"(min {returns.min():.1f}, max {returns.max():.1f})")
    seeds = functools.partial(reset_seeds, config.env.seed, tf.distribute.get_strategy())
    for folder, stream, count, policy_seed in ((collection.train_folder, TRAIN_STREAM, 3, config.env.seed),
                                               (collection.test_folder, TEST_STREAM, 2, config.env.seed + TEST_SEED_OFFSET)):
        episodes = by_reset_seed(config, episodes_in(folder), seeds(stream, 0, count))
        assert sorted(episodes) == list(range(count))  # each reset seed once: the folder holds `count` episodes
        draws = np.random.default_rng(policy_seed).uniform(-1.0, 1.0, (count * 5, 1)).astype(np.float32)
        for index, episode in episodes.items():  # one generator for the folder's episodes, in the order they started
            assert len(episode["action"]) == 6  # the first observation and 5 steps
            np.testing.assert_array_equal(episode["action"][1:], draws[5 * index:5 * index + 5])
    assert int(collection.counters.train_episodes.numpy()) == 0 and int(collection.counters.env_steps.numpy()) == 0


def test_seed_episodes_count_the_episodes_on_disk(smoke_config, tmp_path):
    """Full folders make no environment and no episode. One more seed episode wanted in a folder is the next
    episode of its stream, its random actions seeded as the folder's episodes on disk say, from the folder's own
    environment (the other one is not made)."""
    config = apply_overrides(smoke_config, SHORT)
    collection, envs = collection_for(config, tmp_path)
    collection.seed_episodes()
    envs.close()
    collection.seed_episodes()
    assert envs.made() == []
    assert collection.train_folder.counts()[0] == 3 and collection.test_folder.counts()[0] == 2

    for overrides, stream, on_disk, policy_seed in (
            (["data.seed_episodes=4"], TRAIN_STREAM, 3, config.env.seed + 3),
            (["data.test_seed_episodes=3"], TEST_STREAM, 2, config.env.seed + TEST_SEED_OFFSET + 2)):
        more, more_envs = collection_for(apply_overrides(config, overrides), tmp_path)
        folder = more.train_folder if stream == TRAIN_STREAM else more.test_folder
        before = set(folder.paths())
        try:
            more.seed_episodes()
            made = more_envs.made()
            assert made == [more_envs.train_envs() if stream == TRAIN_STREAM else more_envs.test_envs()]
        finally:
            more_envs.close()
        [new] = set(folder.paths()) - before
        episode = load_episode(new)
        seed = reset_seeds(config.env.seed, tf.distribute.get_strategy(), stream, on_disk, 1)[0]
        np.testing.assert_array_equal(episode["state"][0], first_observation(config, seed))
        draws = np.random.default_rng(policy_seed).uniform(-1.0, 1.0, (5, 1)).astype(np.float32)
        np.testing.assert_array_equal(episode["action"][1:], draws)
    assert collection.train_folder.counts()[0] == 4 and collection.test_folder.counts()[0] == 3


def test_train_episodes_add_their_env_steps_to_the_counters(smoke_config, tmp_path):
    """A resumed run's counters (7 episodes, 100 env steps): 3 episodes of the train stream from 7 on, acting with
    the given policy in the train phase; the counters grow by 3 and by the written files' steps x action repeat."""
    config = apply_overrides(smoke_config, [*SHORT, "env.action_repeat=3"])
    counters = Counters()
    counters.train_episodes.assign(7)
    counters.env_steps.assign(100)
    policy = ScriptedPolicy()
    collection, envs = collection_for(config, tmp_path, policy, counters)
    try:
        summaries = collection.train_episodes("sac", 3)
    finally:
        envs.close()
    episodes = episodes_in(collection.train_folder)
    assert len(summaries) == len(episodes) == 3
    steps = sum(len(episode["reward"]) - 1 for episode in episodes)  # from the files: T + 1 entries for T steps
    assert steps == 15
    assert int(counters.train_episodes.numpy()) == 10
    assert int(counters.env_steps.numpy()) == 100 + steps * 3
    seeds = reset_seeds(config.env.seed, tf.distribute.get_strategy(), TRAIN_STREAM, 7, 3)
    assert sorted(by_reset_seed(config, episodes, seeds)) == [0, 1, 2]
    assert policy.acted_in == {f"{TRAIN}:sac"} and policy.train_policy == config.policy.train


def test_train_episodes_default_to_one_per_environment_with_policy_train(smoke_config, tmp_path):
    config = apply_overrides(smoke_config, [*SHORT, "env.num_envs=2"])
    policy = ScriptedPolicy()
    policy.train_policy = "random"  # whatever the policy was set to, `policy.train` acts by default
    collection, envs = collection_for(config, tmp_path, policy)
    try:
        assert len(collection.train_episodes()) == 2
    finally:
        envs.close()
    assert policy.acted_in == {f"{TRAIN}:{config.policy.train}"}


def test_a_failed_collection_sets_the_train_policy_back_and_counts_nothing(smoke_config, tmp_path):
    config = apply_overrides(smoke_config, SHORT)
    policy = ScriptedPolicy(fail=True)
    collection, envs = collection_for(config, tmp_path, policy)
    try:
        with pytest.raises(RuntimeError, match="policy failed"):
            collection.train_episodes("sac", 1)
    finally:
        envs.close()
    assert policy.train_policy == config.policy.train
    assert int(collection.counters.train_episodes.numpy()) == 0 and int(collection.counters.env_steps.numpy()) == 0


def test_run_environments_are_made_once_with_the_worker_seeds_and_closed(smoke_config):
    """One training batch and one test environment, each made at its first use and the same until closed; the test
    environment's own generator is seeded env.seed + TEST_SEED_OFFSET, the training one's env.seed."""
    envs = RunEnvironments(smoke_config.env, tf.distribute.get_strategy())
    assert envs.made() == []
    train, test = envs.train_envs(), envs.test_envs()
    try:
        assert envs.train_envs() is train and envs.test_envs() is test and envs.made() == [train, test]
        assert envs.shapes(train=True) == envs.shapes(train=False) == ((3,), 1)  # Pendulum: cos, sin, velocity; torque
        for env, seed in ((test, smoke_config.env.seed + TEST_SEED_OFFSET), (train.env, smoke_config.env.seed)):
            own = make_env(smoke_config.env, seed=seed)
            try:
                np.testing.assert_array_equal(env.reset()[0]["state"], own.reset()[0]["state"])
            finally:
                own.close()
    finally:
        envs.close()
    assert envs.made() == []


def test_train_episodes_set_the_heads_exploration_noise_from_the_runs_env_steps(smoke_config, tmp_path):
    """DrQ-v2's linear schedule (sac.exploration_noise 1.0 to sac.exploration_final 0.1 over 100,000 env steps), by
    hand: at 25,000 env steps 1.0 - 0.25 x 0.9 = 0.775; past 100,000 it stays 0.1. Without a schedule: the constant."""
    schedule = ["sac.exploration_noise=1.0", "sac.exploration_final=0.1", "sac.exploration_steps=100000"]
    for settings, env_steps, expected in ((schedule, 25_000, 0.775), (schedule, 150_000, 0.1),
                                          (["sac.exploration_noise=0.3"], 25_000, 0.3)):
        config = apply_overrides(smoke_config, [*SHORT, *settings])
        counters = Counters()
        counters.env_steps.assign(env_steps)
        policy = ScriptedPolicy()
        collection, envs = collection_for(config, tmp_path / str(env_steps) / str(len(settings)), policy, counters)
        try:
            collection.train_episodes("sac", 1)
        finally:
            envs.close()
        assert policy.sac_exploration == [pytest.approx(expected, abs=1e-12)]
    # a collection outside sac.exploration_share acts without noise, whatever the schedule says
    config = apply_overrides(smoke_config, [*SHORT, *schedule])
    policy = ScriptedPolicy()
    collection, envs = collection_for(config, tmp_path / "clean", policy)
    try:
        (episode,) = collection.train_episodes("sac", 1, explore=False)
    finally:
        envs.close()
    assert policy.sac_exploration == [0.0] and episode["sac_exploration"] == 0.0


def test_reset_seeds_are_the_episode_seeds_of_their_stream_and_index():
    """Episode k of a stream resets from envs.episode_seed(env seed, stream, k), the test streams from the env seed
    plus TEST_SEED_OFFSET (docs/determinism.md); the streams never share a seed."""
    from planet_sac.envs import episode_seed

    strategy = tf.distribute.get_strategy()
    assert reset_seeds(7, strategy, TRAIN_STREAM, 2, 2) == [episode_seed(7, TRAIN_STREAM, 2), episode_seed(7, TRAIN_STREAM, 3)]
    assert reset_seeds(7, strategy, TEST_STREAM, 0, 1) == [episode_seed(7 + TEST_SEED_OFFSET, TEST_STREAM, 0)]
    train = {episode_seed(7, TRAIN_STREAM, index) for index in range(200)}
    other = {episode_seed(7, TEST_STREAM, index) for index in range(200)}  # the same base, another stream
    assert len(train) == len(other) == 200 and not train & other
