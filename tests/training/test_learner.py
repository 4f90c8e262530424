import contextlib

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.checkpoints import Checkpointer, named_variables
from planet_sac.config_loading import apply_overrides, load_config
from planet_sac.control.sac import SAC
from planet_sac.models.world_model import WorldModel
from planet_sac.training import learner as learner_module
from planet_sac.training.learner import Learner, actor_critic_updates
from tests.conftest import CONFIGS, state_batch


def build(config, seed=0):
    model = WorldModel(config.model, "state", (3,), 1, seed=seed)
    sac = SAC(config.sac, model.rssm.feature_size, 1, seed=seed)
    return Learner(config, model, sac, seed=seed)


def state_of(learner):
    """Every variable the update touches: weights, Adam slots and counters (SAC included)."""
    names = named_variables([learner.world_model, learner.sac, learner.optimizer, learner])
    return {name: v.numpy() for name, v in names.items()}


@contextlib.contextmanager
def eagerly():
    """Runs tf.functions eagerly inside: a learner's update without tracing it (a trace costs seconds, an eager update
    a fraction of one)."""
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(False)


def assert_states_close(a, b, rtol, atol=0.0):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.slow
def test_accumulated_micro_batches_equal_one_large_batch(smoke_config):
    """World model and SAC head: k micro-batches of B/k give the update of one batch of B (SAC sees all k, and
    each micro-batch its rows of the overshooting noise), with a gradient clip that binds (applied once, to the mean
    gradient) and the same metrics (means, not sums, over k). The k = 4 learner is compiled, the one batch of B is
    run eagerly."""
    batch = state_batch(batch=8)
    config = apply_overrides(smoke_config, ["model.free_nats=1.0", "sac.updates_per_step=2", "sac.batch_size=64",
                                            "optim.grad_clip=0.5", "model.overshooting_distance=2",
                                            "model.overshooting_scale=0.5"])
    whole = build(config)
    accumulated = build(apply_overrides(config, ["optim.accumulate=4"]))
    for _ in range(3):
        accumulated_metrics = accumulated.update(batch)  # compiled, as training runs it
    with eagerly():  # the reference: no second trace (eager and compiled agree, test_compiled_learner_...)
        for _ in range(3):
            whole_metrics = whole.update(batch)
    assert float(whole_metrics["train/grad_norm"]) > 2 * 0.5  # the clip binds
    assert whole_metrics.keys() == accumulated_metrics.keys()
    for key in whole_metrics:
        np.testing.assert_allclose(float(accumulated_metrics[key]), float(whole_metrics[key]), rtol=1e-4, err_msg=key)
    assert_states_close(state_of(whole), state_of(accumulated), rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_infinite_grad_clip_means_no_clipping(smoke_config):
    """optim.grad_clip=.inf is documented as no clipping: the update equals one with a clip no gradient reaches
    (clipping by inf would compute inf * 0 = NaN and poison every weight). Both run eagerly."""
    batch = state_batch(batch=8)
    unclipped, far = (build(apply_overrides(smoke_config, [f"optim.grad_clip={clip}"])) for clip in (".inf", "1e30"))
    with eagerly():  # the clip is chosen in Python (Adam.clip), for the graph as for eager execution: no trace needed
        for learner in (unclipped, far):
            learner.update(batch)
    a, b = state_of(unclipped), state_of(far)
    for name in a:
        assert np.all(np.isfinite(a[name])), name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def checkpointed(learner):
    """What a checkpoint of the learner holds: its variables and its random stream."""
    return named_variables([learner.world_model, learner.sac, learner.optimizer, learner],
                           extra={"learner/rng_state": learner.rng.state})


@pytest.mark.slow
def test_compiled_learner_adds_the_value_loss_agrees_with_eager_resumes_exactly_and_skips_a_nan_batch(smoke_config,
                                                                                                      tmp_path):
    """Two compiled learners of one config (model.value_scale=0.5, 2 micro-batches, no clip, no XLA), for four checks:

    1. model.value_scale=0.5, on the first update of `straight`: the world model's gradient is that of its own loss plus
       0.5 x `value_loss` on its posteriors, through their GRU state only (the targets' noise drawn after the model's,
       each micro-batch taking its rows), read off Adam's first moment after one update; the critics are not in it
       (they learn in the SAC updates only).
    2. `straight`'s first 3 updates agree with the same updates run eagerly.
    3. `straight`, never checkpointed (a save that changed the learner it saves would show), after 6 updates equals
       `first`, checkpointed after 3 and restored into its own variables set to those of a learner built with another
       seed (everything must come from the checkpoint), after the last 3.
    4. A NaN batch on `straight` is skipped and counted, the world model and its Adam slots stay as they were and
       every variable stays finite, and the next good update resets the consecutive skips."""
    from planet_sac.control.transitions import value_loss

    config = apply_overrides(smoke_config, ["model.value_scale=0.5", "optim.grad_clip=.inf", "optim.accumulate=2",
                                            "optim.jit_compile=false", "sac.n_step=2", "sac.burn_in=1",
                                            "sac.updates_per_step=1"])
    batches = [state_batch(seed=i) for i in range(6)]  # state_batch(batch=4, length=10) first

    # 1. The value loss in the world model's gradient, on the first update of `straight`.
    straight = build(config)
    wm, sac = straight.world_model, straight.sac
    batch = batches[0]
    rng = tf.random.Generator.from_state(straight.rng.state.numpy(), straight.rng.algorithm)  # a copy
    noise = wm.sample_noise(rng, 4, 10)
    value_noise = rng.normal([4, 10 - 1 - 2, 1])
    tensors = {key: tf.constant(value) for key, value in batch.items()}
    with tf.GradientTape(persistent=True) as tape:
        model_loss, metrics, posts = wm.loss(tensors, noise)
        deter_only = tf.concat([posts["deter"], tf.stop_gradient(posts["stoch"])], -1)  # the sample gets none
        td = value_loss(sac, deter_only, tensors, value_noise)
    variables = wm.trainable_variables
    td_grads = tape.gradient(td, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    expected = [g + 0.5 * v for g, v in zip(tape.gradient(model_loss, variables), td_grads)]
    assert float(tf.linalg.global_norm(td_grads)) > 0  # the TD loss reaches the model
    critics_before = [v.numpy() for v in sac.critic_variables]

    out = straight.update(batch)
    np.testing.assert_allclose(float(out["loss/value"]), float(td), rtol=1e-4)
    expected_norm = np.sqrt(sum(np.sum(g.numpy().astype(np.float64) ** 2) for g in expected))  # by numpy
    np.testing.assert_allclose(float(out["train/grad_norm"]), expected_norm, rtol=1e-4)
    np.testing.assert_allclose(float(out["loss/total"]), float(model_loss) + 0.5 * float(td), rtol=1e-4)
    for m, g, var in zip(straight.optimizer.m, expected, variables):
        np.testing.assert_allclose(m.numpy(), 0.1 * g.numpy(), rtol=2e-3, atol=1e-7, err_msg=var.name)
    assert straight.optimizer.variables_ == list(variables)  # no critic in the model's optimizer
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(critics_before, sac.critic_variables)]
    assert any(changed)  # the one SAC update trained them, by its own loss

    # 2. Compiled and eager agree.
    for batch in batches[1:3]:
        straight.update(batch)
    eager = build(config)
    with eagerly():
        for batch in batches[:3]:
            eager.update(batch)
    # Same seeds, same data: weights, Adam slots (m, v) and SAC agree; bitwise equality is not promised.
    assert_states_close(state_of(straight), state_of(eager), rtol=1e-4, atol=1e-6)
    for batch in batches[3:]:
        straight.update(batch)

    # 3. Exact resume.
    first = build(config)
    for batch in batches[:3]:
        first.update(batch)
    Checkpointer(str(tmp_path), checkpointed(first)).save(3)
    other = checkpointed(build(config, seed=99))  # different initial values: everything must come from the checkpoint
    for name, variable in checkpointed(first).items():
        variable.assign(other[name])
    assert not np.array_equal(first.rng.state.numpy(), straight.rng.state.numpy())
    assert Checkpointer(str(tmp_path), checkpointed(first)).restore_latest()
    for batch in batches[3:]:
        first.update(batch)
    assert_states_close(state_of(straight), state_of(first), rtol=1e-6)

    # 4. A NaN batch on the straight learner (no skip so far).
    good = batches[0]
    before = state_of(straight)
    bad = dict(good, reward=np.full_like(good["reward"], np.nan))
    metrics = straight.update(bad)
    assert float(metrics["train/update_finite"]) == 0.0
    assert int(straight.skipped_updates.numpy()) == 1 and int(straight.consecutive_skips.numpy()) == 1
    after = state_of(straight)
    for name, value in before.items():
        if name.startswith(("world_model/", "optimizer/world_model/")):
            np.testing.assert_array_equal(value, after[name], err_msg=name)
        assert np.all(np.isfinite(after[name])), name
    straight.update(good)
    assert int(straight.consecutive_skips.numpy()) == 0


def test_batch_not_divisible_by_accumulate_is_a_clear_error(smoke_config):
    """The config refuses an accumulate that does not divide data.batch_size (test_config); the learner still
    checks the batch it is given (a replica's share, or a caller's own batch)."""
    learner = build(apply_overrides(smoke_config, ["optim.accumulate=2"]))
    with pytest.raises(ValueError, match="batch size 3 is not divisible by optim.accumulate=2"):
        learner.update(state_batch(batch=3))


def test_sac_batches_mix_real_and_imagined_transitions(smoke_config, monkeypatch):
    """real_ratio 0.25 of a 16-transition batch: 4 real (episode discount 0.5 per step) and 12 imagined (discount 1)."""
    config = apply_overrides(smoke_config, ["sac.batch_size=16", "sac.real_ratio=0.25", "sac.imagination_horizon=3",
                                            "sac.n_step=2", "sac.burn_in=3", "sac.updates_per_step=1"])
    learner = build(config)
    seen = []
    real_update = learner.sac.update
    monkeypatch.setattr(learner.sac, "update", lambda *args, **kwargs: seen.append((args, kwargs)) or real_update(*args, **kwargs))
    batch = state_batch(batch=4, length=10)
    batch["discount"][:] = 0.5
    batch["reward"][:, :4] = 1000.0  # rewards of steps 1..3 can only reach real transitions if burn-in is ignored
    tf.config.run_functions_eagerly(True)
    try:
        metrics = learner.update(batch)
    finally:
        tf.config.run_functions_eagerly(False)
    (args, kwargs), = seen
    features, action, reward, discount, next_features = (np.asarray(a) for a in args[:5])
    assert kwargs["steps"] == 2 and features.shape == (16, learner.world_model.rssm.feature_size)
    assert kwargs["real_size"] == 4  # the diagnostics split the batch where the real transitions end
    for half in ("real", "imagined"):
        for name in SAC.HALF_METRICS:
            assert np.isfinite(float(metrics[f"sac/{half}/{name}"])), f"sac/{half}/{name}"
    np.testing.assert_array_equal(discount[:4], 0.25)  # 0.5 ** 2: real 2-step transitions
    np.testing.assert_array_equal(discount[4:], 1.0)  # imagined, no continuation head: discount 1
    assert np.all(np.abs(reward[:4]) < 100.0)  # burn-in 3: real starts at t >= 3, so r_{t+1} with t+1 >= 4


def sac_state(sac):
    names = named_variables([sac])
    return {name: v.numpy() for name, v in names.items()}


def test_nan_in_a_sac_loss_skips_that_sac_update():
    """SAC level: a NaN next state makes the critic loss NaN; nothing of the SAC head may change."""
    config = load_config(CONFIGS / "smoke.yaml")
    sac = SAC(config.sac, 20, 1)
    rng = tf.random.Generator.from_seed(0)
    features = tf.random.normal([8, 20], seed=1)
    good = (features, tf.zeros([8, 1]), tf.ones([8]), tf.ones([8]), features)
    assert float(sac.update(*good, rng=rng)["sac/update_finite"]) == 1.0
    before = sac_state(sac)
    bad = good[:4] + (tf.tensor_scatter_nd_update(features, [[3, 0]], [np.nan]),)
    metrics = sac.update(*bad, rng=rng)
    assert float(metrics["sac/update_finite"]) == 0.0 and not np.isfinite(float(metrics["sac/critic_loss"]))
    for name, value in sac_state(sac).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)  # weights, Adam slots, targets, alpha
    assert float(sac.update(*good, rng=rng)["sac/update_finite"]) == 1.0


def test_imagination_after_burn_in_split_among_updates(smoke_config,
                                                                                                monkeypatch):
    """Imagination starts after burn-in, once per model update, and is split among the SAC updates.

    Burn-in 3 of chunks of 10: the rollouts start from exactly the posteriors (b, t) with t >= 3; one imagination
    serves the 3 SAC updates, each taking its own third of it (768 rollouts of 1 step: 3 x 256 transitions)."""
    config = apply_overrides(smoke_config, ["sac.batch_size=256", "sac.real_ratio=0.0", "sac.imagination_horizon=1",
                                            "sac.n_step=1", "sac.burn_in=3", "sac.updates_per_step=3"])
    learner = build(config)
    deter, stoch = learner.world_model.rssm.deter_size, learner.world_model.rssm.stoch_size
    features = np.zeros([4, 10, deter + stoch], np.float32)
    features[..., 0] = np.arange(10)[None, :]  # deter[0] = t, deter[1] = b: each start state names its posterior
    features[..., 1] = np.arange(4)[:, None]
    starts, pools, batches = [], [], []
    imagine = learner_module.imagined_transitions

    def recording_imagine(world_model, actor_sample, start, *args):
        starts.append(np.stack([start["deter"][:, 1].numpy(), start["deter"][:, 0].numpy()], 1))
        pools.append(imagine(world_model, actor_sample, start, *args))
        return pools[-1]

    monkeypatch.setattr(learner_module, "imagined_transitions", recording_imagine)
    update = learner.sac.update
    monkeypatch.setattr(learner.sac, "update", lambda *args, **kwargs: batches.append(args[:5]) or update(*args, **kwargs))
    batch = state_batch(batch=4, length=10)
    metrics = actor_critic_updates(learner.world_model, learner.sac, tf.constant(features), batch, learner.rng)  # eager
    assert len(starts) == 1 and len(batches) == 3 and float(metrics["sac/skipped_updates"]) == 0.0
    assert {tuple(row) for row in starts[0].astype(int)} == {(b, t) for b in range(4) for t in range(3, 10)}
    rows = lambda parts: np.concatenate([np.concatenate([np.asarray(p).reshape(len(p), -1) for p in part], 1)  # noqa: E731
                                         for part in parts])
    used = rows(batches)  # every imagined transition of the pool is used by exactly one update
    pool = rows([pools[0]])
    assert used.shape == pool.shape == (768, used.shape[1])
    np.testing.assert_array_equal(used[np.lexsort(used.T)], pool[np.lexsort(pool.T)])


def update_graph_ops(learner, batch):
    """Ops of the compiled update's graph and of every function in its library (loop bodies, branches)."""
    graph_def = learner.update.get_concrete_function(batch).graph.as_graph_def()
    return len(graph_def.node) + sum(len(function.node_def) for function in graph_def.library.function)


@pytest.mark.slow
def test_five_learners_trace_once_and_check_the_compiled_update(smoke_config, tensorflow_warnings, monkeypatch):
    """Five learners in one process, each traced once by its first update (the five first updates in a row), each
    with its own checks of the compiled update:

    - No retracing warning: five traces in one process used to be one (its count was keyed by Learner._update's code,
      shared by every learner in the process, and five traces in its last ten calls are what TensorFlow warns of).
    - SAC updates and imagination are traced once whatever their number: they run in in-graph loops, so 2 updates
      with horizon 3 and 6 updates with horizon 9 give graphs of the same size (unrolled, every update and every
      imagined step would add its ops).
    - The catch-up trains the head alone on the frozen model (the 2-update learner): `updates_per_step` SAC
      updates, the model and its Adam unchanged.
    - Skipped SAC updates are counted and the world model's update is kept (the same learner, whose critic target
      is then NaN; that update runs eagerly, without another trace).
    - SAC metrics are means over the compiled loop: a deterministic stand-in for SAC.update, update k (1, 2, 3)
      reports critic loss k^2 and is finite unless k = 2; the learner reports the means (14/3, 2/3) and 1 skipped update.
    - `sac.imagined_targets: lambda` in the compiled update: traced once with the config's lambda, and the imagined
      half's mean target is its mean reward (whole targets), the real half's bootstrapped.
    - The loss decreases on the shipped data (40 updates of a world model alone)."""
    from planet_sac.episodes.loader import make_dataset
    from tests.conftest import DATA

    batch = {key: tf.constant(value) for key, value in state_batch().items()}
    loops = {}
    for updates, horizon in ((2, 3), (6, 9)):
        config = apply_overrides(smoke_config, [f"sac.updates_per_step={updates}", "sac.real_ratio=0.5",
                                                f"sac.imagination_horizon={horizon}", "sac.catchup_rounds=1"])
        loops[updates] = learner = build(config)
        learner.update(batch)  # its one trace, counted by TensorFlow as a call that traced

    stand_in = build(apply_overrides(smoke_config, ["sac.updates_per_step=3"]))
    counter = tf.Variable(0.0)

    def fake_update(*args, **kwargs):
        k = counter.assign_add(1.0)
        metrics = {key: k for key in SAC.metric_names(*learner_module.sac_batch_split(stand_in.sac.config))}
        return dict(metrics, **{"sac/critic_loss": k * k, "sac/update_finite": tf.cast(tf.not_equal(k, 2.0), tf.float32)})

    monkeypatch.setattr(stand_in.sac, "update", fake_update)
    stand_in_metrics = stand_in.update(state_batch())

    calls = []
    make = learner_module.imagined_lambda_transitions
    monkeypatch.setattr(learner_module, "imagined_lambda_transitions", lambda *args: calls.append(args[4]) or make(*args))
    lambda_learner = build(apply_overrides(smoke_config, ["sac.imagination_horizon=4", "sac.real_ratio=0.5",
                                                          "sac.imagined_targets=lambda", "sac.return_lambda=0.8"]))
    lambda_metrics = lambda_learner.update(state_batch())
    assert calls == [0.8]  # traced once, with the config's lambda

    dataset, _ = make_dataset(str(DATA / "pendulum_state"), 8, 10, keys=("state", "action", "reward", "discount"), seed=0)
    shipped = build(apply_overrides(smoke_config, ["sac.updates_per_step=0", "data.batch_size=8"]))
    losses = [float(shipped.update(chunks)["loss/total"]) for chunks in dataset.take(40)]  # the first traces
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])

    # The in-graph loops: the two learners' graphs (the same input signature: no new trace).
    sizes = {update_graph_ops(learner, batch) for learner in loops.values()}
    assert len(sizes) == 1, sizes

    # The stand-in SAC update's means.
    assert float(counter.numpy()) == 3.0
    assert float(stand_in_metrics["sac/critic_loss"]) == pytest.approx(np.mean([1.0, 4.0, 9.0]))
    assert float(stand_in_metrics["sac/actor_loss"]) == pytest.approx(np.mean([1.0, 2.0, 3.0]))
    assert float(stand_in_metrics["sac/update_finite"]) == pytest.approx(np.mean([1.0, 0.0, 1.0]))
    assert float(stand_in_metrics["sac/skipped_updates"]) == 1.0

    # Lambda targets.
    assert float(lambda_metrics["sac/skipped_updates"]) == 0.0
    np.testing.assert_allclose(float(lambda_metrics["sac/imagined/target"]), float(lambda_metrics["sac/imagined/reward"]),
                               rtol=1e-5)
    assert abs(float(lambda_metrics["sac/real/target"]) - float(lambda_metrics["sac/real/reward"])) > 1e-3  # bootstrapped

    # The catch-up trains the head alone on the frozen model (after one update of the learner).
    learner, updates = loops[2], 2
    model = {name: v.numpy() for name, v in named_variables([learner.world_model, learner.optimizer]).items()}
    head = sac_state(learner.sac)
    iterations = int(learner.sac.critic_optimizer.iterations.numpy())
    metrics = learner.catch_up(state_batch(seed=2))
    assert float(metrics["sac/update_finite"]) == 1.0 and set(SAC.METRICS) <= set(metrics)
    for name, value in named_variables([learner.world_model, learner.optimizer]).items():
        np.testing.assert_array_equal(value.numpy(), model[name], err_msg=name)  # the model and its Adam: frozen
    assert int(learner.sac.critic_optimizer.iterations.numpy()) == iterations + updates  # updates_per_step SAC updates
    changed = [name for name, value in sac_state(learner.sac).items() if not np.array_equal(value, head[name])]
    assert any("actor" in name for name in changed) and any("critic1" in name for name in changed)

    # The learner counts skipped SAC updates and keeps the world model's update.
    target = learner.sac.critic_target
    monkeypatch.setattr(learner.sac, "critic_target", lambda reward, *args: target(reward, *args) + np.nan)
    world_model = {name: v.numpy() for name, v in named_variables([learner.world_model]).items()}
    before = sac_state(learner.sac)
    with eagerly():  # the compiled update holds the real target: this one runs eagerly
        metrics = learner.update(state_batch(seed=1))
    assert float(metrics["train/update_finite"]) == 1.0 and float(metrics["sac/skipped_updates"]) == updates
    for name, value in sac_state(learner.sac).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    changed = [name for name, v in named_variables([learner.world_model]).items()
               if not np.array_equal(v.numpy(), world_model[name])]
    assert changed  # the world model still trained on this finite batch

    assert not [record for record in tensorflow_warnings if "retracing" in record.getMessage()]

def test_real_transitions_are_aligned_and_cover_every_start(smoke_config, monkeypatch):
    n, burn_in, gamma = 2, 3, 0.9
    config = apply_overrides(smoke_config, ["sac.batch_size=64", "sac.real_ratio=1.0", f"sac.n_step={n}",
                                            f"sac.burn_in={burn_in}", "sac.updates_per_step=8", f"sac.discount={gamma}"])
    learner = build(config)
    size = learner.world_model.rssm.feature_size
    B, T = 4, 10
    features = np.zeros([B, T, size], np.float32)
    features[..., 0], features[..., 1] = np.arange(T)[None, :], np.arange(B)[:, None]  # (t, b) name each posterior
    batch = state_batch(batch=B, length=T)
    batch["action"] = (100.0 * np.arange(B)[:, None] + np.arange(T)[None, :]).astype(np.float32)[..., None]
    batch["reward"] = np.random.default_rng(0).normal(size=(B, T)).astype(np.float32)
    batch["discount"] = np.ones((B, T), np.float32)
    batch["discount"][1, 7] = 0.0
    seen = []
    monkeypatch.setattr(learner.sac, "update", lambda *args, **kwargs: seen.append([np.asarray(a) for a in args[:5]])
                        or {key: tf.constant(1.0) for key in SAC.metric_names(64, 0)})
    actor_critic_updates(learner.world_model, learner.sac, tf.constant(features), batch, learner.rng)
    starts = set()
    for feats, action, reward, discount, next_feats in seen:
        for i in range(len(feats)):
            t, b = int(feats[i, 0]), int(feats[i, 1])
            starts.add((b, t))
            assert action[i, 0] == batch["action"][b, t + 1, 0]  # a_{t+1} follows z_t
            assert (int(next_feats[i, 0]), int(next_feats[i, 1])) == (t + n, b)
            expected_r = batch["reward"][b, t + 1] + gamma * batch["discount"][b, t + 1] * batch["reward"][b, t + 2]
            np.testing.assert_allclose(reward[i], expected_r, rtol=1e-6)
            assert discount[i] == batch["discount"][b, t + 1] * batch["discount"][b, t + 2]
    assert starts == {(b, t) for b in range(B) for t in range(burn_in, T - n)}


def test_imagination_samples_the_actor(smoke_config):
    """Imagined rollouts act with samples of the actor (as it explores), not its mode: with mean 0 and std e the
    imagined actions spread over [-1, 1]; the mode would give tanh(0) = 0 everywhere."""
    from planet_sac.training.learner import imagination_pool
    config = apply_overrides(smoke_config, ["sac.imagination_horizon=3", "sac.real_ratio=0.5", "sac.n_step=1"])
    learner = build(config)
    sac = learner.sac
    sac.actor.out.kernel.assign(tf.zeros_like(sac.actor.out.kernel))
    sac.actor.out.bias.assign([0.0] * sac.action_size + [1.0] * sac.action_size)
    features = tf.random.normal([2, 10, learner.world_model.rssm.feature_size], seed=0)
    pool = imagination_pool(learner.world_model, sac, features, 300, learner.rng)
    actions = pool.action.numpy()
    assert actions.std() > 0.5 and np.abs(actions).max() <= 1.0


def test_held_out_evaluation_sees_unshifted_images_and_measures_moving_pixels(smoke_config):
    """model.augment_shift augments training only: the learner's held-out loss is the loss of the batch as it is,
    with the dequantisation and latent noise of the learner's stream. For an image model it adds
    `model/foreground_error` and `model/background_error`: the decoder's reconstruction of those posteriors against
    each pixel's 5-bit bin centre, split by the chunk's median frame (numpy here); it returns no other non-loss
    metric (the test phase logs all it returns)."""
    config = apply_overrides(smoke_config, ["env.task=dmc:cartpole-swingup", "env.obs=image", "model.cnn_depth=4",
                                            "model.augment_shift=4", "sac.updates_per_step=0"])
    model = WorldModel(config.model, "image", (64, 64, 3), 1)
    learner = Learner(config, model, SAC(config.sac, model.rssm.feature_size, 1))
    g = np.random.default_rng(0)
    images = np.repeat(g.integers(0, 256, (2, 1, 64, 64, 3)), 6, axis=1)
    for t in range(6):  # a bright square moving down each chunk over a still background
        images[:, t, 8 * t:8 * t + 8, 20:28] = 255
    batch = {"image": tf.constant(images, tf.uint8), "action": tf.constant(g.uniform(-1, 1, (2, 6, 1)), tf.float32),
             "reward": tf.constant(g.normal(size=(2, 6)), tf.float32), "discount": tf.ones([2, 6])}
    clone = tf.random.Generator.from_state(learner.rng.state.numpy(), learner.rng.algorithm)
    noise = model.sample_noise(clone, 2, 6)
    assert "shift" in noise
    unshifted = {key: value for key, value in noise.items() if key != "shift"}
    held_out = learner.evaluate(batch)
    (_, expected, posts), shifted = model.loss(batch, unshifted), model.loss(batch, noise)[1]
    assert abs(float(shifted["loss/kl"]) / float(expected["loss/kl"]) - 1) > 0.01  # the shift shows in the KL
    for key in ("loss/kl", "loss/reward", "loss/total"):
        np.testing.assert_allclose(float(held_out[key]), float(expected[key]), rtol=1e-5, err_msg=key)

    assert sorted(key for key in held_out if not key.startswith("loss/")) == ["model/background_error",
                                                                              "model/foreground_error"]
    truth = (np.floor(images / 8.0) + 0.5) / 32.0
    prediction = model.decode(posts).numpy()
    moving = (np.abs(truth - np.median(truth, axis=1, keepdims=True)) > 0.1).any(-1)
    error = np.abs(prediction - truth).mean(-1)
    assert 0 < moving.mean() < 0.2
    np.testing.assert_allclose(float(held_out["model/foreground_error"]), error[moving].mean(), rtol=1e-4)
    np.testing.assert_allclose(float(held_out["model/background_error"]), error[~moving].mean(), rtol=1e-4)


def test_a_sac_batch_splits_by_the_rounded_real_ratio():
    from planet_sac.config import SACConfig

    assert learner_module.sac_batch_split(SACConfig(batch_size=10, real_ratio=0.77)) == (8, 2)  # 7.7 real, rounded
    assert learner_module.sac_batch_split(SACConfig(batch_size=256, real_ratio=1.0)) == (256, 0)


def test_the_imagination_pool_is_shuffled_across_rollouts():
    """Each SAC update takes a slice of the pool: in rollout order a slice would hold a few rollouts' consecutive
    steps (with n = 1, next_features[j] == features[j + 1] for 3 of every 4), shuffled almost none."""
    from planet_sac.config import SACConfig
    from tests.test_planet_fidelity import tiny_state_model

    model = tiny_state_model()
    sac = SAC(SACConfig(units=8, n_step=1, imagination_horizon=4), model.rssm.feature_size, 1)
    features = tf.random.stateless_normal([2, 6, model.rssm.feature_size], [0, 1])
    pool = learner_module.imagination_pool(model, sac, features, 40, tf.random.Generator.from_seed(0))
    assert pool.features.shape[0] == 40
    follows = [np.allclose(pool.next_features[j], pool.features[j + 1]) for j in range(39)]
    assert np.mean(follows) < 0.2


def test_the_imagination_pool_starts_at_the_given_posteriors_and_steps_the_prior():
    """Rollouts start at posterior features read as concat(deter, stoch): each start is the features of one pool
    transition, whose next features' deterministic part is the prior's GRU step from it under the action taken
    (numpy, tests/numpy_reference.py)."""
    from planet_sac.config import SACConfig
    from tests.numpy_reference import img_step
    from tests.test_planet_fidelity import tiny_state_model

    model = tiny_state_model()
    rssm = model.rssm
    sac = SAC(SACConfig(units=8, n_step=1, imagination_horizon=4), rssm.feature_size, 1)
    features = tf.random.stateless_normal([2, 6, rssm.feature_size], [0, 2])
    pool = learner_module.imagination_pool(model, sac, features, 40, tf.random.Generator.from_seed(1))  # 10 rollouts
    given = features.numpy().reshape(-1, rssm.feature_size)
    pool_features, pool_next, pool_action = pool.features.numpy(), pool.next_features.numpy(), pool.action.numpy()
    starts = [j for j in range(40) if (np.abs(given - pool_features[j]).max(-1) == 0).any()]
    assert len(starts) == 10
    deter = rssm.deter_size
    for j in starts:
        start = pool_features[j]
        expected = img_step(rssm, start[None, deter:], start[None, :deter], pool_action[j][None], np.zeros([1, 2]))
        np.testing.assert_allclose(pool_next[j][:deter], expected["deter"][0], rtol=1e-4, atol=1e-5)


def test_lambda_targets_start_a_transition_at_every_imagined_state(monkeypatch):
    """`sac.imagined_targets: lambda`: a rollout of H steps gives H transitions (n-step: H + 1 - n), all of them in
    the pool, whose target is whole (discount 0) with `sac.return_lambda`. That the critic learns them in the compiled
    update (the imagined half's mean target is its mean reward): test_five_learners_trace_once_..."""
    from planet_sac.config import SACConfig
    from tests.test_planet_fidelity import tiny_state_model

    model = tiny_state_model()
    sac = SAC(SACConfig(units=8, imagination_horizon=4, real_ratio=0.5, imagined_targets="lambda"),
              model.rssm.feature_size, 1)  # n_step 3 by default: n-step targets would take 2 per rollout
    features = tf.random.stateless_normal([2, 6, model.rssm.feature_size], [0, 3])
    calls = []
    make = learner_module.imagined_lambda_transitions
    monkeypatch.setattr(learner_module, "imagined_lambda_transitions",
                        lambda *args: calls.append((args[2]["deter"].shape[0], args[4])) or make(*args))
    pool = learner_module.imagination_pool(model, sac, features, 40, tf.random.Generator.from_seed(1))
    assert calls == [(10, 0.95)]  # 10 rollouts imagined for 40 transitions, none wasted; the default lambda
    given = features.numpy().reshape(-1, model.rssm.feature_size)
    starts = [j for j in range(40) if (np.abs(given - pool.features.numpy()[j]).max(-1) == 0).any()]
    assert len(starts) == 10  # 40 transitions from 10 rollouts of 4
    following = [j for j in range(40) if np.isclose(pool.next_features.numpy(), pool.features.numpy()[j]).all(-1).any()]
    assert len(following) == 30  # every later state of each rollout is in the pool: none made and dropped
    np.testing.assert_array_equal(pool.discount.numpy(), np.zeros(40))


def test_without_value_scale_the_update_draws_no_value_noise(smoke_config, monkeypatch):
    """model.value_scale=0 (every shipped config) draws exactly what an update drew before the key existed, so
    runs made before it repeat; with it, one more draw: the TD targets' next-action noise [B, T - burn_in - n, A]."""
    draws = {}
    tf.config.run_functions_eagerly(True)
    try:
        for scale in (0.0, 0.5):
            learner = build(apply_overrides(smoke_config, [f"model.value_scale={scale}", "sac.updates_per_step=1",
                                                           "sac.n_step=2", "sac.burn_in=1"]))
            seen = draws[scale] = []
            for method in ("normal", "uniform"):
                real = getattr(learner.rng, method)
                monkeypatch.setattr(learner.rng, method, lambda shape, *a, _real=real, _m=method, **k:
                                    seen.append((_m, tuple(int(d) for d in shape))) or _real(shape, *a, **k))
            learner.update(state_batch(batch=4, length=10))
    finally:
        tf.config.run_functions_eagerly(False)
    without, with_value = draws[0.0], draws[0.5]
    extra = with_value.index(("normal", (4, 7, 1)))
    assert ("normal", (4, 7, 1)) not in without
    assert with_value[:extra] + with_value[extra + 1:] == without
