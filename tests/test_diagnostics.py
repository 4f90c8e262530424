"""Diagnostics: returns by hand, Q of the action actually taken next."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.config import SACConfig
from planet_sac.control.sac import SAC
from planet_sac.diagnostics import critic_vs_returns, discounted_returns
from tests.test_planet_fidelity import tiny_state_model


def test_discounted_returns_by_hand():
    reward = np.array([0.0, 1.0, 2.0, 4.0])  # index 0: the reset step
    discount = np.array([1.0, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(discounted_returns(reward, discount, 0.5), [1 + 0.5 * 2 + 0.25 * 4, 2 + 0.5 * 4, 4.0])
    discount = np.array([1.0, 1.0, 0.0, 1.0])  # terminal on arriving at step 2: r_3 is never reached from t=0
    np.testing.assert_allclose(discounted_returns(reward, discount, 0.5)[0], 1 + 0.5 * 2)


def test_critic_scores_the_action_taken_next(monkeypatch):
    model = tiny_state_model()
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 1)
    length = 8
    episode = {"state": np.random.default_rng(0).normal(size=(length + 1, 3)).astype(np.float32),
               "action": np.arange(length + 1, dtype=np.float32)[:, None],  # a_t = t
               "reward": np.ones(length + 1, np.float32), "discount": np.ones(length + 1, np.float32)}
    monkeypatch.setattr(sac, "q_value", lambda features, action: tf.squeeze(action, -1))  # Q = the action's value
    result = critic_vs_returns(model, sac, episode, gamma=0.5)
    # First half, t = 0..3: Q = a_t+1 = 1..4 (mean 2.5); G_t = sum_k 0.5^k over the remaining 8 - t rewards.
    assert result["sac/q_episode"] == 2.5
    expected = np.mean([sum(0.5 ** k for k in range(length - t)) for t in range(4)])
    assert abs(result["sac/return_episode"] - expected) < 1e-9
