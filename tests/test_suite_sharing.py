"""Several `planet-sac suite` processes on one `--out`: a run claimed by one is skipped by the others, the claim
lasts the whole run, and score records written at the same moment are all kept. And one process for many runs:
no distribution strategy (TensorFlow allows one per process).

The other process is played by this test holding the same `flock` locks on the paths docs/suite.md names.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import threading
from pathlib import Path

import pytest

from planet_sac import suite

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
TASK = "gym:Pendulum-v1"
REPEAT = [f"{TASK}=2"]


def hold(path: Path):
    """Opens and locks `path` as another process would; closing the file releases it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    file = open(path, "a")
    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    return file


def is_locked(path: Path) -> bool:
    with open(path, "a") as file:
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(file.fileno(), fcntl.LOCK_UN)
        return False


def fake_run_one(calls: list, out: Path):
    """Stands in for training: records which run it was given and whether its claim was held meanwhile."""
    def run_one(spec, *args, **kwargs):
        calls.append((spec.seed, is_locked(out / "runs" / "gym_Pendulum-v1" / f"seed{spec.seed}.claim")))
        return {"headline": {"mean": 1.0, "std": 0.0, "episodes": 1}}
    return run_one


def test_a_run_claimed_by_another_process_is_skipped_and_the_others_run_under_their_claim(tmp_path, monkeypatch):
    out = tmp_path / "out"
    calls: list = []
    monkeypatch.setattr(suite, "run_one", fake_run_one(calls, out))
    other = hold(out / "runs" / "gym_Pendulum-v1" / "seed1.claim")
    try:
        summaries = suite.run_suite(SMOKE, [TASK], [0, 1, 2], 400, str(out), explicit_repeats=REPEAT, progress=False)
    finally:
        other.close()
    assert [(s["seed"], s["status"]) for s in summaries] == [(0, "started"), (1, "elsewhere"), (2, "started")]
    assert calls == [(0, True), (2, True)]  # seed 1 never trained here; the others held their claim while running
    assert not is_locked(out / "runs" / "gym_Pendulum-v1" / "seed0.claim")  # released once the run is published
    assert not (out / "runs" / "gym_Pendulum-v1" / "seed1").exists()


def test_a_run_the_other_process_finished_while_holding_the_claim_is_not_run_again(tmp_path, monkeypatch):
    out = tmp_path / "out"
    calls: list = []
    monkeypatch.setattr(suite, "run_one", fake_run_one(calls, out))
    checks = {"n": 0}
    original = suite.is_finished

    def finished_after_the_first_look(spec, env_steps):
        if spec.seed == 0 and spec.task == TASK:
            checks["n"] += 1
            return checks["n"] > 2  # the config check and the loop's first look see it unfinished, the claim's look finished
        return original(spec, env_steps)

    monkeypatch.setattr(suite, "is_finished", finished_after_the_first_look)
    summaries = suite.run_suite(SMOKE, [TASK], [0], 400, str(out), explicit_repeats=REPEAT, progress=False)
    assert [s["status"] for s in summaries] == ["skipped"] and calls == []


def test_score_records_wait_for_the_score_lock_and_keep_each_others_records(tmp_path):
    scores, lock = tmp_path / "scores" / "x-planet_sac.json.gz", tmp_path / "runs" / "scores.lock"
    first = {"task": "t", "method": "planet_sac", "seed": 0, "xs": [1], "ys": [2.0]}
    second = {**first, "seed": 1}
    suite.add_score(str(scores), first, lock_path=str(lock))
    other = hold(lock)  # another process is rewriting the file
    writer = threading.Thread(target=suite.add_score, args=(str(scores), second), kwargs={"lock_path": str(lock)})
    writer.start()
    writer.join(timeout=0.5)
    try:
        assert writer.is_alive()  # it waits instead of reading a file the other process is about to replace
        with gzip.open(scores, "rt") as file:
            assert json.load(file) == [first]
    finally:
        other.close()
    writer.join(timeout=30)
    assert not writer.is_alive()
    with gzip.open(scores, "rt") as file:
        assert json.load(file) == [first, second]


def test_an_out_without_working_locks_is_one_clear_error(tmp_path, monkeypatch):
    import errno

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(suite.fcntl, "flock", no_locks)
    with pytest.raises(suite.ConfigError, match="may not support locks"):
        suite.claim_run(suite.RunSpec(TASK, 0, 2, str(tmp_path)))


@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker"])
def test_a_distribution_strategy_is_refused_before_anything_is_written(tmp_path, strategy):
    """One process trains every run of a suite, and TensorFlow allows one MirroredStrategy per process."""
    out = tmp_path / "out"
    with pytest.raises(suite.ConfigError, match=f"optim.strategy={strategy}: the suite trains its runs one after another"):
        suite.run_suite(SMOKE, [TASK], [0, 1], 400, str(out), overrides=[f"optim.strategy={strategy}"],
                        explicit_repeats=REPEAT, progress=False)
    assert not out.exists()
