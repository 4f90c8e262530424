"""Soft Actor-Critic on the world model's latent features (as in SLAC).

The actor and twin critics see `concat(deter, stoch)` of the RSSM posterior with
gradients stopped, so SAC's updates never change the world model (`model.value_scale` instead adds the
critics' TD loss to the world model's own; `control/transitions.value_loss`). Transitions come from the
same streamed chunks the world model trains on: the posterior over a chunk gives
z_t and z_t+1 for every step, and the episode's `discount` handles terminations.

Bounded actions: `tanh` squashes a Gaussian (the usual SAC), `invert_gradients`
keeps the Gaussian unsquashed and scales the critic's gradient with respect to the
action by the distance to the bound it pushes towards (Hausknecht & Stone, 2016).
Either way the critics are only ever queried at actions inside [-1, 1], the actions
they were trained on: `invert_gradients` clips the Gaussian sample for the critic
(and for acting), while the inverted gradient still sees where the unclipped sample is.
"""

from __future__ import annotations

import math
from typing import Dict

import tensorflow as tf

from planet_sac.config import SACConfig
from planet_sac.models.networks import MLP
from planet_sac.optim import Adam

LOG_STD_MAX = 2.0


def reset_seed(seed: int, step: int) -> int:
    """The seed of the head's reset after model update `step` of a run of `seed` (in [0, 2**31)): one per pair, apart
    from every run's initial seeds (step 0) and from the critics' `seed + 1`."""
    return step * 2**32 + seed


def invert_gradients(grad: tf.Tensor, action: tf.Tensor, low: float = -1.0, high: float = 1.0) -> tf.Tensor:
    """Hausknecht & Stone's inverted gradient for an ascent direction `grad` = dQ/da.

    Where the gradient suggests increasing the action it is scaled by (high - a) / (high - low),
    where it suggests decreasing by (a - low) / (high - low). Past a bound the factor turns
    negative and pushes the action back inside.
    """
    width = high - low
    return tf.where(grad > 0, grad * (high - action) / width, grad * (action - low) / width)


@tf.custom_gradient
def _inverting_clip(action: tf.Tensor):
    """clip(action, -1, 1), whose backward pass inverts the (descent) gradient flowing into `action`.

    The critic is evaluated at the clipped action, where it was trained; its gradient dQ/da there
    reaches the unclipped action scaled by Hausknecht & Stone's factor of the *unclipped* value, so
    an action past a bound is pushed back inside (a plain clip would pass no gradient at all there).
    """

    def backward(upstream: tf.Tensor) -> tf.Tensor:
        return -invert_gradients(-upstream, action)

    return tf.clip_by_value(action, -1.0, 1.0), backward


class SAC(tf.Module):
    """Actor, twin critics with targets, and the entropy temperature.

    The actor's standard deviation (before the squash) is clipped to [`sac.min_std`, e^2]; the
    temperature is kept at or above `sac.min_alpha` (a projection after each of its steps). With
    `sac.return_normalization` the actor's loss divides Q by `return_scale()`, DreamerV3's max(1, P95 - P5)
    of the critic targets (EMAs at rate 0.01, debiased), so the temperature weighs entropy against returns
    on one scale whatever the task's reward scale; the critics still learn unscaled returns.
    """

    RETURN_RATE = 0.01  # DreamerV3's retnorm rate
    RETURN_PERCENTILES = (5.0, 95.0)  # and its perclo, perchi

    METRICS = ("sac/critic_loss", "sac/actor_loss", "sac/alpha", "sac/q", "sac/entropy", "sac/std",
               "sac/std_at_floor", "sac/return_scale", "sac/update_finite")
    HALF_METRICS = ("reward", "q", "target")  # per half of a mixed batch: sac/real/<name>, sac/imagined/<name>

    @staticmethod
    def metric_names(real_size: int, imagined_size: int) -> tuple[str, ...]:
        """The keys `update` returns for a batch of `real_size` real transitions followed by `imagined_size` imagined."""
        halves = [name for name, size in (("real", real_size), ("imagined", imagined_size)) if size > 0]
        return SAC.METRICS + tuple(f"sac/{half}/{name}" for half in halves for name in SAC.HALF_METRICS)

    def __init__(self, config: SACConfig, feature_size: int, action_size: int, seed: int = 0, name: str = "sac"):
        super().__init__(name=name)
        self.config = config
        self.action_size = action_size
        self.target_entropy = -float(action_size) if config.target_entropy is None else config.target_entropy
        with self.name_scope:
            self.actor = MLP(feature_size, config.units, config.layers, 2 * action_size, tf.nn.elu, seed, name="actor")
            critic_in = feature_size + action_size
            self.critic1 = MLP(critic_in, config.units, config.layers, 1, tf.nn.elu, seed, name="critic1")
            self.critic2 = MLP(critic_in, config.units, config.layers, 1, tf.nn.elu, seed + 1, name="critic2")
            self.target_critic1 = MLP(critic_in, config.units, config.layers, 1, tf.nn.elu, seed, name="target_critic1")
            self.target_critic2 = MLP(critic_in, config.units, config.layers, 1, tf.nn.elu, seed + 1, name="target_critic2")
            self.log_alpha = tf.Variable(math.log(config.init_alpha), name="log_alpha")
            if config.return_normalization:  # only then: checkpoints of other configs keep their variables
                self.return_range = tf.Variable([0.0, 0.0], trainable=False, name="return_range")  # EMAs of P5, P95
                self.return_updates = tf.Variable(0.0, trainable=False, name="return_updates")
        self.critic_variables = self.critic1.trainable_variables + self.critic2.trainable_variables
        self.actor_optimizer = Adam(self.actor.trainable_variables, config.actor_lr, name="sac_actor")
        self.critic_optimizer = Adam(self.critic_variables, config.critic_lr, name="sac_critic")
        self.alpha_optimizer = Adam([self.log_alpha], config.alpha_lr, name="sac_alpha")
        self.min_log_std = math.log(config.min_std)
        self.soft_update_targets(1.0)

    # ------------------------------------------------------------------ acting

    def _distribution(self, features: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        mean, log_std = tf.split(self.actor(features), 2, -1)
        log_std = tf.clip_by_value(log_std, self.min_log_std, LOG_STD_MAX)
        return mean, log_std

    def sample(self, features: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """A reparameterised action inside [-1, 1] and its log-probability, for noise ~ N(0, I).

        `tanh`: a = tanh(u) with the change-of-variables correction. `invert_gradients`: a = clip(u),
        differentiated by inverting gradients (`_inverting_clip`); the log-probability is the
        Gaussian's of u (a clip has no density to correct by), which the entropy terms use.
        """
        mean, log_std = self._distribution(features)
        u = mean + tf.exp(log_std) * noise
        log_prob = tf.reduce_sum(-0.5 * tf.square(noise) - log_std - 0.5 * math.log(2 * math.pi), -1)
        if self.config.action_bounds == "tanh":
            # log(1 - tanh(u)^2) in a numerically stable form.
            log_prob -= tf.reduce_sum(2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u)), -1)
            return tf.tanh(u), log_prob
        return _inverting_clip(u), log_prob

    def act(self, features: tf.Tensor, noise: tf.Tensor, deterministic: tf.Tensor | bool) -> tf.Tensor:
        """The action to execute, inside [-1, 1]: the mode when deterministic, a sample otherwise."""
        mean, log_std = self._distribution(features)
        u = tf.where(deterministic, mean, mean + tf.exp(log_std) * noise)
        action = tf.tanh(u) if self.config.action_bounds == "tanh" else u
        return tf.clip_by_value(action, -1.0, 1.0)

    def q_value(self, features: tf.Tensor, action: tf.Tensor, target: bool = False) -> tf.Tensor:
        """min(Q1, Q2) of (features, action)."""
        critics = (self.target_critic1, self.target_critic2) if target else (self.critic1, self.critic2)
        x = tf.concat([features, action], -1)
        return tf.minimum(tf.squeeze(critics[0](x), -1), tf.squeeze(critics[1](x), -1))

    @property
    def alpha(self) -> tf.Tensor:
        return tf.exp(self.log_alpha)

    def return_scale(self) -> tf.Tensor:
        """max(1, P95 - P5) of the critic targets (debiased EMAs); 1 without `sac.return_normalization`."""
        if not self.config.return_normalization:
            return tf.constant(1.0)
        correction = 1.0 - (1.0 - self.RETURN_RATE) ** tf.maximum(self.return_updates, 1.0)
        low, high = tf.unstack(self.return_range / correction)
        return tf.maximum(1.0, high - low)

    def _track_returns(self, target: tf.Tensor) -> None:
        """Moves the EMAs of the targets' 5th and 95th percentiles towards this batch's."""
        # Imported here, where return normalization is on: importing TensorFlow Probability (and the tf-keras it
        # loads) costs every process about a second of CPU that nothing else in planet_sac needs (docs/performance.md).
        import tensorflow_probability as tfp

        batch = tfp.stats.percentile(target, self.RETURN_PERCENTILES, interpolation="linear")
        self.return_range.assign((1.0 - self.RETURN_RATE) * self.return_range + self.RETURN_RATE * batch)
        self.return_updates.assign_add(1.0)

    # ------------------------------------------------------------------ learning

    def critic_target(self, reward: tf.Tensor, discount: tf.Tensor, next_features: tf.Tensor, noise: tf.Tensor,
                      steps: int = 1) -> tf.Tensor:
        """y = r + gamma^n * d * (min Q_target(z', a') - alpha * log pi(a'|z')), a' ~ pi(z').

        For n-step transitions (`steps` = n), `reward` is the discounted n-step return and `d`
        the product of the episode discounts over the n steps (see `control/transitions.py`).
        """
        next_action, next_log_prob = self.sample(next_features, noise)
        next_value = self.q_value(next_features, next_action, target=True) - self.alpha * next_log_prob
        return tf.stop_gradient(reward + self.config.discount ** steps * discount * next_value)

    def critic_loss(self, features: tf.Tensor, action: tf.Tensor, target: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The twin critics' TD loss 0.5 * mean((Q1 - y)^2) + 0.5 * mean((Q2 - y)^2) for targets y [N]; and Q1 [N].

        Differentiable in the critics' weights and in `features` (`model.value_scale` trains the world model's
        features with it)."""
        x = tf.concat([features, action], -1)
        q1, q2 = tf.squeeze(self.critic1(x), -1), tf.squeeze(self.critic2(x), -1)
        return 0.5 * tf.reduce_mean(tf.square(q1 - target)) + 0.5 * tf.reduce_mean(tf.square(q2 - target)), q1

    def actor_loss(self, features: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """mean(alpha * log pi(a|z) - min Q(z, a) / return_scale()), a ~ pi(z) reparameterised by `noise`; and
        log pi(a|z)."""
        new_action, log_prob = self.sample(features, noise)
        q = self.q_value(features, new_action) / tf.stop_gradient(self.return_scale())
        loss = tf.reduce_mean(tf.stop_gradient(self.alpha) * log_prob - q)
        return loss, log_prob

    def update(self, features: tf.Tensor, action: tf.Tensor, reward: tf.Tensor, discount: tf.Tensor,
               next_features: tf.Tensor, rng: tf.random.Generator, steps: int = 1,
               real_size: int | None = None, train_actor: bool = True) -> Dict[str, tf.Tensor]:
        """One SAC update on a batch of (`steps`-step) transitions; returns scalar metrics.

        The critic, actor and temperature losses are computed from the same parameters and
        applied together (as in the original softlearning implementation), so a NaN/inf in
        any loss or gradient skips the whole update: no optimizer step, no target update;
        `sac/update_finite` is then 0.

        `real_size`: the batch's first `real_size` transitions are real, the rest imagined (None:
        all real). `train_actor=False` (`sac.actor_grad: dynamics`, whose actor and temperature learn
        elsewhere, at the actor's pace): the critics only; the actor loss is computed for the metric.
        The metrics (keys: `metric_names`) are batch means, plus per half the mean
        n-step `reward` (for lambda-return transitions, whose `discount` is 0, the target itself), the first
        critic's `q` and the critic `target`; `sac/std` is the mean
        standard deviation of the actor's Gaussian, `sac/std_at_floor` the share of its
        dimensions clipped at `sac.min_std`.
        """
        features, next_features = tf.stop_gradient(features), tf.stop_gradient(next_features)
        target = self.critic_target(reward, discount, next_features, rng.normal(tf.shape(action)), steps)
        with tf.GradientTape() as tape:
            critic_loss, q1 = self.critic_loss(features, action, target)
        critic_grads = tape.gradient(critic_loss, self.critic_variables)

        if train_actor:
            with tf.GradientTape() as tape:
                actor_loss, log_prob = self.actor_loss(features, rng.normal(tf.shape(action)))
            actor_grads = tape.gradient(actor_loss, self.actor.trainable_variables)
        else:
            actor_loss, log_prob = self.actor_loss(features, rng.normal(tf.shape(action)))
            actor_grads = []

        alpha_loss, alpha_grads = self.temperature_gradients(log_prob)
        _, log_std = self._distribution(features)

        norms = {"critic": tf.linalg.global_norm(critic_grads), "alpha": tf.linalg.global_norm(alpha_grads),
                 **({"actor": tf.linalg.global_norm(actor_grads)} if train_actor else {})}
        finite = tf.reduce_all([tf.math.is_finite(value) for value in (critic_loss, actor_loss, alpha_loss,
                                                                         *norms.values())])

        def apply() -> tf.Tensor:
            self.critic_optimizer.apply(critic_grads, norms["critic"])
            if train_actor:
                self.actor_optimizer.apply(actor_grads, norms["actor"])
                self.apply_temperature(alpha_grads, norms["alpha"])
            if self.config.return_normalization:
                self._track_returns(target)
            self.soft_update_targets(self.config.tau)
            return tf.constant(1.0)

        applied = tf.cond(finite, apply, lambda: tf.constant(0.0))
        metrics = {"sac/critic_loss": critic_loss, "sac/actor_loss": actor_loss, "sac/alpha": self.alpha,
                   "sac/q": tf.reduce_mean(q1), "sac/entropy": -tf.reduce_mean(log_prob),
                   "sac/std": tf.reduce_mean(tf.exp(log_std)),
                   "sac/std_at_floor": tf.reduce_mean(tf.cast(log_std <= self.min_log_std, tf.float32)),
                   "sac/return_scale": self.return_scale(),
                   "sac/update_finite": applied}
        size = action.shape[0]
        real_size = size if real_size is None else real_size
        for half, part in (("real", slice(0, real_size)), ("imagined", slice(real_size, size))):
            if part.stop > part.start:
                metrics.update({f"sac/{half}/reward": tf.reduce_mean(reward[part]),
                                f"sac/{half}/q": tf.reduce_mean(q1[part]),
                                f"sac/{half}/target": tf.reduce_mean(target[part])})
        return metrics

    def temperature_gradients(self, log_prob: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """SAC's temperature loss -mean(log alpha * (log pi + target entropy)) for the actor's log-probabilities, and its
        gradient."""
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(self.log_alpha * tf.stop_gradient(log_prob + self.target_entropy))
        return loss, tape.gradient(loss, [self.log_alpha])

    def apply_temperature(self, grads: list[tf.Tensor], norm: tf.Tensor | None = None) -> None:
        """One step of the temperature, then its floor `sac.min_alpha` (a projection: it can rise again at once);
        `norm`: the gradient's global norm if known (Adam.apply)."""
        self.alpha_optimizer.apply(grads, norm)
        if self.config.min_alpha > 0:
            self.log_alpha.assign(tf.maximum(self.log_alpha, math.log(self.config.min_alpha)))

    def reset(self, seed: int) -> None:
        """Starts the head over on the same variables (Nikishin et al., 2022: resets against the primacy bias): actor
        and critics take the initial values of a head built with `seed`, the targets copy the critics, the temperature
        is `sac.init_alpha` again, the return statistics and the three optimizers' steps and moments are zero. The
        world model is not touched; nothing is traced again (the compiled policy and updates read these variables)."""
        self.actor.initialize(seed)
        self.critic1.initialize(seed)
        self.critic2.initialize(seed + 1)
        self.soft_update_targets(1.0)
        self.log_alpha.assign(math.log(self.config.init_alpha))
        if self.config.return_normalization:
            self.return_range.assign(tf.zeros_like(self.return_range))
            self.return_updates.assign(0.0)
        for optimizer in (self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer):
            optimizer.reset()

    def soft_update_targets(self, tau: float) -> None:
        """target <- (1 - tau) * target + tau * online."""
        for online, target in ((self.critic1, self.target_critic1), (self.critic2, self.target_critic2)):
            for o, t in zip(online.variables, target.variables):
                t.assign((1.0 - tau) * t + tau * o)
