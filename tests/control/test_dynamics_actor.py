"""`sac.actor_grad: dynamics`: the actor learns the imagined lambda-return through the world model (Dreamer's actor)."""

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.checkpoints import named_variables
from planet_sac.config import ConfigError
from planet_sac.config_loading import apply_overrides
from planet_sac.control.dynamics_actor import dynamics_actor_loss, dynamics_actor_update, lambda_returns
from planet_sac.control.sac import SAC
from planet_sac.models.world_model import WorldModel
from planet_sac.training.learner import Learner
from tests.conftest import state_batch


def n_step_return(reward, value, continuation, gamma, k, n):
    """sum_{j<n} gamma^j (prod c) r_{k+j} + gamma^n (prod c) V_{k+n}, by hand, for one row."""
    total, alive = 0.0, 1.0
    for j in range(n):
        total += alive * reward[k + j]
        alive *= gamma * continuation[k + j]
    return total + alive * value[k + n]


def test_lambda_returns_are_the_weighted_mean_of_n_step_returns():
    """G^lambda_k = (1 - lambda) sum_{n<H-k} lambda^(n-1) G^(n)_k + lambda^(H-k-1) G^(H-k)_k (Sutton and Barto 12.3)."""
    rng = np.random.default_rng(3)
    horizon, gamma = 5, 0.9
    reward = rng.normal(size=(2, horizon)).astype(np.float32)
    value = rng.normal(size=(2, horizon + 1)).astype(np.float32)
    continuation = np.ones((2, horizon), np.float32)
    continuation[1, 2] = 0.0  # row 1's episode ends on arriving at state 3
    for lam in (0.0, 0.95, 1.0):
        got = lambda_returns(tf.constant(reward), tf.constant(value), tf.constant(continuation), gamma, lam).numpy()
        for row in range(2):
            for k in range(horizon):
                left = horizon - k
                expected = sum((1 - lam) * lam ** (n - 1) * n_step_return(reward[row], value[row], continuation[row],
                                                                          gamma, k, n) for n in range(1, left))
                expected += lam ** (left - 1) * n_step_return(reward[row], value[row], continuation[row], gamma, k, left)
                np.testing.assert_allclose(got[row, k], expected, rtol=1e-5, atol=1e-5, err_msg=f"{lam} {row} {k}")
    # lambda 0: the one-step targets; lambda 1: the whole discounted sum with the last value
    one_step = lambda_returns(tf.constant(reward), tf.constant(value), tf.constant(continuation), gamma, 0.0).numpy()
    np.testing.assert_allclose(one_step, reward + gamma * continuation * value[:, 1:], rtol=1e-5, atol=1e-6)


def build(smoke_config, overrides=()):
    config = apply_overrides(smoke_config, ["sac.actor_grad=dynamics", "sac.imagination_horizon=4",
                                            "sac.real_ratio=0.5", *overrides])
    model = WorldModel(config.model, "state", (3,), 1, seed=0)
    sac = SAC(config.sac, model.rssm.feature_size, 1, seed=0)
    return config, model, sac


def test_the_loss_is_the_weighted_soft_return_of_the_rollout(smoke_config):
    """Two steps at lambda 1, composed by hand from the same draws: G_1 = -alpha log pi(a1) + r2 + gamma V(z2),
    G_0 = -alpha log pi(a0) + r1 + gamma G_1, V(z) = Q(z, a) - alpha log pi(a); loss = -mean(G_0 + gamma G_1)."""
    gamma = 0.8
    config, model, sac = build(smoke_config, ["sac.return_lambda=1.0", f"sac.discount={gamma}"])
    features = tf.random.stateless_normal([6, model.rssm.feature_size], [1, 2])
    loss, _, _ = dynamics_actor_loss(model, sac, features, 2, 1.0, tf.random.Generator.from_seed(5))
    rng = tf.random.Generator.from_seed(5)  # the same draws, in the same order
    alpha = float(sac.alpha)
    state = {"deter": features[:, :model.rssm.deter_size], "stoch": features[:, model.rssm.deter_size:]}
    entropy, rewards = [], []
    f = features
    for _ in range(2):
        a, logp = sac.sample(f, rng.normal([6, 1]))
        entropy.append(-alpha * logp.numpy())
        state = model.rssm.img_step(state, a, rng.normal([6, model.rssm.stoch_size]))
        f = model.rssm.features(state)
        rewards.append(model.predict_reward(state).numpy())
    a, logp = sac.sample(f, rng.normal([6, 1]))
    last_value = sac.q_value(f, a).numpy() - alpha * logp.numpy()
    g1 = entropy[1] + rewards[1] + gamma * last_value
    g0 = entropy[0] + rewards[0] + gamma * g1
    np.testing.assert_allclose(float(loss), -np.mean(np.stack([g0, gamma * g1], 1)), rtol=1e-4)


def test_the_loss_is_divided_by_the_return_scale(smoke_config):
    """With sac.return_normalization the actor's loss is divided by max(1, P95 - P5) of the critic targets, as SAC's
    actor loss is (DreamerV3 normalises its actor's advantages so): EMAs of (2, 10) after one update, debiased by
    1 - 0.99, give a scale of 8; the same draws without normalisation give 8 times the loss."""
    losses = []
    for normalise in (False, True):
        _, model, sac = build(smoke_config, [f"sac.return_normalization={str(normalise).lower()}"])
        features = tf.random.stateless_normal([6, model.rssm.feature_size], [1, 3])
        if normalise:
            sac.return_range.assign([0.02, 0.10])  # 0.01 x (2, 10): one EMA step from 0
            sac.return_updates.assign(1.0)
            assert float(sac.return_scale()) == pytest.approx(8.0)
        loss, _, _ = dynamics_actor_loss(model, sac, features, 3, 0.95, tf.random.Generator.from_seed(5))
        losses.append(float(loss))
    assert losses[0] != 0 and losses[1] == pytest.approx(losses[0] / 8.0, rel=1e-5)


def test_a_dynamics_step_moves_the_actor_only_and_raises_the_imagined_return(smoke_config):
    """30 dynamics steps, compiled as the learner runs them (traced once: 30 eager steps took 4 times as long)."""
    config, model, sac = build(smoke_config, ["sac.actor_lr=0.01"])
    features = tf.random.stateless_normal([2, 8, model.rssm.feature_size], [4, 2])
    others = lambda: {name: v.numpy() for name, v in named_variables([model, sac]).items()  # noqa: E731
                      if "actor" not in name or "optimizer" in name}
    before_actor = [v.numpy() for v in sac.actor.trainable_variables]
    before_others = others()

    def mean_return():
        return float(dynamics_actor_loss(model, sac, tf.reshape(features, [16, -1]), 4, 0.95,
                                         tf.random.Generator.from_seed(9))[1])

    start = mean_return()
    rng = tf.random.Generator.from_seed(0)
    step = tf.function(lambda: dynamics_actor_update(model, sac, features, rng), autograph=False)
    for _ in range(30):
        metrics = step()
    assert float(metrics["sac/dynamics/update_finite"]) == 1.0
    assert mean_return() > start + 0.05 * abs(start) + 1e-3
    assert any(not np.allclose(a, b.numpy()) for a, b in zip(before_actor, sac.actor.trainable_variables))
    after = others()
    for name, value in before_others.items():
        if "sac_actor" not in name and "alpha" not in name:  # the actor's Adam slots and the temperature move
            np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_the_sac_loop_leaves_the_actor_to_the_dynamics_step(smoke_config):
    config, model, sac = build(smoke_config)
    rng = tf.random.Generator.from_seed(0)
    size = model.rssm.feature_size
    batch = (tf.random.stateless_normal([32, size], [1, 1]), tf.random.stateless_uniform([32, 1], [1, 2], -1, 1),
             tf.random.stateless_normal([32], [1, 3]), tf.ones([32]), tf.random.stateless_normal([32, size], [1, 4]))
    actor = [v.numpy() for v in sac.actor.trainable_variables]
    critic = [v.numpy() for v in sac.critic_variables]
    alpha = float(sac.log_alpha)
    metrics = sac.update(*batch, rng=rng, train_actor=False)
    assert float(metrics["sac/update_finite"]) == 1.0
    for before, v in zip(actor, sac.actor.trainable_variables):
        np.testing.assert_array_equal(before, v.numpy())
    assert any(not np.allclose(b, v.numpy()) for b, v in zip(critic, sac.critic_variables))
    assert float(sac.log_alpha) == alpha  # the temperature moves with the actor, in the dynamics step


def test_the_temperature_steps_with_the_actor_towards_the_target_entropy(smoke_config):
    """One dynamics step moves log alpha by Adam's first step, -lr * sign(gradient), the gradient being
    -(mean log pi + target entropy) over the rollouts' actions: down when the entropy is above the target."""
    for target, direction in ((-50.0, -1.0), (50.0, 1.0)):
        config, model, sac = build(smoke_config, [f"sac.target_entropy={target}", "sac.alpha_lr=0.001"])
        before = float(sac.log_alpha)
        features = tf.random.stateless_normal([2, 8, model.rssm.feature_size], [4, 2])
        dynamics_actor_update(model, sac, features, tf.random.Generator.from_seed(0))
        np.testing.assert_allclose(float(sac.log_alpha) - before, direction * 0.001, rtol=1e-3)


def test_a_learner_update_with_the_dynamics_actor(smoke_config):
    config, model, sac = build(smoke_config, ["sac.updates_per_step=2", "sac.batch_size=32"])
    learner = Learner(config, model, sac, seed=0)
    actor = [v.numpy() for v in sac.actor.trainable_variables]
    metrics = learner.update(state_batch(batch=4))
    for key in ("sac/dynamics/return", "sac/dynamics/update_finite", "sac/actor_loss", "sac/critic_loss"):
        assert np.isfinite(float(metrics[key])), key
    assert float(metrics["sac/dynamics/update_finite"]) == 1.0
    assert any(not np.allclose(a, v.numpy()) for a, v in zip(actor, sac.actor.trainable_variables))


@pytest.mark.parametrize("overrides, message", [
    (["sac.actor_grad=dynamics", "sac.imagination_horizon=0"], "sac.actor_grad=dynamics differentiates"),
    (["sac.return_lambda=0.5"], "sac.return_lambda=0.5 weighs"),
    (["sac.actor_grad=dynamics", "sac.imagination_horizon=3", "sac.return_lambda=1.5"], "sac.return_lambda"),
])
def test_config_errors(smoke_config, overrides, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(smoke_config, overrides).validate()


def test_dynamics_may_imagine_while_the_critic_trains_on_real_data_only(smoke_config):
    apply_overrides(smoke_config, ["sac.actor_grad=dynamics", "sac.imagination_horizon=3", "sac.real_ratio=1.0"]).validate()
    with pytest.raises(ConfigError, match="never uses"):
        apply_overrides(smoke_config, ["sac.imagination_horizon=3", "sac.real_ratio=1.0"]).validate()
