"""Cross-entropy method planning in the world model's latent space (PlaNet).

For each of B environments at once: sample `candidates` action sequences of length
`horizon` from a diagonal Gaussian, roll them out open-loop with the RSSM prior, score
them by the discounted sum of predicted rewards, refit the Gaussian to the `top_k` best, and
repeat `iterations` times. The first action of the final mean is executed (PlaNet), or with
`select: elite` the first action of one elite of the last iteration, drawn with probability
proportional to exp(temperature * score) (TD-MPC's planner): with actor trajectories in the
population the elites can come from two different modes, and their mean from neither.

`sac_guided_cem` (as in TD-MPC): a share of the population are trajectories of the
SAC actor rolled out in the model, and every candidate's score adds the critic's value
at the horizon, so planning looks beyond its short horizon.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from planet_sac.config import CEMConfig
from planet_sac.control.sac import SAC
from planet_sac.models.rssm import State
from planet_sac.models.world_model import WorldModel

ReturnFn = Callable[[State, tf.Tensor, tf.Tensor], tf.Tensor]


def _tile(state: State, count: int) -> State:
    """[B, ...] -> [B * count, ...], each state repeated `count` times in a row: `tf.repeat`'s result in fewer graph
    ops, so the policy traces faster (docs/performance.md)."""
    def repeat(t: tf.Tensor) -> tf.Tensor:
        tiled = tf.tile(t[:, None], [1, count] + [1] * (t.shape.rank - 1))  # [B, count, ...]
        return tf.reshape(tiled, [-1, *t.shape[1:]])

    return tf.nest.map_structure(repeat, state)


def rollout_return(world_model: WorldModel, sac: SAC | None, discount: float, value_weight: float = 1.0) -> ReturnFn:
    """Scores [N, H, A] action sequences from [N] start states.

    PlaNet's objective: the discounted sum of predicted rewards, sum_t discount^t r_t
    (its `discounted_return` with discount 0.99). With a SAC head, the critic's value of
    the actor's action at the horizon is added, discounted by discount^H and scaled by
    `value_weight` (1: TD-MPC's estimate of the return beyond the horizon). With a
    continuation head, each reward and the value count only while the episode goes on:
    r_t is weighted by the predicted discounts of the states before it (c_0 ... c_{t-1}), the
    value by all H of them (Dreamer's pcont weighting).
    """

    def score(state: State, actions: tf.Tensor, noise: tf.Tensor) -> tf.Tensor:
        states = world_model.rssm.imagine(state, actions, noise)
        rewards = world_model.predict_reward(states)  # [N, H]
        horizon = actions.shape[1]
        weights = discount ** tf.range(horizon, dtype=rewards.dtype)
        if world_model.continuation is not None:
            continuation = world_model.predict_continuation(states)
            weights *= tf.math.cumprod(continuation, axis=1, exclusive=True)
        returns = tf.reduce_sum(rewards * weights, 1)
        if sac is None:
            return returns
        last = tf.nest.map_structure(lambda t: t[:, -1], states)
        features = world_model.rssm.features(last)
        value = sac.q_value(features, sac.act(features, tf.zeros_like(actions[:, 0]), True))
        if world_model.continuation is not None:
            value *= tf.reduce_prod(continuation, axis=1)
        return returns + value_weight * discount ** horizon * value

    return score


def plan(world_model: WorldModel, state: State, config: CEMConfig, rng: tf.random.Generator,
         sac: SAC | None = None, guide_fraction: float = 0.0, score: ReturnFn | None = None) -> tf.Tensor:
    """Plans for a batch of [B] latent states; returns the first planned action [B, A] in [-1, 1]."""
    return search(world_model, state, config, rng, sac, guide_fraction, score)[0]


def search(world_model: WorldModel, state: State, config: CEMConfig, rng: tf.random.Generator,
           sac: SAC | None = None, guide_fraction: float = 0.0, score: ReturnFn | None = None,
           initial_mean: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """The CEM search behind `plan`: returns the first action [B, A] and the final plan mean [B, H, A].

    `initial_mean` [B, H, A] replaces the zero mean of the first iteration (a warm start
    from the previous step's plan, see `shift_plan`); with a SAC head and `config.actor_mean`
    the mean of the actor's trajectories takes its place. The stddev always starts at 1.
    Rollouts run in `config.precision`; returns are ranked in float32.
    """
    batch = tf.shape(state["deter"])[0]
    horizon, total, top_k = config.horizon, config.candidates, config.top_k
    action_size = world_model.action_size
    dtype = tf.as_dtype(config.precision)
    score = score or rollout_return(world_model, sac, config.discount, config.value_weight)
    start = tf.nest.map_structure(lambda t: tf.cast(t, dtype), _tile(state, total))  # tiled once, not per iteration
    guided = int(round(guide_fraction * total)) if sac is not None else 0
    sampled = total - guided

    guide_actions = tf.zeros([batch, 0, horizon, action_size])
    if guided:
        assert sac is not None  # guided > 0 only with a SAC head
        guide_actions = _actor_trajectories(world_model, sac, _tile(state, guided), horizon, rng, config.actor_std)
        guide_actions = tf.reshape(guide_actions, [batch, guided, horizon, action_size])
        if config.actor_mean:
            initial_mean = tf.reduce_mean(guide_actions, 1)

    def iteration(i, mean, std, first_actions, elite_returns):
        samples = mean + std * rng.normal([batch, sampled, horizon, action_size])
        candidates = tf.concat([tf.clip_by_value(samples, -1.0, 1.0), guide_actions], 1)
        flat = tf.cast(tf.reshape(candidates, [batch * total, horizon, action_size]), dtype)
        noise = tf.cast(rng.normal([batch * total, horizon, world_model.rssm.stoch_size]), dtype)
        returns = tf.reshape(tf.cast(score(start, flat, noise), tf.float32), [batch, total])
        elite_returns, elite_index = tf.math.top_k(returns, top_k, sorted=False)  # the elites' order does not matter
        elites = tf.gather(candidates, elite_index, batch_dims=1)  # [B, K, H, A]
        mean, variance = tf.nn.moments(elites, 1, keepdims=True)
        return i + 1, mean, tf.sqrt(variance + 1e-6), elites[:, :, 0], elite_returns

    if initial_mean is None:
        mean = tf.zeros([batch, 1, horizon, action_size])
    else:
        mean = initial_mean[:, None]
    std = tf.ones([batch, 1, horizon, action_size])
    first_actions, elite_returns = tf.zeros([batch, top_k, action_size]), tf.zeros([batch, top_k])
    _, mean, _, first_actions, elite_returns = tf.while_loop(
        lambda i, *_: i < config.iterations, iteration, (tf.constant(0), mean, std, first_actions, elite_returns))
    if config.select == "elite":
        action = tf.gather(first_actions, draw_elite(elite_returns, config.temperature, rng), batch_dims=1)
    else:
        action = mean[:, 0, 0]
    return tf.clip_by_value(action, -1.0, 1.0), mean[:, 0]


def draw_elite(returns: tf.Tensor, temperature: float, rng: tf.random.Generator) -> tf.Tensor:
    """Index [B] of one of [B, K] elites, drawn with probability softmax(temperature * returns) (Gumbel-max)."""
    uniform = rng.uniform(tf.shape(returns), minval=1e-20, maxval=1.0)
    return tf.argmax(temperature * returns - tf.math.log(-tf.math.log(uniform)), axis=1, output_type=tf.int32)


def shift_plan(mean: tf.Tensor) -> tf.Tensor:
    """The previous step's plan [B, H, A] moved one step forward, with a zero action appended (iCEM, TD-MPC)."""
    return tf.concat([mean[:, 1:], tf.zeros_like(mean[:, :1])], 1)


def _actor_trajectories(world_model: WorldModel, sac: SAC, state: State, horizon: int, rng: tf.random.Generator,
                        actor_std: float | None = None) -> tf.Tensor:
    """Action sequences [N, H, A] of the SAC actor rolled out open-loop in the model.

    Each action is a sample of the actor's own distribution (`actor_std` None), or its mode plus
    Gaussian noise of a fixed `actor_std`, clipped to [-1, 1], as TD-MPC draws its policy
    trajectories (`min_std` 0.05): near the actor's choice however high SAC's entropy is.
    """
    actions = tf.zeros([horizon, tf.shape(state["deter"])[0], world_model.action_size])

    def step(carry, inputs):
        latent, _ = carry
        action_noise, latent_noise = inputs
        features = world_model.rssm.features(latent)
        if actor_std is None:
            action = sac.act(features, action_noise, False)
        else:
            action = tf.clip_by_value(sac.act(features, action_noise, True) + actor_std * action_noise, -1.0, 1.0)
        return world_model.rssm.img_step(latent, action, latent_noise), action

    noise = (rng.normal(tf.shape(actions)), rng.normal([horizon, tf.shape(actions)[1], world_model.rssm.stoch_size]))
    _, taken = tf.scan(step, noise, initializer=(state, actions[0]))
    return tf.transpose(taken, [1, 0, 2])
