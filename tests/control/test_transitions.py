"""SAC training transitions: n-step returns on real chunks and on imagined rollouts, checked in numpy."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.config import SACConfig
from planet_sac.control.sac import SAC
from planet_sac.control.transitions import (
    imagine,
    imagined_lambda_transitions,
    imagined_transitions,
    n_step_returns,
    real_transitions,
    soft_lambda_targets,
    value_loss,
)
from tests.test_planet_fidelity import numpy_rssm, tiny_state_model


def numpy_n_step(reward, discount, n, gamma):
    """By the definition: R_t = sum_k gamma^k (prod_{j=1..k} d_{t+j}) r_{t+1+k}, D_t = prod_{j=1..n} d_{t+j}."""
    batch, length = reward.shape
    returns, alive = np.zeros((batch, length - n)), np.zeros((batch, length - n))
    for b in range(batch):
        for t in range(length - n):
            total, weight = 0.0, 1.0
            for k in range(n):
                total += gamma ** k * weight * reward[b, t + 1 + k]
                weight *= discount[b, t + 1 + k]
            returns[b, t], alive[b, t] = total, weight
    return returns, alive


def test_n_step_returns_stop_at_a_termination():
    rng = np.random.default_rng(0)
    reward = rng.normal(size=(2, 7)).astype(np.float32)
    discount = np.ones((2, 7), np.float32)
    discount[1, 4] = 0.0  # sequence 1 terminates on arriving at step 4: later rewards must not count
    for n in (1, 3):
        returns, alive = n_step_returns(tf.constant(reward), tf.constant(discount), n, 0.9)
        expected_returns, expected_alive = numpy_n_step(reward, discount, n, 0.9)
        np.testing.assert_allclose(returns.numpy(), expected_returns, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(alive.numpy(), expected_alive)
    # By hand for n = 3, sequence 1, start 2: r3 + 0.9 r4 (then terminated), no bootstrap.
    returns, alive = n_step_returns(tf.constant(reward), tf.constant(discount), 3, 0.9)
    assert float(returns[1, 2]) == np.float32(reward[1, 3] + 0.9 * reward[1, 4])
    assert float(alive[1, 2]) == 0.0


def test_real_transitions_align_state_action_and_next_state():
    batch, length, n = 2, 5, 2
    features = np.arange(batch * length, dtype=np.float32).reshape(batch, length, 1)  # feature = 10 * b + t / 1
    action = features + 100.0
    reward = np.ones((batch, length), np.float32)
    out = real_transitions(tf.constant(features), tf.constant(action), tf.constant(reward),
                           tf.ones((batch, length)), n, 0.5)
    starts = length - n
    np.testing.assert_array_equal(out.features.numpy()[:, 0], features[:, :starts].reshape(-1))
    np.testing.assert_array_equal(out.action.numpy()[:, 0], action[:, 1:1 + starts].reshape(-1))  # a_{t+1} follows z_t
    np.testing.assert_array_equal(out.next_features.numpy()[:, 0], features[:, n:].reshape(-1))
    np.testing.assert_allclose(out.reward.numpy(), np.full(batch * starts, 1.0 + 0.5))


def test_critic_target_bootstraps_with_gamma_to_the_n():
    sac = SAC(SACConfig(units=8, discount=0.9), feature_size=3, action_size=1, seed=0)
    features, noise = tf.random.normal([4, 3], seed=1), tf.random.normal([4, 1], seed=2)
    reward, discount = tf.constant([1.0, -2.0, 0.5, 0.0]), tf.constant([1.0, 1.0, 0.0, 1.0])
    value_1 = sac.critic_target(tf.zeros([4]), tf.ones([4]), features, noise, steps=1).numpy()  # 0.9 V
    value_3 = sac.critic_target(tf.zeros([4]), tf.ones([4]), features, noise, steps=3).numpy()  # 0.9^3 V
    np.testing.assert_allclose(value_3, value_1 * 0.9 ** 2, rtol=1e-5)
    target = sac.critic_target(reward, discount, features, noise, steps=3).numpy()
    np.testing.assert_allclose(target, reward.numpy() + discount.numpy() * value_3, rtol=1e-5, atol=1e-6)


def test_imagined_rollout_returns_follow_the_model_and_the_actor():
    """Rollouts of the prior under a fixed actor, recomputed in numpy; their 2-step returns by hand."""
    model = tiny_state_model()
    horizon, n, gamma, size = 3, 2, 0.9, 2
    start = model.rssm.initial(size)
    start = {**start, "deter": tf.constant(np.random.default_rng(1).normal(size=(size, 6)), tf.float32)}
    actor = lambda features, noise: 0.5 * tf.tanh(noise + 0.3 * tf.reduce_sum(features, -1, keepdims=True))  # noqa: E731
    out = imagined_transitions(model, actor, start, horizon, n, gamma, tf.random.Generator.from_seed(7))

    # The same random stream, in the same order: action noise [N, A], then latent noise [N, S], per step.
    rng = tf.random.Generator.from_seed(7)
    img_step = numpy_rssm(model)
    reward_layers = [(layer.kernel.numpy(), layer.bias.numpy()) for layer in (*model.reward.hidden, model.reward.out)]

    def reward_of(state):
        x = np.concatenate([state["deter"], state["stoch"]], -1)
        for kernel, bias in reward_layers[:-1]:
            x = np.maximum(x @ kernel + bias, 0.0)
        return (x @ reward_layers[-1][0] + reward_layers[-1][1])[:, 0]

    state = {key: value.numpy().astype(np.float64) for key, value in start.items()}
    features, actions, rewards = [np.concatenate([state["deter"], state["stoch"]], -1)], [], []
    for _ in range(horizon):
        action = 0.5 * np.tanh(rng.normal([size, 1]).numpy() + 0.3 * features[-1].sum(-1, keepdims=True))
        state = img_step(state, action, rng.normal([size, 2]).numpy())
        features.append(np.concatenate([state["deter"], state["stoch"]], -1))
        actions.append(action)
        rewards.append(reward_of(state))
    # Start k of each rollout: R = r_{k+1} + gamma r_{k+2}, next state k + 2; rows ordered rollout-major.
    expected_returns = [rewards[k][i] + gamma * rewards[k + 1][i] for i in range(size) for k in range(horizon + 1 - n)]
    expected_next = [features[k + n][i] for i in range(size) for k in range(horizon + 1 - n)]
    expected_action = [actions[k][i] for i in range(size) for k in range(horizon + 1 - n)]
    np.testing.assert_allclose(out.reward.numpy(), expected_returns, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.next_features.numpy(), expected_next, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.action.numpy(), expected_action, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.discount.numpy(), np.ones(size * (horizon + 1 - n)))

    # The rollout itself, aligned: index 0 is the start with a zero action, reward 0 and discount 1.
    rolled = imagine(model, actor, start, horizon, tf.random.Generator.from_seed(7))
    np.testing.assert_allclose(rolled[0].numpy(), np.stack(features, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rolled[1].numpy(), np.concatenate([np.zeros((size, 1, 1)), np.stack(actions, 1)], 1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rolled[2].numpy(), np.concatenate([np.zeros((size, 1)), np.stack(rewards, 1)], 1),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(rolled[3].numpy(), np.ones((size, horizon + 1)))


def numpy_soft_lambda_targets(reward, continuation, value, log_prob, alpha, gamma, lam):
    """By Sutton and Barto's 12.3: the lambda-weighted mean of soft n-step targets of (z_k, a_{k+1}), where
    G^(n)_k = sum_{i<n} w_i (r_{k+1+i} - [i > 0] alpha log pi_{k+i}) + w_n V_{k+n}, w_0 = 1, w_{i+1} = w_i gamma c_{k+1+i}
    (value and log_prob indexed by the state after the step: column j is z_{j+1})."""
    rows, horizon = reward.shape
    out = np.zeros((rows, horizon))
    for row in range(rows):
        for k in range(horizon):
            def g(n):
                total, weight = 0.0, 1.0
                for i in range(n):
                    total += weight * (reward[row, k + i] - (alpha * log_prob[row, k + i - 1] if i else 0.0))
                    weight *= gamma * continuation[row, k + i]
                return total + weight * value[row, k + n - 1]
            left = horizon - k
            out[row, k] = sum((1 - lam) * lam ** (n - 1) * g(n) for n in range(1, left)) + lam ** (left - 1) * g(left)
    return out


def test_soft_lambda_targets_are_the_weighted_mean_of_soft_n_step_targets():
    rng = np.random.default_rng(5)
    horizon, gamma, alpha = 5, 0.9, 0.3
    reward, value, log_prob = (rng.normal(size=(2, horizon)).astype(np.float32) for _ in range(3))
    continuation = np.ones((2, horizon), np.float32)
    continuation[1, 2] = 0.0  # row 1's imagined episode ends on arriving at z_3: nothing after counts
    for lam in (0.0, 0.95, 1.0):
        got = soft_lambda_targets(*map(tf.constant, (reward, continuation, value, log_prob)), alpha, gamma, lam).numpy()
        np.testing.assert_allclose(got, numpy_soft_lambda_targets(reward, continuation, value, log_prob, alpha, gamma, lam),
                                   rtol=1e-5, atol=1e-5, err_msg=str(lam))
    # By hand: lambda 0 is SAC's one-step target; lambda 1 on row 0 from z_3: r_4 + g (r_5 - a lp(z_4)) + g^2 V(z_5).
    one_step = soft_lambda_targets(*map(tf.constant, (reward, continuation, value, log_prob)), alpha, gamma, 0.0).numpy()
    np.testing.assert_allclose(one_step, reward + gamma * continuation * value, rtol=1e-5, atol=1e-6)
    whole = soft_lambda_targets(*map(tf.constant, (reward, continuation, value, log_prob)), alpha, gamma, 1.0).numpy()
    by_hand = reward[0, 3] + gamma * (reward[0, 4] - alpha * log_prob[0, 3]) + gamma ** 2 * value[0, 4]
    np.testing.assert_allclose(whole[0, 3], by_hand, rtol=1e-5)
    assert abs(whole[1, 1] - (reward[1, 1] + gamma * (reward[1, 2] - alpha * log_prob[1, 1]))) < 1e-5  # ended at z_3


def test_imagined_lambda_transitions_pair_each_imagined_state_with_its_target():
    """Every state of a rollout but the last, with the action that left it, and the soft lambda-return target
    recomputed from the same random stream: the rollout (`imagine`), then one fresh action per later state."""
    model = tiny_state_model()
    horizon, size, lam = 4, 3, 0.8
    sac = SAC(SACConfig(units=8, discount=0.9, init_alpha=0.2), feature_size=model.rssm.feature_size,
              action_size=model.action_size, seed=3)
    for online in (*sac.critic1.variables, *sac.critic2.variables):
        online.assign(1.5 * online + 0.1)  # the targets bootstrap from the target critics, which now differ
    start = model.rssm.initial(size)
    start = {**start, "deter": tf.constant(np.random.default_rng(1).normal(size=(size, 6)), tf.float32)}
    out = imagined_lambda_transitions(model, sac, start, horizon, lam, tf.random.Generator.from_seed(7))

    rng = tf.random.Generator.from_seed(7)
    features, actions, rewards, continuations = (x.numpy() for x in imagine(
        model, lambda f, noise: sac.act(f, noise, False), start, horizon, rng))
    later = features[:, 1:].reshape(size * horizon, -1)
    fresh, log_prob = sac.sample(tf.constant(later), rng.normal([size * horizon, model.action_size]))
    q = np.minimum(*(critic(tf.concat([later, fresh], -1)).numpy()[:, 0] for critic in (sac.target_critic1, sac.target_critic2)))
    log_prob = log_prob.numpy().reshape(size, horizon)
    value = q.reshape(size, horizon) - 0.2 * log_prob
    expected = numpy_soft_lambda_targets(rewards[:, 1:], continuations[:, 1:], value, log_prob, 0.2, 0.9, lam)

    assert out.reward.shape == (size * horizon,)  # rollout-major: rollout i's k-th state is row i * horizon + k
    np.testing.assert_allclose(out.reward.numpy(), expected.reshape(-1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.features.numpy(), features[:, :horizon].reshape(size * horizon, -1), atol=1e-6)
    np.testing.assert_allclose(out.action.numpy(), actions[:, 1:].reshape(size * horizon, -1), atol=1e-6)
    np.testing.assert_allclose(out.next_features.numpy(), later, atol=1e-6)
    np.testing.assert_array_equal(out.discount.numpy(), np.zeros(size * horizon))  # the target is whole: no bootstrap
    # ... so the critic update's target is the transition's reward
    target = sac.critic_target(out.reward, out.discount, out.next_features, tf.random.normal(out.action.shape, seed=4), steps=3)
    np.testing.assert_allclose(target.numpy(), out.reward.numpy(), rtol=1e-6)


def test_value_loss_is_the_critics_td_loss_on_the_chunks_real_transitions_and_reaches_the_features():
    """model.value_scale's term, in numpy: after `burn_in`, every z_t with t + n inside the chunk, its action
    a_{t+1} and its n-step return, bootstrapped at z_{t+n} with the noise's next action; 0.5 * mean((Q_i - y)^2)
    for both critics. Its gradient reaches z_t, never z_{t+n}."""
    from tests import numpy_reference as ref

    batch, length, size, n, burn_in, gamma = 3, 8, 5, 2, 1, 0.9
    sac = SAC(SACConfig(units=8, discount=gamma, n_step=n, burn_in=burn_in, init_alpha=0.3), size, 2, seed=0)
    for online, target in ((sac.critic1, sac.target_critic1), (sac.critic2, sac.target_critic2)):  # targets differ
        for o, t in zip(online.variables, target.variables):
            t.assign(o * 0.5 + 0.1)
    rng = np.random.default_rng(3)
    features = rng.normal(size=(batch, length, size)).astype(np.float32)
    chunk = {"action": rng.uniform(-1, 1, (batch, length, 2)).astype(np.float32),
             "reward": rng.normal(size=(batch, length)).astype(np.float32),
             "discount": np.ones((batch, length), np.float32)}
    chunk["discount"][1, 5] = 0.0  # sequence 1 terminates on arriving at step 5
    starts = length - burn_in - n
    noise = rng.normal(size=(batch, starts, 2)).astype(np.float32)

    td, errors = [], []
    for b in range(batch):
        for s in range(starts):
            t = burn_in + s
            ret, alive = 0.0, 1.0
            for k in range(n):
                ret += gamma ** k * alive * chunk["reward"][b, t + 1 + k]
                alive *= chunk["discount"][b, t + 1 + k]
            following = features[b, t + n][None]
            next_action, log_prob = ref.sample(sac, following, noise[b, s][None])
            value = ref.q_value(sac, following, next_action, target=True)[0] - 0.3 * log_prob[0]
            y = ret + gamma ** n * alive * value
            x = np.concatenate([features[b, t], chunk["action"][b, t + 1]])[None]
            errors.append([ref.mlp(x, sac.critic1)[0, 0] - y, ref.mlp(x, sac.critic2)[0, 0] - y])
            td.append((b, t))
    errors = np.array(errors)
    expected = 0.5 * np.mean(errors[:, 0] ** 2) + 0.5 * np.mean(errors[:, 1] ** 2)

    tensor = tf.constant(features)
    with tf.GradientTape() as tape:
        tape.watch(tensor)
        loss = value_loss(sac, tensor, {key: tf.constant(value) for key, value in chunk.items()}, tf.constant(noise))
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    grad = np.abs(tape.gradient(loss, tensor).numpy()).sum(-1)  # [B, T]
    reached = np.zeros((batch, length), bool)
    for b, t in td:
        reached[b, t] = True
    assert np.all(grad[reached] > 0) and np.all(grad[~reached] == 0)  # z_t only: the targets are constants
