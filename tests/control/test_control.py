import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.agent import Agent
from planet_sac.config import CEMConfig, Config, ModelConfig, SACConfig
from planet_sac.config_loading import apply_overrides
from planet_sac.control import cem
from planet_sac.control.policy import Policy
from planet_sac.control.sac import SAC, invert_gradients
from planet_sac.models.world_model import WorldModel
from tests import numpy_reference as ref

TINY = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8)


def tiny_agent(action_size=2, **sac_options):
    model = WorldModel(TINY, "state", (3,), action_size)
    sac = SAC(SACConfig(units=8, **sac_options), model.rssm.feature_size, action_size)
    return model, sac


# ----------------------------------------------------------------------------- CEM

def test_cem_finds_the_known_optimum_of_a_toy_return():
    """Return = -||a - target||^2 summed over the horizon: the optimum is the target sequence, and the action
    executed is its first step (PlaNet), not another."""
    model, _ = tiny_agent(action_size=2)
    target = np.array([[0.6, -0.3], [-0.5, 0.2], [0.1, 0.7]], np.float32)  # [H, A], a different action per step
    config = CEMConfig(horizon=3, candidates=200, iterations=6, top_k=20)

    def toy_score(state, actions, noise):
        return -tf.reduce_sum(tf.square(actions - target), [1, 2])

    state = model.rssm.initial(3)  # three environments planned in one call
    rng = tf.random.Generator.from_seed(0)
    one_iteration = cem.plan(model, state, CEMConfig(horizon=3, candidates=200, iterations=1, top_k=20), rng, score=toy_score)
    action, plan = cem.search(model, state, config, rng, score=toy_score)
    assert action.shape == (3, 2) and plan.shape == (3, 3, 2)
    np.testing.assert_allclose(action.numpy(), np.tile(target[0], (3, 1)), atol=0.05)
    np.testing.assert_allclose(plan.numpy(), np.tile(target, (3, 1, 1)), atol=0.05)
    # More iterations improve the first action's part of the return.
    first_step_error = lambda a: np.sum(np.square(a - target[0]), -1)  # noqa: E731
    assert np.all(first_step_error(action.numpy()) < first_step_error(one_iteration.numpy()))


def test_each_iteration_samples_around_the_refit_of_the_last_iterations_elites():
    """Every candidate by numpy from the search's own normal draws (the same stream, cloned): the first iteration
    scores clip(N(0, 1), -1, 1); each next one clip(m + s * eps, -1, 1), m and s = sqrt(var + 1e-6) of the last
    iteration's top_k candidates by score; each with fresh N(0, 1) latent noise; `iterations` of them; the plan is
    the last refit's mean."""
    model, _ = tiny_agent(action_size=2)
    envs, horizon, count, top_k, iterations = 2, 3, 40, 6, 3
    target = np.array([[0.6, -0.3], [-0.5, 0.2], [0.1, 0.7]], np.float32)
    seen = []

    def score(state, actions, noise):
        seen.append((actions.numpy(), noise.numpy()))
        return -tf.reduce_sum(tf.square(actions - target), [1, 2])

    rng = tf.random.Generator.from_seed(6)
    stream = tf.random.Generator.from_state(rng.state.numpy(), rng.algorithm)
    config = CEMConfig(horizon=horizon, candidates=count, iterations=iterations, top_k=top_k)
    action, plan = cem.search(model, model.rssm.initial(envs), config, rng, score=score)
    assert len(seen) == iterations
    mean, std = np.zeros([envs, 1, horizon, 2]), np.ones([envs, 1, horizon, 2])
    for actions, noise in seen:
        expected = np.clip(mean + std * stream.normal([envs, count, horizon, 2]).numpy(), -1.0, 1.0)
        np.testing.assert_allclose(actions.reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(noise, stream.normal([envs * count, horizon, TINY.stoch_size]).numpy())
        returns = -np.sum(np.square(expected - target), (2, 3))
        elites = np.take_along_axis(expected, np.argsort(-returns, 1)[:, :top_k, None, None], 1)
        mean, std = elites.mean(1, keepdims=True), np.sqrt(elites.var(1, keepdims=True) + 1e-6)
    assert np.abs(seen[0][0]).max() == 1.0  # N(0, 1) draws past the bounds were clipped
    np.testing.assert_allclose(plan.numpy(), mean[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(action.numpy(), mean[:, 0, 0], rtol=1e-5, atol=1e-6)


def test_each_environment_plans_from_its_own_start_state():
    """Three environments in different latent states, a return whose optimum is each start state's first two
    deterministic units: each plan finds its own environment's, so its candidates were scored from its own state."""
    model, _ = tiny_agent(action_size=2)
    deter = np.zeros([3, TINY.deter_size], np.float32)
    deter[:, :2] = [[0.5, -0.5], [-0.2, 0.6], [0.0, 0.3]]
    state = {**model.rssm.initial(3), "deter": tf.constant(deter)}

    def own_target(start, actions, noise):
        return -tf.reduce_sum(tf.square(actions - start["deter"][:, None, :2]), [1, 2])

    _, plan = cem.search(model, state, CEMConfig(horizon=2, candidates=200, iterations=5, top_k=20),
                         tf.random.Generator.from_seed(2), score=own_target)
    np.testing.assert_allclose(plan.numpy(), np.repeat(deter[:, None, :2], 2, 1), atol=0.05)


def test_shift_plan_moves_the_plan_one_step_earlier_and_ends_it_with_a_zero_action():
    plan = tf.constant([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]])  # [B=1, H=3, A=2]
    np.testing.assert_array_equal(cem.shift_plan(plan).numpy(), [[[3.0, 4.0], [5.0, 6.0], [0.0, 0.0]]])


def test_cem_respects_action_bounds():
    model, _ = tiny_agent(action_size=1)

    def wants_large(state, actions, noise):
        return tf.reduce_sum(actions, [1, 2])

    action = cem.plan(model, model.rssm.initial(2), CEMConfig(horizon=2, candidates=50, iterations=3, top_k=5),
                      tf.random.Generator.from_seed(1), score=wants_large)
    assert np.all(action.numpy() <= 1.0) and np.all(action.numpy() > 0.8)


def test_guided_cem_scores_with_the_critic_at_the_horizon():
    """CEM scores the discounted sum of predicted rewards; guided CEM adds gamma^H Q(z_H, mode of pi)."""
    model, sac = tiny_agent(action_size=1)
    rng = np.random.default_rng(0)
    state = {key: tf.constant(rng.normal(size=value.shape), tf.float32) for key, value in model.rssm.initial(2).items()}
    state["std"] = tf.abs(state["std"])
    actions = tf.constant(rng.uniform(-1, 1, (2, 3, 1)), tf.float32)
    noise = tf.constant(rng.normal(size=(2, 3, TINY.stoch_size)), tf.float32)
    plain = cem.rollout_return(model, None, 0.9)(state, actions, noise)
    guided = cem.rollout_return(model, sac, 0.9)(state, actions, noise)

    stoch, deter = state["stoch"].numpy(), state["deter"].numpy()
    rewards = []
    for t in range(3):
        step = ref.img_step(model.rssm, stoch, deter, actions[:, t].numpy(), noise[:, t].numpy())
        stoch, deter = step["stoch"], step["deter"]
        rewards.append(ref.mlp(ref.features(step), model.reward, ref.relu)[:, 0])
    rewards = np.stack(rewards, 1)
    last = ref.features(step)
    value = ref.q_value(sac, last, np.tanh(ref.actor(sac, last)[0]))
    discounted = rewards[:, 0] + 0.9 * rewards[:, 1] + 0.81 * rewards[:, 2]
    np.testing.assert_allclose(plain, discounted, rtol=1e-4)
    np.testing.assert_allclose(guided, discounted + 0.729 * value, rtol=1e-4)
    weighted = cem.rollout_return(model, sac, 0.9, value_weight=0.25)(state, actions, noise)
    np.testing.assert_allclose(weighted, discounted + 0.25 * 0.729 * value, rtol=1e-4)


def test_actor_mean_starts_the_search_at_the_mean_of_the_actor_trajectories():
    """With cem.actor_mean the first iteration samples around the actor trajectories' mean instead of zero."""
    model, sac = tiny_agent(action_size=2)
    state = model.rssm.initial(2)
    config = CEMConfig(horizon=3, candidates=8, iterations=1, top_k=2, guide_fraction=0.5)
    sampled = 4

    def first_candidates(actor_mean: bool) -> np.ndarray:
        seen = []

        def score(start, flat, noise):
            seen.append(flat.numpy())
            return tf.zeros([flat.shape[0]])

        cem.search(model, state, dataclasses.replace(config, actor_mean=actor_mean), tf.random.Generator.from_seed(3),
                   sac, config.guide_fraction, score)
        return seen[0].reshape(2, config.candidates, 3, 2)

    with_actor, from_zero = first_candidates(True), first_candidates(False)
    np.testing.assert_array_equal(with_actor[:, sampled:], from_zero[:, sampled:])  # the same actor trajectories
    actor_mean = with_actor[:, sampled:].mean(1, keepdims=True)  # [B, 1, H, A], computed here from what was scored
    assert np.abs(actor_mean).max() > 0.05
    inside = (np.abs(with_actor[:, :sampled]) < 1) & (np.abs(from_zero[:, :sampled]) < 1)  # neither clipped
    assert inside.mean() > 0.3
    shift = (with_actor[:, :sampled] - from_zero[:, :sampled])[inside]
    np.testing.assert_allclose(shift, np.broadcast_to(actor_mean, with_actor[:, :sampled].shape)[inside], atol=1e-5)


def test_select_elite_acts_from_one_final_elite_where_the_mean_falls_between_two_modes():
    """Return = -(|a_0| - 0.7)^2: the elites split between +0.7 and -0.7, their mean lies near 0; an elite is at a mode."""
    model, _ = tiny_agent(action_size=1)
    recorded = []

    def two_modes(state, actions, noise):
        recorded.append(actions.numpy()[:, 0, 0])  # each iteration's candidates' first actions
        return -tf.square(tf.abs(actions[:, 0, 0]) - 0.7)

    def last_scores() -> np.ndarray:  # [8 environments, 400 candidates] of the last iteration, by numpy
        return -np.square(np.abs(recorded[-1].reshape(8, 400)) - 0.7)

    config = CEMConfig(horizon=2, candidates=400, iterations=3, top_k=40)
    state = model.rssm.initial(8)
    mean_action = cem.plan(model, state, config, tf.random.Generator.from_seed(4), score=two_modes).numpy()[:, 0]
    recorded.clear()
    elite_action = cem.plan(model, state, dataclasses.replace(config, select="elite"), tf.random.Generator.from_seed(4),
                            score=two_modes).numpy()[:, 0]
    fortieth = np.sort(last_scores(), 1)[:, -40]
    assert np.all(-np.square(np.abs(elite_action) - 0.7) >= fortieth - 1e-6)  # an elite of the last iteration
    assert np.all(np.abs(np.abs(elite_action) - 0.7) < 0.1) and np.any(elite_action > 0) and np.any(elite_action < 0)
    assert np.mean(np.abs(mean_action)) < 0.4
    recorded.clear()  # a high temperature draws the best elite
    greedy = cem.plan(model, state, dataclasses.replace(config, select="elite", temperature=1e9),
                      tf.random.Generator.from_seed(5), score=two_modes).numpy()[:, 0]
    np.testing.assert_allclose(-np.square(np.abs(greedy) - 0.7), last_scores().max(1), atol=1e-6)


def test_draw_elite_draws_with_softmax_probabilities():
    """exp(T * r) / sum: returns ln([1, 2, 3, 4]) / T and a very low one give probabilities 0.1, 0.2, 0.3, 0.4, 0."""
    temperature = 0.5
    row = [*(np.log([1.0, 2.0, 3.0, 4.0]) / temperature), -1e4]
    drawn = cem.draw_elite(tf.constant([row] * 40_000, tf.float32), temperature, tf.random.Generator.from_seed(0)).numpy()
    frequencies = np.bincount(drawn, minlength=5) / len(drawn)
    np.testing.assert_allclose(frequencies, [0.1, 0.2, 0.3, 0.4, 0.0], atol=0.012)


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
        from planet_sac.control.sac import _inverting_clip
        loss = -3.0 * _inverting_clip(action)  # descent gradient -3: the critic wants a larger action
    grad = tape.gradient(loss, action).numpy()
    np.testing.assert_allclose(grad, [[-3.0 * (1 - 0.9) / 2]], rtol=1e-6)
    assert sac.act(features, tf.zeros([1, 1]), True).shape == (1, 1)


def actor_outputs(sac, mean, log_std):
    """An actor whose output is (mean, log_std) for every input: zero output kernel, bias set."""
    sac.actor.out.kernel.assign(tf.zeros_like(sac.actor.out.kernel))
    sac.actor.out.bias.assign([mean] * sac.action_size + [log_std] * sac.action_size)


def test_invert_gradients_queries_the_critic_at_the_clipped_action():
    """Actor mean 3, log-std -5, noise 1: u = 3 + e^-5 = 3.0067 lies past the bound; the critic sees a = 1.0,
    in the critic target and in the actor loss, and the actor's gradient is inverted at the bound."""
    _, sac = tiny_agent(action_size=1, action_bounds="invert_gradients", discount=0.9, init_alpha=0.5)
    actor_outputs(sac, 3.0, -5.0)
    u = 3.0 + math.exp(-5.0)
    features = np.random.default_rng(4).normal(size=(3, 12)).astype(np.float32)
    noise = np.ones([3, 1], np.float32)
    action, log_prob = sac.sample(features, noise)
    np.testing.assert_array_equal(action.numpy(), 1.0)
    np.testing.assert_allclose(log_prob.numpy(), -0.5 + 5.0 - 0.5 * math.log(2 * math.pi), rtol=1e-6)  # Gaussian of u
    # Critic target at a' = 1.0, by hand: y = r + gamma * d * (min Q_target(z', 1) - alpha * log pi).
    reward, discount = np.array([1.0, 0.0, -1.0], np.float32), np.array([1.0, 0.5, 0.0], np.float32)
    soft = ref.q_value(sac, features, np.ones([3, 1]), target=True) - 0.5 * (4.5 - 0.5 * math.log(2 * math.pi))
    target = sac.critic_target(reward, discount, features, noise).numpy()
    np.testing.assert_allclose(target, reward + 0.9 * discount * soft, rtol=1e-4, atol=1e-5)
    # Actor loss with a critic Q = 2a: the critic is queried at 1.0, and d loss / d mean = (u - 1), Hausknecht &
    # Stone's factor (1 - u) / 2 on the ascent gradient 2 (per sample, averaged): positive, so descent pulls u back.
    seen = []
    sac.q_value = lambda f, a, target=False: seen.append(a.numpy()) or 2.0 * tf.reduce_sum(a, -1)
    with tf.GradientTape() as tape:
        loss, _ = sac.actor_loss(features, noise)
    grad = tape.gradient(loss, sac.actor.out.bias).numpy()
    np.testing.assert_array_equal(np.concatenate(seen), 1.0)
    assert grad[0] == pytest.approx(u - 1.0, rel=1e-5)


def test_critic_target_on_hand_made_tensors():
    """y = r + gamma * d * (min Q_target(z', a') - alpha * log pi(a'|z')), a' = tanh(mean + std * noise)."""
    _, sac = tiny_agent(action_size=1, discount=0.9, init_alpha=0.5)
    for online, target in zip(sac.critic1.variables + sac.critic2.variables,
                              sac.target_critic1.variables + sac.target_critic2.variables):
        target.assign(online * 1.5 + 0.1)  # targets differ from the online critics, so using the wrong ones shows
    rng = np.random.default_rng(1)
    next_features = rng.normal(size=(4, 12)).astype(np.float32)
    noise = rng.normal(size=(4, 1)).astype(np.float32)
    reward = np.array([1.0, 0.0, -1.0, 2.0], np.float32)
    discount = np.array([1.0, 1.0, 0.0, 1.0], np.float32)
    next_action, log_prob = ref.sample(sac, next_features, noise)
    soft_value = ref.q_value(sac, next_features, next_action, target=True) - 0.5 * log_prob
    expected = reward + 0.9 * discount * soft_value
    target = sac.critic_target(reward, discount, next_features, noise).numpy()
    np.testing.assert_allclose(target, expected, rtol=1e-4, atol=1e-5)
    assert target[2] == pytest.approx(-1.0)  # termination (discount 0) gives exactly the reward


def test_tanh_log_prob_matches_change_of_variables():
    _, sac = tiny_agent(action_size=2)
    rng = np.random.default_rng(2)
    features = rng.normal(size=(5, 12)).astype(np.float32)
    noise = rng.normal(size=(5, 2)).astype(np.float32)
    action, log_prob = sac.sample(features, noise)
    expected_action, expected_log_prob = ref.sample(sac, features, noise)
    np.testing.assert_allclose(log_prob, expected_log_prob, rtol=1e-4)
    np.testing.assert_allclose(action, expected_action, rtol=1e-5, atol=1e-6)


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


def test_invert_gradients_acts_inside_the_bounds():
    """sac.action_bounds=invert_gradients: the unsquashed Gaussian's mode 3 and its samples around it act as 1.0."""
    _, sac = tiny_agent(action_size=1, action_bounds="invert_gradients")
    actor_outputs(sac, 3.0, -5.0)
    features = np.random.default_rng(5).normal(size=(4, 12)).astype(np.float32)
    noise = np.array([[1.0], [-1.0], [0.0], [2.0]], np.float32)
    for deterministic in (True, False):
        np.testing.assert_array_equal(sac.act(features, noise, deterministic).numpy(), 1.0)


# ----------------------------------------------------------------------------- the phase-gated policy

SWITCHES = [("cem", "sac"), ("random", "sac_guided_cem"), ("sac", "cem"), ("sac_guided_cem", "random")]


def switch_phases_and_policies(policy, envs: int) -> None:
    """Acts with every pair of SWITCHES in the train, test and train phase again, carrying the state: bounded actions."""
    state = policy.initial_state(envs)
    obs = tf.zeros([envs, 3])
    for train, test in SWITCHES:
        policy.set_policies(train=train, test=test)
        for phase in ("train", "test", "train"):
            action, state = policy.act(obs, state, phase)
            assert action.shape == (envs, 1)
            assert np.all(np.abs(action.numpy()) <= 1.0)


# Each branch of the compiled policy, made observable: a test that swaps two branches fails.

# Horizon 1: the first action is also the last, so the value at the horizon judges it.
BRANCH_CEM = CEMConfig(horizon=1, candidates=64, iterations=3, top_k=8, exploration_noise=0.0, guide_fraction=0.5)


def zero(module):
    for variable in module.variables:
        variable.assign(tf.zeros_like(variable))


def known_optimum_agent():
    """A model whose predicted reward rises with the action (best: +1) and a critic that prefers -1.

    prior_in: x0 = relu(a + 2) = a + 2; GRU with its update gate shut: deter0 = tanh(0.5 x0 - 1)
    = tanh(a / 2); reward head: relu(relu(deter0 + 1)) = deter0 + 1, increasing in a and
    independent of the start state. The critics score -20 * elu(elu(deter0)), so adding the
    value at the horizon (sac_guided_cem) makes -1 best, while the rewards alone (cem) make +1 best.
    """
    model, sac = tiny_agent(action_size=1)
    rssm, stoch = model.rssm, TINY.stoch_size
    for module in (rssm, model.reward):
        zero(module)
    rssm.prior_in.kernel[stoch, 0].assign(1.0)
    rssm.prior_in.bias[0].assign(2.0)
    rssm.gru.gates_bias.assign(tf.concat([tf.zeros([TINY.deter_size]), tf.fill([TINY.deter_size], -30.0)], 0))
    rssm.gru.candidate_kernel[0, 0].assign(0.5)
    rssm.gru.candidate_bias[0].assign(-1.0)
    model.reward.hidden[0].bias[0].assign(1.0)
    for layer in model.reward.hidden:
        layer.kernel[0, 0].assign(1.0)
    model.reward.out.kernel[0, 0].assign(1.0)
    for critic in (sac.critic1, sac.critic2, sac.target_critic1, sac.target_critic2):
        zero(critic)
        for layer in critic.hidden:
            layer.kernel[0, 0].assign(1.0)
        critic.out.kernel[0, 0].assign(-20.0)
    return model, sac


def test_known_optimum_agent_is_what_it_claims():
    model, sac = known_optimum_agent()
    actions = tf.constant([[[-1.0], [-1.0]], [[0.0], [0.0]], [[1.0], [1.0]]])
    start = model.rssm.initial(3)
    noise = tf.random.normal([3, 2, TINY.stoch_size], seed=0)
    plain = cem.rollout_return(model, None, 0.99)(start, actions, noise).numpy()
    guided = cem.rollout_return(model, sac, 0.99)(start, actions, noise).numpy()
    assert plain[0] < plain[1] < plain[2] and guided[0] > guided[1] > guided[2]


def test_guided_cem_rounds_its_guide_fraction_of_the_population_to_the_nearest_count():
    """guide_fraction 0.38 of 10 candidates: round(3.8) = 4 trajectories of the actor's mode (actor_std 0: its constant
    action -0.3) after the 6 sampled ones."""
    model, sac = tiny_agent(action_size=1)
    zero(sac.actor)
    sac.actor.out.bias[0].assign(math.atanh(-0.3))
    seen = []

    def score(state, actions, noise):
        seen.append(actions.numpy())
        return tf.zeros([actions.shape[0]])

    config = CEMConfig(horizon=2, candidates=10, iterations=1, top_k=2, actor_std=0.0)
    cem.search(model, model.rssm.initial(1), config, tf.random.Generator.from_seed(1), sac, 0.38, score)
    from_actor = np.all(np.abs(seen[0] + 0.3) < 1e-6, axis=(1, 2))
    assert from_actor.tolist() == [False] * 6 + [True] * 4


@pytest.mark.slow
def test_xla_policy_computes_what_the_graph_policy_computes():
    """One XLA-compiled policy (one compile for all branches): CEM finds the top of the reward, SAC-guided CEM
    follows the critic, and the deterministic parts are the graph's numbers: the posterior's mean and std, and SAC's
    mode (test phase) at the posterior sample each drew (XLA draws its own stream from the same seed). Switching
    phase and policy (every pair of SWITCHES, in both phases) never retraces it.

    The graph policy first shows the same on its own, its branches switched without a retrace: CEM in the train and
    the test phase finds the top of the reward; SAC-guided CEM follows the critic."""
    model, sac = known_optimum_agent()
    graph = Policy(model, sac, BRANCH_CEM, train="cem", test="cem", seed=3, jit_compile=False)
    for phase in ("train", "test"):
        action, _ = graph.act(tf.zeros([4, 3]), graph.initial_state(4), phase)
        assert np.all(action.numpy() > 0.8), (phase, action)  # the planner finds the top of the reward
    graph.set_policies(train="sac_guided_cem", test="sac_guided_cem")
    for phase in ("train", "test"):
        action, _ = graph.act(tf.zeros([4, 3]), graph.initial_state(4), phase)
        assert np.all(action.numpy() < -0.6), (phase, action)  # the value at the horizon outweighs the rewards
    assert graph.traces == 1

    policy = Policy(model, sac, BRANCH_CEM, train="cem", test="sac_guided_cem", seed=3, jit_compile=True)
    planned, _ = policy.act(tf.zeros([4, 3]), policy.initial_state(4), "train")
    assert np.all(planned.numpy() > 0.8), planned
    guided, _ = policy.act(tf.zeros([4, 3]), policy.initial_state(4), "test")
    assert np.all(guided.numpy() < -0.6), guided
    obs = tf.random.stateless_normal([4, 3], seed=[0, 1])
    policy.set_policies(test="sac")
    graph.set_policies(train="sac", test="sac")
    graph.rng.reset_from_seed(3)  # the stream it started with
    latents = []
    for acting in (graph, policy):
        action, (latent, *_) = acting.act(obs, acting.initial_state(4), "test")
        latents.append({key: value.numpy() for key, value in latent.items()})
        np.testing.assert_allclose(action.numpy(), np.tanh(ref.actor(sac, ref.features(latents[-1]))[0]), atol=1e-5)
    for key in ("mean", "std", "deter"):
        np.testing.assert_allclose(latents[1][key], latents[0][key], atol=1e-5, err_msg=key)
    switch_phases_and_policies(policy, 4)
    assert policy.traces == 1


@pytest.mark.slow
@pytest.mark.e2e
def test_policy_jit_compile_key_acts_through_xla_with_its_own_reproducible_stream():
    """`policy.jit_compile` reaches the policy: XLA's random stream differs from the graph's for the same seed
    (TensorFlow's stateful generator compiles differently), a seed still fixes it, and it is uniform in [-1, 1]."""
    draws = {}
    for jit_compile in (True, False):
        config = apply_overrides(Config(), ["model.deter_size=8", "model.stoch_size=4", "model.hidden_size=8",
                                            "model.mlp_units=8", "sac.units=8", "policy.train=random",
                                            f"policy.jit_compile={str(jit_compile).lower()}"])
        policy = Agent.build(config, "state", (3,), 1).policy
        state, draws[jit_compile] = policy.initial_state(500), []
        for _ in range(2):
            policy.rng.reset_from_seed(5)
            draws[jit_compile].append(np.concatenate([policy.act(tf.zeros([500, 3]), state, "train")[0].numpy()
                                                      for _ in range(4)]))
    np.testing.assert_array_equal(draws[True][0], draws[True][1])
    assert not np.allclose(draws[True][0][:500], draws[True][0][500:1000])  # the state advances from call to call
    assert not np.allclose(draws[True][0], draws[False][0])
    values = draws[True][0].ravel()
    assert values.min() >= -1.0 and values.max() <= 1.0
    assert abs(values.mean()) < 0.05 and abs(values.std() - 1 / np.sqrt(3)) < 0.03  # U(-1, 1): std 0.577


@pytest.mark.parametrize("actor_std", [None, 0.0, 0.05])
def test_actor_trajectories_sample_the_actor_or_its_mode_with_a_fixed_std(actor_std):
    """cem.actor_std None: the first actions follow SAC's own distribution; a number: its mode + N(0, actor_std) (TD-MPC)."""
    model, sac = tiny_agent(action_size=2)
    count = 4000
    state = model.rssm.initial(count)  # the same start state for every trajectory
    actions = cem._actor_trajectories(model, sac, state, 3, tf.random.Generator.from_seed(5), actor_std).numpy()
    first = actions[:, 0]  # [N, A]
    mean, log_std = ref.actor(sac, ref.features({k: v[:1].numpy() for k, v in state.items()}))
    mode = np.tanh(mean[0])
    if actor_std is None:
        samples = np.tanh(mean[0] + np.exp(log_std[0]) * np.random.default_rng(0).standard_normal((count, 2)))
        np.testing.assert_allclose(first.std(0), samples.std(0), rtol=0.1)
        np.testing.assert_allclose(first.mean(0), samples.mean(0), atol=0.05)
        assert first.std(0).min() > 0.2
    elif actor_std == 0.0:
        np.testing.assert_allclose(first, np.broadcast_to(mode, first.shape), atol=1e-5)
    else:
        np.testing.assert_allclose(first.std(0), actor_std, rtol=0.1)
        np.testing.assert_allclose(first.mean(0), mode, atol=3 * actor_std / np.sqrt(count) + 1e-4)


def test_actor_trajectories_roll_the_model_forward_with_each_clipped_action():
    """cem.actor_std=0.5 around modes near 0.9: each action is clip(tanh(mu(z_t)) + 0.5 eps_t, -1, 1), and z_t+1 the
    model's prior step from z_t under that action; by numpy from the draws of the same stream (actions, then latents)."""
    model, sac = tiny_agent(action_size=2)
    g = np.random.default_rng(8)
    for variable in model.rssm.variables:  # a prior that depends on the action
        variable.assign(g.normal(0, 0.5, variable.shape).astype(np.float32))
    sac.actor.out.bias.assign([1.5, 1.4, 0.0, 0.0])  # modes tanh(1.5) ~ 0.9: a third of the samples pass 1
    count, horizon = 64, 3
    state = {key: tf.constant(g.normal(size=value.shape), tf.float32) for key, value in model.rssm.initial(count).items()}
    rng = tf.random.Generator.from_seed(9)
    stream = tf.random.Generator.from_state(rng.state.numpy(), rng.algorithm)
    actions = cem._actor_trajectories(model, sac, state, horizon, rng, 0.5).numpy()
    action_noise = stream.normal([horizon, count, 2]).numpy()
    latent_noise = stream.normal([horizon, count, TINY.stoch_size]).numpy()
    stoch, deter = state["stoch"].numpy(), state["deter"].numpy()
    for t in range(horizon):
        mode = np.tanh(ref.actor(sac, np.concatenate([deter, stoch], -1))[0])
        expected = np.clip(mode + 0.5 * action_noise[t], -1.0, 1.0)
        np.testing.assert_allclose(actions[:, t], expected, rtol=1e-4, atol=1e-5, err_msg=f"step {t}")
        step = ref.img_step(model.rssm, stoch, deter, expected, latent_noise[t])
        stoch, deter = step["stoch"], step["deter"]
    assert np.mean(actions == 1.0) > 0.1


@pytest.mark.slow
def test_five_policies_trace_once_and_act_by_their_branches(tensorflow_warnings):
    """Five graph policies in one process, each traced once by its first act (the five first acts in a row), each with
    its own checks:

    - No retracing warning: an evaluation of several policies builds one Policy each; each traces once, which
      TensorFlow used to count together (keyed by Policy._act's code) and warn about as excessive retracing (five
      traces in the last ten calls of one function).
    - The policy filters with the action it took: the posterior at step 2 is the numpy RSSM's from step 1's sample
      under step 1's action (the mean and the deterministic state, which no noise enters), and the state handed back
      carries that action.
    - Guided CEM draws its guide fraction of the population from the actor: with the whole population drawn from the
      actor's mode (guide_fraction 1, actor_std 0), every candidate is the actor's constant action, so the plan is that
      action whatever the critic prefers (-1 here).
    - The SAC branch returns the actor's mode in the test phase and samples in the train phase: test phase,
      tanh(actor mean) of a posterior *sample*, as the model and SAC train on (and as PlaNet's MPCAgent and Dreamer's
      policy act), computed here in numpy with the policy's first normal draw as noise.
    - The random branch (the same policy, switched) is uniform in the action box, in both phases.
    - sac.test_action=sample: the test phase acts with tanh(mean + std * noise), the noise the policy's draw after the
      posterior's; computed in numpy from the policy's random stream.
    - Dispatch follows the phase mapping (SAC's mode in the test phase, random in the train phase, an unknown policy
      refused), and switching phase and policy (every pair of SWITCHES) never retraces the graph policy (the XLA
      policy switches too in test_xla_policy_computes_what_the_graph_policy_computes)."""
    # 1. Filtering: a prior that depends on the action.
    filter_model, filter_sac = tiny_agent(action_size=2)
    for variable in filter_model.rssm.variables:
        variable.assign(tf.random.stateless_normal(variable.shape, [2, 3], stddev=0.5))
    filtering = Policy(filter_model, filter_sac, CEMConfig(horizon=2, candidates=8, iterations=1, top_k=2),
                       train="random", test="sac")
    filter_obs = tf.random.stateless_normal([3, 3], [4, 5])
    filter_action, filter_state = filtering.act(filter_obs, filtering.initial_state(3), "train")

    # 2. Guided CEM's population from the actor's mode: tanh(atanh(-0.3)) in every state.
    guided_model, guided_sac = known_optimum_agent()
    zero(guided_sac.actor)
    guided_sac.actor.out.bias[0].assign(math.atanh(-0.3))
    guided = Policy(guided_model, guided_sac, dataclasses.replace(BRANCH_CEM, guide_fraction=1.0, actor_std=0.0),
                    train="sac_guided_cem", test="sac_guided_cem")
    guided_action, _ = guided.act(tf.zeros([2, 3]), guided.initial_state(2), "test")

    # 3. The SAC branch's mode, at a posterior sample.
    mode_model, mode_sac = tiny_agent(action_size=2)
    mode_rng = np.random.default_rng(3)
    for variable in mode_model.rssm.variables + mode_sac.actor.variables:
        variable.assign(mode_rng.normal(0, 0.5, variable.shape).astype(np.float32))
    mode_policy = Policy(mode_model, mode_sac, BRANCH_CEM, train="sac", test="sac", seed=11)
    mode_obs = mode_rng.normal(size=(5, 3)).astype(np.float32)
    mode_action, (mode_latent, *_) = mode_policy.act(mode_obs, mode_policy.initial_state(5), "test")

    # 4. sac.test_action=sample.
    sample_model, sample_sac = tiny_agent(action_size=2, test_action="sample")
    sample_rng = np.random.default_rng(4)
    for variable in sample_model.rssm.variables + sample_sac.actor.variables:
        variable.assign(sample_rng.normal(0, 0.5, variable.shape).astype(np.float32))
    sampling = Policy(sample_model, sample_sac, BRANCH_CEM, train="sac", test="sac", seed=12)
    sample_obs = sample_rng.normal(size=(5, 3)).astype(np.float32)
    sample_action, _ = sampling.act(sample_obs, sampling.initial_state(5), "test")

    # 5. Dispatch and switching.
    dispatch_model, dispatch_sac = tiny_agent(action_size=1)
    dispatch = Policy(dispatch_model, dispatch_sac, CEMConfig(horizon=2, candidates=16, iterations=2, top_k=4,
                                                              exploration_noise=0.0),
                      train="random", test="sac", jit_compile=False)
    dispatch_obs = tf.zeros([1, 3])
    dispatch_state = dispatch.initial_state(1)
    dispatch_acts = [dispatch.act(dispatch_obs, dispatch_state, "test")]

    # 1. The posterior of the second step.
    np.testing.assert_array_equal(filter_state[1].numpy(), filter_action.numpy())
    latent = {key: value.numpy() for key, value in filter_state[0].items()}
    _, (after, *_) = filtering.act(filter_obs, filter_state, "train")
    prior = ref.img_step(filter_model.rssm, latent["stoch"], latent["deter"], filter_action.numpy(),
                         np.zeros([3, TINY.stoch_size]))
    hidden = ref.dense(np.concatenate([prior["deter"], filter_model.embed(filter_obs).numpy()], -1),
                       filter_model.rssm.posterior_hidden, ref.relu)
    mean, _, _ = ref.gaussian(ref.dense(hidden, filter_model.rssm.posterior_out), np.zeros([3, TINY.stoch_size]),
                              filter_model.rssm.min_stddev)
    np.testing.assert_allclose(after["deter"].numpy(), prior["deter"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after["mean"].numpy(), mean, rtol=1e-5, atol=1e-5)

    # 2. Every candidate the actor's constant action.
    np.testing.assert_allclose(guided_action.numpy(), -0.3, rtol=0, atol=1e-5)

    # 3. The mode in the test phase, samples in the train phase.
    noise = tf.random.Generator.from_seed(11).normal([5, TINY.stoch_size]).numpy()  # the act's first draw
    embed = ref.mlp(mode_obs, mode_model.encoder, ref.relu)[:, None]  # PlaNet: ReLU state encoder
    posts, _ = ref.observe(mode_model.rssm, embed, np.zeros([5, 1, 2]), noise[:, None])
    features = ref.features({key: value[:, 0] for key, value in posts.items()})
    assert np.abs(posts["stoch"] - posts["mean"]).min() > 1e-3  # a sample, not the mean
    np.testing.assert_allclose(mode_latent["stoch"].numpy(), posts["stoch"][:, 0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mode_action.numpy(), np.tanh(ref.actor(mode_sac, features)[0]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mode_latent["mean"].numpy(), posts["mean"][:, 0], rtol=1e-4, atol=1e-5)
    samples = np.stack([mode_policy.act(mode_obs, mode_policy.initial_state(5), "train")[0].numpy() for _ in range(20)])
    assert samples.std(0).min() > 0.01  # the train phase samples the actor instead of taking its mode

    # The random branch of the same policy.
    mode_policy.set_policies(train="random", test="random")
    for phase in ("train", "test"):
        action = mode_policy.act(tf.zeros([4000, 3]), mode_policy.initial_state(4000), phase)[0].numpy()
        # U(-1, 1): mean 0, standard deviation 1/sqrt(3) = 0.577, reaching close to both bounds.
        np.testing.assert_allclose(action.mean(0), 0.0, atol=0.05, err_msg=phase)
        np.testing.assert_allclose(action.std(0), 1 / np.sqrt(3), atol=0.02, err_msg=phase)
        assert action.min() < -0.99 and action.max() > 0.99, phase
        assert abs(np.corrcoef(action.T)[0, 1]) < 0.1, phase  # independent dimensions

    # 4. A sample of the actor in the test phase.
    stream = tf.random.Generator.from_seed(12)
    latent_noise = stream.normal([5, TINY.stoch_size]).numpy()
    action_noise = stream.normal([5, 2]).numpy()
    embed = ref.mlp(sample_obs, sample_model.encoder, ref.relu)[:, None]
    posts, _ = ref.observe(sample_model.rssm, embed, np.zeros([5, 1, 2]), latent_noise[:, None])
    features = ref.features({key: value[:, 0] for key, value in posts.items()})
    expected, _ = ref.sample(sample_sac, features, action_noise)
    np.testing.assert_allclose(sample_action.numpy(), expected, rtol=1e-4, atol=1e-5)
    assert np.abs(expected - np.tanh(ref.actor(sample_sac, features)[0])).min() > 1e-3  # not the mode

    # 5. SAC's mode in the test phase, at the latent state it filtered (twice), random in the train phase.
    dispatch_acts.append(dispatch.act(dispatch_obs, dispatch_state, "test"))
    for action, (latent, *_) in dispatch_acts:
        mode = np.tanh(ref.actor(dispatch_sac, ref.features({key: value.numpy() for key, value in latent.items()}))[0])
        np.testing.assert_allclose(action.numpy(), mode, rtol=1e-5, atol=1e-6)
    random = [dispatch.act(dispatch_obs, dispatch_state, "train")[0].numpy() for _ in range(3)]
    assert not np.allclose(random[0], random[1])  # random policy in the train phase
    with pytest.raises(ValueError, match="unknown policy 'ppo'"):
        dispatch.set_policies(train="ppo")
    switch_phases_and_policies(dispatch, 3)
    assert dispatch.traces == 1

    assert not [record for record in tensorflow_warnings if "retracing" in record.getMessage()]
