"""examples/train_world_model.py runs as a user would run it, with tiny settings."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import CONFIGS, ROOT


@pytest.mark.slow
@pytest.mark.e2e
def test_example_trains_offline_restores_under_a_new_head_and_evaluates(tmp_path):
    logdir = tmp_path / "example"
    tiny = ["schedule.train_steps=2", "env.time_limit=10", "data.seed_episodes=1", "schedule.test_episodes=0"]
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "train_world_model.py"), str(logdir),
                             str(CONFIGS / "smoke.yaml"), *tiny], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"offline world model: loss -?\d+\.\d\d after 2 updates", lines[0]), result.stdout
    for line, policy in zip(lines[1:], ("random", "cem", "sac")):
        assert re.fullmatch(rf"{policy}\s+return\s+-?\d+\.\d ± \d+\.\d over 3 episodes", line), result.stdout
    assert not (logdir / "offline" / "train_episodes").exists()  # trained from data/ only
    assert (logdir / "new_head" / "train_episodes").is_dir() and (logdir / "new_head" / "checkpoints").is_dir()
    assert "I0000" not in result.stderr and "absl::InitializeLog" not in result.stderr  # quiet from Python too
