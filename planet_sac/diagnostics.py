"""Diagnostics of the SAC head against what really happened: the critic's Q beside real returns.

For a recorded episode, the world model filters the posterior states z_t (as when acting),
the critic scores the action actually taken next, Q(z_t, a_t+1), and the episode gives the
real discounted return from t, G_t = sum_k gamma^k r_t+1+k (truncated at the episode's
end, so the last steps' G_t miss their tail; only the first half of the episode is used).
A critic that overestimates shows Q >> G; one that learned little shows Q ~ 0.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.control.sac import SAC
from planet_sac.models.world_model import WorldModel


def discounted_returns(reward: np.ndarray, discount: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = r_t+1 + gamma d_t+1 G_t+1 for t = 0..T-1 of an aligned episode (reward[0] is the reset's 0)."""
    returns = np.zeros(len(reward) - 1, np.float64)
    running = 0.0
    for t in range(len(reward) - 2, -1, -1):
        running = reward[t + 1] + gamma * discount[t + 1] * running
        returns[t] = running
    return returns


def critic_vs_returns(world_model: WorldModel, sac: SAC, episode: dict, gamma: float) -> dict[str, float]:
    """Mean Q(z_t, a_t+1) and mean real G_t over the first half of `episode`, and their mean absolute gap."""
    obs = tf.constant(episode[world_model.obs_key][None])
    action = tf.constant(episode["action"][None], tf.float32)
    noise = world_model.observation_noise(tf.random.Generator.from_seed(0), obs)
    posts, _ = world_model.rssm.observe(world_model.embed(obs, noise), action,
                                        tf.zeros([1, action.shape[1], world_model.rssm.stoch_size]))
    features = world_model.rssm.features(posts)[0]  # [T + 1, F]
    q = sac.q_value(features[:-1], action[0, 1:]).numpy()  # Q(z_t, a_t+1), t = 0..T-1
    real = discounted_returns(np.asarray(episode["reward"]), np.asarray(episode["discount"]), gamma)
    half = max(1, len(real) // 2)
    return {"sac/q_episode": float(q[:half].mean()), "sac/return_episode": float(real[:half].mean()),
            "sac/q_abs_error": float(np.abs(q[:half] - real[:half]).mean())}
