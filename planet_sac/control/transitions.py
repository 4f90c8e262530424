"""Where the SAC head's training transitions come from: real chunks (n-step) and imagined rollouts.

A transition is `(features, action, reward, discount, next_features)` where `reward` is
the n-step return `sum_k gamma^k (prod_{j<=k} d_j) r_k` and `discount` is the product of
the episode discounts over the n steps, so the critic's target is
`reward + gamma^n * discount * V(next_features)` (`SAC.critic_target(..., steps=n)`).
Imagined transitions with soft lambda-return targets (`sac.imagined_targets: lambda`, as Dreamer's
critic learns) carry their whole target in `reward`, bootstraps included, and `discount` 0, so the
same critic update reads `reward` as the target.

Real transitions come from the posterior over a training chunk (aligned layout:
`action[:, t + 1]` and `reward[:, t + 1]` follow the state at t). Imagined transitions
come from open-loop rollouts of the RSSM prior under the current actor, started from
posterior states (as MBPO does with its model, and Dreamer with its latent imagination);
their rewards are the reward head's predictions and their discounts the continuation head's
(`model.continuation_scale` > 0; without it 1, right for dm_control, which never terminates early).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import tensorflow as tf

from planet_sac.control.sac import SAC
from planet_sac.models.rssm import State
from planet_sac.models.world_model import WorldModel


class Transitions(NamedTuple):
    """A flat batch of (n-step) transitions, every field [N, ...]."""

    features: tf.Tensor
    action: tf.Tensor
    reward: tf.Tensor
    discount: tf.Tensor
    next_features: tf.Tensor

    def gather(self, index: tf.Tensor) -> "Transitions":
        return Transitions(*(tf.gather(field, index) for field in self))

    @staticmethod
    def concat(parts: list["Transitions"]) -> "Transitions":
        return Transitions(*(tf.concat(fields, 0) for fields in zip(*parts)))


def n_step_returns(reward: tf.Tensor, discount: tf.Tensor, n: int, gamma: float) -> tuple[tf.Tensor, tf.Tensor]:
    """n-step returns and discount products for every start t in [0, T - 1 - n] of [B, T] sequences.

    `reward[:, t + 1]` and `discount[:, t + 1]` belong to the step from t to t + 1.
    Returns `(R[B, T - n], D[B, T - n])` with
    `R_t = sum_{k<n} gamma^k (prod_{j=1..k} d_{t+j}) r_{t+1+k}` and `D_t = prod_{j=1..n} d_{t+j}`.
    """
    length = reward.shape[1]
    starts = length - n
    returns = tf.zeros_like(reward[:, :starts])
    alive = tf.ones_like(reward[:, :starts])
    for k in range(n):
        returns += gamma ** k * alive * reward[:, 1 + k:1 + k + starts]
        alive *= discount[:, 1 + k:1 + k + starts]
    return returns, alive


def real_transitions(features: tf.Tensor, action: tf.Tensor, reward: tf.Tensor, discount: tf.Tensor,
                     n: int, gamma: float) -> Transitions:
    """n-step transitions of the posterior features [B, T, F] of training chunks, flattened to [B * (T - n)]."""
    starts = features.shape[1] - n
    returns, alive = n_step_returns(reward, discount, n, gamma)
    flat = lambda t: tf.reshape(t, [-1, *t.shape[2:]])  # noqa: E731
    return Transitions(flat(features[:, :starts]), flat(action[:, 1:1 + starts]), flat(returns), flat(alive),
                       flat(features[:, n:n + starts]))


def value_loss(sac: SAC, features: tf.Tensor, batch: Mapping[str, tf.Tensor], noise: tf.Tensor) -> tf.Tensor:
    """The critics' TD loss on a chunk's real n-step transitions, differentiable in the posterior features [B, T, F].

    The transitions are the SAC head's real half (`sac.burn_in` and `sac.n_step` as there, `batch` holding the
    chunk's action, reward and discount), their targets those of `SAC.critic_target` with `noise`
    [B, T - burn_in - n, A] for the next actions, and their gradient stopped; so the loss pulls the features of
    z_t (not z_{t+n}) towards states the critics tell apart by return, as DrQ's critic trains its encoder and
    TD-MPC's value loss its representation (`model.value_scale`).
    """
    cfg = sac.config
    n, skip = cfg.n_step, cfg.burn_in
    real = real_transitions(features[:, skip:], batch["action"][:, skip:], batch["reward"][:, skip:],
                            batch["discount"][:, skip:], n, cfg.discount)
    noise = tf.reshape(noise, [-1, noise.shape[-1]])
    target = sac.critic_target(real.reward, real.discount, real.next_features, noise, n)  # gradient stopped there
    loss, _ = sac.critic_loss(real.features, real.action, target)
    return loss


def imagine(world_model: WorldModel, actor_sample, start: State, horizon: int,
            rng: tf.random.Generator) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Rolls the prior `horizon` steps from [N] start states under `actor_sample(features, noise) -> action`.

    Returns features [N, H + 1, F] (index 0 is the start), actions [N, H + 1, A] in the
    aligned layout (index k + 1 led from state k to k + 1; index 0 is zero), predicted
    rewards [N, H + 1] (index k + 1 is the reward head's prediction at state k + 1) and
    predicted discounts [N, H + 1] (the continuation head's, likewise; index 0 is 1).
    Nothing here is differentiated: the head learns from these transitions like from data.
    """
    rssm = world_model.rssm
    state = tf.nest.map_structure(tf.stop_gradient, {key: start[key] for key in ("deter", "stoch")})
    size = tf.shape(state["deter"])[0]
    features = rssm.features(state)
    shapes: tuple[list[int | None], ...] = ([None, rssm.feature_size], [None, world_model.action_size], [None], [None])
    arrays = [tf.TensorArray(tf.float32, size=horizon, element_shape=shape) for shape in shapes]

    def step(k: tf.Tensor, state: State, features: tf.Tensor, arrays: list) -> tuple:
        # An in-graph loop: the rollout is traced once, whatever the horizon.
        action = actor_sample(features, rng.normal([size, world_model.action_size]))
        state = rssm.img_step(state, action, rng.normal([size, rssm.stoch_size]))
        state = {key: state[key] for key in ("deter", "stoch")}
        features = rssm.features(state)
        values = (features, action, world_model.predict_reward(state), world_model.predict_continuation(state))
        return k + 1, state, features, [array.write(k, value) for array, value in zip(arrays, values)]

    _, _, _, arrays = tf.while_loop(lambda k, *_: k < horizon, step, (tf.constant(0), state, features, arrays),
                                    parallel_iterations=1)
    # [H, N, ...] -> [N, H, ...], after index 0: the start features, a zero action, reward 0, discount 1.
    steps = [tf.transpose(array.stack(), [1, 0, *range(2, len(shape) + 1)]) for array, shape in zip(arrays, shapes)]
    first = (features[:, None], tf.zeros([size, 1, world_model.action_size]), tf.zeros([size, 1]), tf.ones([size, 1]))
    return tuple(tf.stop_gradient(tf.concat([head, tail], 1)) for head, tail in zip(first, steps))


def imagined_transitions(world_model: WorldModel, actor_sample, start: State, horizon: int, n: int, gamma: float,
                         rng: tf.random.Generator) -> Transitions:
    """n-step transitions along imagined rollouts from [N] start states: N * (horizon + 1 - n) of them.

    A predicted termination stops the n-step return and the bootstrap as a recorded one does;
    transitions that start past it are kept at full weight (Dreamer down-weights its imagined
    states by the cumulative discount; SAC's batches have no per-transition weight).
    """
    features, actions, rewards, discounts = imagine(world_model, actor_sample, start, horizon, rng)
    return real_transitions(features, actions, rewards, discounts, n, gamma)


def soft_lambda_targets(reward: tf.Tensor, continuation: tf.Tensor, value: tf.Tensor, log_prob: tf.Tensor,
                        alpha: tf.Tensor | float, gamma: float, lambda_: float) -> tf.Tensor:
    """Soft lambda-return targets [N, H] for the critic at an imagined rollout's pairs (z_k, a_{k+1}), k < H.

    `reward[:, k]` and `continuation[:, k]` belong to the step from z_k to z_{k+1}; `value[:, k]` is SAC's soft
    value V(z_{k+1}) = min Q_target(z_{k+1}, a') - alpha log pi(a'|z_{k+1}) for a fresh a' ~ pi(z_{k+1}), and
    `log_prob[:, k]` that log pi(a'|z_{k+1}). With U_H = V(z_H):

        T_k = r_{k+1} + gamma c_{k+1} U_{k+1},   U_j = (1 - lambda) V(z_j) + lambda (T_j - alpha log pi(a'|z_j))

    so T_k is the lambda-weighted mean of the soft n-step targets (each intermediate state's entropy bonus
    counted, the last one's value bootstrapped): lambda = 0 gives SAC's one-step target, lambda = 1 the
    rollout's discounted soft return bootstrapped at its end.
    """
    horizon = reward.shape[1]
    following = value[:, horizon - 1]
    targets = []
    for k in reversed(range(horizon)):
        target = reward[:, k] + gamma * continuation[:, k] * following
        targets.append(target)
        if k:
            following = (1.0 - lambda_) * value[:, k - 1] + lambda_ * (target - alpha * log_prob[:, k - 1])
    return tf.stack(targets[::-1], 1)


def imagined_lambda_transitions(world_model: WorldModel, sac: SAC, start: State, horizon: int, lambda_: float,
                                rng: tf.random.Generator) -> Transitions:
    """Transitions with soft lambda-return targets along imagined rollouts from [N] start states: N * horizon of them.

    The rollouts sample the actor (`imagine`); every state after the start gets a fresh action a' ~ pi and the
    target critics' soft value, and `soft_lambda_targets` turns the predicted rewards and continuations into a
    target for every (z_k, a_{k+1}), k < horizon. Each transition's `reward` is that target and its `discount`
    0 (see the module's docstring). The targets use the target critics and temperature of the moment they are
    made, as Dreamer computes its returns once per model update; nothing is differentiated.
    """
    actor_sample = lambda f, noise: sac.act(f, noise, False)  # noqa: E731
    features, actions, rewards, discounts = imagine(world_model, actor_sample, start, horizon, rng)
    size, feature_size = tf.shape(features)[0], features.shape[-1]
    later = tf.reshape(features[:, 1:], [-1, feature_size])  # z_1 .. z_H of every rollout
    action, log_prob = sac.sample(later, rng.normal([tf.shape(later)[0], sac.action_size]))
    alpha = sac.alpha
    value = tf.reshape(sac.q_value(later, action, target=True) - alpha * log_prob, [size, horizon])
    log_prob = tf.reshape(log_prob, [size, horizon])
    targets = soft_lambda_targets(rewards[:, 1:], discounts[:, 1:], value, log_prob, alpha, sac.config.discount, lambda_)
    flat = lambda t: tf.reshape(t, [-1, *t.shape[2:]])  # noqa: E731
    return Transitions(*(tf.stop_gradient(field) for field in (
        flat(features[:, :horizon]), flat(actions[:, 1:]), flat(targets), tf.zeros_like(flat(targets)),
        flat(features[:, 1:]))))
