"""Diagnostics: returns by hand, Q of the action actually taken next."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.config import SACConfig
from planet_sac.control.sac import SAC
from planet_sac.diagnostics import critic_vs_returns, discounted_returns, foreground_errors, open_loop
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


def test_critic_scores_the_posterior_state_before_the_action(monkeypatch):
    """Q(z_t, a_t+1): the features beside a_t+1 are the posterior of observation t (filtered by the RSSM through the
    posterior means, here by `rssm.observe` directly), not of observation t+1."""
    model = tiny_state_model()
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 1)
    g = np.random.default_rng(1)
    length = 6
    episode = {"state": g.normal(size=(length + 1, 3)).astype(np.float32),
               "action": g.uniform(-1, 1, (length + 1, 1)).astype(np.float32),
               "reward": np.ones(length + 1, np.float32), "discount": np.ones(length + 1, np.float32)}
    seen = []
    monkeypatch.setattr(sac, "q_value", lambda features, action: (seen.append(features.numpy()), action[:, 0])[1])
    critic_vs_returns(model, sac, episode, gamma=0.9)
    obs = tf.constant(episode["state"][None])
    posts, _ = model.rssm.observe(model.embed(obs), tf.constant(episode["action"][None]),
                                  tf.zeros([1, length + 1, model.rssm.stoch_size]))
    expected = np.concatenate([posts["deter"][0], posts["mean"][0]], -1)[:length]  # z_0 .. z_T-1
    np.testing.assert_allclose(seen[0], expected, rtol=1e-5, atol=1e-6)


def test_open_loop_predicts_step_t_from_the_action_that_led_to_it():
    """The aligned layout: action[:, t] led to observation t. Changing the action at step k >= context changes the
    open-loop prediction from step k on and nothing before it; the last action is used too. (ELU: no dead units
    that would hide a change.)"""
    model = tiny_state_model(activation="elu")
    g = np.random.default_rng(2)
    length, context = 8, 3
    batch = {"state": g.normal(size=(1, length, 3)).astype(np.float32),
             "action": g.uniform(-1, 1, (1, length, 1)).astype(np.float32)}
    _, base = open_loop(model, batch, context)
    for k in (context, length - 1):
        changed = {key: value.copy() for key, value in batch.items()}
        changed["action"][0, k] += 1.5
        _, predicted = open_loop(model, changed, context)
        np.testing.assert_array_equal(predicted[:k], base[:k])
        assert np.abs(predicted[k] - base[k]).max() > 1e-4


def _numpy_foreground_errors(truth: np.ndarray, prediction: np.ndarray, threshold: float) -> tuple[float, float]:
    background = np.median(truth, axis=1, keepdims=True)
    moving = (np.abs(truth - background) > threshold).any(-1)
    error = np.abs(prediction - truth).mean(-1)
    return float(error[moving].mean()), float(error[~moving].mean())


def test_foreground_errors_by_hand():
    """A 2x2 square moves over a flat background the prediction shows without it: the foreground error is the
    square's contrast, the background error the prediction's offset; a flicker under the threshold is background."""
    truth = np.full((1, 5, 8, 8, 3), 0.2, np.float32)
    for t in range(5):
        truth[0, t, t:t + 2, 2:4] = 0.9
    truth[0, 2, 7, 7] = 0.25  # a flicker of 0.05: under the 0.1 threshold
    prediction = np.full_like(truth, 0.25)  # the background, 0.05 too bright, and no square
    errors = {key: float(value) for key, value in foreground_errors(tf.constant(truth), tf.constant(prediction)).items()}
    np.testing.assert_allclose(errors["model/foreground_error"], 0.65, rtol=1e-6)
    # 5 x 64 pixels, 20 of them the square; the flicker pixel is predicted exactly
    np.testing.assert_allclose(errors["model/background_error"], (299 * 0.05 + 0.0) / 300, rtol=1e-5)


def test_foreground_errors_match_numpy_per_chunk_median_over_an_even_length():
    """Each chunk has its own background, the median over its frames (for an even number of frames the mean of the
    middle two, as numpy's): a pixel at 0.2, 0.2, 0.9, 0.9 has the background 0.55 and moves in all four frames."""
    g = np.random.default_rng(0)
    truth = np.repeat(g.uniform(0, 1, (3, 1, 6, 6, 3)), 4, axis=1).astype(np.float32)
    truth[:, 2:, :3] = g.uniform(0, 1, (3, 2, 3, 6, 3))
    truth[1, :, 5, 5] = np.array([0.2, 0.2, 0.9, 0.9])[:, None]
    prediction = (truth + g.normal(0, 0.1, truth.shape)).astype(np.float32)
    errors = foreground_errors(tf.constant(truth), tf.constant(prediction), threshold=0.15)
    expected = _numpy_foreground_errors(truth, prediction, 0.15)
    np.testing.assert_allclose(float(errors["model/foreground_error"]), expected[0], rtol=1e-5)
    np.testing.assert_allclose(float(errors["model/background_error"]), expected[1], rtol=1e-5)
    upper = np.sort(truth, axis=1)[:, 2:3]  # the upper middle frame instead of numpy's median
    wrong = (np.abs(truth - upper) > 0.15).any(-1)
    assert wrong.sum() != (np.abs(truth - np.median(truth, axis=1, keepdims=True)) > 0.15).any(-1).sum()
