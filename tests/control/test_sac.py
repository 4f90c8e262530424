"""One SAC.update against numpy: the losses it reports, the direction of every Adam step it takes
(Adam's first step moves each parameter by -lr * sign(gradient)), the temperature and the Polyak targets."""

import math

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.config import SACConfig
from planet_sac.control.sac import SAC
from tests import numpy_reference as ref

F, A, N = 6, 2, 64


def snapshot(module):
    return [v.numpy().copy() for v in module.variables]


@pytest.mark.parametrize("steps", [1, 3])
def test_one_sac_update_matches_numpy(steps):
    lr = dict(actor_lr=1e-3, critic_lr=2e-3, alpha_lr=3e-3)
    sac = SAC(SACConfig(units=16, discount=0.9, init_alpha=0.5, tau=0.1, **lr), F, A, seed=3)
    assert sac.target_entropy == -float(A)  # Haarnoja et al. 2018: -dim(A)
    for online, target in zip(sac.critic1.variables + sac.critic2.variables,
                              sac.target_critic1.variables + sac.target_critic2.variables):
        target.assign(online * 1.5 + 0.1)  # distinguishable targets
    sac.actor.out.bias.assign([0.3, -0.4, -0.7, -0.9])  # mean log-prob inside (-|A|, |A|): the alpha step's sign shows
    g = np.random.default_rng(0)
    feats = g.normal(size=(N, F)).astype(np.float32)
    nfeats = g.normal(size=(N, F)).astype(np.float32)
    action = np.tanh(g.normal(size=(N, A))).astype(np.float32)
    reward = g.normal(size=N).astype(np.float32)
    discount = (g.uniform(size=N) > 0.2).astype(np.float32)
    rng = tf.random.Generator.from_seed(11)
    clone = tf.random.Generator.from_state(rng.state.numpy(), rng.algorithm)
    noise_next, noise_pi = clone.normal([N, A]).numpy(), clone.normal([N, A]).numpy()

    alpha, gamma = 0.5, 0.9
    # critic target and loss
    next_a, next_lp = ref.sample(sac, nfeats, noise_next)
    y = reward + gamma ** steps * discount * (ref.q_value(sac, nfeats, next_a, target=True) - alpha * next_lp)
    x = np.concatenate([feats, action], -1)
    q1, q2 = ref.mlp(x, sac.critic1)[:, 0], ref.mlp(x, sac.critic2)[:, 0]
    critic_loss = 0.5 * np.mean((q1 - y) ** 2) + 0.5 * np.mean((q2 - y) ** 2)

    # actor loss as a function of an offset of the actor's output bias (for finite differences)
    out = ref.mlp(feats, sac.actor)

    def actor_loss(offset):
        mean, log_std = np.split(out + offset, 2, -1)
        log_std = np.clip(log_std, np.log(sac.config.min_std), ref.LOG_STD_MAX)
        u = mean + np.exp(log_std) * noise_pi
        lp = np.sum(-0.5 * noise_pi ** 2 - log_std - 0.5 * math.log(2 * math.pi), -1) - np.sum(np.log(1 - np.tanh(u) ** 2), -1)
        return np.mean(alpha * lp - ref.q_value(sac, feats, np.tanh(u))), lp

    loss_pi, log_prob = actor_loss(np.zeros(2 * A))
    eps = 1e-5
    actor_bias_grad = np.array([(actor_loss(e)[0] - actor_loss(-e)[0]) / (2 * eps) for e in np.eye(2 * A) * eps])
    assert -A < log_prob.mean() < A

    actor_before, critics_before = snapshot(sac.actor), [snapshot(c) for c in (sac.critic1, sac.critic2)]
    log_alpha_before = float(sac.log_alpha.numpy())
    metrics = sac.update(feats, action, reward, discount, nfeats, rng=rng, steps=steps)

    assert float(metrics["sac/update_finite"]) == 1.0
    np.testing.assert_allclose(float(metrics["sac/critic_loss"]), critic_loss, rtol=1e-4)
    np.testing.assert_allclose(float(metrics["sac/q"]), q1.mean(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(metrics["sac/entropy"]), -log_prob.mean(), rtol=1e-4)
    np.testing.assert_allclose(float(metrics["sac/alpha"]), math.exp(float(sac.log_alpha.numpy())), rtol=1e-6)  # the stepped temperature
    np.testing.assert_allclose(float(metrics["sac/actor_loss"]), loss_pi, rtol=1e-4, atol=1e-5)
    # Adam's first step: -lr * sign(gradient), to within epsilon / |gradient|
    for critic, q, before in ((sac.critic1, q1, critics_before[0]), (sac.critic2, q2, critics_before[1])):
        index = [i for i, v in enumerate(critic.variables) if v is critic.out.bias][0]
        np.testing.assert_allclose(critic.out.bias.numpy() - before[index], -lr["critic_lr"] * np.sign([np.mean(q - y)]), rtol=1e-3)
    index = [i for i, v in enumerate(sac.actor.variables) if v is sac.actor.out.bias][0]
    np.testing.assert_allclose(sac.actor.out.bias.numpy() - actor_before[index], -lr["actor_lr"] * np.sign(actor_bias_grad), rtol=1e-3)
    # temperature: d/dlog_alpha of -mean(log_alpha * (log pi + H)) = -(mean log pi + H)
    assert float(sac.log_alpha.numpy()) - log_alpha_before == pytest.approx(
        lr["alpha_lr"] * np.sign(log_prob.mean() - A), rel=1e-3)
    # Polyak: target <- (1 - tau) target + tau * online (after the online step), both critics, every variable
    for online, target, before in ((sac.critic1, sac.target_critic1, critics_before[0]),
                                   (sac.critic2, sac.target_critic2, critics_before[1])):
        for o, t, b in zip(online.variables, target.variables, before):
            np.testing.assert_allclose(t.numpy(), 0.9 * (b * 1.5 + 0.1) + 0.1 * o.numpy(), rtol=1e-5, atol=1e-6)


def test_half_metrics_std_and_its_floor_match_numpy():
    """real_size=16 of 64: the n-step reward, Q1 and critic target of each half; the actor's std clipped at
    sac.min_std=0.3 (one output dimension pushed below it) and the share of dimensions at that floor."""
    sac = SAC(SACConfig(units=16, discount=0.9, init_alpha=0.5, min_std=0.3), F, A, seed=3)
    sac.actor.out.bias.assign([0.3, -0.4, -4.0, 0.5])  # log-std of dimension 0 far below log 0.3 everywhere
    g = np.random.default_rng(1)
    feats, nfeats = g.normal(size=(N, F)).astype(np.float32), g.normal(size=(N, F)).astype(np.float32)
    action = np.tanh(g.normal(size=(N, A))).astype(np.float32)
    reward = g.normal(size=N).astype(np.float32) + np.where(np.arange(N) < 16, 3.0, -3.0).astype(np.float32)
    discount = np.ones(N, np.float32)
    rng = tf.random.Generator.from_seed(5)
    clone = tf.random.Generator.from_state(rng.state.numpy(), rng.algorithm)
    noise_next = clone.normal([N, A]).numpy()

    mean, log_std = ref.actor(sac, feats)
    raw_log_std = np.split(ref.mlp(feats, sac.actor), 2, -1)[1]
    floor = np.log(0.3)
    assert (raw_log_std[:, 0] < floor).all() and (raw_log_std[:, 1] > floor).mean() > 0.5
    next_a, next_lp = ref.sample(sac, nfeats, noise_next)
    y = reward + 0.9 * discount * (ref.q_value(sac, nfeats, next_a, target=True) - 0.5 * next_lp)
    q1 = ref.mlp(np.concatenate([feats, action], -1), sac.critic1)[:, 0]

    metrics = sac.update(feats, action, reward, discount, nfeats, rng=rng, real_size=16)
    assert set(metrics) == set(SAC.metric_names(16, N - 16))
    for half, part in (("real", slice(0, 16)), ("imagined", slice(16, N))):
        np.testing.assert_allclose(float(metrics[f"sac/{half}/reward"]), reward[part].mean(), rtol=1e-5)
        np.testing.assert_allclose(float(metrics[f"sac/{half}/q"]), q1[part].mean(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(float(metrics[f"sac/{half}/target"]), y[part].mean(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(metrics["sac/std"]), np.exp(log_std).mean(), rtol=1e-5)
    np.testing.assert_allclose(float(metrics["sac/std_at_floor"]), (raw_log_std <= floor).mean(), rtol=1e-6)
    # a batch of real transitions only reports the real half
    assert not any(key.startswith("sac/imagined/") for key in sac.update(feats, action, reward, discount, nfeats, rng=rng))


def test_actions_are_sampled_with_at_least_min_std():
    """The acting path uses the same floor: the sample is tanh(mean + max(std, min_std) * noise)."""
    sac = SAC(SACConfig(units=8, min_std=0.1), F, A, seed=1)
    sac.actor.out.bias.assign([0.0, 0.0, -9.0, -9.0])  # std e^-9 before the floor
    feats = np.random.default_rng(2).normal(size=(5, F)).astype(np.float32)
    noise = np.ones((5, A), np.float32)
    mean = np.split(ref.mlp(feats, sac.actor), 2, -1)[0]
    action = sac.act(feats, noise, False).numpy()
    np.testing.assert_allclose(action, np.tanh(mean + 0.1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("entropy_above_target", [True, False])
def test_min_alpha_holds_the_temperature_at_its_floor_and_lets_it_rise(entropy_above_target):
    """At alpha = min_alpha, an entropy above target would lower log alpha by lr (Adam's first step): the floor
    holds it; an entropy below target raises it by lr, untouched by the floor."""
    lr = 0.01
    sac = SAC(SACConfig(units=8, init_alpha=0.05, min_alpha=0.05, alpha_lr=lr,
                        target_entropy=-50.0 if entropy_above_target else 50.0), F, A, seed=1)
    g = np.random.default_rng(3)
    feats = g.normal(size=(N, F)).astype(np.float32)
    batch = (feats, np.zeros((N, A), np.float32), np.zeros(N, np.float32), np.ones(N, np.float32), feats)
    sac.update(*batch, rng=tf.random.Generator.from_seed(0))
    expected = math.log(0.05) if entropy_above_target else math.log(0.05) + lr
    assert float(sac.log_alpha.numpy()) == pytest.approx(expected, abs=1e-5)


def _retnorm_batch_and_reference(sac, data_seed: int, reward_scale: float, rng_seed: int):
    """A random batch (discount 1) for a SAC with discount 0.9 and alpha 0.5, and by numpy from the update's own
    normal draws (a cloned stream): the critic targets y, the online critic's Q of the actor's sampled actions, and
    their log-probabilities. Returns (batch, rng, y, q_pi, log_pi)."""
    g = np.random.default_rng(data_seed)
    feats, nfeats = g.normal(size=(N, F)).astype(np.float32), g.normal(size=(N, F)).astype(np.float32)
    action = np.tanh(g.normal(size=(N, A))).astype(np.float32)
    reward = (reward_scale * g.normal(size=N)).astype(np.float32)
    rng = tf.random.Generator.from_seed(rng_seed)
    clone = tf.random.Generator.from_state(rng.state.numpy(), rng.algorithm)
    noise_next, noise_pi = clone.normal([N, A]).numpy(), clone.normal([N, A]).numpy()
    next_a, next_lp = ref.sample(sac, nfeats, noise_next)
    y = reward + 0.9 * (ref.q_value(sac, nfeats, next_a, target=True) - 0.5 * next_lp)
    a, lp = ref.sample(sac, feats, noise_pi)
    return (feats, action, reward, np.ones(N, np.float32), nfeats), rng, y, ref.q_value(sac, feats, a), lp


def test_return_normalization_scales_the_actors_q_by_the_targets_percentile_range():
    """sac.return_normalization (DreamerV3's retnorm): the actor's loss is mean(alpha log pi - Q / S) with
    S = max(1, (hi - lo) / (1 - 0.99^n)) from the EMAs of the critic targets' 5th and 95th percentiles after n batches;
    the update moves the EMAs 1% towards this batch's percentiles (numpy's, linear)."""
    sac = SAC(SACConfig(units=16, discount=0.9, init_alpha=0.5, return_normalization=True), F, A, seed=3)
    assert {v.name.split(":")[0] for v in sac.variables} >= {"sac/return_range", "sac/return_updates"}
    sac.return_range.assign([-2.0, 30.0])  # debiased over 3 batches: (30 + 2) / (1 - 0.99^3) = 1077.5
    sac.return_updates.assign(3.0)
    scale = 32.0 / (1 - 0.99 ** 3)
    assert float(sac.return_scale()) == pytest.approx(scale, rel=1e-5)
    batch, rng, y, q_pi, lp = _retnorm_batch_and_reference(sac, data_seed=4, reward_scale=100, rng_seed=7)
    expected_loss = np.mean(0.5 * lp - q_pi / scale)

    metrics = sac.update(*batch, rng=rng)
    np.testing.assert_allclose(float(metrics["sac/actor_loss"]), expected_loss, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(sac.return_range.numpy(), 0.99 * np.array([-2.0, 30.0]) + 0.01 * np.percentile(y, [5, 95]),
                               rtol=1e-4)
    assert float(sac.return_updates.numpy()) == 4.0
    sac.return_range.assign([0.1, 0.4])  # a range under 1 (debiased ~0.3): the scale stays 1, never magnifies Q
    sac.return_updates.assign(10_000.0)
    assert float(sac.return_scale()) == 1.0
    plain = SAC(SACConfig(units=16), F, A, seed=3)  # off by default: no variables, scale 1
    assert not any("return" in v.name for v in plain.variables) and float(plain.return_scale()) == 1.0


def test_return_normalization_starts_at_scale_one_and_its_first_update_debiases_fully():
    """Before any update the EMAs are zero and the scale is 1 (no 0 / 0); after the first, the debiased EMAs are
    this batch's 5th and 95th percentiles (numpy's), so the scale is max(1, P95 - P5) of its critic targets."""
    sac = SAC(SACConfig(units=16, discount=0.9, init_alpha=0.5, return_normalization=True), F, A, seed=3)
    assert float(sac.return_scale()) == 1.0
    batch, rng, y, q_pi, lp = _retnorm_batch_and_reference(sac, data_seed=5, reward_scale=10, rng_seed=8)
    unscaled_loss = np.mean(0.5 * lp - q_pi)  # scale 1 at the first update
    metrics = sac.update(*batch, rng=rng)
    assert float(metrics["sac/update_finite"]) == 1.0
    np.testing.assert_allclose(float(metrics["sac/actor_loss"]), unscaled_loss, rtol=1e-4, atol=1e-6)
    low, high = np.percentile(y, [5, 95])
    assert high - low > 5.0
    np.testing.assert_allclose(sac.return_range.numpy(), [0.01 * low, 0.01 * high], rtol=1e-4)
    np.testing.assert_allclose(float(sac.return_scale()), high - low, rtol=1e-4)


def _batch(seed):
    g = np.random.default_rng(seed)
    return (g.normal(size=(N, F)).astype(np.float32), np.tanh(g.normal(size=(N, A))).astype(np.float32),
            g.normal(size=N).astype(np.float32), np.ones(N, np.float32), g.normal(size=(N, F)).astype(np.float32))


def test_reset_starts_the_head_over_as_a_head_built_with_the_new_seed():
    """sac.reset_every: after updates have moved every part of the head, `reset(seed)` leaves it as a head built with
    `seed` (weights and targets), the temperature at sac.init_alpha, the return statistics and all three optimizers
    at zero, on the same variables: a function traced before it is not traced again and computes the new head's
    actions, and the next update is the new head's first update, as Adam's first step (t = 1) makes it."""
    config = SACConfig(units=16, init_alpha=0.5, return_normalization=True)
    sac = SAC(config, F, A, seed=3)
    variables = list(sac.variables)
    for data_seed in range(3):
        sac.update(*_batch(data_seed), rng=tf.random.Generator.from_seed(data_seed))
    act = tf.function(lambda features: sac.act(features, tf.zeros([N, A]), True))
    features = _batch(9)[0]
    before = act(features).numpy()
    fresh = SAC(config, F, A, seed=17)

    sac.reset(17)
    assert [v.ref() for v in sac.variables] == [v.ref() for v in variables]  # the same variables, new values
    for name, (mine, theirs) in {v.name: (v, w) for v, w in zip(sac.variables, fresh.variables)}.items():
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=name)
    for online, target in ((sac.critic1, sac.target_critic1), (sac.critic2, sac.target_critic2)):
        for o, t in zip(online.variables, target.variables):
            np.testing.assert_array_equal(t.numpy(), o.numpy())
    assert float(sac.alpha) == pytest.approx(0.5)
    assert sac.return_range.numpy().tolist() == [0.0, 0.0] and float(sac.return_updates.numpy()) == 0.0
    for optimizer in (sac.actor_optimizer, sac.critic_optimizer, sac.alpha_optimizer):
        assert int(optimizer.iterations.numpy()) == 0
        assert all(not np.any(slot.numpy()) for slot in (*optimizer.m, *optimizer.v))
    after = act(features).numpy()
    assert act.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(after, fresh.act(features, tf.zeros([N, A]), True).numpy(), rtol=1e-6)
    assert not np.allclose(after, before)

    sac.update(*_batch(5), rng=tf.random.Generator.from_seed(5))
    fresh.update(*_batch(5), rng=tf.random.Generator.from_seed(5))
    for mine, theirs in zip(sac.variables, fresh.variables):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-7, err_msg=mine.name)


def test_a_reset_seed_is_new_for_every_run_seed_and_step():
    """Each (run seed, update) pair gives its own seed, apart from the head's initial ones (seed and seed + 1)."""
    from planet_sac.config import MAX_SEED
    from planet_sac.control.sac import reset_seed

    seeds = {reset_seed(seed, step) for seed in (0, 1, 2, MAX_SEED) for step in (1, 2, 500, 400_000)}
    assert len(seeds) == 16 and not seeds & {0, 1, 2, 3, MAX_SEED, MAX_SEED + 1}
    assert max(seeds) < 2**63  # a stateless seed is an int64
    first = SAC(SACConfig(units=8), F, A, seed=0)
    second = SAC(SACConfig(units=8), F, A, seed=0)
    first.reset(reset_seed(0, 500))
    second.reset(reset_seed(0, 1000))
    assert not np.allclose(first.actor.out.kernel.numpy(), second.actor.out.kernel.numpy())
