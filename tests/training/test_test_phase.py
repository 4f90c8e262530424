"""The test phase: every policy in `policy.compare` is evaluated on the same model and logged by name."""

from __future__ import annotations

import json
import os

import pytest

from planet_sac.config import ConfigError
from planet_sac.config_loading import apply_overrides
from planet_sac.training import collection as collection_module
from planet_sac.training import testing as test_phase_module
from tests.conftest import CONFIGS


@pytest.mark.parametrize("value, message", [("sac", "must be a list"), ("[sac, bogus]", "not allowed"),
                                            ("[sac, sac]", "more than once")])
def test_compare_list_is_validated(smoke_config, value, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(smoke_config, [f"policy.compare={value}"])


def by_hand_test_phase_steps(first: int, every: int, steps: int) -> list[int]:
    """The updates after which a run of `steps` updates has a test phase: `first`, then every `every`."""
    return [step for step in range(1, steps + 1) if step >= first and (step - first) % every == 0]


def test_catch_up_needs_sac_updates(smoke_config):
    with pytest.raises(ConfigError, match="sac.catchup_rounds=2"):
        apply_overrides(smoke_config, ["sac.updates_per_step=0", "sac.catchup_rounds=2"])
    with pytest.raises(ConfigError, match="multi_worker"):
        apply_overrides(smoke_config, ["optim.strategy=multi_worker", "optim.jit_compile=false", "sac.catchup_rounds=2"])


@pytest.mark.parametrize("share, expected", [
    (0.5, ["cem", "sac", "cem", "sac"]),  # every other collection, the first by policy.train
    (1 / 3, ["cem", "cem", "sac", "cem", "cem", "sac"]),  # every third
    (0.0, ["cem", "cem", "cem"]),
])
def test_sac_share_spreads_the_head_collections_evenly(smoke_config, share, expected):
    from planet_sac.training.schedule import collecting_policy

    policy = apply_overrides(smoke_config, [f"policy.sac_share={share}"]).policy
    assert [collecting_policy(policy, index) for index in range(len(expected))] == expected


@pytest.mark.parametrize("share", ["0.29", "0.7", "0.05"])
def test_sac_share_is_exact_over_many_collections(smoke_config, share):
    """The head's collections counted with exact fractions: floor((k + 1) s) > floor(k s) (0.29 x 100 is 28.999... in floats)."""
    from fractions import Fraction

    from planet_sac.training.schedule import collecting_policy

    policy = apply_overrides(smoke_config, [f"policy.sac_share={share}"]).policy
    exact = Fraction(share)
    expected = ["sac" if (k + 1) * exact // 1 > k * exact // 1 else "cem" for k in range(200)]
    assert [collecting_policy(policy, k) for k in range(200)] == expected
    assert expected.count("sac") == int(200 * exact)


def test_pendulum_first_run_lets_the_head_collect_every_other_episode():
    """The fix of the first run (research/pendulum_head): in configs/pendulum.yaml the head collects 7 of the 15
    training episodes (the 2nd, 4th, ...) and catches up with the model before each."""
    from planet_sac.config_loading import load_config
    from planet_sac.training.schedule import collecting_policy

    config = load_config(CONFIGS / "pendulum.yaml")
    collections = config.schedule.train_steps // config.schedule.collect_every
    assert collections == 15
    assert [collecting_policy(config.policy, index) for index in range(collections)] == ["cem", "sac"] * 7 + ["cem"]
    assert config.sac.catchup_rounds > 0 and config.sac.updates_per_step > 0


@pytest.mark.slow
def test_sac_share_lets_the_head_collect_every_other_episode_with_its_exploration(smoke_config, tmp_path, monkeypatch):
    """One run checks the training collections, the test phases' schedule and start states, and the compared policies.

    20 updates with a collection every 5: CEM collects the 1st and 3rd episodes, the SAC head (sampling its actions:
    the train phase) the 2nd and 4th, each after its catch-up rounds; the train-phase policy is CEM again after each.
    The head's collections log the exploration noise it acted with (`train/sac_exploration`), CEM's do not; with
    sac.exploration_share=0.67 the 2nd collection has it, the 4th not (floor(4 x 0.67) = floor(3 x 0.67)).

    Test phases at schedule.first_test_phase=5, then every train_phase_steps=10: at 5 and 15, none at the run's end
    (a first test phase later than train_phase_steps: tests/test_config.py's test_test_phases_due_by_hand; a
    SAC-guided CEM collection's catch-up: the exact-resume test, whose runs collect with it). The
    head catches up before each test phase too (recorded in the test phase's record), also when CEM collects. Each
    compared policy (policy.test=cem, policy.compare=[random, sac, cem]) acts and is logged by name after the test
    policy, with the compiled test-phase branch pointing at it, and the branch is restored afterwards; only the test
    policy's episodes are saved. Test phases start from fresh states (DrQ-v2 and CURL evaluate from fresh ones), so a
    test phase does not replay an earlier phase's, and each compared policy plays start states of its own. Training
    episodes are collected in the train phase (PlaNet's exploration), test episodes in the test phase."""
    from planet_sac.config import POLICIES
    from planet_sac.training.trainer import Trainer

    config = apply_overrides(smoke_config, ["schedule.train_steps=20", "schedule.train_phase_steps=10",
                                            "schedule.first_test_phase=5", "schedule.collect_every=5",
                                            "schedule.log_every=100", "schedule.test_episodes=2",
                                            "policy.test=cem", "policy.compare=[random, sac, cem]",
                                            "policy.sac_share=0.5", "sac.updates_per_step=1", "sac.catchup_rounds=2",
                                            "sac.exploration_noise=1.0", "sac.exploration_final=0.1",
                                            "sac.exploration_steps=1000", "sac.exploration_share=0.67"])
    expected_tests = by_hand_test_phase_steps(first=5, every=10, steps=20)
    assert expected_tests == [5, 15]  # the first earlier: the benchmark's 10k, 20k, ... env steps after 5k of seed episodes
    trainer = Trainer(config, str(tmp_path / "run"), progress=False)
    acting = []  # the policy the compiled train-phase branch points at while each training actor runs
    testing = []  # the policy the compiled test-phase branch points at while each test-phase actor runs
    tested = []  # (that policy, the reset seeds) of each actor the test phase makes, in order
    agent_actors = []  # (phase, outdir) of every actor that acts with the agent's policy

    actor = collection_module.Actor  # the product's, also the test phase's

    def spy(made_by_the_test_phase: bool) -> type:
        class SpyActor(actor):
            def run(self, num_episodes, progress=False, seeds=None):
                branches = trainer.agent.policy.phase_policy.numpy()
                if self.phase == "train" and self.policy is trainer.agent.policy:  # not the seed episodes' RandomPolicy
                    acting.append(POLICIES[int(branches[0])])
                if self.phase == "test":
                    testing.append(POLICIES[int(branches[1])])
                if self.policy is trainer.agent.policy:
                    agent_actors.append((self.phase, self.outdir))
                if made_by_the_test_phase:
                    tested.append((POLICIES[int(branches[1])], list(seeds)))
                return super().run(num_episodes, progress, seeds)

        return SpyActor

    monkeypatch.setattr(collection_module, "Actor", spy(False))  # seed and training episodes
    monkeypatch.setattr(test_phase_module, "Actor", spy(True))  # test and compared episodes (none is in the train phase)
    # what this run can act by, compiled into its policy: cem (train, test), random and sac (compared), sac (the share)
    assert trainer.agent.policy.policies == ("random", "cem", "sac")
    try:
        trainer.run()
        assert int(trainer.learner.optimizer.iterations.numpy()) == 20  # the world model: updates only
        # 20 updates x 1 SAC update + (2 head collections + 2 test phases) x 2 catch-up rounds x 1 update, by hand
        assert int(trainer.agent.sac.critic_optimizer.iterations.numpy()) == 20 + 4 * 2
        assert int(trainer.agent.policy.phase_policy.numpy()[0]) == POLICIES.index("cem")
        assert int(trainer.agent.policy.phase_policy.numpy()[1]) == POLICIES.index("cem")  # restored afterwards
    finally:
        trainer.close()
    assert acting == ["cem", "sac", "cem", "sac"]
    # The test policy's (saved) episodes first, then the compared ones in order.
    assert testing[-3:] == ["cem", "random", "sac"]
    assert [policy for policy, _ in tested] == ["cem", "random", "sac"] * len(expected_tests)
    # Training episodes are collected in the train phase (PlaNet's exploration), test episodes in the test phase.
    train_dir = str(tmp_path / "run" / "train_episodes")
    assert ("train", train_dir) in agent_actors
    assert all(phase == ("train" if outdir == train_dir else "test") for phase, outdir in agent_actors), agent_actors
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    collected = [record for record in records if "train/return" in record]
    assert [record["step"] for record in collected] == [5, 10, 15, 20]  # the collections keep their own schedule
    assert [("train/return/sac" in record, "catchup/sac/q" in record) for record in collected] == [
        (False, False), (True, True), (False, False), (True, True)]
    assert all(("train/return/cem" in record) != ("train/return/sac" in record) for record in collected)
    # the head's collections log the noise it acted with: DrQ-v2's linear(1.0, 0.1, 1000) at the env steps before
    # them on the 2nd collection, none on the 4th (outside the exploration share)
    action_repeat = config.env.action_repeat
    for index, record in enumerate(collected):
        if "train/return/sac" in record:
            before = record["env_steps"] - record["train/episode_length"] * action_repeat
            expected = 1.0 - 0.9 * min(1.0, before / 1000) if index == 1 else 0.0
            assert record["train/sac_exploration"] == pytest.approx(expected, abs=1e-6)
        else:
            assert "train/sac_exploration" not in record  # CEM's own noise is cem.exploration_noise
    assert collected[1]["train/sac_exploration"] > 0.1
    tests = [record for record in records if record["phase"] == "test"]
    assert [record["step"] for record in tests] == expected_tests
    assert all("catchup/sac/q" in record and "test/return" in record for record in tests)
    for test in tests:
        assert {"test/return/cem", "test/return/random", "test/return/sac"} <= test.keys()
        assert test["test/return"] == test["test/return/cem"]
    # per phase: cem, then random and sac, each on schedule.test_episodes start states no other actor plays
    assert [len(seeds) for _, seeds in tested] == [2] * 3 * len(expected_tests)
    assert len({seed for _, seeds in tested for seed in seeds}) == 2 * 3 * len(expected_tests)
    assert len(os.listdir(tmp_path / "run" / "train_episodes")) == 2 + 4  # smoke's 2 seed episodes + 4 collected
    # Only the test policy's episodes are saved (1 seed episode + 2 test phases x 2 test episodes).
    assert len(os.listdir(tmp_path / "run" / "test_episodes")) == 1 + 2 * 2


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_sac_share_is_a_share(smoke_config, value):
    with pytest.raises(ConfigError, match=rf"policy.sac_share={value}: must be in \[0.0, 1.0\]"):
        apply_overrides(smoke_config, [f"policy.sac_share={value}"])


def test_parallel_test_episodes_are_for_image_tasks(smoke_config):
    with pytest.raises(ConfigError, match="env.test_envs=2: parallel test episodes are for image tasks"):
        apply_overrides(smoke_config, ["env.test_envs=2"])
    with pytest.raises(ConfigError, match="env.test_envs"):
        apply_overrides(smoke_config, ["env.test_envs=0"])


@pytest.mark.slow
@pytest.mark.e2e
def test_a_test_phase_plays_its_episodes_in_parallel_environments(smoke_config, tmp_path, monkeypatch):
    """env.test_envs=2 on dm_control cartpole from pixels: the phase's 3 episodes are played by two environment
    processes at once, each from one of the reset seeds a single environment would use (every saved episode is
    replayed, action by action, in a fresh environment reset with its seed: the same frames and rewards), the record's
    return is their mean, and the eval video is a phase episode's frames (the last to finish)."""
    import numpy as np

    from planet_sac.envs import ParallelEnvs, make_env
    from planet_sac.episodes.folder import list_episodes
    from planet_sac.episodes.storage import load_episode
    from planet_sac.training.run_state import TEST_STREAM
    from planet_sac.training.trainer import Trainer

    config = apply_overrides(smoke_config, [
        "env.task=dmc:cartpole-swingup", "env.obs=image", "env.action_repeat=8", "env.time_limit=6", "env.test_envs=2",
        "model.cnn_depth=4", "model.decoder_depth=4", "data.chunk_length=4", "data.seed_episodes=1",
        "data.test_seed_episodes=1", "policy.train=sac", "policy.test=sac", "policy.compare=[]",
        "schedule.train_steps=2", "schedule.train_phase_steps=2", "schedule.collect_every=2",
        "schedule.test_episodes=3"])
    trainer = Trainer(config, str(tmp_path / "run"), progress=False)
    videos = []
    monkeypatch.setattr(trainer.test_phases, "video", lambda step, name, frames: videos.append((name, frames)))
    try:
        trainer.run()
        test_envs = trainer.envs.test_envs()
        assert isinstance(test_envs, ParallelEnvs) and test_envs.num_envs == 2
        seeds = trainer.reset_seeds(TEST_STREAM, 0, 6)  # more than the 1 + 3 episodes of the test stream
    finally:
        trainer.close()
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    (test,) = [record for record in records if record.get("phase") == "test"]
    episodes = [load_episode(path) for path in list_episodes(str(tmp_path / "run" / "test_episodes"))]
    env = make_env(config.env)
    try:  # the index in the test stream of each saved episode: the seed whose replay gives it
        index = [[k for k, seed in enumerate(seeds) if replays(env, seed, episode)] for episode in episodes]
    finally:
        env.close()
    assert sorted(index) == [[0], [1], [2], [3]]  # the seed episode, then the phase's three, each seed once
    phase = [episode for episode, (k,) in zip(episodes, index) if k > 0]
    returns = [episode["reward"].sum() for episode in phase]
    assert test["test/return"] == pytest.approx(np.mean(returns), rel=1e-6) == test["test/return/sac"]  # its name too
    assert np.std(returns) > 0 and test["test/return_std"] == pytest.approx(np.std(returns), rel=1e-6)  # not the variance
    # the critic's diagnostic follows the phase's first episode (seed index 1): its real discounted returns G_t,
    # t = 0 .. T-1, averaged over the first half, summed here term by term
    (first,) = [episode for episode, (k,) in zip(episodes, index) if k == 1]
    reward, discount, gamma = first["reward"][1:], first["discount"][1:], config.sac.discount
    real = [sum(gamma ** j * np.prod(discount[t:t + j]) * reward[t + j] for j in range(len(reward) - t))
            for t in range(len(reward))]
    assert test["test/sac/return_episode"] == pytest.approx(np.mean(real[:max(1, len(real) // 2)]), rel=1e-5)
    # the held-out model loss of an image task, with the reconstruction errors on moving pixels and on the rest
    assert all(np.isfinite(test[f"test/{key}"]) for key in ("loss/image", "model/foreground_error", "model/background_error"))
    (frames,) = [frames for name, frames in videos if name == "eval/video"]
    assert any(np.array_equal(frames, episode["image"]) for episode in phase)


def replays(env, seed: int, episode: dict) -> bool:
    """Whether a fresh environment reset with `seed` and given the episode's actions gives its frames and rewards."""
    import numpy as np

    obs, _ = env.reset(seed=int(seed))
    if not np.array_equal(obs["image"], episode["image"][0]):
        return False
    for t in range(1, len(episode["action"])):
        obs, reward, *_ = env.step(episode["action"][t])
        if not (np.array_equal(obs["image"], episode["image"][t]) and np.isclose(reward, episode["reward"][t])):
            return False
    return True


def test_the_held_out_loss_is_one_batch_of_test_chunks_and_waits_for_them(smoke_config, tmp_path, monkeypatch, caplog):
    """PlaNet's held-out loss: one batch of `data.batch_size` chunks of `data.chunk_length` steps, each a stretch of a
    test episode, through the learner's `evaluate`. While no test episode is as long as a chunk there is no loss (one
    log line), and a later test phase finds the episodes that came since."""
    import logging
    import shutil

    import numpy as np

    from planet_sac.episodes.folder import list_episodes
    from planet_sac.episodes.storage import load_episode
    from planet_sac.training.trainer import Trainer

    config = apply_overrides(smoke_config, ["data.test_seed_episodes=0"])
    trainer = Trainer(config, str(tmp_path / "run"), progress=False)
    batches = []
    evaluate = trainer.learner.evaluate
    monkeypatch.setattr(trainer.learner, "evaluate", lambda batch: batches.append(batch) or evaluate(batch))
    try:
        trainer.collect_seed_episodes()  # 2 training episodes, no test episode
        with caplog.at_level(logging.INFO, logger="planet_sac"):
            assert trainer.test_phases.held_out_loss() == {}
        assert "no held-out model loss this test phase" in caplog.text and not batches
        source = list_episodes(str(tmp_path / "run" / "train_episodes"))[0]
        os.makedirs(tmp_path / "run" / "test_episodes", exist_ok=True)
        moved = shutil.move(source, tmp_path / "run" / "test_episodes")  # an episode arrives in test_episodes/ (only)
        loss = trainer.test_phases.held_out_loss()
    finally:
        trainer.close()
    assert np.isfinite(loss["test/loss/total"]) and np.isfinite(loss["test/loss/reward"])
    (batch,) = batches
    episode = load_episode(str(moved))
    obs = np.asarray(batch[config.env.obs])
    assert obs.shape[:2] == (config.data.batch_size, config.data.chunk_length)
    stretches = [episode[config.env.obs][t:t + config.data.chunk_length]
                 for t in range(len(episode["action"]) - config.data.chunk_length + 1)]
    assert all(any(np.array_equal(chunk, stretch) for stretch in stretches) for chunk in obs)
