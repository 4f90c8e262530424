import math

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.config import CEMConfig, ModelConfig, SACConfig
from planet_sac.control import cem
from planet_sac.control.policy import Policy
from planet_sac.control.sac import SAC, invert_gradients
from planet_sac.models.world_model import WorldModel

TINY = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8)


def tiny_agent(action_size=2, **sac_options):
    model = WorldModel(TINY, "state", (3,), action_size)
    sac = SAC(SACConfig(units=8, **sac_options), model.rssm.feature_size, action_size)
    return model, sac


# ----------------------------------------------------------------------------- CEM

def test_cem_finds_the_known_optimum_of_a_toy_return():
    """Return = -||a - target||^2 summed over the horizon: the optimum is the target sequence."""
    model, _ = tiny_agent(action_size=2)
    target = tf.constant([0.6, -0.3])
    config = CEMConfig(horizon=3, candidates=200, iterations=6, top_k=20)

    def toy_score(state, actions, noise):
        return -tf.reduce_sum(tf.square(actions - target), [1, 2])

    state = model.rssm.initial(3)  # three environments planned in one call
    rng = tf.random.Generator.from_seed(0)
    one_iteration = cem.plan(model, state, CEMConfig(horizon=3, candidates=200, iterations=1, top_k=20), rng, score=toy_score)
    action = cem.plan(model, state, config, rng, score=toy_score)
    assert action.shape == (3, 2)
    np.testing.assert_allclose(action.numpy(), np.tile(target, (3, 1)), atol=0.05)
    # More iterations improve the planned return.
    assert np.all(toy_score(None, tf.tile(action[:, None], [1, 3, 1]), None) >
                  toy_score(None, tf.tile(one_iteration[:, None], [1, 3, 1]), None))


def test_cem_respects_action_bounds():
    model, _ = tiny_agent(action_size=1)

    def wants_large(state, actions, noise):
        return tf.reduce_sum(actions, [1, 2])

    action = cem.plan(model, model.rssm.initial(2), CEMConfig(horizon=2, candidates=50, iterations=3, top_k=5),
                      tf.random.Generator.from_seed(1), score=wants_large)
    assert np.all(action.numpy() <= 1.0) and np.all(action.numpy() > 0.8)


def test_guided_cem_scores_with_the_critic_at_the_horizon():
    model, sac = tiny_agent(action_size=1)
    state = model.rssm.initial(2)
    actions = tf.zeros([2, 3, 1])
    noise = tf.zeros([2, 3, TINY.stoch_size])
    plain = cem.rollout_return(model, None, 0.9)(state, actions, noise)
    guided = cem.rollout_return(model, sac, 0.9)(state, actions, noise)
    states = model.rssm.imagine(state, actions, noise)
    rewards = model.predict_reward(states).numpy()
    last = tf.nest.map_structure(lambda t: t[:, -1], states)
    features = model.rssm.features(last)
    value = sac.q_value(features, sac.act(features, tf.zeros([2, 1]), True)).numpy()
    np.testing.assert_allclose(plain, rewards.sum(1), rtol=1e-5)
    np.testing.assert_allclose(guided, (rewards * 0.9 ** np.arange(3)).sum(1) + 0.9 ** 3 * value, rtol=1e-5)


# ----------------------------------------------------------------------------- SAC

def test_invert_gradients_matches_hand_computed_values():
    grad = tf.constant([[2.0, -2.0, 1.0, -1.0]])
    action = tf.constant([[0.5, 0.5, -1.0, 1.5]])
    # Increase: scale (1 - a) / 2; decrease: scale (a + 1) / 2. Past the upper bound the sign flips.
    expected = [[2.0 * 0.25, -2.0 * 0.75, 1.0 * 1.0, -1.0 * 1.25]]
    np.testing.assert_allclose(invert_gradients(grad, action).numpy(), expected)
    # At 1.5 an increasing gradient is inverted and pushes the action back below the bound.
    assert invert_gradients(tf.constant([1.0]), tf.constant([1.5])).numpy()[0] == pytest.approx(-0.25)


def test_invert_gradients_mode_shapes_the_actor_gradient():
    _, sac = tiny_agent(action_size=1, action_bounds="invert_gradients")
    features = tf.zeros([1, 12])
    with tf.GradientTape() as tape:
        action = tf.constant([[0.9]])
        tape.watch(action)
        from planet_sac.control.sac import _inverting_identity
        loss = -3.0 * _inverting_identity(action)  # descent gradient -3: the critic wants a larger action
    grad = tape.gradient(loss, action).numpy()
    np.testing.assert_allclose(grad, [[-3.0 * (1 - 0.9) / 2]], rtol=1e-6)
    assert sac.act(features, tf.zeros([1, 1]), True).shape == (1, 1)


def test_critic_target_on_hand_made_tensors():
    _, sac = tiny_agent(action_size=1, discount=0.9)
    features = tf.random.normal([4, 12], seed=1)
    noise = tf.zeros([4, 1])
    reward = tf.constant([1.0, 0.0, -1.0, 2.0])
    discount = tf.constant([1.0, 1.0, 0.0, 1.0])
    action, log_prob = sac.sample(features, noise)
    q = sac.q_value(features, action, target=True)
    expected = reward + 0.9 * discount * (q - sac.alpha * log_prob)
    np.testing.assert_allclose(sac.critic_target(reward, discount, features, noise), expected, rtol=1e-5)
    # Termination (discount 0) gives exactly the reward.
    assert float(sac.critic_target(reward, discount, features, noise)[2]) == pytest.approx(-1.0)


def test_tanh_log_prob_matches_change_of_variables():
    _, sac = tiny_agent(action_size=1)
    features = tf.random.normal([5, 12], seed=2)
    noise = tf.random.normal([5, 1], seed=3)
    action, log_prob = sac.sample(features, noise)
    mean, log_std = sac._distribution(features)
    u = mean + tf.exp(log_std) * noise
    gaussian = -0.5 * noise ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    expected = tf.reduce_sum(gaussian - tf.math.log(1 - tf.tanh(u) ** 2), -1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-4)
    np.testing.assert_allclose(action, tf.tanh(u), rtol=1e-6)


def test_entropy_temperature_moves_towards_target_entropy():
    _, sac = tiny_agent(action_size=1, init_alpha=1.0, alpha_lr=0.1)
    rng = tf.random.Generator.from_seed(0)
    features = tf.random.normal([32, 12], seed=4)
    batch = (features, tf.zeros([32, 1]), tf.zeros([32]), tf.ones([32]), features)
    _, log_prob = sac.sample(features, rng.normal([32, 1]))
    entropy = -float(tf.reduce_mean(log_prob))
    before = float(sac.log_alpha.numpy())
    sac.update(*batch, rng=rng)
    after = float(sac.log_alpha.numpy())
    # alpha grows when the policy's entropy is below the target (-|A| = -1) and shrinks above it.
    assert (after - before) * (entropy - sac.target_entropy) < 0


def test_soft_update_moves_targets_by_tau():
    _, sac = tiny_agent(action_size=1)
    for variable in sac.critic1.variables:
        variable.assign(tf.ones_like(variable))
    for variable in sac.target_critic1.variables:
        variable.assign(tf.zeros_like(variable))
    sac.soft_update_targets(0.005)
    for variable in sac.target_critic1.variables:
        np.testing.assert_allclose(variable.numpy(), 0.005)


def test_targets_start_equal_to_online_critics():
    _, sac = tiny_agent()
    for online, target in zip(sac.critic1.variables, sac.target_critic1.variables):
        np.testing.assert_array_equal(online.numpy(), target.numpy())


# ----------------------------------------------------------------------------- the phase-gated policy

def test_switching_phase_and_policy_never_retraces():
    model, sac = tiny_agent(action_size=1)
    policy = Policy(model, sac, CEMConfig(horizon=2, candidates=16, iterations=2, top_k=4), train="cem", test="sac")
    state = policy.initial_state(3)
    obs = tf.zeros([3, 3])
    for train, test in [("cem", "sac"), ("random", "sac_guided_cem"), ("sac", "cem"), ("sac_guided_cem", "random")]:
        policy.set_policies(train=train, test=test)
        for phase in ("train", "test", "train"):
            action, state = policy.act(obs, state, phase)
            assert action.shape == (3, 1)
            assert np.all(np.abs(action.numpy()) <= 1.0)
    assert policy.traces == 1


def test_policy_dispatch_follows_the_phase_mapping():
    model, sac = tiny_agent(action_size=1)
    policy = Policy(model, sac, CEMConfig(horizon=2, candidates=16, iterations=2, top_k=4, exploration_noise=0.0),
                    train="random", test="sac")
    obs = tf.zeros([1, 3])
    state = policy.initial_state(1)
    deterministic = [policy.act(obs, state, "test")[0].numpy() for _ in range(3)]
    np.testing.assert_allclose(deterministic[0], deterministic[1])  # SAC mode in the test phase
    random = [policy.act(obs, state, "train")[0].numpy() for _ in range(3)]
    assert not np.allclose(random[0], random[1])  # random policy in the train phase
    with pytest.raises(ValueError, match="unknown policy 'ppo'"):
        policy.set_policies(train="ppo")
