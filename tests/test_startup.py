"""A quiet start: no TensorFlow/absl C++ start-up lines on the planet-sac commands unless --verbose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from planet_sac.cli import main
from planet_sac.startup import is_startup_noise
from tests.conftest import CONFIGS

NOISE = ("cuInit", "cudart_stub", "oneDNN", "absl::InitializeLog", "cpu_feature_guard", "E0000", "W0000", "I0000")
COMMAND = str(Path(sys.executable).with_name("planet-sac"))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Runs planet-sac as a user's shell would: none of the test suite's TensorFlow variables set."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLED_DEVICE_TYPES", "TF_ENABLE_ONEDNN_OPTS")}
    return subprocess.run([COMMAND, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(word in line for word in NOISE)]


@pytest.mark.slow
@pytest.mark.e2e
def test_help_collect_and_train_start_quietly(tmp_path):
    help_run = run("--help", cwd=tmp_path)
    assert help_run.returncode == 0 and "plot" in help_run.stdout
    assert noise(help_run.stderr) == []

    collect = run("collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--time-limit", "10",
                  "--outdir", str(tmp_path / "episodes"), cwd=tmp_path)
    assert collect.returncode == 0, collect.stderr
    assert noise(collect.stderr) == [], collect.stderr

    train = run("train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(tmp_path / "run"), "--train-steps", "2",
                cwd=tmp_path)
    assert train.returncode == 0, train.stderr
    assert noise(train.stderr) == [], train.stderr
    assert "started from scratch" in train.stderr and train.stdout.startswith("done: step 2")


@pytest.mark.slow
@pytest.mark.e2e
def test_verbose_shows_tensorflow_start_up_lines(tmp_path):
    verbose = run("collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--time-limit", "10",
                  "--outdir", str(tmp_path / "episodes"), "--verbose", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert any("absl::InitializeLog" in line for line in noise(verbose.stderr)), verbose.stderr


@pytest.mark.slow
@pytest.mark.e2e
def test_training_without_return_normalization_never_imports_tensorflow_probability(tmp_path):
    """TensorFlow Probability (and the tf-keras it loads) cost a process about a second of CPU: only
    `sac.return_normalization`'s percentiles use it, so a run without it never imports it."""
    code = ("import sys\nfrom planet_sac.cli import main\n"
            f"assert main(['train', '--config', {str(CONFIGS / 'smoke.yaml')!r}, '--logdir', {str(tmp_path / 'run')!r}, "
            "'--train-steps', '2', '--quiet']) == 0\n"
            "print(sorted(name for name in ('tensorflow_probability', 'tf_keras') if name in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_only_known_start_up_lines_count_as_noise():
    assert is_startup_noise("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")
    assert is_startup_noise("I0000 00:00:1795335029.725661    5363 cudart_stub.cc:31] Could not find cuda drivers")
    assert is_startup_noise("W0000 00:00:1795335029.725661    5363 port.cc:153] something")
    assert not is_startup_noise("E0000 00:00:1795335036.952072    5363 cuda_platform.cc:52] failed call to cuInit")
    assert not is_startup_noise("Traceback (most recent call last):")
    assert not is_startup_noise("ImportError: libcudnn.so.9: cannot open shared object file")


@pytest.mark.slow
def test_quiet_prints_only_the_result(tmp_path, capsys):
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(tmp_path / "run"), "--train-steps", "2",
                 "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.startswith("done: step 2")
    # the default shows progress messages (said at the start: a run of 0 updates says it too, and traces no update)
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", str(tmp_path / "run2"), "--train-steps", "0"]) == 0
    assert "started from scratch" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--verbose", "--quiet"]])
def test_verbose_and_quiet_exclude_each_other(flags, tmp_path):
    with pytest.raises(SystemExit):
        main(["variables", str(tmp_path), *flags])
