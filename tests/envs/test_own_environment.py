"""Your own environment: `gym:<module>:<id>` in every process, Dict observations, capped restarts, quiet dmc."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap

import gymnasium
import numpy as np
import pytest

from planet_sac.cli import main
from planet_sac.config import ConfigError, EnvConfig
from planet_sac.envs import environment_seed, episode_seed, make_env, make_envs
from tests.conftest import CONFIGS, ROOT, old_run_copy

EXAMPLE = ROOT / "examples" / "myenvs.py"

needs_dmc = pytest.mark.skipif(importlib.util.find_spec("dm_control") is None, reason="needs planet-sac[dmc]")


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    """A folder put on this process's sys.path only (not on PYTHONPATH), and a working directory elsewhere."""
    folder = tmp_path / "modules"
    folder.mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.syspath_prepend(str(folder))
    registered = set(gymnasium.envs.registry)
    yield folder
    for name, module in list(sys.modules.items()):  # the next test imports its own copy
        if str(getattr(module, "__file__", None) or "").startswith(str(folder)):
            del sys.modules[name]
    for env_id in set(gymnasium.envs.registry) - registered:  # and registers its ids afresh, without a warning
        del gymnasium.envs.registry[env_id]


def write_module(folder, name: str, source: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(source))


@pytest.mark.slow
@pytest.mark.e2e
def test_the_example_environment_trains_from_the_command_line_in_two_processes(module_dir, tmp_path):
    """docs/own_environment.md's example, as a user's module: the environment processes import it themselves.

    `e2e`: in `make test`, test_a_module_task_in_environment_processes_and_from_python checks the same module in two
    environment processes and from Python (its Dict observation mapped by hand, the environment's seed); this scenario
    adds the `train` command and its training episodes' seeds."""
    shutil.copy(EXAMPLE, module_dir / "myreach_example.py")
    logdir = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(logdir), "--quiet",
                 "--set", "env.task=gym:myreach_example:MyReach-v0", "--set", "env.num_envs=2",
                 "--set", "schedule.train_steps=5", "--set", "sac.updates_per_step=0"]) == 0  # the model alone
    from planet_sac.episodes.folder import list_episodes
    from planet_sac.episodes.storage import load_episode

    episodes = [load_episode(path) for path in list_episodes(str(logdir / "train_episodes"))]
    assert len(episodes) >= 2
    assert all(episode["state"].shape[1:] == (4,) and episode["action"].shape[1:] == (2,) for episode in episodes)
    # expected first observations: the raw environment reset as the run's training episodes 0 and 1 are
    # (envs.episode_seed of env.seed 0, the training stream), its Dict observation mapped by hand: keys sorted by
    # name (goal, position), concatenated
    module = sys.modules["myreach_example"]
    expected = []
    for seed in (episode_seed(0, 0, 0), episode_seed(0, 0, 1)):
        obs, _ = module.MyReach().reset(seed=seed)
        expected.append(np.concatenate([obs["goal"], obs["position"]]))
    firsts = sorted((episode["state"][0] for episode in episodes[:2]), key=lambda s: tuple(s))
    np.testing.assert_allclose(np.array(firsts), np.array(sorted(expected, key=lambda s: tuple(s))), rtol=1e-6)


def test_a_module_task_in_environment_processes_and_from_python(module_dir):
    shutil.copy(EXAMPLE, module_dir / "myreach_python.py")
    task = "gym:myreach_python:MyReach-v0"
    single = make_env(task, "image", action_repeat=2, seed=3)
    envs = make_envs(EnvConfig(task=task, obs="state", action_repeat=2), seed=3, num_envs=2)
    try:
        assert single.reset()[0]["image"].shape == (64, 64, 3)
        assert single.action_space.shape == (2,) and envs.action_space.shape == (2,)
        obs = envs.reset(1)["state"]
        raw, _ = sys.modules["myreach_python"].MyReach().reset(seed=environment_seed(3, 1))  # environment 1 of seed 3
        np.testing.assert_allclose(obs, np.concatenate([raw["goal"], raw["position"]]), rtol=1e-6)
    finally:
        single.close()
        envs.close()


DICT_ENV = """
import gymnasium
import numpy as np
from gymnasium import spaces


class Mixed(gymnasium.Env):
    def __init__(self, render_mode=None, size=32):
        self.observation_space = spaces.Dict([  # pairs keep their order (a plain dict would be sorted by gymnasium)
            ("zeta", spaces.Box(-100, 100, (2, 2), np.float32)),
            ("camera", spaces.Box(0, 255, (size, size, 3), np.uint8)),
            ("alpha", spaces.Box(-100, 100, (3,), np.float32)),
        ])
        self.action_space = spaces.Box(-1, 1, (1,), np.float32)

    def _obs(self):
        size = self.observation_space["camera"].shape[0]
        camera = (np.arange(size * size * 3) % 251).reshape(size, size, 3).astype(np.uint8)
        return {"zeta": np.full((2, 2), self.t, np.float32) + np.arange(4, dtype=np.float32).reshape(2, 2),
                "camera": camera, "alpha": np.array([10, 20, 30], np.float32) + self.t}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, False, {}


class TwoCameras(Mixed):
    def __init__(self, render_mode=None):
        super().__init__()
        self.observation_space = spaces.Dict(a=spaces.Box(0, 255, (8, 8, 3), np.uint8),
                                             b=spaces.Box(0, 255, (8, 8, 3), np.uint8))


class CameraOnly(Mixed):
    def __init__(self, render_mode=None):
        super().__init__()
        self.observation_space = spaces.Dict(camera=spaces.Box(0, 255, (8, 8, 3), np.uint8))


class Points(Mixed):
    def __init__(self, render_mode=None):
        super().__init__()
        self.observation_space = spaces.Sequence(spaces.Box(-1, 1, (2,), np.float32))  # any number of points


gymnasium.register("Mixed-v0", entry_point=Mixed)
gymnasium.register("Mixed128-v0", entry_point=Mixed, kwargs={"size": 128})
gymnasium.register("TwoCameras-v0", entry_point=TwoCameras)
gymnasium.register("CameraOnly-v0", entry_point=CameraOnly)
gymnasium.register("Points-v0", entry_point=Points)
"""


def test_dict_observations_map_to_state_and_image(module_dir):
    write_module(module_dir, "dict_envs", DICT_ENV)
    env = make_env("gym:dict_envs:Mixed-v0", "state", seed=0)
    env.reset()
    obs = env.step(np.zeros(1, np.float32))[0]["state"]
    # by hand: keys sorted (alpha, zeta; the uint8 HxWx3 camera is the image), each flattened, at t = 1
    np.testing.assert_array_equal(obs, np.array([11, 21, 31, 1, 2, 3, 4], np.float32))
    assert env.observation_space["state"].shape == (7,)
    env.close()

    camera = (np.arange(32 * 32 * 3) % 251).reshape(32, 32, 3).astype(np.uint8)
    image = make_env("gym:dict_envs:Mixed-v0", "image", seed=0).reset()[0]["image"]  # 32x32 -> 64x64
    np.testing.assert_array_equal(image, camera.repeat(2, 0).repeat(2, 1))  # box upsampling by 2: each pixel doubled
    big = (np.arange(128 * 128 * 3) % 251).reshape(128, 128, 3).astype(np.float64)
    down = make_env("gym:dict_envs:Mixed128-v0", "image", seed=0).reset()[0]["image"]  # 128x128 -> 64x64
    means = big.reshape(64, 2, 64, 2, 3).mean((1, 3))  # area average of 2x2 blocks
    assert np.abs(down.astype(np.float64) - means).max() <= 1.0  # PIL's fixed-point rounding: within one level


@pytest.mark.parametrize("task, obs, words", [
    ("gym:dict_envs:TwoCameras-v0", "image", "2 uint8 HxWx3 image observations (a, b)"),
    ("gym:dict_envs:CameraOnly-v0", "state", "no state keys beside its image 'camera'"),
    ("gym:dict_envs:Points-v0", "state", "has no fixed size"),
])
def test_dict_observations_that_cannot_be_mapped_get_one_line(module_dir, task, obs, words):
    write_module(module_dir, "dict_envs", DICT_ENV)
    with pytest.raises(ConfigError) as info:
        make_env(task, obs)
    assert words in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("task, words", [
    ("gym:no_such_module_xyz:Any-v0", "no module named 'no_such_module_xyz'"),
    ("gym:registers_nothing:Missing-v0", "did not register 'Missing-v0' (it registers Other-v0)"),
    ("gym:fails_to_import:Any-v0", "importing module 'fails_to_import' failed: ZeroDivisionError"),
    ("gym:needs_a_package:NeedsBox-v0",  # as LunarLander without Box2D: it used to be a traceback
     "gym:needs_a_package:NeedsBox-v0 needs a package that is not installed: Box2D is not installed"),
])
def test_module_errors_are_one_line_from_the_command_line(module_dir, tmp_path, capsys, task, words):
    write_module(module_dir, "registers_nothing", """
        import gymnasium
        gymnasium.register("Other-v0", entry_point="gymnasium.envs.classic_control:PendulumEnv")
    """)
    write_module(module_dir, "fails_to_import", "x = 1 / 0\n")
    write_module(module_dir, "needs_a_package", """
        import gymnasium
        gymnasium.register("NeedsBox-v0", entry_point="needs_box_impl:Lander")
    """)
    write_module(module_dir, "needs_box_impl", """
        import gymnasium
        raise gymnasium.error.DependencyNotInstalled("Box2D is not installed, run `pip install swig`")
    """)
    outdir = tmp_path / "episodes"
    status = main(["collect", "--task", task, "--obs", "state", "--episodes", "1", "--outdir", str(outdir),
                   "--set", "env.num_envs=2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and words in err[0], err


@pytest.mark.parametrize("task, words", [
    ("gym:breaks_contract:WordReward-v0", "gym:breaks_contract:WordReward-v0 returned a reward that is not a number: 'abc'"),
    ("gym:breaks_contract:Grows-v0", "gym:breaks_contract:Grows-v0 returned an observation of 3 values where its "
                                     "observation space Box(-1.0, 1.0, (2,), float32) has 2"),
])
def test_an_environment_that_breaks_its_own_spaces_mid_episode_is_one_line(module_dir, tmp_path, capsys, task, words):
    write_module(module_dir, "breaks_contract", """
        import gymnasium
        import numpy as np
        from gymnasium import spaces

        class Env(gymnasium.Env):
            def __init__(self, render_mode=None):
                self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
                self.action_space = spaces.Box(-1, 1, (1,), np.float32)
                self.t = 0

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.t = 0
                return np.zeros(2, np.float32), {}

        class WordReward(Env):
            def step(self, action):
                self.t += 1
                return np.zeros(2, np.float32), ("abc" if self.t == 3 else 1.0), False, False, {}

        class Grows(Env):
            def step(self, action):
                self.t += 1
                return np.zeros(3 if self.t == 3 else 2, np.float32), 1.0, False, False, {}

        gymnasium.register("WordReward-v0", entry_point="breaks_contract:WordReward")
        gymnasium.register("Grows-v0", entry_point="breaks_contract:Grows")
    """)
    outdir = tmp_path / "episodes"
    status = main(["collect", "--task", task, "--obs", "state", "--episodes", "1", "--time-limit", "8",
                   "--outdir", str(outdir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and words in err[0], err


@pytest.mark.parametrize("task, words", [
    ("gym:bad_frames:NoFrame-v0", "gym:bad_frames:NoFrame-v0 render() returned None, not an RGB frame"),
    ("gym:bad_frames:UnitFloat-v0", "gym:bad_frames:UnitFloat-v0 render() returned a float32 array of shape "
                                    "(32, 32, 3) with values in [0, 0.5], not an RGB frame: render_mode='rgb_array' "
                                    "returns a uint8 array of shape (height, width, 3), values 0-255"),
    ("gym:bad_frames:Gray-v0", "render() returned a uint8 array of shape (32, 32) with values in [7, 7], not an RGB"),
])
def test_a_frame_that_is_not_uint8_rgb_is_one_line_not_a_black_episode(module_dir, tmp_path, capsys, task, words):
    """A render() returning None was a traceback; float frames in [0, 1] were stored black without a word."""
    write_module(module_dir, "bad_frames", """
        import gymnasium
        import numpy as np
        from gymnasium import spaces

        class Env(gymnasium.Env):
            metadata = {"render_modes": ["rgb_array"]}

            def __init__(self, render_mode=None):
                self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
                self.action_space = spaces.Box(-1, 1, (1,), np.float32)
                self.render_mode = render_mode

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                return np.zeros(2, np.float32), {}

            def step(self, action):
                return np.zeros(2, np.float32), 1.0, False, False, {}

        class NoFrame(Env):
            def render(self):
                return None

        class UnitFloat(Env):
            def render(self):
                return np.full((32, 32, 3), 0.5, np.float32) * (np.arange(32) > 0)[:, None, None]

        class Gray(Env):
            def render(self):
                return np.full((32, 32), 7, np.uint8)

        for name in ("NoFrame", "UnitFloat", "Gray"):
            gymnasium.register(f"{name}-v0", entry_point=f"bad_frames:{name}")
    """)
    outdir = tmp_path / "episodes"
    status = main(["collect", "--task", task, "--obs", "image", "--episodes", "1", "--time-limit", "4",
                   "--outdir", str(outdir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and words in err[0], err
    assert not outdir.exists()


def test_a_train_that_fails_at_its_environment_leaves_no_folder(module_dir, tmp_path, capsys):
    """A missing package shows only when the environment is built, after the logdir is made: it used to leave a
    folder holding run.lock alone, which `evaluate` then called 'not a training run'."""
    write_module(module_dir, "needs_a_package", """
        import gymnasium
        gymnasium.register("NeedsBox-v0", entry_point="needs_box_impl:Lander")
    """)
    write_module(module_dir, "needs_box_impl", """
        import gymnasium
        raise gymnasium.error.DependencyNotInstalled("Box2D is not installed")
    """)
    logdir = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(logdir), "--set",
                 "env.task=gym:needs_a_package:NeedsBox-v0", "--set", "env.obs=state", "--quiet"]) == 2
    assert "needs a package that is not installed" in capsys.readouterr().err
    assert not logdir.exists()


BROKEN_ENV = """
import gymnasium
import numpy as np
from gymnasium import spaces


class BrokenReset(gymnasium.Env):
    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("the simulator is down")

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


class BrokenStep(BrokenReset):
    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        raise RuntimeError("the simulator is down")


gymnasium.register("BrokenReset-v0", entry_point=BrokenReset)
gymnasium.register("BrokenStep-v0", entry_point=BrokenStep)
"""


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("env_id, num_envs", [("BrokenReset-v0", 2), ("BrokenStep-v0", 1)])
def test_an_environment_that_always_raises_ends_the_run_with_one_line(module_dir, tmp_path, env_id, num_envs):
    """A real command in a real process (a timeout, not a hang, if restarts were endless): 3 restarts, then one line;
    in child processes (num_envs=2) as in this one (num_envs=1, where a raising step was a traceback)."""
    write_module(module_dir, "broken_envs", BROKEN_ENV)
    command = [sys.executable, "-m", "planet_sac", "collect", "--task", f"gym:broken_envs:{env_id}", "--obs",
               "state", "--episodes", "2", "--outdir", str(tmp_path / "episodes"), "--set", f"env.num_envs={num_envs}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(module_dir)])))
    lines = result.stderr.strip().splitlines()
    restarts = [line for line in lines if line.startswith("warning: environment 0 raised RuntimeError: the simulator "
                                                          "is down; restarted it")]
    errors = [line for line in lines if line.startswith("planet-sac collect: error:")]
    assert result.returncode == 2 and len(restarts) == 3, result.stderr[-3000:]  # max_restarts = 3
    assert errors == ["planet-sac collect: error: environment 0 failed 4 times within 300 s, last: raised "
                      "RuntimeError: the simulator is down; not restarting it again (fix the environment, or see "
                      "--verbose)"], result.stderr[-3000:]
    assert "Traceback" not in result.stderr


FLAKY_ENV = """
import gymnasium
import numpy as np
from gymnasium import spaces

MADE = []  # the first reset seed of each environment made, in order


class Flaky(gymnasium.Env):
    observation_space = spaces.Box(-1, 1, (1,), np.float32)
    action_space = spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self):
        self.number, self.t = len(MADE), 0
        MADE.append(None)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        MADE[self.number] = MADE[self.number] or seed
        self.t = 0
        return np.zeros(1, np.float32), {{}}

    def step(self, action):  # environment number {failing} raises at its 3rd step
        self.t += 1
        if self.number == {failing} and self.t == 3:
            raise RuntimeError("lost the simulator")
        return np.full(1, self.t / 10, np.float32), 1.0, False, self.t >= {steps}, {{}}


gymnasium.register("Flaky-v0", entry_point=Flaky)
"""


def test_a_single_environment_that_raises_once_is_restarted_and_its_episode_redone(module_dir, tmp_path, capsys):
    """num_envs=1, in this process: the first environment raises at its 3rd step; the actor drops the partial episode,
    and a fresh environment, seeded `environment_seed(seed, 0, 1)` as `ParallelEnvs` seeds a restarted one, plays it
    again. This used to end the command with a traceback."""
    write_module(module_dir, "flaky_envs", FLAKY_ENV.format(failing=0, steps=5))
    from planet_sac.episodes.folder import list_episodes

    outdir = tmp_path / "episodes"
    assert main(["collect", "--task", "gym:flaky_envs:Flaky-v0", "--obs", "state", "--episodes", "1",
                 "--outdir", str(outdir), "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert "environment 0 raised RuntimeError: lost the simulator; restarted it" in err
    [path] = list_episodes(str(outdir))
    with np.load(path) as episode:
        assert len(episode["reward"]) == 6 and episode["reward"].sum() == 5.0  # the whole episode, played again
    made = sys.modules["flaky_envs"].MADE
    assert made == [3, environment_seed(3, 0, 1)]  # the restart's own seed, as ParallelEnvs gives it


def test_a_run_whose_test_environment_raises_once_goes_on(module_dir, tmp_path, capsys):
    """The run's one test environment (`env.test_envs=1`) is replaced as the training environments are: it raised
    at its 3rd step (here while collecting the test folder's seed episode), and the run used to end there with a
    traceback."""
    write_module(module_dir, "flaky_test_env", FLAKY_ENV.format(failing=1, steps=20))  # the test environment fails
    logdir = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(logdir), "--quiet",
                 "--set", "env.task=gym:flaky_test_env:Flaky-v0", "--set", "env.obs=state",
                 "--set", "schedule.train_steps=10", "--set", "sac.updates_per_step=0"]) == 0  # the model alone
    assert "environment 0 raised RuntimeError: lost the simulator; restarted it" in capsys.readouterr().err
    assert len(sys.modules["flaky_test_env"].MADE) == 3  # training, test, and the test environment's replacement


def test_an_evaluation_whose_environment_raises_once_plays_the_episode_again(module_dir, tmp_path, capsys):
    """`planet-sac evaluate` (and so the suite's final evaluation) acts in an environment replaced when it fails: a
    Pendulum run evaluated on a look-alike that raises at its 3rd step ends with all its episodes."""
    write_module(module_dir, "flaky_pendulum", """
        import gymnasium
        from gymnasium.envs.classic_control.pendulum import PendulumEnv

        MADE = []

        class FlakyPendulum(PendulumEnv):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.number, self.t = len(MADE), 0
                MADE.append(self)

            def step(self, action):
                self.t += 1
                if self.number == 0 and self.t == 3:
                    raise RuntimeError("lost the simulator")
                return super().step(action)

        gymnasium.register("FlakyPendulum-v0", entry_point=FlakyPendulum, max_episode_steps=200)
    """)
    run = tmp_path / "run"
    old_run_copy(run)
    out = tmp_path / "returns.json"
    assert main(["evaluate", "--logdir", str(run), "--episodes", "2", "--policy", "random", "--json", str(out),
                 "--set", "env.task=gym:flaky_pendulum:FlakyPendulum-v0"]) == 0
    assert "environment 0 raised RuntimeError: lost the simulator; restarted it" in capsys.readouterr().err
    assert len(json.loads(out.read_text())["policies"]["random"]["returns"]) == 2
    assert len(sys.modules["flaky_pendulum"].MADE) == 2


@pytest.mark.slow
@needs_dmc
def test_dm_control_deprecation_warning_is_silenced_and_other_absl_warnings_are_not():
    """In a fresh interpreter (dm_control next to TensorFlow crashes): cheetah's XML triggers the warning."""
    code = ("from planet_sac.envs import make_env; from absl import logging\n"
            "env = make_env('dmc:cheetah-run', 'state', _spawn=False); env.reset(); env.close()\n"
            "logging.warning('another absl warning')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env=dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl")))
    assert result.returncode == 0, result.stderr
    assert "settotalmass" not in result.stderr and "another absl warning" in result.stderr, result.stderr


def test_tasks_simulated_by_mujoco_are_told_apart_from_the_registry():
    """dm_control and gymnasium's MuJoCo tasks run in a child process of their own; a classic-control task does not."""
    from planet_sac.envs.tasks import uses_mujoco

    assert uses_mujoco("dmc:cartpole-swingup") and uses_mujoco("gym:InvertedPendulum-v5")
    assert not uses_mujoco("gym:Pendulum-v1")


def test_a_packaged_environment_module_is_found_from_its_package_root(tmp_path, monkeypatch):
    """`gym:pkg.sub.mod:Id`: an environment process needs the folder above the top package on its path, also when
    the module is a package's `__init__`; an id registered by a submodule counts as the package's in the one-line
    error for an id it does not register, even when the package was imported before."""
    from planet_sac.envs.tasks import import_gym_module, module_paths, one_line

    package = tmp_path / "planetsac_testpkg"
    (package / "envs").mkdir(parents=True)
    (package / "__init__.py").write_text("from planetsac_testpkg.envs import reach  # noqa: F401\n")
    (package / "envs" / "__init__.py").write_text("")
    (package / "envs" / "reach.py").write_text(textwrap.dedent("""
        import gymnasium
        if "PlanetSacTest/PkgReach-v0" not in gymnasium.registry:
            gymnasium.register(id="PlanetSacTest/PkgReach-v0", entry_point="planetsac_testpkg.envs.reach:Reach")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("planetsac_testpkg", "planetsac_testpkg.envs", "planetsac_testpkg.envs.reach"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.import_module("planetsac_testpkg")  # imported before planet_sac asks for it
    assert module_paths("gym:planetsac_testpkg.envs.reach:PlanetSacTest/PkgReach-v0") == [str(tmp_path)]
    assert module_paths("gym:planetsac_testpkg:PlanetSacTest/PkgReach-v0") == [str(tmp_path)]
    with pytest.raises(ConfigError, match=r"did not register 'Missing-v0' \(it registers PlanetSacTest/PkgReach-v0\)"):
        import_gym_module("planetsac_testpkg:Missing-v0")
    assert one_line(ValueError("first line\n   second\tline ")) == "ValueError: first line second line"
