"""Environments in parallel processes: the same episodes as one environment each, per-environment resets, crashes."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from planet_sac.config import ConfigError, EnvConfig
from planet_sac.envs import LocalEnvs, ParallelEnvs, environment_seed, make_env, make_envs

TASK = dict(task="gym:Pendulum-v1", obs="state", action_repeat=2, image_size=64)


@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 3])
def test_each_process_plays_what_its_own_environment_would(count):
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (6, count, 1)).astype(np.float32)
    envs = make_envs(EnvConfig(time_limit=4, **TASK), seed=10, num_envs=count)
    try:
        assert isinstance(envs, ParallelEnvs) and envs.num_envs == count
        assert envs.action_space.shape == (1,) and envs.observation_space["state"].shape == (3,)
        first = [envs.reset(i)["state"] for i in range(count)]
        got = [[] for _ in range(count)]
        for t in range(4):
            results = envs.step({i: actions[t, i] for i in range(count)})
            for i in range(count):
                got[i].append((results[i].obs["state"], results[i].reward, results[i].truncated))
    finally:
        envs.close()
    for i in range(count):  # expected: a plain environment with environment i's seed, stepped by hand with its actions
        env = make_env(time_limit=4, seed=environment_seed(10, i), **TASK)
        np.testing.assert_array_equal(first[i], env.reset()[0]["state"])
        for t in range(4):
            obs, reward, _, truncated, _ = env.step(actions[t, i])
            np.testing.assert_array_equal(got[i][t][0], obs["state"])
            assert got[i][t][1] == pytest.approx(float(reward)) and got[i][t][2] == truncated
        env.close()
    assert not np.array_equal(first[0], first[1])  # different seeds, different episodes


def test_only_the_given_environments_step_and_one_resets_alone():
    envs = make_envs(EnvConfig(time_limit=10, **TASK), seed=3, num_envs=2)
    reference = [make_env(time_limit=10, seed=environment_seed(3, i), **TASK) for i in range(2)]
    try:
        envs.reset(0), envs.reset(1), reference[0].reset(), reference[1].reset()
        action = np.array([0.5], np.float32)
        results = envs.step({1: action})  # env 0 does not move
        assert list(results) == [1]
        expected = reference[1].step(action)[0]["state"]
        np.testing.assert_array_equal(results[1].obs["state"], expected)
        after_reset = envs.reset(1)  # env 1 starts over: its second episode, as its own environment's
        np.testing.assert_array_equal(after_reset["state"], reference[1].reset()[0]["state"])
        both = envs.step({0: action, 1: action})
        np.testing.assert_array_equal(both[0].obs["state"], reference[0].step(action)[0]["state"])
        np.testing.assert_array_equal(both[1].obs["state"], reference[1].step(action)[0]["state"])
    finally:
        envs.close()
        for env in reference:
            env.close()


@pytest.mark.slow
def test_a_killed_process_is_restarted_and_reported_as_crashed(caplog):
    envs = make_envs(EnvConfig(time_limit=50, **TASK), seed=0, num_envs=3)
    try:
        for i in range(3):
            envs.reset(i)
        action = np.zeros(1, np.float32)
        before = envs.step({i: action for i in range(3)})
        victim = envs.pids()[1]
        os.kill(victim, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="planet_sac"):
            results = envs.step({i: action for i in range(3)})
        assert results[1].crashed and results[1].obs is None
        assert not results[0].crashed and not results[2].crashed
        assert not np.array_equal(results[0].obs["state"], before[0].obs["state"])  # the others went on
        assert envs.restarts == [0, 1, 0] and envs.pids()[1] != victim
        assert any("environment 1" in r.getMessage() and "restarted" in r.getMessage() for r in caplog.records)
        assert envs.reset(1)["state"].shape == (3,)
        assert not envs.step({1: action})[1].crashed
    finally:
        envs.close()


def test_one_environment_stays_in_this_process():
    envs = make_envs(EnvConfig(time_limit=5, **TASK), seed=0, num_envs=1)
    assert isinstance(envs, LocalEnvs)
    envs.close()


@pytest.mark.slow
def test_a_single_mujoco_environment_is_restarted_when_its_process_dies(caplog):
    """MuJoCo tasks run in a child process anyway; with num_envs=1 it used to be the one child nobody restarted,
    so a crash ended the run instead of dropping the partial episode."""
    envs = make_envs(EnvConfig(task="dmc:cartpole-swingup", obs="state", action_repeat=8, time_limit=10), seed=0, num_envs=1)
    try:
        assert isinstance(envs, ParallelEnvs) and envs.num_envs == 1
        envs.reset(0)
        victim = envs.pids()[0]
        os.kill(victim, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="planet_sac"):
            assert envs.step({0: np.zeros(1, np.float32)})[0].crashed
        assert envs.restarts == [1] and envs.pids()[0] != victim
        assert envs.reset(0)["state"].shape == (5,)
    finally:
        envs.close()


def test_num_envs_must_be_positive():
    with pytest.raises(ConfigError, match=r"env.num_envs=0: must be >= 1"):
        make_envs(EnvConfig(time_limit=5, **TASK), seed=0, num_envs=0)


def test_a_process_killed_between_episodes_is_restarted_by_reset(caplog):
    envs = make_envs(EnvConfig(time_limit=5, **TASK), seed=0, num_envs=2)
    try:
        envs.reset(0), envs.reset(1)
        victim = envs.pids()[0]
        os.kill(victim, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="planet_sac"):
            obs = envs.reset(0)
        fresh = make_env(time_limit=5, seed=environment_seed(0, 0, 1), **TASK)  # the replacement's seed
        np.testing.assert_array_equal(obs["state"], fresh.reset()[0]["state"])
        fresh.close()
        assert envs.restarts == [1, 0] and envs.pids()[0] != victim
        assert not envs.step({0: np.zeros(1, np.float32)})[0].crashed
    finally:
        envs.close()


@pytest.mark.slow
def test_training_with_two_environment_processes(tmp_path):
    """env.num_envs=2: N episodes every N * collect_every updates, each its own file, counted once; the test phase
    (one environment in this process) runs beside the environment processes."""
    import json

    from planet_sac.cli import main
    from planet_sac.episodes.folder import list_episodes
    from tests.conftest import CONFIGS

    logdir = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(logdir), "--quiet",
                 "--set", "env.num_envs=2", "--set", "schedule.train_steps=4", "--set", "schedule.collect_every=2",
                 "--set", "schedule.train_phase_steps=4"]) == 0
    files = list_episodes(str(logdir / "train_episodes"))
    assert len(files) == 2 + 2  # 2 seed episodes (one per process), then 2 at update 4 (not 1 at 2 and 1 at 4)
    rows = [json.loads(line) for line in open(logdir / "metrics.jsonl")]
    collected = [row for row in rows if "train/return" in row]
    assert [row["step"] for row in collected] == [4] and collected[0]["episodes"] == 4
    assert collected[0]["env_steps"] == 4 * 50 * 2  # 4 episodes x 50 agent steps x action repeat 2
    assert [(row["step"], row["episodes"]) for row in rows if row["phase"] == "test"] == [(4, 4)]


def test_num_envs_zero_is_refused_by_the_command_line_before_anything_is_written(tmp_path, capsys):
    from planet_sac.cli import main
    from tests.conftest import CONFIGS

    logdir = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(logdir), "--set", "env.num_envs=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "env.num_envs=0" in err[0] and not logdir.exists()


def test_closing_kills_a_hung_environment_process_instead_of_waiting_forever(monkeypatch, caplog):
    monkeypatch.setattr("planet_sac.envs.EnvProcess.CLOSE_SECONDS", 1.0)
    envs = make_envs(EnvConfig(time_limit=50, **TASK), seed=0, num_envs=2)
    envs.reset(0), envs.reset(1)
    hung = envs.pids()[1]
    os.kill(hung, signal.SIGSTOP)  # alive, never answers
    closing = threading.Thread(target=envs.close, daemon=True)
    closing.start()
    closing.join(30)
    if closing.is_alive():
        os.kill(hung, signal.SIGKILL)
        closing.join(15)
        pytest.fail("ParallelEnvs.close() blocked on a hung environment process")
    with pytest.raises(ProcessLookupError):
        os.kill(hung, 0)  # killed and reaped
    assert f"environment process {hung} did not answer close" in caplog.text


def test_collectors_with_neighbouring_seeds_share_no_environment_seed():
    """Two collectors with --seed 1 and --seed 2 and two environments each: four different start states (with
    seed + i, collector 1's environment 1 would replay collector 2's environment 0), restarts too; the first
    environment keeps the plain seed, so one environment plays what make_env(seed) plays."""
    starts = {}
    for seed in (1, 2):
        envs = make_envs(EnvConfig(time_limit=4, **TASK), seed=seed, num_envs=2)
        try:
            for i in range(2):
                starts[seed, i] = envs.reset(i)["state"]
        finally:
            envs.close()
    firsts = list(starts.values())
    assert all(not np.array_equal(a, b) for k, a in enumerate(firsts) for b in firsts[k + 1:])
    env = make_env(time_limit=4, seed=2, **TASK)
    np.testing.assert_array_equal(starts[2, 0], env.reset()[0]["state"])
    env.close()
    seeds = {environment_seed(s, i, r) for s in range(50) for i in range(4) for r in range(3)}
    assert len(seeds) == 50 * 4 * 3 and all(0 <= s < 2**31 for s in seeds)


def test_make_envs_takes_seed_and_count_from_the_config():
    """`make_envs(config)` alone: `config.num_envs` environments, environment 0 seeded with `config.seed`."""
    config = EnvConfig(time_limit=3, seed=7, num_envs=2, **TASK)
    envs = make_envs(config)
    single = make_env(TASK["task"], TASK["obs"], TASK["action_repeat"], 3, seed=7)
    try:
        assert isinstance(envs, ParallelEnvs) and envs.num_envs == 2
        np.testing.assert_array_equal(envs.reset(0)["state"], single.reset()[0]["state"])
    finally:
        envs.close()
        single.close()


def test_make_env_takes_an_env_config_as_gymnasium_make_takes_a_spec():
    config = EnvConfig(task="gym:Pendulum-v1", obs="state", action_repeat=3, time_limit=2, seed=4)
    from_config, from_fields = make_env(config), make_env("gym:Pendulum-v1", "state", 3, 2, seed=4)
    reseeded = make_env(config, seed=5)
    first = from_config.reset()[0]["state"]
    np.testing.assert_array_equal(first, from_fields.reset()[0]["state"])
    assert not np.array_equal(first, reseeded.reset()[0]["state"])
    action = np.full(1, 0.3, np.float32)
    for env in (from_config, from_fields):
        env.step(action)
    a, b = from_config.step(action), from_fields.step(action)
    np.testing.assert_array_equal(a[0]["state"], b[0]["state"])
    assert a[1] == b[1] and a[3] and b[3]  # the config's time limit of 2 agent steps ends both
    with pytest.raises(TypeError, match="obs"):
        make_env(config, obs="image")


def test_failures_older_than_the_window_are_forgotten():
    from planet_sac.envs.restarts import failures_in_window

    assert failures_in_window([0.0, 100.0, 250.0], 320.0, 300.0) == [100.0, 250.0, 320.0]  # 320 - 0 is past 300
    assert failures_in_window([20.0], 320.0, 300.0) == [320.0]  # exactly the window's length ago: forgotten
    assert failures_in_window([], 5.0, 300.0) == [5.0]


@pytest.mark.slow
def test_an_environment_is_given_up_after_max_restarts_failures_within_the_window(monkeypatch):
    """max_restarts=2: the 1st and 2nd failures restart the environment, the 3rd within the window ends with one
    line; failures spread wider than the window never do."""
    from planet_sac.envs.restarts import EnvFailedError, Restarts

    class Stub:  # a restarted environment, without a process of its own
        def close(self):
            pass

    envs = ParallelEnvs(EnvConfig(time_limit=5, **TASK), seed=0, num_envs=1, max_restarts=2, restart_window=300.0)
    envs.close()  # its process; the restarts below make stubs
    envs._envs = [Stub()]
    monkeypatch.setattr(envs, "_start", lambda index: Stub())
    now = [0.0]
    monkeypatch.setattr("planet_sac.envs.restarts.time.monotonic", lambda: now[0])
    for now[0] in (0.0, 10.0):
        envs._replace(0, RuntimeError("down"))
    assert envs.restarts == [2]
    now[0] = 20.0
    with pytest.raises(EnvFailedError, match=r"^environment 0 failed 3 times within 300 s, last: raised "
                                             r"RuntimeError: down; not restarting it again"):
        envs._replace(0, RuntimeError("down"))
    envs._restarts = Restarts(1, max_restarts=2, restart_window=300.0)
    for now[0] in (1000.0, 2000.0, 3000.0, 4000.0):  # as many, each past the window of the one before
        envs._replace(0, RuntimeError("down"))
    assert envs.restarts == [4]


@pytest.mark.slow
def test_an_environment_process_ends_quietly_when_its_parent_dies_unread():
    """A parent killed with an answer unread resets the socket (ECONNRESET, not EOF): the child ends with exit code 0
    and prints nothing, instead of a traceback under the parent's own last words."""
    ours, theirs = socket.socketpair()
    code = "import sys; from planet_sac.envs.process import serve_env; serve_env(int(sys.argv[1]))"
    child = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                             stderr=subprocess.PIPE, text=True)
    theirs.close()
    conn = Connection(ours.detach())
    conn.send(("reset", (), {}))  # no environment yet: the child answers with an error the parent never reads
    deadline = time.monotonic() + 60
    while not conn.poll(0.1) and time.monotonic() < deadline:
        pass
    conn.close()  # with the answer unread
    _, stderr = child.communicate(timeout=60)
    assert (child.returncode, stderr) == (0, "")


class RaisesAtStep(gymnasium.Env):
    """Raises at step `at` of its life (never when `at` is 0); counts its closes."""

    observation_space = spaces.Box(-1, 1, (1,), np.float32)
    action_space = spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self, at: int):
        self.at, self.steps, self.closed = at, 0, 0

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps == self.at:
            raise RuntimeError("lost the simulator")
        return np.full(1, self.steps / 10, np.float32), 1.0, False, False, {}

    def close(self):
        self.closed += 1


def test_an_environment_that_raises_is_replaced_capped_and_a_local_batch_reports_the_crash(monkeypatch):
    """`RestartOnFailure`: a raising step closes the environment, makes the next with the restart count and raises
    `EnvRestarted`, which `LocalEnvs` reports as a crashed step; a raising reset is retried with a new environment;
    the 4th failure within the window is one line; a `ConfigError` is never retried. A plain environment's error
    stays its own."""
    from planet_sac.envs import EnvRestarted, RestartOnFailure
    from planet_sac.envs.restarts import EnvFailedError

    made = []

    def remake(restarts):
        made.append(restarts)
        return RaisesAtStep(at=1)

    first = RaisesAtStep(at=2)
    env = RestartOnFailure(first, remake)
    envs = LocalEnvs(env)
    monkeypatch.setattr("planet_sac.envs.restarts.time.monotonic", lambda: 0.0)
    assert not envs.step({0: np.zeros(1)})[0].crashed
    result = envs.step({0: np.zeros(1)})[0]
    assert result.crashed and result.obs is None and first.closed == 1 and made == [1] and env.restarts == 1
    assert env.env is not first and envs.reset(0).shape == (1,)  # the new environment plays on
    with pytest.raises(EnvRestarted):
        env.step(np.zeros(1))
    assert made == [1, 2]
    capped = RestartOnFailure(RaisesAtStep(at=1), remake, max_restarts=2)
    for _ in range(2):
        with pytest.raises(EnvRestarted):
            capped.step(np.zeros(1))
    with pytest.raises(EnvFailedError, match=r"^environment 0 failed 3 times within 300 s, last: raised "
                                             r"RuntimeError: lost the simulator; not restarting it again"):
        capped.step(np.zeros(1))
    alone = LocalEnvs(RaisesAtStep(at=1))
    with pytest.raises(RuntimeError, match="^lost the simulator$"):
        alone.step({0: np.zeros(1)})

    class ResetFails(RaisesAtStep):
        def reset(self, *, seed=None, options=None):
            raise RuntimeError("no simulator yet")

    retried = RestartOnFailure(ResetFails(at=0), lambda restarts: RaisesAtStep(at=0))
    assert retried.reset()[0].shape == (1,) and retried.restarts == 1

    class BrokenContract(RaisesAtStep):
        def step(self, action):
            raise ConfigError("reward 'abc' is not a number")

    with pytest.raises(ConfigError, match="is not a number"):
        RestartOnFailure(BrokenContract(at=0), remake).step(np.zeros(1))
