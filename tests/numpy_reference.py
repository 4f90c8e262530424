"""Independent numpy versions of the model's equations, for expected values in tests.

Written from the equations in the modules' docstrings, reading only the weights of the
TensorFlow modules, never calling them: a test that compares the two fails when either
the maths or the wiring (which input goes where, which bias, which activation) changes.
"""

from __future__ import annotations

import math

import numpy as np

LOG_STD_MAX = 2.0


def relu(x):
    return np.maximum(x, 0.0)


def elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def softplus(x):
    return np.logaddexp(0.0, x)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def dense(x, layer, activation=None):
    """y = activation(x W + b) with the layer's weights."""
    y = np.asarray(x, np.float64) @ layer.kernel.numpy() + layer.bias.numpy()
    return activation(y) if activation else y


def mlp(x, module, activation=elu):
    """Hidden layers with `activation`, then a linear output layer."""
    for layer in module.hidden:
        x = dense(x, layer, activation)
    return dense(x, module.out)


# ----------------------------------------------------------------------------- RSSM


def gaussian(params, noise, min_stddev):
    mean, raw = np.split(params, 2, -1)
    std = softplus(raw) + min_stddev
    return mean, std, mean + std * noise


def gru(x, h, cell):
    """h' = z * h + (1 - z) * tanh(W [x, r * h]), gates r, z = sigmoid(W_g [x, h] + b_g)."""
    gates = sigmoid(np.concatenate([x, h], -1) @ cell.gates_kernel.numpy() + cell.gates_bias.numpy())
    reset, update = np.split(gates, 2, -1)
    candidate = np.tanh(np.concatenate([x, reset * h], -1) @ cell.candidate_kernel.numpy() + cell.candidate_bias.numpy())
    return update * h + (1 - update) * candidate


def img_step(rssm, stoch, deter, action, noise):
    """Prior: GRU on relu([stoch, action] W + b), then a Gaussian from the new deterministic state."""
    x = dense(np.concatenate([stoch, action], -1), rssm.prior_in, relu)
    deter = gru(x, deter, rssm.gru)
    params = dense(dense(deter, rssm.prior_hidden, relu), rssm.prior_out)
    mean, std, stoch = gaussian(params, noise, rssm.min_stddev)
    return dict(mean=mean, std=std, stoch=stoch, deter=deter)


def observe(rssm, embed, action, noise):
    """Posteriors and priors [B, T, ...] from the all-zero state; action[:, t] led to observation t."""
    batch, length = action.shape[:2]
    stoch, deter = np.zeros([batch, rssm.stoch_size]), np.zeros([batch, rssm.deter_size])
    posts, priors = [], []
    for t in range(length):
        prior = img_step(rssm, stoch, deter, action[:, t], np.zeros_like(noise[:, t]))
        hidden = dense(np.concatenate([prior["deter"], embed[:, t]], -1), rssm.posterior_hidden, relu)
        mean, std, stoch = gaussian(dense(hidden, rssm.posterior_out), noise[:, t], rssm.min_stddev)
        deter = prior["deter"]
        posts.append(dict(mean=mean, std=std, stoch=stoch, deter=deter))
        priors.append(prior)

    def stack(states):
        return {key: np.stack([s[key] for s in states], 1) for key in states[0]}

    return stack(posts), stack(priors)


def features(state):
    return np.concatenate([state["deter"], state["stoch"]], -1)


def gaussian_kl(mean1, std1, mean2, std2):
    """KL(N(mean1, std1) || N(mean2, std2)) of diagonal Gaussians, summed over the last axis."""
    return np.sum(np.log(std2 / std1) + (std1 ** 2 + (mean1 - mean2) ** 2) / (2 * std2 ** 2) - 0.5, -1)


# ----------------------------------------------------------------------------- SAC (tanh-squashed)


def actor(sac, feats):
    """Mean and log-std (clipped to [log sac.min_std, 2]) of the actor's Gaussian before the tanh."""
    mean, log_std = np.split(mlp(feats, sac.actor), 2, -1)
    return mean, np.clip(log_std, np.log(sac.config.min_std), LOG_STD_MAX)


def sample(sac, feats, noise):
    """tanh(u), u = mean + std * noise, and log pi(a) = log N(u) - sum log(1 - tanh(u)^2)."""
    mean, log_std = actor(sac, feats)
    u = mean + np.exp(log_std) * noise
    log_prob = np.sum(-0.5 * noise ** 2 - log_std - 0.5 * math.log(2 * math.pi), -1)
    log_prob -= np.sum(np.log(1 - np.tanh(u) ** 2), -1)
    return np.tanh(u), log_prob


def q_value(sac, feats, action, target=False):
    """min(Q1, Q2) of the online or target critics."""
    critics = (sac.target_critic1, sac.target_critic2) if target else (sac.critic1, sac.critic2)
    x = np.concatenate([feats, action], -1)
    return np.minimum(mlp(x, critics[0])[..., 0], mlp(x, critics[1])[..., 0])
