"""Runs written by earlier versions still load: the checkpoint keys are a stable format.

`tests/fixtures/run_0_1` is a smoke-config run (10 updates) written by planet_sac at commit
a95ded7, before the agent/actor/learner split: the trainer still defined its own Agent and
the config had no env.num_envs or schedule.collect.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.agent import load_agent
from planet_sac.checkpoints import variable_name
from planet_sac.training.run_dir import resolve_run_config
from planet_sac.training.trainer import Trainer
from tests.conftest import OLD_RUN, old_run_copy

PREFIX = str(OLD_RUN / "checkpoints" / "ckpt-10")


def stored(name: str) -> np.ndarray:
    """A variable's value read straight from the checkpoint file, independently of the restore code."""
    return tf.train.load_checkpoint(PREFIX).get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE")


@pytest.mark.slow
def test_an_old_run_loads_as_an_agent_and_acts(tmp_path):
    """Its policy acts as a graph (`conftest.old_run_copy`): the default policy.jit_compile, which its config
    predates, would compile it with XLA, some 10 CPU seconds that check nothing of the format (test_control.py
    checks that the XLA policy computes what the graph policy computes)."""
    assert resolve_run_config(str(OLD_RUN)).policy.jit_compile  # the key it predates takes its default
    config, agent, env, step = load_agent(str(old_run_copy(tmp_path / "run")))
    assert step == 10 and config.env.num_envs == 1 and config.schedule.collect  # new keys take their defaults
    acting = {variable_name(v): v for v in agent.world_model.variables + agent.sac.variables
              if variable_name(v).startswith(("world_model/", "sac/"))}  # not the optimizers' slots: acting needs none
    assert "world_model/rssm/gru/gates_kernel" in acting and "sac/actor/out/kernel" in acting and len(acting) > 40
    for name, variable in acting.items():
        np.testing.assert_array_equal(variable.numpy(), stored(name))
    obs, _ = env.reset()
    action, _ = agent.policy.act({key: value[None] for key, value in obs.items()}, agent.policy.initial_state(1), "test")
    assert action.shape == (1, 1) and np.all(np.isfinite(action.numpy()))
    env.close()


@pytest.mark.slow
def test_an_old_run_resumes_exactly_where_it_stopped(tmp_path):
    logdir = tmp_path / "run"
    shutil.copytree(OLD_RUN, logdir)
    config = resolve_run_config(str(logdir))
    episodes = sorted(path.name for path in (logdir / "train_episodes").glob("*.npz"))
    trainer = Trainer(config, str(logdir), progress=False)
    try:
        assert trainer.start_message.startswith("resumed") and int(trainer.counters.step.numpy()) == 10
        # Its checkpoint names no episodes (no run_state/): its counters say none was written after it, so none moves.
        assert sorted(path.name for path in (logdir / "train_episodes").glob("*.npz")) == episodes and len(episodes) > 1
        assert not (logdir / "train_episodes" / "interrupted").exists()
        for name in ("world_model/rssm/gru/gates_kernel", "optimizer/world_model/iterations", "learner/rng_state", "counters/test_phases"):
            np.testing.assert_array_equal(trainer.variables[name].numpy(), stored(name))
        trainer.run(train_steps=12)
        assert int(trainer.counters.step.numpy()) == 12
    finally:
        trainer.close()


def test_a_trained_world_model_loads_under_a_fresh_head():
    """`load_agent(include=["world_model/"])`: the checkpoint's world model, the SAC head as a new run builds it."""
    config, agent, env, _ = load_agent(str(OLD_RUN), include=["world_model/"])
    env.close()
    _, fresh, env, _ = load_agent(str(OLD_RUN), include=["world_model/"])  # a second build: what "as built" means
    env.close()
    named = lambda agent: {variable_name(v): v.numpy() for v in agent.world_model.variables + agent.sac.variables}  # noqa: E731
    ours, built = named(agent), named(fresh)
    model = [name for name in ours if name.startswith("world_model/")]
    assert "world_model/rssm/gru/gates_kernel" in model and len(model) > 20
    for name in model:
        np.testing.assert_array_equal(ours[name], stored(name))
    head = [name for name in ours if name.startswith("sac/") and not name.startswith("sac/log_alpha")]
    assert len(head) > 10
    for name in head:
        np.testing.assert_array_equal(ours[name], built[name])
    assert any(not np.array_equal(ours[name], stored(name)) for name in head)  # the trained head was not restored
