"""scripts/check_large_files.py: a tracked file over 2 MB fails `make test`, except in data/ and tests/fixtures/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_large_files.py"
MB = 1_000_000


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo(tmp_path: Path, files: dict[str, int], stage: bool = True) -> Path:
    """A new git repository holding `files` ({path: size in bytes}), added to the index."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for name, size in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    if stage:
        _git(repo, "add", "-A")
    return repo


def _check(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--repo", str(repo)], capture_output=True, text=True)


def test_a_new_3_mb_file_fails(tmp_path):
    result = _check(_repo(tmp_path, {"README.md": 10, "bench/results/new_run/ckpt.data": 3 * MB}))
    assert result.returncode == 1
    assert "bench/results/new_run/ckpt.data is 3.0 MB" in result.stderr
    assert "README.md" not in result.stderr


@pytest.mark.parametrize("path", ["data/pendulum_state/episode.npz", "tests/fixtures/run_0_1/checkpoints/ckpt-1.data"])
def test_allowed_folders_pass(tmp_path, path):
    result = _check(_repo(tmp_path, {path: 3 * MB, "small.txt": 2 * MB}))  # exactly 2 MB is allowed
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", ["bench/results/cheetah_pixels_sac/run/checkpoints/ckpt-4750.data",  # a run directory
                                  "bench/results/cheetah_pixels/metrics_big.jsonl",
                                  "mydata/episode.npz", "data_old/episode.npz", "tests/big_fixture.npz"])
def test_near_misses_of_the_allowed_paths_fail(tmp_path, path):
    result = _check(_repo(tmp_path, {path: 2 * MB + 1}))
    assert result.returncode == 1
    assert path in result.stderr


def test_untracked_files_do_not_count_but_growth_after_staging_does(tmp_path):
    repo = _repo(tmp_path, {"notes.txt": 100})
    (repo / "untracked.bin").write_bytes(b"x" * 3 * MB)
    assert _check(repo).returncode == 0
    (repo / "notes.txt").write_bytes(b"x" * 3 * MB)  # tracked, grown in the working tree after `git add`
    assert _check(repo).returncode == 1


def test_the_project_itself_passes():
    result = _check(ROOT)
    assert result.returncode == 0, result.stderr


def test_make_test_runs_the_check():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "scripts/check_large_files.py" in recipe
