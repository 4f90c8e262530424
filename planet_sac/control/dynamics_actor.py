"""The SAC head's actor trained through the world model (`sac.actor_grad: dynamics`), as Dreamer's actor is.

SAC's own actor loss (`sac.actor_grad: critic`) differentiates min Q(z, a) at the states of a batch:
the actor learns only what the critic has learned. Dreamer (V1-V3, `actor_grad: dynamics` /
`actor_grad_cont: backprop` for continuous actions) instead rolls the model's prior forward under
the actor's reparameterised actions and differentiates the lambda-return of the imagined rewards,
bootstrapped with the value, through the dynamics and the reward head: the reward model's slope
towards what pays reaches the actor directly, as it reaches a planner that searches the same model.

Here the value is SAC's soft one, V(z) = min Q(z, a) - alpha log pi(a|z) with a ~ pi(z), and each
step's reward carries SAC's entropy bonus, so the return at lambda = 0 is SAC's soft target:

    G_H = V(z_H)
    G_k = -alpha log pi(a_k|z_k) + r_{k+1} + gamma c_{k+1} ((1 - lambda) V(z_{k+1}) + lambda G_{k+1})

for k = 0..H-1 (r and c: the reward and continuation heads at z_{k+1}). The loss is
-mean_k(w_k G_k) / return_scale, with Dreamer V2's weights w_k = prod_{j<k} gamma c_{j+1} (the
imagined episode's discounted chance to be alive at z_k; 1 at k = 0), not differentiated. Only the
actor's variables move; the world model and the critics are what the gradient flows through.
"""

from __future__ import annotations

from typing import Dict

import tensorflow as tf

from planet_sac.control.sac import SAC
from planet_sac.models.world_model import WorldModel

METRICS = ("sac/dynamics/return", "sac/dynamics/update_finite")


def lambda_returns(reward: tf.Tensor, value: tf.Tensor, continuation: tf.Tensor, gamma: float,
                   lambda_: float) -> tf.Tensor:
    """Lambda-returns [N, H] of an imagined rollout.

    `reward[:, k]` and `continuation[:, k]` belong to the step from state k to k + 1 (k < H);
    `value` [N, H + 1] is the value of states 0..H. G_H = value[:, H] and
    G_k = reward[:, k] + gamma * continuation[:, k] * ((1 - lambda) value[:, k + 1] + lambda G_{k + 1}).
    """
    horizon = reward.shape[1]
    following = value[:, horizon]
    returns = []
    for k in reversed(range(horizon)):
        following = reward[:, k] + gamma * continuation[:, k] * ((1.0 - lambda_) * value[:, k + 1] + lambda_ * following)
        returns.append(following)
    return tf.stack(returns[::-1], 1)


def dynamics_actor_loss(world_model: WorldModel, sac: SAC, features: tf.Tensor, horizon: int, lambda_: float,
                        rng: tf.random.Generator) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The loss above, the mean return G and the actions' log-probabilities [N, H + 1], from rollouts of `horizon`
    steps started at `features` [N, F].

    Differentiable with respect to the actor's variables (through the rollout); the start
    features are not differentiated.
    """
    rssm = world_model.rssm
    features = tf.stop_gradient(features)
    size = tf.shape(features)[0]
    state = {"deter": features[:, :rssm.deter_size], "stoch": features[:, rssm.deter_size:]}
    alpha = tf.stop_gradient(sac.alpha)
    log_probs: list[tf.Tensor] = []
    values: list[tf.Tensor] = []
    rewards: list[tf.Tensor] = []
    continuations: list[tf.Tensor] = []
    for _ in range(horizon + 1):
        action, log_prob = sac.sample(features, rng.normal([size, sac.action_size]))
        values.append(sac.q_value(features, action) - alpha * log_prob)
        log_probs.append(log_prob)
        if len(rewards) == horizon:
            break
        state = rssm.img_step(state, action, rng.normal([size, rssm.stoch_size]))
        state = {"deter": state["deter"], "stoch": state["stoch"]}
        features = rssm.features(state)
        rewards.append(tf.cast(world_model.predict_reward(state), tf.float32))
        continuations.append(tf.cast(world_model.predict_continuation(state), tf.float32))
    log_prob = tf.stack(log_probs, 1)
    reward = -alpha * log_prob[:, :horizon] + tf.stack(rewards, 1)
    continuation = tf.stack(continuations, 1)
    returns = lambda_returns(reward, tf.stack(values, 1), continuation, sac.config.discount, lambda_)
    weight = tf.stop_gradient(tf.math.cumprod(sac.config.discount * continuation, axis=1, exclusive=True))
    loss = -tf.reduce_mean(weight * returns) / tf.stop_gradient(sac.return_scale())
    return loss, tf.reduce_mean(returns), log_prob


def dynamics_actor_update(world_model: WorldModel, sac: SAC, features: tf.Tensor,
                          rng: tf.random.Generator) -> Dict[str, tf.Tensor]:
    """One actor step on `dynamics_actor_loss` from the posterior features [B, T, F] (every state starts a
    rollout of `sac.imagination_horizon` steps, as Dreamer starts one from every state of its batch), and one
    step of SAC's temperature on the rollouts' log-probabilities, so the temperature moves at the actor's pace
    (docs/results.md, lever `dynamics`, measures why).

    Skipped (no optimizer step) when the loss or its gradient is not finite. Returns `sac/actor_loss`,
    and the `METRICS`: the mean return G and whether the step was applied.
    """
    cfg = sac.config
    starts = tf.reshape(features, [-1, features.shape[-1]])
    with tf.GradientTape() as tape:
        loss, mean_return, log_prob = dynamics_actor_loss(world_model, sac, starts, cfg.imagination_horizon,
                                                          cfg.return_lambda, rng)
    grads = tape.gradient(loss, sac.actor.trainable_variables)
    _, alpha_grads = sac.temperature_gradients(log_prob)
    finite = tf.reduce_all([tf.math.is_finite(value) for value in (
        loss, tf.linalg.global_norm(grads), tf.linalg.global_norm(alpha_grads))])

    def apply() -> tf.Tensor:
        sac.actor_optimizer.apply(grads)
        sac.apply_temperature(alpha_grads)
        return tf.constant(1.0)

    applied = tf.cond(finite, apply, lambda: tf.constant(0.0))
    return {"sac/actor_loss": loss, "sac/dynamics/return": mean_return, "sac/dynamics/update_finite": applied}
