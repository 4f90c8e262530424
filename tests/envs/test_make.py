"""Tests for planet_sac.envs: observation formats, action handling, episode ends, seeding."""

from __future__ import annotations

import importlib.util
import os
import re

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from planet_sac.acting.actor import RandomPolicy, run_episode
from planet_sac.envs import episode_limit, make_env

# dm_control is only looked up, never imported here: it crashes next to TensorFlow (see EnvProcess).
needs_dmc = pytest.mark.skipif(
    importlib.util.find_spec("dm_control") is None, reason="needs planet-sac[dmc]"
)
TERMINATES_ID = "PlanetSacTest/Terminates-v0"
ECHO_ID = "PlanetSacTest/EchoAction-v0"
TRUNCATES_ID = "PlanetSacTest/Truncates-v0"


class TerminatesEnv(gymnasium.Env):
    """Reward 1 per step; terminates after 3 steps (no time limit of its own)."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 3, False, {}


class EchoActionEnv(gymnasium.Env):
    """Observes the last action it received, to check rescaling; bounds [0, 4] and [-10, 10]."""

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = spaces.Box(np.array([0.0, -10.0], np.float32), np.array([4.0, 10.0], np.float32))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.asarray(action, np.float32), 0.0, False, False, {}


class TruncatesEnv(TerminatesEnv):
    """Reward 1 per step; its own limit truncates after 5 steps, and a step past it is an error (as stepping a
    finished dm_control episode would silently start a new one)."""

    def step(self, action):
        assert self.t < 5, "stepped past the end of the episode"
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, False, self.t >= 5, {}


for _id, _cls in ((TERMINATES_ID, TerminatesEnv), (ECHO_ID, EchoActionEnv), (TRUNCATES_ID, TruncatesEnv)):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_cls)


def test_gym_state_obs():
    env = make_env("gym:Pendulum-v1", obs="state", seed=0)
    obs, _ = env.reset()
    assert env.obs_key == "state"
    assert set(obs) == {"state"}
    assert obs["state"].shape == (3,) and obs["state"].dtype == np.float32
    assert env.observation_space["state"].shape == (3,)
    obs, *_ = env.step(env.action_space.sample())
    assert obs["state"].dtype == np.float32
    assert env.observation_space.contains(obs)


def test_gym_image_obs():
    env = make_env("gym:Pendulum-v1", obs="image", seed=0)
    obs, _ = env.reset()
    assert set(obs) == {"image"} and env.obs_key == "image"
    assert obs["image"].shape == (64, 64, 3) and obs["image"].dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert obs["image"].min() < obs["image"].max()


@pytest.mark.slow
@needs_dmc
def test_dmc_image_obs_changes_with_physics():
    env = make_env("dmc:cartpole-swingup", obs="image", action_repeat=4, seed=0)
    first, _ = env.reset()
    assert first["image"].shape == (64, 64, 3) and first["image"].dtype == np.uint8
    obs = first
    for _ in range(5):
        obs, *_ = env.step(np.ones(1, np.float32))
    assert env.observation_space.contains(obs)
    assert not np.array_equal(obs["image"], first["image"])


@pytest.mark.slow
@needs_dmc
def test_dmc_renders_next_to_tensorflow():
    """MuJoCo's headless GL and TensorFlow crash in one process; dmc envs run in a child."""
    import tensorflow as tf

    env = make_env("dmc:cartpole-swingup", obs="image", image_size=32, seed=0)
    obs, _ = env.reset()
    assert obs["image"].shape == (32, 32, 3)
    assert env.unwrapped.render().shape == (32, 32, 3)
    assert float(tf.reduce_sum(tf.ones(3))) == 3.0
    env.close()


@needs_dmc
def test_dmc_state_obs_and_default_time_limit_truncates():
    env = make_env("dmc:ball_in_cup-catch", obs="state", action_repeat=8, seed=0)
    obs, _ = env.reset()
    assert obs["state"].shape == (8,) and obs["state"].dtype == np.float32
    assert env.max_episode_steps == 125
    episode = run_episode(env, RandomPolicy(2, seed=0))
    assert len(episode["action"]) == 126
    assert np.all(episode["discount"] == 1.0)


def test_dmc_episode_ends_are_terminations_only_at_discount_0():
    """dm_control's last step with discount 0 is a termination, with discount 1 a truncation (the task's own limit);
    a middle step neither. DMCEnv's step logic on scripted time steps: no dm_control is loaded into this process,
    where MuJoCo's GL beside TensorFlow crashes later tests."""
    from types import SimpleNamespace

    from planet_sac.envs.base import SimEnv
    from planet_sac.envs.dmc import DMCEnv

    env = DMCEnv.__new__(DMCEnv)  # the simulator part only: a scripted stand-in for dm_control's environment
    SimEnv.__init__(env, "state", 1, 64, None)
    for last, discount, expected in ((True, 0.0, (True, False)), (True, 1.0, (False, True)), (False, 1.0, (False, False))):
        step = SimpleNamespace(last=lambda last=last: last, discount=discount, reward=0.5,
                               observation={"position": np.array([0.25, -1.0])})
        env._env = SimpleNamespace(step=lambda action, step=step: step)
        obs, reward, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
        assert (terminated, truncated) == expected and reward == 0.5
        np.testing.assert_array_equal(obs["state"], [0.25, -1.0])


@needs_dmc
def test_dmc_reset_seeds_give_the_same_start_whatever_came_before():
    """reset(seed=s) of a dm_control task starts where any other environment's reset(seed=s) starts, after any
    history; another seed starts elsewhere."""
    first = make_env("dmc:cartpole-swingup", obs="state", seed=0)
    other = make_env("dmc:cartpole-swingup", obs="state", seed=1)
    try:
        start = first.reset(seed=5)[0]["state"]
        other.reset()
        for _ in range(3):
            other.step(np.full(1, 0.7, np.float32))
        np.testing.assert_array_equal(other.reset(seed=5)[0]["state"], start)
        assert not np.array_equal(other.reset(seed=6)[0]["state"], start)
    finally:
        first.close()
        other.close()


@needs_dmc
def test_a_dmc_time_limit_past_the_tasks_own_length_is_kept():
    """make_env counts the limit: dm_control's own 1,000 control steps are off, so 130 agent steps at action repeat
    8 (1,040 control steps) run to the end without an earlier end."""
    env = make_env("dmc:cartpole-swingup", obs="state", action_repeat=8, time_limit=130, seed=0)
    try:
        env.reset()
        ends = [env.step(np.zeros(1, np.float32))[2:4] for _ in range(130)]
    finally:
        env.close()
    assert not any(any(end) for end in ends[:-1]) and ends[-1] == (False, True)


class HalfBoundedEnv(gymnasium.Env):
    """Actions bounded below only; observations: a one-channel uint8 grid (not an RGB image) and a position."""

    observation_space = spaces.Dict({"depth": spaces.Box(0, 255, (4, 4, 1), np.uint8),
                                     "pos": spaces.Box(-1.0, 1.0, (2,), np.float32)})

    def __init__(self, high: float = np.inf):
        self.action_space = spaces.Box(np.array([-1.0], np.float32), np.array([high], np.float32))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"depth": np.full((4, 4, 1), 7, np.uint8), "pos": np.zeros(2, np.float32)}, {}

    def step(self, action):
        return self.reset()[0], 0.0, False, False, {}


def test_gym_actions_must_be_bounded_on_both_sides_and_only_rgb_is_an_image():
    """Unbounded high actions are refused in one line; a one-channel uint8 key is state, not the image."""
    from planet_sac.config import ConfigError

    for env_id, high in (("PlanetSacTest/HalfBounded-v0", np.inf), ("PlanetSacTest/DepthGrid-v0", 1.0)):
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=HalfBoundedEnv, kwargs={"high": high})
    with pytest.raises(ConfigError, match="has unbounded actions; bounded Box actions are needed"):
        make_env("gym:PlanetSacTest/HalfBounded-v0", obs="state")
    env = make_env("gym:PlanetSacTest/DepthGrid-v0", obs="state")
    try:
        obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(obs["state"], [7.0] * 16 + [0.0, 0.0])  # depth (sorted first), then pos
    finally:
        env.close()


def test_a_gym_time_limit_past_the_tasks_own_length_is_kept():
    """gymnasium's own TimeLimit is off (Pendulum-v1 registers 200 steps), so make_env's 250 holds."""
    env = make_env("gym:Pendulum-v1", obs="state", time_limit=250, seed=0)
    env.reset()
    ends = [env.step(np.zeros(1, np.float32))[2:4] for _ in range(250)]
    assert not any(any(end) for end in ends[:-1]) and ends[-1] == (False, True)


def test_episode_limit_is_the_time_limit_or_the_tasks_own_length_over_the_action_repeat():
    # By hand: dm_control's 1000 control steps; Pendulum-v1 registers 200; a partial last step counts.
    assert episode_limit("dmc:cartpole-swingup", 8, None) == 125
    assert episode_limit("dmc:cheetah-run", 3, None) == 334
    assert episode_limit("gym:Pendulum-v1", 3, None) == 67
    assert episode_limit("gym:Pendulum-v1", 3, 40) == 40
    assert make_env("gym:Pendulum-v1", obs="state", action_repeat=3, seed=0).max_episode_steps == 67


def test_action_repeat_sums_rewards():
    action = np.array([0.7], np.float32)
    repeated = make_env("gym:Pendulum-v1", obs="state", action_repeat=2, seed=1)
    single = make_env("gym:Pendulum-v1", obs="state", action_repeat=1, seed=1)
    repeated.reset()
    single.reset()
    obs2, reward2, *_ = repeated.step(action)
    _, reward_a, *_ = single.step(action)
    obs1, reward_b, *_ = single.step(action)
    assert reward2 == pytest.approx(reward_a + reward_b)
    np.testing.assert_array_equal(obs2["state"], obs1["state"])
    assert repeated.max_episode_steps == 100 and repeated.action_repeat == 2


def test_action_repeat_stops_at_termination():
    env = make_env(f"gym:{TERMINATES_ID}", obs="state", action_repeat=2)
    env.reset(seed=0)
    assert env.step(np.zeros(1))[1:4] == (2.0, False, False)
    assert env.step(np.zeros(1))[1:4] == (1.0, True, False)


def test_action_repeat_stops_where_the_simulators_own_episode_ends():
    env = make_env(f"gym:{TRUNCATES_ID}", obs="state", action_repeat=3)
    env.reset(seed=0)
    assert env.step(np.zeros(1))[1:4] == (3.0, False, False)
    assert env.step(np.zeros(1))[1:4] == (2.0, False, True)  # 2 of the 3 repeats, then the episode's end


def test_actions_are_normalised_to_true_bounds():
    env = make_env(f"gym:{ECHO_ID}", obs="state")
    assert env.action_space == spaces.Box(-1.0, 1.0, (2,), np.float32)
    env.reset(seed=0)
    for action, expected in [
        ([-1.0, -1.0], [0.0, -10.0]),
        ([1.0, 1.0], [4.0, 10.0]),
        ([0.0, 0.5], [2.0, 5.0]),
        ([5.0, -3.0], [4.0, -10.0]),
    ]:
        obs, *_ = env.step(np.array(action, np.float32))
        np.testing.assert_allclose(obs["state"], expected, atol=1e-6)


def test_termination_gives_zero_discount():
    env = make_env(f"gym:{TERMINATES_ID}", obs="state")
    env.reset(seed=0)
    env.step(np.zeros(1))
    env.step(np.zeros(1))
    _, _, terminated, truncated, _ = env.step(np.zeros(1))
    assert terminated and not truncated
    episode = run_episode(env, RandomPolicy(1, seed=0))
    assert len(episode["discount"]) == 4
    np.testing.assert_array_equal(episode["discount"], [1.0, 1.0, 1.0, 0.0])


def test_a_termination_on_the_time_limits_step_is_not_a_truncation():
    """gymnasium's contract: an episode that ends by itself on the limit's last step terminated; it was not cut off."""
    env = make_env(f"gym:{TERMINATES_ID}", obs="state", time_limit=3)
    env.reset(seed=0)
    for _ in range(2):
        assert not any(env.step(np.zeros(1))[2:4])
    _, _, terminated, truncated, _ = env.step(np.zeros(1))
    assert terminated and not truncated


def test_time_limit_truncates_and_keeps_discount():
    env = make_env("gym:Pendulum-v1", obs="state", time_limit=5, seed=0)
    env.reset()
    for step in range(5):
        _, _, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
        assert not terminated
        assert truncated == (step == 4)
    episode = run_episode(env, RandomPolicy(1, seed=0))
    assert len(episode["discount"]) == 6
    assert np.all(episode["discount"] == 1.0)


def test_default_time_limit_counts_agent_steps():
    assert make_env("gym:Pendulum-v1", obs="state").max_episode_steps == 200
    assert make_env("gym:Pendulum-v1", obs="state", action_repeat=3).max_episode_steps == 67
    assert make_env(f"gym:{TERMINATES_ID}", obs="state").max_episode_steps is None


def _trajectory(task: str, seed: int, steps: int = 5) -> list[np.ndarray]:
    env = make_env(task, obs="state", seed=seed)
    obs, _ = env.reset()
    actions = np.linspace(-1.0, 1.0, steps * env.action_space.shape[0], dtype=np.float32)
    states = [obs["state"]]
    for action in actions.reshape(steps, -1):
        states.append(env.step(action)[0]["state"])
    states.append(env.action_space.sample())
    return states


@pytest.mark.slow
@pytest.mark.parametrize(
    "task", ["gym:Pendulum-v1", pytest.param("dmc:cartpole-swingup", marks=needs_dmc)]
)
def test_seeding_is_reproducible(task):
    first, again, other = _trajectory(task, 3), _trajectory(task, 3), _trajectory(task, 4)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])


def test_reset_seed_reproduces_first_obs():
    env = make_env("gym:Pendulum-v1", obs="state")
    first = env.reset(seed=7)[0]["state"]
    env.step(np.ones(1, np.float32))
    np.testing.assert_array_equal(env.reset(seed=7)[0]["state"], first)


@pytest.mark.parametrize(
    "task, hint",
    [
        ("Pendulum-v1", "gym:Pendulum-v1"),
        ("foo:Pendulum-v1", "gym:Pendulum-v1"),
        ("gym:", "gym:Pendulum-v1"),
        ("gym:NoSuchEnv-v0", "gym:Pendulum-v1"),
        ("gym:CartPole-v1", "Box"),
        pytest.param("dmc:cartpole-nope", "cartpole-swingup", marks=needs_dmc),
        pytest.param("dmc:nodomain-run", "cheetah-run", marks=needs_dmc),
        pytest.param("dmc:cartpole", "cartpole-balance", marks=needs_dmc),
    ],
)
@pytest.mark.slow
def test_bad_task_raises_helpful_value_error(task, hint):
    with pytest.raises(ValueError) as info:
        make_env(task)
    message = str(info.value)
    assert hint in message and "\n" not in message


def test_bad_obs_raises_value_error():
    with pytest.raises(ValueError, match="obs must be one of"):
        make_env("gym:Pendulum-v1", obs="pixels")


def _dmc_frames(shadow_size, num_envs=None):
    """Four cartpole frames (reset + 3 steps of action 0.5) rendered with `shadow_size`, in a single env or a batch."""
    if num_envs is None:
        env = make_env("dmc:cartpole-swingup", "image", 8, None, 0, 64, shadow_size)
        frames = [env.reset(seed=0)[0]["image"]]
        for _ in range(3):
            frames.append(env.step(np.full(1, 0.5, np.float32))[0]["image"])
        env.close()
        return np.stack(frames).astype(int)
    from planet_sac.config import EnvConfig
    from planet_sac.envs import make_envs

    envs = make_envs(EnvConfig(task="dmc:cartpole-swingup", action_repeat=8, shadow_size=shadow_size), seed=0,
                     num_envs=num_envs)
    try:
        frames = [envs.reset(0)["image"]]
        for _ in range(3):
            frames.append(envs.step({0: np.full(1, 0.5, np.float32)})[0].obs["image"])
    finally:
        envs.close()
    return np.stack(frames).astype(int)


@pytest.mark.slow
@needs_dmc
def test_shadow_size_reaches_the_renderer_in_single_and_parallel_environments():
    default = _dmc_frames(None)
    np.testing.assert_array_equal(_dmc_frames(4096), default)  # MuJoCo's own default: the same pixels
    coarse = _dmc_frames(32)
    assert np.abs(coarse - default).mean() > 0.005  # a coarse shadow map moves the shadows' edges
    # environment processes (`ParallelEnvs`, also for a single MuJoCo environment): a batch seeded 0 plays the single
    # environment's episode, so it shows the coarse map's pixels exactly
    np.testing.assert_array_equal(_dmc_frames(32, num_envs=1), coarse)


def test_shadow_size_is_for_dm_control_tasks_only():
    from planet_sac.config import ConfigError
    from planet_sac.config_loading import load_config

    with pytest.raises(ConfigError, match="dm_control tasks only"):
        make_env("gym:Pendulum-v1", "state", shadow_size=1024)
    with pytest.raises(ConfigError, match="env.shadow_size"):
        load_config(None, ["env.task=gym:Pendulum-v1", "env.obs=state", "env.shadow_size=1024"])
    with pytest.raises(ConfigError, match="env.shadow_size"):
        load_config(None, ["env.shadow_size=0"])
    assert load_config(None, ["env.shadow_size=1024"]).env.shadow_size == 1024


CAMERAS = """
from planet_sac.envs import DMCEnv
for name in ("quadruped-walk", "cheetah-run", "walker-walk"):
    env = DMCEnv(name, "state", 1, 64, 0)  # built only to read its camera; nothing is rendered
    print(name, env.camera_id)
    env.close()
"""


@pytest.mark.slow
def test_dm_control_frames_come_from_planets_camera_for_each_domain():
    """Quadruped is filmed with camera 2 (PlaNet's and Dreamer's choice): camera 0 sees the arena from 10 m.
    Read in a child process: MuJoCo's EGL renderer loaded into the test process made later TensorFlow calls there
    crash (a segmentation fault in a compiled policy), as it does in any process with TensorFlow (docs/how_it_works.md)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", CAMERAS], capture_output=True, text=True, check=True,
                            env={**os.environ, "MUJOCO_GL": "egl"})
    cameras = dict(line.split() for line in result.stdout.splitlines())
    assert cameras == {"quadruped-walk": "2", "cheetah-run": "0", "walker-walk": "0"}


OFFSCREEN = """
import numpy as np
from dm_control import suite
from planet_sac.envs import DMCEnv

for name, size in (("cartpole-swingup", 64), ("walker-walk", 48)):
    ours = DMCEnv(name, "image", 1, size, 0)
    plain = suite.load(*name.split("-"), task_kwargs={"random": 0, "time_limit": float("inf")})  # dm_control's buffer
    ours.reset(seed=3)
    plain.task.random.seed(3)
    plain.reset()
    rng = np.random.default_rng(0)
    same = True
    for _ in range(5):
        action = rng.uniform(-1, 1, ours.action_space.shape).astype(np.float32)
        ours.step(action)
        plain.step(action)
        same &= np.array_equal(ours.render(), plain.physics.render(size, size, camera_id=0))
    visual = ours._env.physics.model.vis.global_
    print(name, same, visual.offwidth, visual.offheight, plain.physics.model.vis.global_.offwidth)
    ours.close()
    plain.close()
large = DMCEnv("cartpole-swingup", "image", 1, 800, 0)
large.reset(seed=0)
print("large", large.render().shape)
large.close()
"""


@pytest.mark.slow
@needs_dmc
def test_the_offscreen_buffer_fits_the_frame_and_leaves_its_pixels_unchanged():
    """A frame-sized offscreen buffer renders the same pixels as dm_control's 640 x 480 one, faster; frames larger
    than 640 pixels, which dm_control's buffer refuses, render. In a child process (MuJoCo's GL beside TensorFlow)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", OFFSCREEN], capture_output=True, text=True,
                            env={**os.environ, "MUJOCO_GL": "egl"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["cartpole-swingup True 64 64 640", "walker-walk True 48 48 640",
                                          "large (800, 800, 3)"]


@needs_dmc
def test_a_dmc_task_is_checked_without_loading_dm_control_here():
    """`planet-sac suite` checks its tasks up front in the process that then trains: importing dm_control there
    loaded MuJoCo's EGL renderer beside TensorFlow, which crashed a later compiled policy (a segmentation fault)."""
    import sys

    from planet_sac.config import ConfigError
    from planet_sac.envs.tasks import check_task

    loaded = "dm_control" in sys.modules
    check_task("dmc:cartpole-swingup")
    check_task("dmc:quadruped-walk")
    with pytest.raises(ConfigError, match=r"unknown dm_control task 'dmc:cartpole-fly'; use 'dmc:<domain>-<task>' with "
                                          r"one of: cartpole-balance, cartpole-balance_sparse, cartpole-swingup"):
        check_task("dmc:cartpole-fly")
    with pytest.raises(ConfigError, match=r"unknown dm_control task 'dmc:nodomain-x'; .* acrobot-swingup"):
        check_task("dmc:nodomain-x")
    assert ("dm_control" in sys.modules) == loaded


@pytest.mark.parametrize("action, words", [
    (np.zeros(3, np.float32), "an action of shape (3,): this environment takes shape (1,)"),  # used to use a[0]
    (np.zeros((1, 1), np.float32), "an action of shape (1, 1)"),
    (np.zeros(0, np.float32), "an action of shape (0,)"),
    (np.array([np.nan], np.float32), "an action holding NaN or inf"),  # used to leave the state NaN for good
])
def test_an_action_of_another_shape_or_not_finite_is_refused(action, words):
    from planet_sac.config import ConfigError

    env = make_env("gym:Pendulum-v1", obs="state", seed=0)
    env.reset()
    with pytest.raises(ConfigError, match=re.escape(words)):
        env.step(action)
    obs, *_ = env.step(np.array([0.5], np.float32))  # the environment is unharmed
    assert np.isfinite(obs["state"]).all()
    env.close()
