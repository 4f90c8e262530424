"""The continuation head (`model.continuation_scale`, Dreamer's pcont): its loss, and where its discounts go.

Every expected value is recomputed in numpy from the head's weights or set by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.checkpoints import variable_name
from planet_sac.config import Config
from planet_sac.config_loading import apply_overrides
from planet_sac.control import cem
from planet_sac.control.transitions import imagined_transitions
from planet_sac.training.run_checks import imagination_termination_warning
from tests.test_planet_fidelity import numpy_rssm, tiny_state_model


def numpy_mlp(mlp, x):
    """The head by hand: ReLU hidden layers, a linear output, [N, F] -> [N]."""
    for layer in mlp.hidden:
        x = np.maximum(x @ layer.kernel.numpy() + layer.bias.numpy(), 0.0)
    return (x @ mlp.out.kernel.numpy() + mlp.out.bias.numpy())[:, 0]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_the_head_exists_only_when_its_loss_has_a_weight():
    assert tiny_state_model().continuation is None
    names = {variable_name(v) for v in tiny_state_model(continuation_scale=1.0).variables}
    assert {"world_model/continuation/h0/kernel", "world_model/continuation/out/bias"} <= names
    plain = tiny_state_model().predict_continuation(tiny_state_model().rssm.initial(3))
    np.testing.assert_array_equal(plain.numpy(), np.ones(3))


def test_continuation_loss_is_the_bernoulli_nll_of_the_recorded_discount():
    """loss(scale 2) - loss(no head) = 2 * mean BCE(sigmoid(head(features)), discount), same weights and noise."""
    with_head, without = tiny_state_model(continuation_scale=2.0), tiny_state_model()
    rng = np.random.default_rng(0)
    batch = {"state": tf.constant(rng.normal(size=(2, 4, 3)), tf.float32),
             "action": tf.constant(rng.uniform(-1, 1, size=(2, 4, 1)), tf.float32),
             "reward": tf.constant(rng.normal(size=(2, 4)), tf.float32),
             "discount": tf.constant([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]])}
    noise = {"posterior": tf.constant(rng.normal(size=(2, 4, 2)), tf.float32)}
    loss, metrics, posts = with_head.loss(batch, noise)
    plain_loss, plain_metrics, _ = without.loss(batch, noise)
    features = np.concatenate([posts["deter"].numpy(), posts["stoch"].numpy()], -1).reshape(8, -1)
    p = sigmoid(numpy_mlp(with_head.continuation, features))
    d = batch["discount"].numpy().reshape(-1)
    expected = np.mean(-(d * np.log(p) + (1 - d) * np.log(1 - p)))
    np.testing.assert_allclose(float(metrics["loss/continuation"]), expected, rtol=1e-5)
    np.testing.assert_allclose(float(loss) - float(plain_loss), 2.0 * expected, rtol=1e-4)
    assert "loss/continuation" not in plain_metrics


def test_a_gradient_step_moves_the_continuation_head():
    model = tiny_state_model(continuation_scale=1.0)
    batch = {"state": tf.zeros([1, 3, 3]), "action": tf.zeros([1, 3, 1]), "reward": tf.zeros([1, 3]),
             "discount": tf.constant([[1.0, 1.0, 0.0]])}
    with tf.GradientTape() as tape:
        loss, _, _ = model.loss(batch, {"posterior": tf.zeros([1, 3, 2])})
    grads = tape.gradient(loss, model.continuation.trainable_variables)
    assert all(g is not None for g in grads) and sum(float(tf.reduce_sum(tf.abs(g))) for g in grads) > 0


def test_planner_weights_rewards_and_value_by_the_predicted_discounts(monkeypatch):
    """r_t counts with the discounts of the states before it; the horizon's value with all of them."""
    model = tiny_state_model(continuation_scale=1.0)
    rewards = np.array([[1.0, 2.0, 3.0]], np.float32)
    continuation = np.array([[0.5, 0.2, 0.4]], np.float32)
    monkeypatch.setattr(model, "predict_reward", lambda states: tf.constant(rewards))
    monkeypatch.setattr(model, "predict_continuation", lambda states: tf.constant(continuation))

    class ValueFive:
        def act(self, features, noise, deterministic):
            return tf.zeros([1, 1])

        def q_value(self, features, action):
            return tf.constant([5.0])

    state = model.rssm.initial(1)
    plain = cem.rollout_return(model, None, 0.9)(state, tf.zeros([1, 3, 1]), tf.zeros([1, 3, 2]))
    guided = cem.rollout_return(model, ValueFive(), 0.9, 0.5)(state, tf.zeros([1, 3, 1]), tf.zeros([1, 3, 2]))
    by_hand = 1.0 + 0.9 * 0.5 * 2.0 + 0.81 * 0.5 * 0.2 * 3.0  # 2.143
    np.testing.assert_allclose(plain.numpy(), [by_hand], rtol=1e-6)
    np.testing.assert_allclose(guided.numpy(), [by_hand + 0.5 * 0.9 ** 3 * 0.5 * 0.2 * 0.4 * 5.0], rtol=1e-6)


def test_imagined_transitions_stop_at_predicted_terminations():
    """2-step returns and discounts along a rollout, with the head's discounts recomputed in numpy."""
    model = tiny_state_model(continuation_scale=1.0)
    horizon, n, gamma, size = 3, 2, 0.9, 2
    start = {**model.rssm.initial(size),
             "deter": tf.constant(np.random.default_rng(1).normal(size=(size, 6)), tf.float32)}
    actor = lambda features, noise: 0.5 * tf.tanh(noise)  # noqa: E731
    out = imagined_transitions(model, actor, start, horizon, n, gamma, tf.random.Generator.from_seed(7))

    rng = tf.random.Generator.from_seed(7)  # the same stream: action noise, then latent noise, per step
    img_step = numpy_rssm(model)
    state = {key: value.numpy().astype(np.float64) for key, value in start.items()}
    rewards, continues = [], []
    for _ in range(horizon):
        action = 0.5 * np.tanh(rng.normal([size, 1]).numpy())
        state = img_step(state, action, rng.normal([size, 2]).numpy())
        features = np.concatenate([state["deter"], state["stoch"]], -1)
        rewards.append(numpy_mlp(model.reward, features))
        continues.append(sigmoid(numpy_mlp(model.continuation, features)))
    starts = range(horizon + 1 - n)
    expected_returns = [rewards[k][i] + gamma * continues[k][i] * rewards[k + 1][i] for i in range(size) for k in starts]
    expected_discounts = [continues[k][i] * continues[k + 1][i] for i in range(size) for k in starts]
    assert np.all(np.abs(np.array(expected_discounts) - 1.0) > 0.1)  # the check below could fail
    np.testing.assert_allclose(out.reward.numpy(), expected_returns, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.discount.numpy(), expected_discounts, rtol=1e-4, atol=1e-6)


def test_termination_warning_is_off_with_a_continuation_head():
    imagining = apply_overrides(Config(), ["sac.imagination_horizon=5", "sac.real_ratio=0.5"])
    assert "model.continuation_scale" in imagination_termination_warning(imagining, {"terminated_episodes": 1})
    with_head = apply_overrides(imagining, ["model.continuation_scale=10"])
    assert imagination_termination_warning(with_head, {"terminated_episodes": 1}) is None


def test_the_learner_trains_the_head_and_the_sac_head_sees_its_discounts(smoke_config, monkeypatch):
    """One learner update with the head: its loss is logged, its weights move, and imagined SAC
    transitions carry its discounts instead of 1."""
    from tests.conftest import state_batch
    from tests.training.test_learner import build

    config = apply_overrides(smoke_config, ["model.continuation_scale=10", "optim.warmup_updates=0",
                                            "sac.batch_size=8", "sac.real_ratio=0.5", "sac.imagination_horizon=3",
                                            "sac.n_step=1", "sac.updates_per_step=1"])
    learner = build(config)
    before = [v.numpy() for v in learner.world_model.continuation.trainable_variables]
    seen = []
    real_update = learner.sac.update
    monkeypatch.setattr(learner.sac, "update", lambda *args, **kwargs: seen.append(args) or real_update(*args, **kwargs))
    batch = state_batch(batch=4, length=10)
    batch["discount"][:, -1] = 0.0
    tf.config.run_functions_eagerly(True)
    try:
        metrics = learner.update(batch)
    finally:
        tf.config.run_functions_eagerly(False)
    assert np.isfinite(float(metrics["loss/continuation"]))
    after = [v.numpy() for v in learner.world_model.continuation.trainable_variables]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))
    imagined_discount = np.asarray(seen[0][3])[4:]
    assert np.all((imagined_discount > 0.0) & (imagined_discount < 1.0))  # sigmoid outputs, not the constant 1


@pytest.mark.slow
@pytest.mark.e2e
def test_the_xla_policy_acts_with_the_head():
    """The phase-gated policy, compiled with XLA (the default), acts in every branch on a model with a
    continuation head, without retracing.

    `e2e` (an XLA compile of every branch, 10 s of CPU): in `make test`, the head's discounts in the planner's returns
    are test_planner_weights_rewards_and_value_by_the_predicted_discounts, and an XLA-compiled policy acting in every
    branch without a retrace is test_control.test_xla_policy_computes_what_the_graph_policy_computes."""
    from planet_sac.config import CEMConfig, ModelConfig, SACConfig
    from planet_sac.control.policy import Policy
    from planet_sac.control.sac import SAC
    from planet_sac.models.world_model import WorldModel

    model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8, continuation_scale=1.0),
                       "state", (3,), 1)
    sac = SAC(SACConfig(units=8), model.rssm.feature_size, 1)
    policy = Policy(model, sac, CEMConfig(horizon=3, candidates=16, iterations=2, top_k=4), train="cem",
                    test="sac_guided_cem", jit_compile=True)
    obs, state = tf.zeros([2, 3]), policy.initial_state(2)
    for train, test in [("cem", "sac_guided_cem"), ("sac", "random")]:
        policy.set_policies(train=train, test=test)
        for phase in ("train", "test"):
            action, _ = policy.act(obs, state, phase)
            assert action.shape == (2, 1) and np.all(np.abs(action.numpy()) <= 1.0)
    assert policy.traces == 1


@pytest.mark.slow
def test_a_terminating_task_trains_on_its_short_episodes_padded(tmp_path, monkeypatch):
    """gym:InvertedPendulum-v5: random episodes last 2-9 agent steps, shorter than a 10-step chunk. They are
    padded with their absorbing state (not skipped, which left no data at all) and the head learns from them;
    the replay appends sac.n_step - 1 absorbing steps to every terminated episode (n-step starts reach its end)."""
    pytest.importorskip("mujoco")
    from planet_sac.config_loading import load_config
    from planet_sac.episodes import loader
    from planet_sac.metrics import read_metrics
    from planet_sac.training import run_state, trainer
    from tests.conftest import CONFIGS

    absorbing = []
    monkeypatch.setattr(run_state, "make_dataset", lambda *args, **kwargs: absorbing.append(kwargs["absorbing_steps"])
                        or loader.make_dataset(*args, **kwargs))
    config = load_config(CONFIGS / "smoke.yaml", ["env.task=gym:InvertedPendulum-v5", "model.continuation_scale=10",
                                                  "schedule.test_episodes=0", "schedule.log_every=2", "sac.n_step=4"])
    assert trainer.train(config, str(tmp_path / "run"), train_steps=2, progress=False)["step"] == 2
    assert absorbing == [3]
    record = read_metrics(str(tmp_path / "run" / "metrics.jsonl"))[-1]
    assert record["replay/padded_episodes"] >= 1 and record["replay/terminated_episodes"] >= 1
    assert np.isfinite(record["loss/continuation"]) and record["loss/continuation"] > 0
