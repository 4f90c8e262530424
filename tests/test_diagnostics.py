"""Diagnostics: returns by hand, Q of the action actually taken next, the chunk-start gap from a numpy filter."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.config import SACConfig
from planet_sac.control.sac import SAC
from planet_sac.diagnostics import chunk_start_gap, critic_vs_returns, discounted_returns
from tests.test_planet_fidelity import numpy_rssm, tiny_state_model


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


def numpy_filter(model, embed: np.ndarray, action: np.ndarray) -> np.ndarray:
    """Posterior concat(deter, mean) filtered from a zero state, without noise, in numpy from the RSSM's weights."""
    rssm = model.rssm
    img_step = numpy_rssm(model)
    (hk, hb), (ok, ob) = ((layer.kernel.numpy(), layer.bias.numpy()) for layer in (rssm.posterior_hidden, rssm.posterior_out))
    assert model.config.activation == "relu"
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    state = {"stoch": np.zeros((1, rssm.stoch_size)), "deter": np.zeros((1, rssm.deter_size))}
    features = []
    for t in range(len(embed)):
        prior = img_step(state, action[t][None], np.zeros((1, rssm.stoch_size)))
        mean = np.split(relu(np.concatenate([prior["deter"], embed[t][None]], -1) @ hk + hb) @ ok + ob, 2, -1)[0]
        state = {"stoch": mean, "deter": prior["deter"]}
        features.append(np.concatenate([prior["deter"], mean], -1)[0])
    return np.array(features)


def test_chunk_start_gap_against_a_numpy_filter():
    model = tiny_state_model()
    rng = np.random.default_rng(1)
    steps = 12
    embed = rng.normal(size=(steps, model.rssm.posterior_hidden.kernel.shape[0] - model.rssm.deter_size))
    action = rng.uniform(-1, 1, (steps, 1))
    full = numpy_filter(model, embed, action)
    starts, offsets = [2, 5], [0, 1, 4]
    expected = {k: np.mean([np.linalg.norm(numpy_filter(model, embed[s:], action[s:])[k] - full[s + k])
                            / np.linalg.norm(full[s + k]) for s in starts]) for k in offsets}
    got = chunk_start_gap(model, tf.constant(embed, tf.float32), tf.constant(action, tf.float32), starts, offsets)
    assert set(got) == set(offsets)
    for k in offsets:
        assert abs(got[k] - expected[k]) < 1e-4 * max(1.0, expected[k])
    assert got[0] > got[4] > 0  # the gap closes as the chunk's filter sees more observations
    # A chunk that starts at the episode's start is filtered exactly as the episode is.
    assert chunk_start_gap(model, tf.constant(embed, tf.float32), tf.constant(action, tf.float32), [0], offsets) == \
        {k: 0.0 for k in offsets}
