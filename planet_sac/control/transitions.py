"""Where the SAC head's training transitions come from: real chunks (n-step) and imagined rollouts.

A transition is `(features, action, reward, discount, next_features)` where `reward` is
the n-step return `sum_k gamma^k (prod_{j<=k} d_j) r_k` and `discount` is the product of
the episode discounts over the n steps, so the critic's target is
`reward + gamma^n * discount * V(next_features)` (`SAC.critic_target(..., steps=n)`).

Real transitions come from the posterior over a training chunk (aligned layout:
`action[:, t + 1]` and `reward[:, t + 1]` follow the state at t). Imagined transitions
come from open-loop rollouts of the RSSM prior under the current actor, started from
posterior states (as MBPO does with its model, and Dreamer with its latent imagination);
their rewards are the reward head's predictions and their discounts the continuation head's
(`model.continuation_scale` > 0; without it 1, right for dm_control, which never terminates early).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

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
