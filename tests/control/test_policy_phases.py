"""What acting in the train phase does differently from the test phase, for every policy.

PlaNet explores while it collects training episodes and not while it evaluates. Here, with
one observation acted on by many environments at once, so the spread across the batch is
the policy's own randomness:

- every policy: both phases sample the latent posterior (stoch = mean + std * N(0, 1)), as
  PlaNet's and Dreamer's agents do when they act (docs/sac_head.md); only exploration differs;
- `cem` and `sac_guided_cem`: the train phase adds N(0, `cem.exploration_noise`) to the planned
  action and clips it to [-1, 1] (PlaNet's `exploration noise`), the test phase acts with the plan;
- `sac`: the train phase samples the actor, tanh(mu + sigma * N(0, 1)), the test phase takes its
  mode tanh(mu); SAC explores through its own distribution, so no planner noise is added, unless
  `sac.exploration_noise` adds N(0, it) to the sample and clips (Dreamer's expl_amount);
- `random`: U(-1, 1) in both phases.

The planner itself is replaced by a fixed plan (its search has its own tests in test_control.py),
so the expected actions are known exactly; the actor's mu and sigma are computed in numpy
from its weights (tests/numpy_reference.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.acting.actor import TEST, TRAIN
from planet_sac.config import POLICIES, CEMConfig, ModelConfig, SACConfig
from planet_sac.control import cem
from planet_sac.control.policy import Policy
from planet_sac.control.sac import SAC
from planet_sac.models.world_model import WorldModel
from tests import numpy_reference as ref

TINY = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8)
BATCH = 4000  # environments acting on the same observation: their spread is the policy's randomness
PLAN = np.array([0.25, -0.5], np.float32)  # the fixed plan's first action


def tiny_agent(sac_noise: float = 0.0) -> tuple[WorldModel, SAC]:
    """A tiny state model and SAC head with random weights; the actor's std is about 0.3, its mean depends on the features."""
    model = WorldModel(TINY, "state", (3,), 2)
    sac = SAC(SACConfig(units=8, exploration_noise=sac_noise), model.rssm.feature_size, 2)
    rng = np.random.default_rng(7)
    for variable in model.variables:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    for variable in sac.actor.variables:
        variable.assign(rng.normal(0, 0.1, variable.shape).astype(np.float32))
    sac.actor.out.bias.assign([0.2, -0.1, np.log(0.3), np.log(0.3)])  # [mean, log_std] per action dimension
    return model, sac


def fixed_plan(world_model, state, config, rng, sac=None, guide_fraction=0.0, initial_mean=None):
    """Stands in for cem.search: first action PLAN for every environment, a plan of zeros."""
    batch = tf.shape(state["deter"])[0]
    action = tf.tile(tf.constant(PLAN)[None], [batch, 1])
    return action, tf.zeros([batch, config.horizon, 2])


@pytest.fixture(scope="module")
def policies():
    """policies(noise, sac_noise): one Policy per `cem.exploration_noise` and `sac.exploration_noise` (read when the
    function is traced, once), with the planner replaced by `fixed_plan`; tests switch its policies with
    `set_policies`, which never retraces."""
    built: dict[tuple[float, float], Policy] = {}

    def get(exploration_noise: float, sac_noise: float = 0.0) -> Policy:
        if (exploration_noise, sac_noise) not in built:
            model, sac = tiny_agent(sac_noise)
            config = CEMConfig(horizon=2, candidates=8, iterations=1, top_k=2, exploration_noise=exploration_noise)
            built[exploration_noise, sac_noise] = Policy(model, sac, config, seed=3)
        return built[exploration_noise, sac_noise]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cem, "search", fixed_plan)
        yield get
    assert all(policy.traces == 1 for policy in built.values())


@pytest.fixture
def act(policies):
    def act(policy_name: str, phase: str, exploration_noise: float = 0.3, sac_noise: float = 0.0):
        """Actions [BATCH, 2] and latent state of one step of `policy_name` in `phase`, all envs seeing one observation."""
        policy = policies(exploration_noise, sac_noise)
        policy.set_policies(train=policy_name, test=policy_name)
        obs = np.tile(np.array([[0.3, -0.7, 1.1]], np.float32), [BATCH, 1])
        action, (latent, _, _) = policy.act(obs, policy.initial_state(BATCH), phase)
        return action.numpy(), {key: value.numpy() for key, value in latent.items()}, policy.sac

    return act


@pytest.mark.parametrize("policy_name", POLICIES)
def test_both_phases_sample_the_posterior(policy_name, act):
    _, test_latent, _ = act(policy_name, TEST)
    _, train_latent, _ = act(policy_name, TRAIN)
    np.testing.assert_allclose(train_latent["mean"], test_latent["mean"], rtol=1e-5, atol=1e-6)  # same observation
    for latent in (train_latent, test_latent):
        z = (latent["stoch"] - latent["mean"]) / latent["std"]  # N(0, 1) draws, one per env and unit
        assert np.all(latent["std"] > 0.01)
        np.testing.assert_allclose(z.mean(0), 0.0, atol=4 / np.sqrt(BATCH))
        np.testing.assert_allclose(z.std(0), 1.0, atol=0.04)
    assert not np.allclose(train_latent["stoch"], test_latent["stoch"])  # two draws, not one reused


@pytest.mark.parametrize("policy_name", ["cem", "sac_guided_cem"])
@pytest.mark.parametrize("exploration_noise", [0.3, 0.1])
def test_planners_add_clipped_gaussian_exploration_noise_only_in_the_train_phase(policy_name, exploration_noise, act):
    test_action, _, _ = act(policy_name, TEST, exploration_noise)
    np.testing.assert_array_equal(test_action, np.broadcast_to(PLAN, test_action.shape))  # the plan, untouched
    action, _, _ = act(policy_name, TRAIN, exploration_noise)
    # Expected: clip(PLAN + N(0, sigma), -1, 1), its mean and std from a large numpy sample.
    reference = np.clip(PLAN + exploration_noise * np.random.default_rng(0).standard_normal((400_000, 2)), -1.0, 1.0)
    np.testing.assert_allclose(action.mean(0), reference.mean(0), atol=4 * exploration_noise / np.sqrt(BATCH))
    np.testing.assert_allclose(action.std(0), reference.std(0), rtol=0.05)
    assert action.min() >= -1.0 and action.max() <= 1.0
    if exploration_noise == 0.3:  # the bounds are reached (5% of the second dimension's draws pass -1)
        assert np.mean(action[:, 1] == -1.0) == pytest.approx(np.mean(reference[:, 1] == -1.0), abs=0.015)
        assert np.mean(action[:, 1] == -1.0) > 0.02
    assert abs(np.corrcoef((action - PLAN).T)[0, 1]) < 0.1  # independent per dimension


@pytest.mark.parametrize("policy_name", ["cem", "sac_guided_cem"])
def test_planners_act_with_the_plan_in_the_train_phase_when_exploration_noise_is_zero(policy_name, act):
    action, _, _ = act(policy_name, TRAIN, 0.0)
    np.testing.assert_array_equal(action, np.broadcast_to(PLAN, action.shape))


def test_sac_samples_its_actor_in_the_train_phase_and_takes_the_mode_in_the_test_phase(act):
    """tanh(mu) when testing; tanh(mu + sigma * eps) when training, eps ~ N(0, 1), no planner noise added."""
    action, latent, sac = act("sac", TEST, 0.3)
    mean, _ = ref.actor(sac, ref.features(latent))
    np.testing.assert_allclose(action, np.tanh(mean), rtol=1e-4, atol=1e-5)
    action, latent, sac = act("sac", TRAIN, 0.3)
    mean, log_std = ref.actor(sac, ref.features(latent))  # of the sampled latent the train phase acted on
    assert np.abs(action).max() < 0.999  # tanh's inverse stays exact in float32
    eps = (np.arctanh(action.astype(np.float64)) - mean) / np.exp(log_std)
    np.testing.assert_allclose(eps.mean(0), 0.0, atol=4 / np.sqrt(BATCH))
    np.testing.assert_allclose(eps.std(0), 1.0, atol=0.04)  # 0.3 exploration noise on top would make it about 1.4
    assert abs(np.corrcoef(eps.T)[0, 1]) < 0.1


def test_sac_exploration_noise_is_added_to_the_sample_and_clipped_in_the_train_phase_only(act):
    """sac.exploration_noise=0.5: clip(tanh(mu + sigma * eps) + 0.5 * eps2, -1, 1) when training (Dreamer's
    additive exploration on its actor's sample), still tanh(mu) when testing."""
    action, latent, sac = act("sac", TEST, 0.3, sac_noise=0.5)
    mean, _ = ref.actor(sac, ref.features(latent))
    np.testing.assert_allclose(action, np.tanh(mean), rtol=1e-4, atol=1e-5)
    action, latent, sac = act("sac", TRAIN, 0.3, sac_noise=0.5)
    mean, log_std = ref.actor(sac, ref.features(latent))
    rng = np.random.default_rng(0)  # 50 numpy draws per environment of what each should act
    shape = (50, *mean.shape)
    reference = np.clip(np.tanh(mean + np.exp(log_std) * rng.standard_normal(shape)) + 0.5 * rng.standard_normal(shape),
                        -1.0, 1.0)
    np.testing.assert_allclose(action.mean(0), reference.mean((0, 1)), atol=4 * 0.6 / np.sqrt(BATCH))
    np.testing.assert_allclose(action.std(0), reference.std((0, 1)), rtol=0.05)  # without the noise: about 0.3
    for bound in (-1.0, 1.0):  # clipped, and as often as the reference
        np.testing.assert_allclose(np.mean(action == bound, 0), np.mean(reference == bound, (0, 1)), atol=0.015)
    assert action.min() >= -1.0 and action.max() <= 1.0


@pytest.mark.parametrize("phase", [TRAIN, TEST])
def test_random_acts_uniformly_in_both_phases(phase, act):
    action, _, _ = act("random", phase, 0.3)
    np.testing.assert_allclose(action.mean(0), 0.0, atol=0.05)
    np.testing.assert_allclose(action.std(0), 1 / np.sqrt(3), atol=0.02)  # U(-1, 1), no noise added on top
    assert action.min() >= -1.0 and action.max() <= 1.0


def test_the_heads_exploration_noise_follows_its_variable_without_retracing(act, policies):
    """A policy traced with sac.exploration_noise=0.5, set to 0 (a schedule's end): the train phase acts with the
    actor's sample alone (eps = (atanh(a) - mu) / sigma has std 1, against about 1.4 with the noise); set to 0.5
    again, the spread is back. The module's fixture checks that each policy traced once."""
    policy = policies(0.3, 0.5)
    policy.set_sac_exploration(0.0)
    try:
        action, latent, sac = act("sac", TRAIN, 0.3, sac_noise=0.5)
    finally:
        policy.set_sac_exploration(0.5)
    mean, log_std = ref.actor(sac, ref.features(latent))
    assert np.abs(action).max() < 0.999  # no clipping at the bounds: the sample alone
    eps = (np.arctanh(action.astype(np.float64)) - mean) / np.exp(log_std)
    np.testing.assert_allclose(eps.std(0), 1.0, atol=0.04)
    action, _, _ = act("sac", TRAIN, 0.3, sac_noise=0.5)
    assert np.mean(np.abs(action) == 1.0) > 0.05  # 0.5 on top of the sample reaches the bounds


@pytest.mark.parametrize("obs, phase, words", [
    (np.zeros(3, np.float32), "test", "observations of dtype float32 and shape (3,): this policy takes float32 of shape "
                                      "(batch, 3); add the batch axis (obs[None])"),
    (np.zeros((2, 4), np.float32), "test", "shape (2, 4): this policy takes float32 of shape (batch, 3)"),
    (np.zeros((2, 3), np.int64), "test", "observations of dtype int64 and shape (2, 3)"),
    (np.zeros((3, 3), np.float32), "test", "a batch of 3 observations for a state of 2 environments"),
    (np.zeros((2, 3), np.float32), "eval", "phase 'eval': one of train, test"),
])
def test_act_refuses_what_the_compiled_policy_cannot_take_in_one_line(obs, phase, words):
    """A 7-line `Binding inputs to tf.function failed`, a graph error for another batch, `tuple.index(x)` for a
    phase; float64 states are cast, as numpy users hand them."""
    model, sac = tiny_agent()
    policy = Policy(model, sac, CEMConfig(horizon=2, candidates=8, iterations=1, top_k=2), seed=3)
    state = policy.initial_state(2)
    with pytest.raises(ValueError, match=re.escape(words)):
        policy.act(obs, state, phase)
    action, _ = policy.act(np.zeros((2, 3), np.float64), state, "test")
    assert action.shape == (2, 2)


def test_a_policy_built_with_fewer_policies_acts_as_the_full_one_and_refuses_the_others():
    """`policies`: only those (with train and test) are compiled into the function, in POLICIES' order. Each acts in
    both phases exactly as the policy of all four does from the same seed (the branches not taken draw nothing),
    its switch has only their branches, and switching to a policy not compiled in is refused in one line."""
    model, sac = tiny_agent()
    cem_config = CEMConfig(horizon=2, candidates=16, iterations=2, top_k=4)
    small = Policy(model, sac, cem_config, train="cem", test="sac", seed=5, policies=["sac"])
    full = Policy(model, sac, cem_config, train="cem", test="sac", seed=5)
    assert small.policies == ("cem", "sac") and full.policies == POLICIES  # branches 0, 1: not POLICIES' 1, 2
    obs = tf.random.stateless_normal([3, 3], [1, 2])
    for name in ("cem", "sac"):
        for phase in (TRAIN, TEST):
            small.set_policies(train=name, test=name)
            full.set_policies(train=name, test=name)
            small_action, _ = small.act(obs, small.initial_state(3), phase)
            full_action, _ = full.act(obs, full.initial_state(3), phase)
            np.testing.assert_array_equal(small_action.numpy(), full_action.numpy(), err_msg=f"{name} {phase}")
    assert small.traces == 1

    def branches(policy: Policy) -> int:
        """The branches of the function's one switch (a Case op) as traced."""
        graph = policy.compiled.get_concrete_function().graph
        (case,) = [op for op in graph.get_operations() if op.type in ("Case", "StatelessCase")]
        return len(case.get_attr("branches"))

    assert (branches(small), branches(full)) == (2, 4)
    for name in ("random", "sac_guided_cem"):
        with pytest.raises(ValueError, match=re.escape(f"policy '{name}' is not compiled into this policy "
                                                       "(it acts by cem, sac)")):
            small.set_policies(test=name)
    with pytest.raises(ValueError, match="unknown policy 'ppo'"):
        Policy(model, sac, cem_config, policies=["ppo"])


@pytest.mark.parametrize("settings, expected", [
    ([], ("cem",)),  # smoke: cem trains and tests
    (["policy.test=sac", "policy.compare=[random]"], ("random", "cem", "sac")),
    (["policy.sac_share=0.5"], ("cem", "sac")),  # the head collects a share
    (["policy.train=sac_guided_cem", "policy.compare=[cem, sac]"], ("cem", "sac", "sac_guided_cem")),
])
def test_a_run_acts_by_its_train_test_compared_and_shared_policies(settings, expected):
    from planet_sac.agent import run_policies
    from planet_sac.config_loading import load_config
    from tests.conftest import CONFIGS

    assert run_policies(load_config(CONFIGS / "smoke.yaml", settings)) == expected
