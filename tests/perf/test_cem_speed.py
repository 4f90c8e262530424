"""Planning speed levers: bfloat16 rollouts and the warm start from the previous step's plan (what they change in the plan)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.config import CEMConfig, SACConfig
from planet_sac.control import cem
from planet_sac.control.policy import Policy
from planet_sac.control.sac import SAC
from tests.conftest import needs_bfloat16_kernels
from tests.test_planet_fidelity import tiny_state_model


@needs_bfloat16_kernels
def test_bfloat16_rollouts_rank_like_float32():
    """Same candidates (same random stream), rollouts in bfloat16: the plan stays close to float32's."""
    model = tiny_state_model()
    seen = []
    real = cem.rollout_return(model, None, 0.99)

    def score(state, actions, noise):
        seen.append(actions.dtype)
        return real(state, actions, noise)

    state = model.rssm.initial(2)
    state = {**state, "deter": tf.random.normal([2, 6], seed=3)}
    plans = {}
    for precision in ("float32", "bfloat16"):
        config = CEMConfig(horizon=4, candidates=300, iterations=3, top_k=30, precision=precision)
        plans[precision] = cem.search(model, state, config, tf.random.Generator.from_seed(5), score=score)[1].numpy()
    assert seen == [tf.float32] * 3 + [tf.bfloat16] * 3
    assert np.max(np.abs(plans["float32"] - plans["bfloat16"])) < 0.15


def test_shift_plan_moves_one_step_and_appends_zero():
    plan = np.arange(12, dtype=np.float32).reshape(1, 4, 3)
    expected = np.concatenate([plan[:, 1:], np.zeros((1, 1, 3), np.float32)], 1)
    np.testing.assert_array_equal(cem.shift_plan(tf.constant(plan)).numpy(), expected)


def two_searches(monkeypatch, warm_start: bool) -> list:
    """(initial_mean, final plan mean) of the searches of two CEM steps of one episode."""
    model = tiny_state_model()
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 1)
    calls = []
    real = cem.search

    def spy(*args, initial_mean=None, **kwargs):
        action, mean = real(*args, initial_mean=initial_mean, **kwargs)
        calls.append((None if initial_mean is None else initial_mean.numpy(), mean.numpy()))
        return action, mean

    monkeypatch.setattr(cem, "search", spy)
    config = CEMConfig(horizon=3, candidates=16, iterations=2, top_k=4, warm_start=warm_start)
    policy = Policy(model, sac, config, train="cem", test="cem")
    tf.config.run_functions_eagerly(True)
    try:
        state = policy.initial_state(1)
        obs = tf.zeros([1, 3])
        _, state = policy.act(obs, state, "test")
        _, state = policy.act(obs, state, "test")
    finally:
        tf.config.run_functions_eagerly(False)
    return calls


def test_without_warm_start_every_search_starts_from_the_zero_mean(monkeypatch):
    calls = two_searches(monkeypatch, warm_start=False)
    assert [start for start, _ in calls] == [None, None]
    assert np.abs(calls[0][1]).max() > 0  # a plan to start from was there


def test_warm_start_passes_the_previous_plan_to_the_next_search(monkeypatch):
    (first_start, first_plan), (second_start, _) = two_searches(monkeypatch, warm_start=True)
    np.testing.assert_array_equal(first_start, np.zeros((1, 3, 1)))  # a new episode starts from the zero plan
    np.testing.assert_allclose(second_start, np.concatenate([first_plan[:, 1:], np.zeros((1, 1, 1))], 1))


def test_search_samples_around_the_initial_mean():
    """One iteration whose elites are all candidates: the new mean is E[clip(N(m, 1), -1, 1)] (numpy, Monte Carlo)."""
    model = tiny_state_model()
    flat = lambda state, actions, noise: tf.zeros([tf.shape(actions)[0]])  # noqa: E731 - every candidate ties
    config = CEMConfig(horizon=2, candidates=4000, iterations=1, top_k=4000)
    start = tf.fill([1, 2, 1], 0.8)
    _, mean = cem.search(model, model.rssm.initial(1), config, tf.random.Generator.from_seed(0), score=flat,
                         initial_mean=start)
    expected = np.clip(np.random.default_rng(0).normal(0.8, 1.0, 1_000_000), -1, 1).mean()
    np.testing.assert_allclose(mean.numpy(), np.full((1, 2, 1), expected), atol=0.05)
