"""Errors a newcomer meets: each is one line saying what to do (exit status 2) and writes nothing;
programming errors keep their traceback."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import tensorflow as tf

from planet_sac.cli import main
from planet_sac.envs import DMCEnv, make_env
from planet_sac.errors import MissingPackageError, SetupError
from planet_sac.training.learner import Learner
from tests.conftest import CONFIGS

SMOKE = str(CONFIGS / "smoke.yaml")
TYPO = "model.deter_sise=3"
needs_dmc = pytest.mark.skipif(importlib.util.find_spec("dm_control") is None, reason="needs planet-sac[dmc]")


@pytest.fixture
def run(smoke_run):
    """The session's smoke run (conftest.smoke_run), which these tests only read."""
    return smoke_run[0]


def snapshot(path: str) -> dict[str, bytes]:
    """Every file under `path` with its contents (empty if `path` does not exist)."""
    files = {}
    for folder, _, names in os.walk(path):
        for name in names:
            with open(os.path.join(folder, name), "rb") as file:
                files[os.path.join(folder, name)] = file.read()
    return files


def one_line_error(capsys, command: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"planet-sac {command}: error: "), captured.err
    return lines[0]


@pytest.mark.parametrize("command", ["train-new", "train-resume", "collect-random", "collect-checkpoint", "evaluate"])
def test_every_set_is_checked_before_anything_is_written(command, run, tmp_path, capsys):
    target = str(tmp_path / "out")
    argv = {
        "train-new": ["train", "--config", SMOKE, "--logdir", target],
        "train-resume": ["train", "--logdir", run],
        "collect-random": ["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--outdir", target],
        "collect-checkpoint": ["collect", "--policy", "sac", "--checkpoint", run, "--episodes", "1", "--outdir", target],
        "evaluate": ["evaluate", "--logdir", run, "--episodes", "1", "--video", str(tmp_path / "video.gif")],
    }[command]
    before = snapshot(run)
    assert main([*argv, "--set", TYPO, "--quiet"]) == 2
    line = one_line_error(capsys, argv[0])
    assert "model.deter_sise" in line and "did you mean 'deter_size'" in line
    assert os.listdir(tmp_path) == [] and snapshot(run) == before


def test_set_with_a_wrong_value_is_one_line_too(tmp_path, capsys):
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--outdir",
                 str(tmp_path / "out"), "--set", "env.image_size=-1"]) == 2
    assert "env.image_size=-1: must be > 0" in one_line_error(capsys, "collect")
    assert not (tmp_path / "out").exists()


def test_missing_dm_control_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dm_control", None)  # as if not installed; never imported next to TensorFlow
    with pytest.raises(MissingPackageError, match=r"pip install -e '\.\[dmc\]'") as info:
        DMCEnv("cartpole-swingup", "state", 1, 64, 0)
    assert isinstance(info.value, ImportError) and "\n" not in str(info.value)


@needs_dmc
def test_no_opengl_for_mujoco_says_what_to_set_and_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MUJOCO_GL", "glx")  # a back-end dm_control cannot load, as on a machine without libEGL
    with pytest.raises(SetupError) as info:
        make_env("dmc:cartpole-swingup", "state")
    for hint in ("MUJOCO_GL=glx", "MUJOCO_GL=egl", "libegl1", "MUJOCO_GL=osmesa", "libosmesa6"):
        assert hint in str(info.value)
    assert main(["collect", "--task", "dmc:cartpole-swingup", "--episodes", "1", "--outdir", str(tmp_path / "x")]) == 2
    assert "apt-get install libegl1" in one_line_error(capsys, "collect")


def test_missing_pygame_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pygame", None)  # gymnasium's classic-control tasks render with pygame
    env = make_env("gym:Pendulum-v1", "image")
    with pytest.raises(MissingPackageError, match="pygame.*pip install"):
        env.reset()
    env.close()
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "image", "--episodes", "1",
                 "--outdir", str(tmp_path / "x")]) == 2
    assert "pip install" in one_line_error(capsys, "collect")


def test_out_of_memory_says_which_setting_to_lower(monkeypatch, tmp_path, capsys):
    def out_of_memory(self, batch):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[50,50,64,64,3]")

    monkeypatch.setattr(Learner, "_update", out_of_memory)
    assert main(["train", "--config", SMOKE, "--logdir", str(tmp_path / "run"), "--quiet"]) == 2
    line = one_line_error(capsys, "train")
    assert "out of memory" in line and "--set data.batch_size=" in line and "--set optim.accumulate=" in line


@pytest.mark.parametrize("error", [ValueError("a bug"), OSError("a bug"), tf.errors.InvalidArgumentError(None, None, "a bug")])
def test_programming_errors_keep_their_traceback(error, monkeypatch, tmp_path):
    def broken(self, batch):
        raise error

    monkeypatch.setattr(Learner, "_update", broken)
    with pytest.raises(type(error), match="a bug"):
        main(["train", "--config", SMOKE, "--logdir", str(tmp_path / "run"), "--quiet"])


def test_train_steps_zero_restores_and_stops_without_updates(run, tmp_path, capsys):
    new = tmp_path / "new_head"
    assert main(["train", "--config", SMOKE, "--logdir", str(new), "--restore-from", run, "--include", "world_model/",
                 "--train-steps", "0", "--set", "schedule.test_episodes=0", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("done: step 0")
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(new / "checkpoints")))
    assert reader.get_tensor("variables/counters/step/.ATTRIBUTES/VARIABLE_VALUE") == 0
    old = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{run}/checkpoints"))
    key = "variables/world_model/rssm/gru/gates_kernel/.ATTRIBUTES/VARIABLE_VALUE"
    assert (reader.get_tensor(key) == old.get_tensor(key)).all()  # restored, not trained on
