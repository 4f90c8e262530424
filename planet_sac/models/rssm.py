"""PlaNet's recurrent state-space model (RSSM).

The latent state has a deterministic part `deter` (a GRU state, 200 units by default)
and a stochastic part `stoch` (a diagonal Gaussian, 30 units, stddev >= min_stddev).
The prior predicts the next state from the last state and action alone; the posterior
also sees the encoded observation. Features for every head are `concat(deter, stoch)`.

Sampling noise is passed in explicitly instead of drawn inside: the caller owns the
random stream, which makes gradient accumulation exactly equal to one large batch and
eager execution equal to graph execution.
"""

from __future__ import annotations

import math
from typing import Dict

import tensorflow as tf

from planet_sac.models.networks import Dense, GRUCell

State = Dict[str, tf.Tensor]  # keys: mean, std, stoch, deter


class RSSM(tf.Module):
    """Transition (prior) and filtering (posterior) of the latent state."""

    def __init__(self, action_size: int, embed_size: int, deter_size: int = 200, stoch_size: int = 30,
                 hidden_size: int = 200, min_stddev: float = 0.1, seed: int = 0, activation=tf.nn.relu,
                 name: str = "rssm"):
        super().__init__(name=name)
        with self.name_scope:
            self.prior_in = Dense(stoch_size + action_size, hidden_size, activation, seed, name="prior_in")
            self.gru = GRUCell(hidden_size, deter_size, seed, name="gru")
            self.prior_hidden = Dense(deter_size, hidden_size, activation, seed, name="prior_hidden")
            self.prior_out = Dense(hidden_size, 2 * stoch_size, None, seed, name="prior_out")
            self.posterior_hidden = Dense(deter_size + embed_size, hidden_size, activation, seed, name="posterior_hidden")
            self.posterior_out = Dense(hidden_size, 2 * stoch_size, None, seed, name="posterior_out")
        self.deter_size = deter_size
        self.stoch_size = stoch_size
        self.min_stddev = min_stddev

    @property
    def feature_size(self) -> int:
        return self.deter_size + self.stoch_size

    def initial(self, batch_size: int | tf.Tensor) -> State:
        """The all-zero state every chunk and every episode starts from."""
        zeros = lambda size: tf.zeros([batch_size, size])  # noqa: E731
        return dict(mean=zeros(self.stoch_size), std=zeros(self.stoch_size),
                    stoch=zeros(self.stoch_size), deter=zeros(self.deter_size))

    @staticmethod
    def features(state: State) -> tf.Tensor:
        return tf.concat([state["deter"], state["stoch"]], -1)

    @staticmethod
    def kl_divergence(p: State, q: State) -> tf.Tensor:
        """KL(p || q) of the stochastic parts' diagonal Gaussians, summed over their units ([...] for [..., stoch]).

        Closed form, as TensorFlow Probability computes it for `MultivariateNormalDiag` (PlaNet's distribution), in
        a far smaller graph (docs/performance.md): sum(log q_std - log p_std + ((p_std / q_std)^2 + ((p_mean - q_mean) / q_std)^2 - 1) / 2).
        """
        ratio = p["std"] / q["std"]
        return tf.reduce_sum(0.5 * (tf.square(ratio) + tf.square((p["mean"] - q["mean"]) / q["std"]) - 1.0)
                             - tf.math.log(ratio), -1)

    @staticmethod
    def entropy(state: State) -> tf.Tensor:
        """The differential entropy of the stochastic part's diagonal Gaussian, in nats ([...] for [..., stoch])."""
        return tf.reduce_sum(0.5 * math.log(2.0 * math.pi * math.e) + tf.math.log(state["std"]), -1)

    def _gaussian(self, params: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        mean, raw_std = tf.split(params, 2, -1)
        std = tf.nn.softplus(raw_std) + self.min_stddev
        return mean, std, mean + std * noise

    def img_step(self, state: State, action: tf.Tensor, noise: tf.Tensor) -> State:
        """Prior: the next state from the current state and action, without an observation."""
        x = self.prior_in(tf.concat([state["stoch"], action], -1))
        deter = self.gru(x, state["deter"])
        mean, std, stoch = self._gaussian(self.prior_out(self.prior_hidden(deter)), noise)
        return dict(mean=mean, std=std, stoch=stoch, deter=deter)

    def obs_step(self, state: State, action: tf.Tensor, embed: tf.Tensor, noise: tf.Tensor) -> tuple[State, State]:
        """Posterior and prior of the next state, given the action taken and the observation it led to."""
        prior = self.img_step(state, action, tf.zeros_like(noise))
        hidden = self.posterior_hidden(tf.concat([prior["deter"], embed], -1))
        mean, std, stoch = self._gaussian(self.posterior_out(hidden), noise)
        return dict(mean=mean, std=std, stoch=stoch, deter=prior["deter"]), prior

    def observe(self, embed: tf.Tensor, action: tf.Tensor, noise: tf.Tensor, state: State | None = None) -> tuple[State, State]:
        """Filters a [B, T] sequence; action[:, t] is the action that led to observation t.

        Returns posteriors and priors, each a dict of [B, T, ...] tensors.
        """
        if state is None:
            state = self.initial(tf.shape(action)[0])
        inputs = (_time_major(embed), _time_major(action), _time_major(noise))

        def step(carry, inp):
            post, _ = carry
            e, a, n = inp
            return self.obs_step(post, a, e, n)

        posts, priors = tf.scan(step, inputs, initializer=(state, state))
        return _batch_major(posts), _batch_major(priors)

    def imagine(self, state: State, action: tf.Tensor, noise: tf.Tensor) -> State:
        """Rolls the prior forward open-loop over [B, H] actions; returns [B, H, ...] states."""
        inputs = (_time_major(action), _time_major(noise))
        states = tf.scan(lambda s, inp: self.img_step(s, inp[0], inp[1]), inputs, initializer=state)
        return _batch_major(states)


def _time_major(x):
    return tf.nest.map_structure(lambda t: tf.transpose(t, [1, 0] + list(range(2, t.shape.rank))), x)


_batch_major = _time_major
