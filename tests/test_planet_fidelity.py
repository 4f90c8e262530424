"""Where planet_sac claims to match PlaNet (google-research/planet), checked against numbers computed by hand.

Each test names the PlaNet source it reproduces. PlaNet's step counter counts samples
(`global_step.assign_add(batch_size)` in `training/trainer.py`); planet_sac counts
updates, so PlaNet's sample counts are divided by its batch size of 50.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.config import CEMConfig, Config, ModelConfig
from planet_sac.config_loading import apply_overrides
from planet_sac.control import cem
from planet_sac.models.world_model import WorldModel
from planet_sac.optim import Adam

PLANET_BATCH = 50


def test_defaults_are_planets_numbers_in_updates():
    config = Config()
    assert config.model.reward_scale == 10.0  # configs.py _loss_functions: reward_scale 10.0
    assert config.model.free_nats == 3.0
    assert config.optim.warmup_updates == 10_000 // PLANET_BATCH == 200  # schedule.linear ramp=10000 (samples)
    assert config.schedule.train_phase_steps == 50_000 // PLANET_BATCH == 1000  # train_steps=50000 (samples)
    assert config.schedule.collect_every == 5_000 // PLANET_BATCH == 100  # collect_every=5000 (samples)
    assert config.cem.discount == 0.99  # planning.py cross_entropy_method(discount=0.99)
    assert config.data.every == 10  # scan_episodes_every=10
    assert config.data.seed_episodes == config.data.test_seed_episodes == 5  # num_seed_episodes=5, both directories
    assert config.model.reward_units == 100  # networks/basic.py feed_forward: 2 x 100 ReLU


# ----------------------------------------------------------------------------- free nats


def tiny_state_model(**overrides) -> WorldModel:
    config = ModelConfig(deter_size=6, stoch_size=2, hidden_size=5, mlp_units=5, reward_units=4, **overrides)
    return WorldModel(config, "state", (3,), 1, seed=4)


def test_free_nats_floor_every_time_step_before_the_mean():
    """utility.compute_losses: tf.maximum(free_nats, kl) per step, then the mean."""
    model = tiny_state_model(free_nats=3.0)
    kl = tf.constant([[0.5, 4.0, 3.0], [5.0, 1.0, 2.0]])
    # By hand: [[3, 4, 3], [5, 3, 3]] -> 21 / 6. (A floor on each sequence's mean would give 3.0.)
    assert float(model._free_nats(kl)) == pytest.approx(21 / 6)


# ----------------------------------------------------------------------------- overshooting


def numpy_rssm(model: WorldModel):
    """The RSSM's prior step reimplemented in numpy from its weights (ReLU or ELU layers, GRU, softplus std)."""
    rssm = model.rssm
    w = {name: (layer.kernel.numpy(), layer.bias.numpy()) for name, layer in
         (("prior_in", rssm.prior_in), ("prior_hidden", rssm.prior_hidden), ("prior_out", rssm.prior_out))}
    gru = rssm.gru
    gk, gb, ck, cb = (v.numpy() for v in (gru.gates_kernel, gru.gates_bias, gru.candidate_kernel, gru.candidate_bias))
    if model.config.activation == "relu":
        relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    else:
        relu = lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))  # noqa: E731 - ELU
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731

    def img_step(state, action, noise):
        x = relu(np.concatenate([state["stoch"], action], -1) @ w["prior_in"][0] + w["prior_in"][1])
        h = state["deter"]
        reset, update = np.split(sigmoid(np.concatenate([x, h], -1) @ gk + gb), 2, -1)
        candidate = np.tanh(np.concatenate([x, reset * h], -1) @ ck + cb)
        deter = update * h + (1 - update) * candidate
        params = relu(deter @ w["prior_hidden"][0] + w["prior_hidden"][1]) @ w["prior_out"][0] + w["prior_out"][1]
        mean, raw = np.split(params, 2, -1)
        std = np.log1p(np.exp(raw)) + rssm.min_stddev
        return dict(mean=mean, std=std, stoch=mean + std * noise, deter=deter)

    return img_step


def gaussian_kl(mean_p, std_p, mean_q, std_q):
    return np.sum(np.log(std_q / std_p) + (std_p ** 2 + (mean_p - mean_q) ** 2) / (2 * std_q ** 2) - 0.5, -1)


def test_overshooting_is_planets_distances_two_to_d_plus_one():
    """tools/overshooting.py + define_model.py: open-loop priors from every posterior, rows 1..D
    (the one-step row 0 is the ordinary KL), floored elementwise, mean over valid steps, then over
    sequences and distances; targets are the posteriors."""
    batch, length, distance, free_nats = 2, 5, 2, 0.05
    model = tiny_state_model(free_nats=free_nats, overshooting_distance=distance, overshooting_scale=1.0)
    rng = np.random.default_rng(0)
    posts = {"mean": rng.normal(size=(batch, length, 2)), "std": rng.uniform(0.2, 1.0, (batch, length, 2)),
             "stoch": rng.normal(size=(batch, length, 2)), "deter": rng.normal(size=(batch, length, 6))}
    action = rng.uniform(-1, 1, (batch, length, 1))
    noise = rng.normal(size=(distance + 1, batch, length, 2))
    got = model._overshooting_kl({k: tf.constant(v, tf.float32) for k, v in posts.items()},
                                 tf.constant(action, tf.float32), tf.constant(noise, tf.float32))

    img_step = numpy_rssm(model)
    per_distance = np.zeros((batch, distance))
    for b in range(batch):
        for d in range(2, distance + 2):
            kls = []
            for t in range(length - d):
                state = {k: v[b, t][None] for k, v in posts.items()}
                for j in range(1, d + 1):  # action[:, t + j] led to observation t + j
                    state = img_step(state, action[b, t + j][None], noise[j - 1, b, t][None])
                kl = gaussian_kl(posts["mean"][b, t + d], posts["std"][b, t + d], state["mean"][0], state["std"][0])
                kls.append(max(kl, free_nats))
            per_distance[b, d - 2] = np.mean(kls)
    np.testing.assert_allclose(float(got), per_distance.mean(), rtol=1e-4)


@pytest.mark.parametrize("activation", ["relu", "elu"])
def test_prior_step_uses_the_configured_activation(activation):
    """PlaNet's RSSM uses ReLU layers (models/rssm.py); `model.activation: elu` gives Dreamer's."""
    model = tiny_state_model(activation=activation)
    rng = np.random.default_rng(3)
    state = {"stoch": rng.normal(size=(4, 2)), "deter": rng.normal(size=(4, 6)) * 3}
    action, noise = rng.uniform(-1, 1, (4, 1)), rng.normal(size=(4, 2))
    expected = numpy_rssm(model)(state, action, noise)
    got = model.rssm.img_step({k: tf.constant(v, tf.float32) for k, v in state.items()}, tf.constant(action, tf.float32),
                              tf.constant(noise, tf.float32))
    for key in ("mean", "std", "deter"):
        np.testing.assert_allclose(got[key].numpy(), expected[key], rtol=1e-4, atol=1e-5)


def test_overshooting_longer_than_the_chunk_is_a_config_error():
    from planet_sac.config import ConfigError

    with pytest.raises(ConfigError, match=r"model.overshooting_distance=4 needs chunks of at least 6 steps"):
        apply_overrides(Config(), ["data.chunk_length=5", "model.overshooting_distance=4", "model.overshooting_scale=1.0"])


# ----------------------------------------------------------------------------- learning-rate warm-up


def test_warmup_ramps_the_learning_rate_linearly_from_zero():
    """tools/schedule.py linear: min(step / ramp, 1); the first update (step 0) has rate 0."""
    var = tf.Variable([1.0, -2.0])
    adam = Adam([var], learning_rate=0.1, epsilon=1e-8, warmup=10, name="warmup_test")
    rates = []
    for _ in range(12):
        rates.append(float(adam.current_learning_rate()))
        adam.apply([tf.constant([0.5, -0.25])])
    np.testing.assert_allclose(rates, [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.1], atol=1e-7)


def test_warmup_first_update_leaves_weights_and_second_takes_a_tenth_step():
    var = tf.Variable([1.0, -2.0])
    adam = Adam([var], learning_rate=0.1, epsilon=1e-8, warmup=10, name="warmup_steps")
    grad = np.array([0.5, -0.25], np.float32)
    adam.apply([tf.constant(grad)])
    np.testing.assert_allclose(var.numpy(), [1.0, -2.0])
    adam.apply([tf.constant(grad)])
    # By hand: after two equal gradients, m = (1 - 0.9^2) g, v = (1 - 0.999^2) g^2; the bias-corrected
    # ratio m_hat / sqrt(v_hat) = sign(g); the rate is 0.1 * 1/10.
    m, v = (1 - 0.9 ** 2) * grad, (1 - 0.999 ** 2) * grad ** 2
    step = 0.01 * np.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2) * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(var.numpy(), np.array([1.0, -2.0]) - step, rtol=1e-6)


def test_adam_adds_epsilon_to_the_root_of_v_as_tf1():
    """TF1's Adam (PlaNet's): step = lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), eps added to the root of
    the uncorrected v. By hand, first step, g = 1e-4 = eps: m = 0.1 g, sqrt(v) = sqrt(0.001) g, so the step is
    lr * sqrt(0.001) / (sqrt(0.001) + 1) = 0.0030653 (eps inside the root would give 3.2e-5)."""
    var = tf.Variable([0.0, 0.0])
    adam = Adam([var], learning_rate=0.1, epsilon=1e-4, name="epsilon_test")
    adam.apply([tf.constant([1e-4, -1e-4])])
    step = 0.1 * np.sqrt(0.001) / (np.sqrt(0.001) + 1.0)
    np.testing.assert_allclose(var.numpy(), [-step, step], rtol=1e-4)


def test_adam_clips_by_the_global_norm_and_returns_it():
    """Gradients [3, 4] and [12] (global norm 13) with clip 1.3: scaled by 0.1 before the step, so the first moment
    is 0.1 x 0.1 g; the pre-clip norm is returned, and a norm the caller hands in is the one used."""
    for given in (None, 13.0):
        a, b = tf.Variable([0.0, 0.0]), tf.Variable([0.0])
        adam = Adam([a, b], learning_rate=0.1, clip=1.3, name="clip_test")
        norm = adam.apply([tf.constant([3.0, 4.0]), tf.constant([12.0])], None if given is None else tf.constant(given))
        assert float(norm) == pytest.approx(13.0)
        np.testing.assert_allclose(adam.m[0].numpy(), [0.03, 0.04], rtol=1e-5)
        np.testing.assert_allclose(adam.m[1].numpy(), [0.12], rtol=1e-5)
        np.testing.assert_allclose(adam.v[1].numpy(), [0.001 * 1.2 ** 2], rtol=1e-4)  # 1 - 0.999 in float32


# ----------------------------------------------------------------------------- planning objective


def test_planning_objective_is_the_discounted_sum_of_predicted_rewards(monkeypatch):
    """control/planning.py: discounted_return(reward, length, 0.99)[:, 0] = sum_t 0.99^t r_t."""
    model = tiny_state_model()
    rewards = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 4.0]], np.float32)
    monkeypatch.setattr(model, "predict_reward", lambda states: tf.constant(rewards))
    state = model.rssm.initial(2)
    score = cem.rollout_return(model, None, 0.99)(state, tf.zeros([2, 3, 1]), tf.zeros([2, 3, 2]))
    expected = [1.0 + 0.99 * 2.0 - 0.99 ** 2, 0.5 + 0.99 ** 2 * 4.0]
    np.testing.assert_allclose(score.numpy(), expected, rtol=1e-6)


def test_planner_scores_with_the_configured_discount(monkeypatch):
    seen = []
    real = cem.rollout_return
    monkeypatch.setattr(cem, "rollout_return", lambda wm, sac, discount, value_weight:
                        seen.append((discount, value_weight)) or real(wm, sac, discount, value_weight))
    model = tiny_state_model()
    cem.plan(model, model.rssm.initial(1), CEMConfig(horizon=2, candidates=8, iterations=1, top_k=2, discount=0.8,
                                                     value_weight=0.5), tf.random.Generator.from_seed(0))
    assert seen == [(0.8, 0.5)]


# ----------------------------------------------------------------------------- schedule and restore


def read_records(logdir):
    with open(f"{logdir}/metrics.jsonl") as file:
        return [json.loads(line) for line in file if line.strip()]


SHORT_SCHEDULE = ["schedule.train_steps=20", "schedule.train_phase_steps=10", "schedule.collect_every=5",
                  "schedule.log_every=100", "schedule.checkpoint_every=100", "schedule.video_every=100"]


@pytest.fixture
def short_schedule(smoke_config):
    return apply_overrides(smoke_config, SHORT_SCHEDULE)


def test_phase_sequence_and_held_out_loss(smoke_run):
    """A test phase follows every train_phase_steps updates; each logs test/loss/* from test_episodes/ and the SAC
    critic's Q beside the real returns. The session's smoke run (conftest.smoke_run: train_phase_steps 10, 20 updates)
    is read; with collections at other steps than the test phases (collect_every 5):
    test_test_phase.test_sac_share_lets_the_head_collect_every_other_episode_with_its_exploration."""
    records = read_records(smoke_run[0])
    assert [r["step"] for r in records if r.get("phase") == "test"] == [10, 20]
    for record in (r for r in records if r.get("phase") == "test"):
        assert np.isfinite(record["test/loss/total"]) and np.isfinite(record["test/loss/reward"])
        assert np.isfinite(record["test/sac/q_episode"]) and np.isfinite(record["test/sac/return_episode"])


def test_zero_train_steps_means_zero_updates(short_schedule, tmp_path):
    from planet_sac.training.trainer import Trainer

    trainer = Trainer(short_schedule, str(tmp_path / "run"), progress=False)
    try:
        trainer.run(train_steps=0)
        assert int(trainer.counters.step.numpy()) == 0
        assert int(trainer.learner.optimizer.iterations.numpy()) == 0
    finally:
        trainer.close()


@pytest.mark.slow
@pytest.mark.e2e
def test_filtered_restore_keeps_the_new_runs_test_phases(short_schedule, smoke_run, tmp_path):
    """Restoring everything from a run that already had test phases must not skip the new run's first one
    (a test phase every 2 updates: with the source's counter of 2 test phases it would be skipped).

    `e2e` (a whole run, about 11 CPU seconds): in `make test`, test_cli's
    `test_filtered_restore_of_everything_leaves_the_new_runs_own_state` checks its logic, the new run's counters
    (test phases included) left at their own values and no test phase owed at step 0."""
    from planet_sac.training.trainer import train

    source = smoke_run[0]  # two test phases done; restoring from it only reads it
    assert [r["step"] for r in read_records(source) if r.get("phase") == "test"] == [10, 20]
    target = str(tmp_path / "target")
    train(apply_overrides(short_schedule, ["schedule.train_phase_steps=2"]), target, restore_from=source, train_steps=2,
          progress=False)
    assert [r["step"] for r in read_records(target) if r.get("phase") == "test"] == [2]
