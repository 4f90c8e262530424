"""The research scripts' own tests: outside `make test` (run them with `pytest research/tests`)."""

from __future__ import annotations

import json
import subprocess
import sys

import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on, see planet_sac/startup.py)

# isort: split
import numpy as np
import pytest
import tensorflow as tf

from tests.test_planet_fidelity import numpy_rssm, tiny_state_model


def _load_research_module(name: str):
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location(name, ROOT / "research" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sac_head_lab_trains_a_new_head_on_a_frozen_model(tmp_path):
    """bench/sac_head.py on a smoke run: the update count, the lab's own yardsticks, no drift against itself."""
    from planet_sac.cli import main
    from planet_sac.episodes.folder import list_episodes
    from planet_sac.episodes.storage import load_episode
    from tests.conftest import CONFIGS, ROOT

    logdir = str(tmp_path / "run")
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", logdir, "--train-steps", "5", "--quiet"]) == 0
    out = tmp_path / "head.json"
    run = subprocess.run([sys.executable, str(ROOT / "research" / "sac_head.py"), "--logdir", logdir, "--rounds", "4",
                          "--eval-every", "2", "--episodes", "1", "--set", "sac.updates_per_step=3", "sac.n_step=2",
                          "--drift", logdir, "--guided", "cem.value_weight=0.5,cem.actor_mean=true",
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    agent_steps = sum(len(load_episode(path)["action"]) - 1 for path in list_episodes(f"{logdir}/train_episodes"))
    assert result["sac_updates"] == 12 and abs(result["sac_updates_per_agent_step"] - 12 / agent_steps) < 1e-12
    assert [point["round"] for point in result["curve"]] == [2, 4]
    assert all(point["sac/update_finite"] == 1.0 for point in result["curve"])
    assert set(result["burn_in_gap"]) == {"0", "1", "2", "3", "5"}  # offsets inside a 10-step chunk
    assert result["burn_in_gap"]["0"] > 0
    assert result["drift"]["feature_relative_l2"] == 0.0 and result["drift"]["q_relative_change"] == 0.0
    assert set(result["final"]) == {"sac", "sac_guided_cem", "sac_guided_cem[cem.value_weight=0.5,cem.actor_mean=true]"}


def test_collect_cost_times_each_collecting_policy_on_a_checkpoint(tmp_path):
    """bench/collect_cost.py on a smoke run: per-episode cost = collect_every updates + one collected episode."""
    from planet_sac.cli import main
    from tests.conftest import CONFIGS, ROOT

    logdir = str(tmp_path / "run")
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", logdir, "--train-steps", "10",
                 "--quiet"]) == 0
    out, png = tmp_path / "cost.json", tmp_path / "hours.png"
    run = subprocess.run([sys.executable, str(ROOT / "research" / "collect_cost.py"), "--logdir", logdir, "--episodes", "1",
                          "--updates", "2", "--json", str(out), "--runs", logdir, "--out", str(png)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["collect_every"] == 10 and set(result["episode_seconds"]) == {"cem", "sac"}
    assert result["catchup_round_seconds"] > 0
    for name, seconds in result["episode_seconds"].items():
        assert len(result["collect_seconds"][name]) == 1
        assert abs(seconds - (10 * result["update_seconds"] + result["collect_seconds"][name][0])) < 1e-9
    assert png.stat().st_size > 10_000


def test_training_hours_count_collected_episodes_past_the_seed_episodes(tmp_path):
    collect_cost = _load_research_module("collect_cost")
    (tmp_path / "config.yaml").write_text("env:\n  task: gym:Pendulum-v1\n  obs: state\n"
                                          "data:\n  seed_episodes: 5\npolicy:\n  train: sac\n")
    records = [{"step": 10, "phase": "train", "episodes": 6, "train/return": 1.0},
               {"step": 20, "phase": "test", "episodes": 7, "test/return": 3.0, "test/return/sac": 3.0,
                "test/return/cem": 4.0},
               {"step": 40, "phase": "test", "episodes": 17, "test/return/sac": 9.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records) + '{"step": 5')
    collector, curves = collect_cost.training_hours(str(tmp_path), {"cem": 100.0, "sac": 36.0})
    assert collector == "sac"
    # (7 - 5) and (17 - 5) episodes at 36 s each, in hours.
    assert curves["test/return/sac"][0].tolist() == [2 * 36 / 3600, 12 * 36 / 3600]
    assert curves["test/return/sac"][1].tolist() == [3.0, 9.0]
    assert curves["test/return/cem"][0].tolist() == [2 * 36 / 3600] and curves["test/return/cem"][1].tolist() == [4.0]


def test_training_hours_add_catch_up_rounds_only_to_runs_collecting_with_the_head(tmp_path):
    collect_cost = _load_research_module("collect_cost")
    records = [{"step": 20, "phase": "test", "episodes": 9, "test/return/cem": 5.0}]
    for name in ("sac", "cem"):
        run = tmp_path / name
        run.mkdir()
        (run / "config.yaml").write_text("env:\n  task: gym:Pendulum-v1\n  obs: state\ndata:\n  seed_episodes: 5\n"
                                         f"sac:\n  catchup_rounds: 3\npolicy:\n  train: {name}\n")
        (run / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    costs = {"cem": 100.0, "sac": 36.0}
    # SAC collects: (9 - 5) episodes x (36 s + 3 catch-up rounds x 2 s); CEM collects: no catch-up.
    assert collect_cost.training_hours(str(tmp_path / "sac"), costs, 2.0)[1]["test/return/cem"][0].tolist() == [4 * 42 / 3600]
    assert collect_cost.training_hours(str(tmp_path / "cem"), costs, 2.0)[1]["test/return/cem"][0].tolist() == [4 * 100 / 3600]


def test_sac_head_lab_saves_the_trained_head_over_the_frozen_model(tmp_path):
    """--save-run: the saved run holds the run's world model unchanged and the head as trained (not as loaded);
    --head-only: the final evaluation is the head's alone."""
    import tensorflow as tf

    from planet_sac.checkpoints import resolve
    from planet_sac.cli import main
    from tests.conftest import CONFIGS, ROOT

    logdir, saved = str(tmp_path / "run"), str(tmp_path / "saved")
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", logdir, "--train-steps", "5", "--quiet"]) == 0
    run = subprocess.run([sys.executable, str(ROOT / "research" / "sac_head.py"), "--logdir", logdir, "--keep-head",
                          "--rounds", "3", "--episodes", "1", "--save-run", saved, "--head-only",
                          "--json", str(tmp_path / "head.json")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert set(json.loads((tmp_path / "head.json").read_text())["final"]) == {"sac"}
    original, trained = tf.train.load_checkpoint(resolve(logdir)), tf.train.load_checkpoint(resolve(saved))
    names = [name for name in trained.get_variable_to_shape_map() if name.startswith("variables/")]
    model = [name for name in names if name.startswith("variables/world_model/")]
    head = [name for name in names if name.startswith("variables/sac/") and "critic1" in name]
    assert model and head
    for name in model:
        np.testing.assert_array_equal(trained.get_tensor(name), original.get_tensor(name))
    assert any(not np.array_equal(trained.get_tensor(name), original.get_tensor(name)) for name in head)
    assert main(["evaluate", "--logdir", saved, "--policy", "sac", "--episodes", "1", "--quiet"]) == 0


def _tiny_agent(guide_fraction: float, actor_std: float | None):
    from planet_sac.config import CEMConfig, ModelConfig, SACConfig
    from planet_sac.control.sac import SAC
    from planet_sac.models.world_model import WorldModel

    model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8), "state", (3,), 2)
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 2)
    config = CEMConfig(horizon=3, candidates=40, iterations=2, top_k=8, guide_fraction=guide_fraction, actor_std=actor_std)
    return model, sac, config


def test_guided_anatomy_of_a_search_made_only_of_the_actors_mode():
    """All candidates the actor's mode (actor_std 0): every elite is the actor's, and the plan is a_pi exactly."""
    import tensorflow as tf

    anatomy = _load_research_module("guided_anatomy").anatomy
    model, sac, config = _tiny_agent(guide_fraction=1.0, actor_std=0.0)
    state = {key: tf.random.normal(value.shape, seed=1) for key, value in model.rssm.initial(1).items()}
    result = anatomy(model, sac, config, state, tf.random.Generator.from_seed(0), guided=True)
    assert result["actor_elite_share"] == 1.0
    assert "best_sampled_minus_actor" not in result  # nothing was sampled
    assert result["action_distance"] < 1e-6 and abs(result["q_plan_minus_q_pi"]) < 1e-5


def test_guided_anatomy_compares_the_plan_with_the_actor_independently():
    """A mixed population: the share counts the elites past the sampled block; the distance is |a_plan - a_pi| by hand."""
    import tensorflow as tf

    from planet_sac.control import cem

    anatomy = _load_research_module("guided_anatomy").anatomy
    model, sac, config = _tiny_agent(guide_fraction=0.5, actor_std=None)
    state = {key: tf.random.normal(value.shape, seed=2) for key, value in model.rssm.initial(1).items()}
    result = anatomy(model, sac, config, state, tf.random.Generator.from_seed(3), guided=True)
    action, _ = cem.search(model, state, config, tf.random.Generator.from_seed(3), sac, 0.5)  # the same draws
    features = model.rssm.features(state)
    a_pi = sac.act(features, tf.zeros([1, 2]), True).numpy()
    assert abs(result["action_distance"] - np.mean(np.abs(action.numpy() - a_pi))) < 1e-6
    assert 0.0 <= result["actor_elite_share"] <= 1.0 and "best_sampled_minus_actor" in result
    plain = anatomy(model, sac, config, state, tf.random.Generator.from_seed(3), guided=False)
    assert "actor_elite_share" not in plain and "best_sampled_minus_actor" not in plain


def test_episode_strips_sums_rewards_per_segment_and_lays_frames_side_by_side():
    strips = _load_research_module("episode_strips")
    assert strips.segment_returns(np.arange(7, dtype=np.float32), 3) == [3.0, 12.0, 6.0]  # 0+1+2, 3+4+5, 6
    frames = np.stack([np.full((2, 3, 3), t, np.uint8) for t in range(5)])
    strip = strips.film_strip(frames, 2)  # frames 0, 2, 4
    assert strip.shape == (2, 9, 3) and list(strip[0, ::3, 0]) == [0, 2, 4]


def test_episode_strips_reads_saved_episodes_without_a_model(tmp_path):
    """--saved: returns and per-segment sums of the files as written, strips of the worst and the best episode."""
    from tests.conftest import ROOT

    for name, reward in (("a", [0, 1, 1, 1]), ("b", [0, 5, 0, 2])):
        image = np.full((4, 2, 2, 3), ord(name), np.uint8)
        np.savez(tmp_path / f"{name}.npz", reward=np.array(reward, np.float32), image=image)
    out = tmp_path / "strips"
    subprocess.run([sys.executable, str(ROOT / "research" / "episode_strips.py"), "--saved", str(tmp_path / "*.npz"),
                    "--segment", "2", "--frame-every", "2", "--out", str(out)], check=True, capture_output=True)
    result = json.loads((tmp_path / "strips.json").read_text())
    assert result["returns"] == [3.0, 7.0] and result["segment_returns"] == [[1.0, 2.0], [5.0, 2.0]]
    from PIL import Image

    worst, best = (np.asarray(Image.open(tmp_path / f"strips_{name}.png")) for name in ("worst", "best"))
    assert worst.shape == (2, 4, 3) and (worst == ord("a")).all() and (best == ord("b")).all()


def test_first_reward_tells_start_states_from_reached_rewards(tmp_path):
    """Episodes written as the layout has them (reward[0] = 0 before any action), sorted and placed by hand."""
    first_reward = _load_research_module("first_reward")
    rewards = {"a": [0, 0, 0, 0, 0],        # 4 actions, no reward
               "b": [0, 0, 1, 2, 0],        # first reward after action 2: from the start (start_steps=2); return 3
               "c": [0, 0, 0, 0.5, 2],      # first reward after action 3: reached (start_steps=2); return 2.5
               "d": [0, 0, -1, 0, 0, 0, 4]}  # a negative reward is not a reward reached; after action 6
    paths = []
    for name, reward in rewards.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, reward=np.array(reward, np.float32))
        paths.append(str(path))
    episodes = first_reward.first_rewards(paths)
    assert episodes == [(4, 0.0, None), (4, 3.0, 2), (4, 2.5, 3), (6, 3.0, 6)]
    assert [first_reward.classify(first, 2) for _, _, first in episodes] == ["none", "start", "reached", "reached"]
    # action repeat 10, windows of 40 env steps: episodes end at 40, 80, 120, 180 (an end on a window's edge
    # belongs to the window it closes); the first is a seed episode
    rows = first_reward.training_table(episodes, action_repeat=10, window=40, start_steps=2, skip=1)
    assert [(row["from"], row["episodes"], row["start"], row["reached"]) for row in rows] == [
        (40, 1, [3.0], []), (80, 1, [], [2.5]), (160, 1, [], [3.0])]
    assert first_reward.counts(episodes, 2) == "4 episodes, from the start 1 (3), by reaching 2 (2, 3)"


def numpy_filter(model, embed: np.ndarray, action: np.ndarray) -> np.ndarray:
    """Posterior concat(deter, mean) filtered from a zero state, without noise, in numpy from the RSSM's weights."""
    rssm = model.rssm
    img_step = numpy_rssm(model)
    (hk, hb), (ok, ob) = ((layer.kernel.numpy(), layer.bias.numpy()) for layer in (rssm.posterior_hidden, rssm.posterior_out))
    assert model.config.activation == "relu"
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    state = {"stoch": np.zeros((1, rssm.stoch_size)), "deter": np.zeros((1, rssm.deter_size))}
    features = []
    for t in range(len(embed)):
        prior = img_step(state, action[t][None], np.zeros((1, rssm.stoch_size)))
        mean = np.split(relu(np.concatenate([prior["deter"], embed[t][None]], -1) @ hk + hb) @ ok + ob, 2, -1)[0]
        state = {"stoch": mean, "deter": prior["deter"]}
        features.append(np.concatenate([prior["deter"], mean], -1)[0])
    return np.array(features)


def test_chunk_start_gap_against_a_numpy_filter():
    model = tiny_state_model()
    rng = np.random.default_rng(1)
    steps = 12
    embed = rng.normal(size=(steps, model.rssm.posterior_hidden.kernel.shape[0] - model.rssm.deter_size))
    action = rng.uniform(-1, 1, (steps, 1))
    full = numpy_filter(model, embed, action)
    starts, offsets = [2, 5], [0, 1, 4]
    expected = {k: np.mean([np.linalg.norm(numpy_filter(model, embed[s:], action[s:])[k] - full[s + k])
                            / np.linalg.norm(full[s + k]) for s in starts]) for k in offsets}
    chunk_start_gap = _load_research_module("sac_head").chunk_start_gap
    got = chunk_start_gap(model, tf.constant(embed, tf.float32), tf.constant(action, tf.float32), starts, offsets)
    assert set(got) == set(offsets)
    for k in offsets:
        assert abs(got[k] - expected[k]) < 1e-4 * max(1.0, expected[k])
    assert got[0] > got[4] > 0  # the gap closes as the chunk's filter sees more observations
    # A chunk that starts at the episode's start is filtered exactly as the episode is.
    assert chunk_start_gap(model, tf.constant(embed, tf.float32), tf.constant(action, tf.float32), [0], offsets) == \
        {k: 0.0 for k in offsets}


def test_model_error_by_policy_windows_pair_the_prediction_with_the_rewards_that_followed():
    """reward_gaps: one window per `every` steps that has `horizon` steps after it; the real sum is the rewards
    r[t+1..t+H] (reward[0] is the reset's); the prediction is the reward head over the prior rolled from z_t."""
    module = _load_research_module("model_error_by_policy")
    model = tiny_state_model()
    rng = np.random.default_rng(0)
    for layer in model.reward.hidden:  # zero biases and tiny features leave the ReLUs off: open them
        layer.bias.assign(np.ones(layer.bias.shape, np.float32))
    length = 23  # 22 steps after the reset
    episode = {"state": rng.normal(size=(length, 3)).astype(np.float32),
               "action": rng.uniform(-1, 1, (length, 1)).astype(np.float32),
               "reward": rng.normal(size=length).astype(np.float32), "discount": np.ones(length, np.float32)}
    predicted, real = module.reward_gaps(model, episode, horizon=4, every=5)
    starts = [0, 5, 10, 15]  # t + 4 < 22 for each
    assert len(predicted) == len(real) == len(starts)
    np.testing.assert_allclose(real, [episode["reward"][t + 1:t + 5].sum() for t in starts], rtol=1e-6)
    # Other actions after t change the prediction (it uses the actions taken), the rewards' alignment does not.
    shuffled = dict(episode, action=episode["action"][::-1].copy())
    assert module.reward_gaps(model, shuffled, 4, 5)[0] != predicted


def test_cup_swing_finds_ball_and_cup_by_colour():
    """Frames drawn by hand: a blue background, a tan cup (rows 20-29), an orange ball at chosen rows."""
    cup_swing = _load_research_module("cup_swing")
    frames = np.zeros((4, 64, 64, 3), np.uint8)
    frames[...] = (40, 60, 90)                      # background: blue, dark
    frames[:, 20:30, 30:34] = (220, 170, 110)       # cup: green / red 0.77
    frames[0, 10:13, 40:43] = (240, 130, 60)        # ball over the rim: centre row 11
    frames[1, 24:26, 31:33] = (240, 130, 60)        # ball in the cup: centre row 24.5 (covers cup pixels)
    frames[2, 40:42, 40:42] = (240, 130, 60)        # ball hanging below: centre row 40.5
    # frame 3: no ball in sight
    ball, top, bottom = cup_swing.ball_and_cup(frames)
    np.testing.assert_allclose(ball[:3], [11.0, 24.5, 40.5])
    assert np.isnan(ball[3])
    np.testing.assert_array_equal(top, [20, 20, 20, 20])
    np.testing.assert_array_equal(bottom, [29, 29, 29, 29])
    share, highest = cup_swing.swing(frames)
    assert share == 0.25 and highest == 29 - 11.0
    share, highest = cup_swing.swing(frames, skip=1)  # the over-the-rim frame left out
    assert share == 0.0 and highest == 29 - 24.5


def test_moving_mask_compares_a_strided_background_with_the_full_median(tmp_path):
    """One pixel of a 10-frame 2x2 episode is lit in frames 0, 2 and 4: the median of all 10 frames is dark, so it
    moves in those 3 frames; the median of frames 0, 2, 4, 6, 8 is lit, so it moves in the other 7 instead."""
    moving_mask = _load_research_module("moving_mask")
    images = np.full((10, 2, 2, 3), 50, np.uint8)
    images[[0, 2, 4], 1, 0] = (50, 101, 50)  # off by 0.2 in one channel: moving by its largest channel
    full = moving_mask.moving(images)
    assert sorted(zip(*np.nonzero(full))) == [(0, 1, 0), (2, 1, 0), (4, 1, 0)]
    strided = moving_mask.moving(images, stride=2)
    assert sorted(t for t, _, _ in zip(*np.nonzero(strided))) == [1, 3, 5, 6, 7, 8, 9]
    np.savez(tmp_path / "episode.npz", image=images, reward=np.zeros(10, np.float32))
    result = moving_mask.compare(str(tmp_path), chunks=3, length=10, strides=[1, 2])
    assert result["moving_share"] == 3 / 40
    assert result["stride1"] == {"recall": 1.0, "precision": 1.0, "differ_share": 0.0}
    assert result["stride2"] == {"recall": 0.0, "precision": 0.0, "differ_share": 10 / 40}


def test_static_foreground_finds_a_target_placed_anew_in_each_episode(tmp_path):
    """Episodes with a red block that stands still (elsewhere in each) and a white pixel that moves: the chunk's mask
    finds the pixel only, the batch's the blocks (and the pixel), counted by hand."""
    static = _load_research_module("static_foreground")
    for index, corner in enumerate([(2, 2), (8, 8), (2, 10)]):  # one block per episode, never twice at one place
        images = np.full((6, 16, 16, 3), 100, np.uint8)
        images[:, corner[0]:corner[0] + 2, corner[1]:corner[1] + 2] = (220, 60, 60)
        for t in range(6):
            images[t, 14, t] = 250
        np.savez(tmp_path / f"episode{index}.npz", image=images)
    result = static.measure(str(tmp_path), batches=2, batch_size=3, length=6)
    pixels = 3 * 6 * 16 * 16  # per batch: 3 whole episodes (length 6 of 6)
    # chunk: the moving pixel, 6 per episode; batch: also the 4 block pixels in each of the 6 frames of every episode
    # (the block stands at the common background's place in 1 chunk of 3), and the moving pixel off it too
    assert result["foreground_share"]["chunk"] == round(3 * 6 / pixels, 4)
    assert result["foreground_share"]["either"] == round(3 * 6 * (1 + 4) / pixels, 4)
    assert result["target_recall"] == {"chunk": 0.0, "batch": 1.0, "either": 1.0}
    # the block is 120 levels (0.47) off the grey in its red channel: off the batch's background at 0.4, not at 0.5
    assert static.measure(str(tmp_path), 2, 3, 6, batch_threshold=0.4)["target_recall"]["batch"] == 1.0
    assert static.measure(str(tmp_path), 2, 3, 6, batch_threshold=0.5)["target_recall"]["batch"] == 0.0


def test_reconstructions_probe_locates_reachers_red_target_by_colour():
    reconstructions = _load_research_module("reconstructions")
    images = np.full((2, 8, 8, 3), (30, 70, 110), np.uint8)
    images[0, 1:3, 4:6] = (220, 60, 60)  # the target
    images[:, 6, 0:4] = (230, 200, 60)  # the yellow arm: a body, not the target
    centroid, seen = reconstructions.body_centroids(images, "target")
    np.testing.assert_allclose(centroid[0], [1.5, 4.5])
    assert seen.tolist() == [True, False]
    bodies, _ = reconstructions.body_centroids(images, "bodies")
    np.testing.assert_allclose(bodies[1], [6.0, 1.5])


def test_reacher_reach_finds_the_target_and_the_arms_farthest_point_by_colour():
    """A drawn frame: the target up-left of the centre, a yellow arm from the centre to the right (its tip 10 px
    away), a pink highlight on the target that must not count as arm; directions and distances by hand."""
    reach = _load_research_module("reacher_reach")
    images = np.full((60, 64, 64, 3), (30, 70, 110), np.uint8)
    images[:, 20:24, 12:16] = (220, 60, 60)  # the target
    images[:, 21, 13] = (255, 170, 170)  # its highlight
    images[:, 32, 32:42] = (255, 220, 130)  # the arm, pointing right: farthest pixel (32, 41)
    images[0, 32, 32:54] = (255, 220, 130)  # stretched out in the first frame: (32, 53)
    rewards = np.zeros(60)
    rewards[-3:] = 1.0
    found = reach.episode_reach(images, rewards)
    dy, dx = 32 - (16 * 21.5 - 21) / 15, (16 * 13.5 - 13) / 15 - 32  # the block's 15 red pixels (not the highlight)
    assert found["target_direction"] == round(float(np.degrees(np.arctan2(dy, dx))), 1)  # about 150 degrees
    assert found["target_distance"] == round(float(np.hypot(dy, dx)), 2)
    assert found["tip_direction"] == 0.0 and found["reach"] == 9.0 and found["start_reach"] == 21.0
    assert found["pointing_off"] == round(-found["target_direction"], 1) and found["return"] == 3.0
    rows = reach.summarise([found, {**found, "target_distance": 5.0, "pointing_off": 4.0, "return": 300.0},
                            {**found, "target_distance": 6.0, "pointing_off": -30.0, "return": 50.0}], [10.0, 14.0])
    assert [(row["target_distance"], row["episodes"], row["pointing"], row["scored_over_100"], row["mean_return"])
            for row in rows] == [("0-10 px", 2, 1, 1, 175.0), ("14-inf px", 1, 0, 0, 3.0)]
    assert reach.episode_reach(np.full((3, 64, 64, 3), 100, np.uint8), np.zeros(3)) is None  # no target shown


def test_reward_bias_pairs_each_distance_with_the_reward_it_predicts():
    """predicted_rewards: column 0 is the reward head on the filtered state at t against reward[t]; column k the
    prior rolled k steps from it on the recorded actions against reward[t + k] (their sum is model_error_by_policy's
    window); with samples > 0 the prior is sampled, so its columns move and column 0 does not."""
    module = _load_research_module("reward_bias")
    windows = _load_research_module("model_error_by_policy")
    model = tiny_state_model()
    rng = np.random.default_rng(1)
    for layer in model.reward.hidden:  # zero biases and tiny features leave the ReLUs off: open them
        layer.bias.assign(np.ones(layer.bias.shape, np.float32))
    length = 23
    episode = {"state": rng.normal(size=(length, 3)).astype(np.float32),
               "action": rng.uniform(-1, 1, (length, 1)).astype(np.float32),
               "reward": rng.normal(size=length).astype(np.float32), "discount": np.ones(length, np.float32)}
    predicted, real = module.predicted_rewards(model, episode, horizon=4, every=5, samples=0)
    starts = [0, 5, 10, 15]
    assert predicted.shape == real.shape == (4, 5)
    np.testing.assert_allclose(real, [episode["reward"][t:t + 5] for t in starts], rtol=1e-6)
    from planet_sac.diagnostics import episode_posteriors
    filtered = model.reward(model.rssm.features(episode_posteriors(model, episode))).numpy()[:, 0]
    np.testing.assert_allclose(predicted[:, 0], filtered[starts], rtol=1e-6)
    sums, _ = windows.reward_gaps(model, episode, 4, 5)
    np.testing.assert_allclose(predicted[:, 1:].sum(1), sums, rtol=1e-5, atol=1e-5)
    sampled, _ = module.predicted_rewards(model, episode, horizon=4, every=5, samples=2)
    np.testing.assert_allclose(sampled[:, 0], predicted[:, 0], rtol=1e-6)
    assert np.abs(sampled[:, 1:] - predicted[:, 1:]).max() > 1e-4
    # the mean over the draws, each a prior rollout with its own noise (drawn in turn from the seed's generator)
    posts = episode_posteriors(model, episode)
    state = {key: tf.gather(value, starts) for key, value in posts.items()}
    plan = tf.constant(np.stack([episode["action"][t + 1:t + 5] for t in starts]))
    noise = np.random.default_rng(0)
    draws = [model.reward(model.rssm.features(model.rssm.imagine(
        state, plan, tf.constant(noise.normal(size=(4, 4, model.rssm.stoch_size)), tf.float32)))).numpy()[..., 0]
        for _ in range(2)]
    np.testing.assert_allclose(sampled[:, 1:], np.mean(draws, 0), rtol=1e-5, atol=1e-6)


def test_reward_refit_errors_split_the_paid_steps_by_hand():
    module = _load_research_module("reward_refit")
    prediction, real = np.array([0.5, 1.0, 3.0, 0.0]), np.array([0.0, 0.0, 4.0, 2.0])
    result = module.errors(prediction, real, paid=1e-3)
    assert result["mse"] == pytest.approx((0.25 + 1.0 + 1.0 + 4.0) / 4)
    assert result["mse_paid"] == pytest.approx((1.0 + 4.0) / 2)
    assert result["mean_on_paid"] == pytest.approx(1.5)
    assert result["explained"] == pytest.approx(1.0 - 1.5625 / np.var([0.0, 0.0, 4.0, 2.0]))
    centred_p, centred_y = prediction - 1.125, real - 1.5  # the means, by hand
    assert result["correlation"] == pytest.approx(
        (centred_p * centred_y).sum() / np.sqrt((centred_p ** 2).sum() * (centred_y ** 2).sum()))
    assert [0, 1, 2, 3, 4][module.as_slice("1:3")] == [1, 2]
    assert [0, 1, 2, 3, 4][module.as_slice("-2:")] == [3, 4]


def test_paired_eval_difference_is_other_minus_reference_per_start():
    paired = _load_research_module("paired_eval")
    # by hand: the pairs differ by +900, 0, 0, -900, +900 -> mean +180
    mean, low, high = paired.paired_difference(np.array([0, 900, 0, 900, 0]), np.array([900, 900, 0, 0, 900]))
    assert mean == pytest.approx(180.0)
    assert -900.0 <= low < mean < high <= 900.0
    # a constant difference has no spread: the interval is that difference
    assert paired.paired_difference(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])) == pytest.approx((3.0, 3.0, 3.0))
    # paired, not pooled: a huge spread across starts that both runs share leaves the interval tight
    assert paired.paired_difference(np.array([0.0, 1000.0, 0.0, 1000.0]), np.array([10.0, 1010.0, 10.0, 1010.0]))[1:] \
        == pytest.approx((10.0, 10.0))


def test_paired_eval_logdir_of_picks_a_checkpoint():
    paired = _load_research_module("paired_eval")
    assert paired.logdir_of("runs/a/seed0") == "runs/a/seed0"
    assert paired.logdir_of("runs/a/seed0:ckpt-1125") == "runs/a/seed0/checkpoints/ckpt-1125"


def test_imagination_gap_pairs_the_actors_imagined_rewards_with_the_recorded_ones():
    """imagined_and_real: column k - 1 is the reward head at the k-th state of the prior rolled from the filtered
    state at t under the actor, sampled (mean over the rollouts of that start), against reward[t + k]; replayed
    here step by step with the same generator's draws in the same order (action noise, then prior noise)."""
    from planet_sac.config import SACConfig
    from planet_sac.control.sac import SAC
    from planet_sac.diagnostics import episode_posteriors

    module = _load_research_module("imagination_gap")
    model = tiny_state_model()
    for layer in model.reward.hidden:  # zero biases and tiny features leave the ReLUs off: open them
        layer.bias.assign(np.ones(layer.bias.shape, np.float32))
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 1, seed=3)
    rng = np.random.default_rng(2)
    length, horizon, every, samples = 19, 3, 5, 2
    episode = {"state": rng.normal(size=(length, 3)).astype(np.float32),
               "action": rng.uniform(-1, 1, (length, 1)).astype(np.float32),
               "reward": rng.normal(size=length).astype(np.float32), "discount": np.ones(length, np.float32)}
    predicted, real = module.imagined_and_real(model, sac, episode, horizon, every, samples, seed=7)
    starts = [0, 5, 10, 15]
    assert predicted.shape == real.shape == (4, 3)
    np.testing.assert_allclose(real, [episode["reward"][t + 1:t + 4] for t in starts], rtol=1e-6)
    posts = episode_posteriors(model, episode)
    generator = tf.random.Generator.from_seed(7)
    state = {key: tf.gather(posts[key], np.repeat(starts, samples)) for key in ("deter", "stoch")}
    rewards = []
    for _ in range(horizon):
        mean, log_std = sac._distribution(model.rssm.features(state))
        action = np.clip(np.tanh(mean.numpy() + np.exp(log_std.numpy()) * generator.normal([8, 1]).numpy()), -1, 1)
        state = model.rssm.img_step(state, tf.constant(action, tf.float32), generator.normal([8, model.rssm.stoch_size]))
        state = {key: state[key] for key in ("deter", "stoch")}
        rewards.append(model.reward(model.rssm.features(state)).numpy()[:, 0])
    by_hand = np.stack(rewards, 1).reshape(4, samples, horizon).mean(1)
    np.testing.assert_allclose(predicted, by_hand, rtol=1e-5, atol=1e-6)
    rows = module.by_depth(np.array([[1.0, 2.0], [3.0, 6.0]]), np.array([[0.0, 2.0], [1.0, 0.0]]))
    assert rows == [{"k": 1, "predicted": 2.0, "real": 0.5, "gap": 1.5}, {"k": 2, "predicted": 4.0, "real": 1.0, "gap": 3.0}]


def test_critic_slope_reads_the_actors_mean_and_the_critics_slope_at_its_mode():
    """head_along: at every filtered state the actor's pre-tanh mean, min Q at tanh(mean) and dQ/da there, against
    numpy (tests/numpy_reference) and a central finite difference of the numpy critics; summary by hand."""
    from planet_sac.config import SACConfig
    from planet_sac.control.sac import SAC
    from planet_sac.diagnostics import episode_posteriors
    from tests import numpy_reference as ref

    module = _load_research_module("critic_slope")
    model = tiny_state_model()
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 1, seed=3)
    for online, target in ((sac.critic1, sac.target_critic1), (sac.critic2, sac.target_critic2)):
        for o, t in zip(online.variables, target.variables):  # the head acts on the online critics, not these
            t.assign(-o)
    rng = np.random.default_rng(4)
    episode = {"state": rng.normal(size=(9, 3)).astype(np.float32),
               "action": rng.uniform(-1, 1, (9, 1)).astype(np.float32),
               "reward": rng.normal(size=9).astype(np.float32), "discount": np.ones(9, np.float32)}
    head = module.head_along(model, sac, episode)
    posts = episode_posteriors(model, episode)
    features = np.concatenate([posts["deter"].numpy(), posts["stoch"].numpy()], -1).astype(np.float64)
    mean, _ = ref.actor(sac, features)
    np.testing.assert_allclose(head["mu"], mean, rtol=1e-4, atol=1e-6)
    mode = np.tanh(mean)
    np.testing.assert_allclose(head["q"], ref.q_value(sac, features, mode), rtol=1e-4, atol=1e-6)
    step = 1e-4
    slope = (ref.q_value(sac, features, mode + step) - ref.q_value(sac, features, mode - step)) / (2 * step)
    np.testing.assert_allclose(head["slope"][:, 0], slope, rtol=2e-3, atol=1e-4)
    assert np.abs(slope).max() > 1e-2  # a slope to compare, not zeros
    # where the actor's loss moves its mean, signed along sign(mu), over 3 noise draws, by hand:
    # d(alpha log pi)/d mu = 2 alpha tanh(u) (the tanh correction; the Gaussian's term does not move with mu), and
    # d(-min Q)/d mu = -dQ/da (1 - tanh(u)^2) at a = tanh(u), u = mu + std * noise
    sac.log_alpha.assign(np.log(0.3))
    centre = np.sort(ref.actor(sac, features)[0].ravel())[3:5].mean()  # the means moved to both signs, none at 0
    sac.actor.out.bias.assign(sac.actor.out.bias.numpy() - np.array([centre, 0.0], np.float32))
    noise = rng.normal(size=(3, len(features), 1)).astype(np.float32)
    entropy_push, q_push = module.actor_pushes(sac, tf.constant(features, tf.float32), tf.constant(noise))
    mean, log_std = ref.actor(sac, features)
    u = mean[None] + np.exp(log_std)[None] * noise
    direction = np.sign(mean)
    assert (direction > 0).any() and (direction < 0).any()  # both signs, so the signing is checked
    np.testing.assert_allclose(entropy_push, -(2 * 0.3 * np.tanh(u)).mean(0) * direction, rtol=1e-4, atol=1e-6)
    slopes = np.stack([(ref.q_value(sac, features, np.tanh(u[k]) + step) - ref.q_value(sac, features, np.tanh(u[k]) - step))
                       / (2 * step) for k in range(3)])[..., None]
    np.testing.assert_allclose(q_push, (slopes * (1 - np.tanh(u) ** 2)).mean(0) * direction, rtol=2e-3, atol=1e-4)
    row = module.summary({"mu": np.array([[0.5, -3.0], [-1.0, 1.0]]), "q": np.array([10.0, 20.0]),
                          "slope": np.array([[0.2, -0.4], [-0.6, 0.0]]),
                          "entropy_push": np.array([[-0.1, -0.3], [-0.3, 0.1]]),
                          "q_push": np.array([[0.0, 0.2], [0.4, 0.4]])}, 7.0)
    assert row == {"return": 7.0, "abs_mu": [0.75, 2.0], "saturated": [0.0, 0.5], "q": 15.0, "abs_slope": [0.4, 0.2],
                   "entropy_push": [-0.2, -0.1], "q_push": [0.2, 0.3]}


def test_cartpole_reward_terms_multiply_to_dm_controls_reward():
    """The four terms' product is the reward dm_control paid at every simulator step; an action of 0 costs nothing
    and a saturated one keeps 4/5 of it (by hand: tolerance 1 and 0 in (4 + tolerance) / 5)."""
    pytest.importorskip("dm_control")
    reward_terms = _load_research_module("cartpole_reward").reward_terms
    actions = [np.zeros(1)] * 3 + [np.ones(1)] * 3
    terms = reward_terms("dmc:cartpole-balance", 3, actions, action_repeat=2)
    product = terms["upright"] * terms["centered"] * terms["small_control"] * terms["small_velocity"]
    np.testing.assert_allclose(product, terms["reward"], rtol=1e-6)
    np.testing.assert_allclose(terms["small_control"], [1.0] * 6 + [0.8] * 6)
    assert len(terms["reward"]) == 12
    np.testing.assert_allclose(terms["upright"], (terms["cosine"] + 1) / 2)


def _numpy_transposed_conv(x: np.ndarray, kernel: np.ndarray, stride: int) -> np.ndarray:
    """By hand: every input pixel scatters its kernel-weighted copy to the output at stride steps (VALID)."""
    batch, n, _, _ = x.shape
    k, _, out, _ = kernel.shape
    size = (n - 1) * stride + k
    y = np.zeros((batch, size, size, out))
    for i in range(n):
        for j in range(n):
            y[:, i * stride:i * stride + k, j * stride:j * stride + k] += np.einsum("bc,hwoc->bhwo", x[:, i, j], kernel)
    return y


@pytest.mark.parametrize("size, inp, out, k", [(3, 2, 3, 6), (4, 3, 2, 5), (2, 1, 1, 4)])
def test_deconv_phases_compute_the_transposed_convolution(size, inp, out, k):
    module = _load_research_module("deconv_phases")
    rng = np.random.default_rng(size)
    x = rng.normal(size=(2, size, size, inp)).astype(np.float32)
    kernel = rng.normal(size=(k, k, out, inp)).astype(np.float32)
    expected = _numpy_transposed_conv(x.astype(np.float64), kernel.astype(np.float64), 2)
    np.testing.assert_allclose(module.phase_deconv(tf.constant(x), tf.constant(kernel)).numpy(), expected, atol=1e-4)
    np.testing.assert_allclose(module.transposed_deconv(tf.constant(x), tf.constant(kernel)).numpy(), expected, atol=1e-4)


def _numpy_conv(x: np.ndarray, kernel: np.ndarray, stride: int) -> np.ndarray:
    """By hand: each output pixel is the kernel-weighted sum of its input window (VALID), NHWC."""
    batch, n, _, _ = x.shape
    k, _, _, out = kernel.shape
    size = (n - k) // stride + 1
    y = np.zeros((batch, size, size, out))
    for i in range(size):
        for j in range(size):
            window = x[:, i * stride:i * stride + k, j * stride:j * stride + k]
            y[:, i, j] = np.einsum("bhwc,hwco->bo", window, kernel)
    return y


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_conv_layout_computes_both_layers_in_either_layout(layout):
    """research/conv_layout.py times what the networks compute: its convolution and transposed convolution in NCHW
    give, transposed back, the by-hand NHWC results."""
    module = _load_research_module("conv_layout")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 9, 9, 3)).astype(np.float32)
    kernel = rng.normal(size=(4, 4, 3, 5)).astype(np.float32)
    back = (lambda t: np.transpose(t, [0, 2, 3, 1])) if layout == "NCHW" else (lambda t: t)  # noqa: E731
    y = module.conv(module.to_layout(tf.constant(x), layout), tf.constant(kernel), layout).numpy()
    np.testing.assert_allclose(back(y), _numpy_conv(x.astype(np.float64), kernel.astype(np.float64), 2), atol=1e-4)
    deconv_kernel = rng.normal(size=(5, 5, 2, 3)).astype(np.float32)
    y = module.deconv(module.to_layout(tf.constant(x), layout), tf.constant(deconv_kernel), layout).numpy()
    expected = _numpy_transposed_conv(x.astype(np.float64), deconv_kernel.astype(np.float64), 2)
    np.testing.assert_allclose(back(y), expected, atol=1e-4)
