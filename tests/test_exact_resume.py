"""A run stopped or killed at any moment and resumed ends as the never-stopped run: every checkpoint tensor and every
metrics.jsonl record (wall-clock aside) are equal. `run_state/` is compared by content: the replays' generators,
counts and episodes by their data, since episode file names carry a uuid and a time stamp."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from planet_sac.checkpoints import list_variables, resolve
from planet_sac.config_loading import load_config
from planet_sac.training.run_lock import LOCK_FILE
from tests.conftest import records_without_wall_clock

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.yaml"
# Every random stream in use (replay sampling, CEM and SAC acting with exploration noise, imagined transitions, the
# head's catch-up rounds before each collection and test phase, its resets (at 7, 14, 21, ...: none at a checkpoint,
# 28 after the stop at 27) and their rounds, test phases with a compared policy, seed episodes of both folders), with
# checkpoints (every 10) apart from logs (every 5).
SETTINGS = ["policy.train=sac_guided_cem", "policy.compare=[sac]", "sac.imagination_horizon=2", "sac.real_ratio=0.5",
            "sac.catchup_rounds=1", "sac.reset_every=7", "sac.reset_rounds=1",
            "schedule.collect_every=5", "schedule.train_phase_steps=10", "env.time_limit=10", "data.seed_episodes=3",
            "data.test_seed_episodes=2", "schedule.checkpoint_every=10", "schedule.log_every=5"]


def checkpoint(logdir: Path) -> dict[str, np.ndarray]:
    import tensorflow as tf

    prefix = resolve(str(logdir))
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE") for name, _ in list_variables(prefix)}


def episodes(folder: Path) -> list[tuple[int, float]]:
    """(length, return) of every episode in a folder, sorted: the data, not the names (a uuid orders the episodes of
    one second)."""
    out = []
    for path in folder.glob("*.npz"):
        with np.load(path) as data:
            out.append((len(data["action"]), float(data["reward"].sum())))
    return sorted(out)


def assert_same_run(expected: Path, resumed: Path) -> None:
    """Every record and every tensor equal; the replays' states equal but for the episode files' names."""
    assert records_without_wall_clock(resumed) == records_without_wall_clock(expected)
    a, b = checkpoint(expected), checkpoint(resumed)
    assert a.keys() == b.keys()
    different = [name for name in a if not name.startswith("run_state/") and not np.array_equal(a[name], b[name])]
    assert not different, f"{len(different)} of {len(a)} tensors differ, e.g. {different[:3]}"
    for name in ("run_state/replay", "run_state/held_out_replay"):
        state_a, state_b = (json.loads(tensors[name].decode()) for tensors in (a, b))
        for key in ("rng", "stats", "scan_due"):
            assert state_a[key] == state_b[key], f"{name} {key}"
        assert [len(state_a[key]) for key in ("recent", "cache", "pending")] == \
            [len(state_b[key]) for key in ("recent", "cache", "pending")], name
    assert episodes(resumed / "train_episodes") == episodes(expected / "train_episodes")
    assert episodes(resumed / "test_episodes") == episodes(expected / "test_episodes")


def train_in_process(logdir: Path, steps: int, settings=()) -> None:
    from planet_sac.training.trainer import Trainer

    trainer = Trainer(load_config(SMOKE, [*SETTINGS, *settings]), str(logdir), progress=False)
    try:
        trainer.run(steps)
    finally:
        trainer.close()


def command(logdir: Path, steps: int, settings=()) -> list[str]:
    sets = [arg for setting in [*SETTINGS, *settings] for arg in ("--set", setting)]
    return [sys.executable, "-m", "planet_sac", "train", "--config", str(SMOKE), "--logdir", str(logdir), "--quiet",
            "--train-steps", str(steps), *sets]


def never_stopped_run(tmp_path_factory, steps: int) -> Path:
    """The run every stopped one of `steps` updates is compared with: trained once per test session, read by all
    (never written)."""
    from tests.conftest import made_once_per_session

    return made_once_per_session(tmp_path_factory, f"never_stopped_{steps}",
                                 lambda folder: train_in_process(folder / "run", steps)) / "run"


@pytest.fixture(scope="session")
def never_stopped(tmp_path_factory) -> Path:
    """The never-stopped run of 50 updates (checkpoints at 10, 20, 30, 40: one per stop of the `e2e` kills)."""
    return never_stopped_run(tmp_path_factory, 50)


@pytest.fixture(scope="session")
def never_stopped_30(tmp_path_factory) -> Path:
    """The never-stopped run of 30 updates: what the in-process stops and resumes end as."""
    return never_stopped_run(tmp_path_factory, 30)


@pytest.mark.slow
def test_stopped_at_a_step_and_resumed_equals_the_never_stopped_run(never_stopped_30, tmp_path, monkeypatch, caplog):
    """Three Trainers, as new processes would be, end as the never-stopped run of 30 updates:

    1. --train-steps 30, whose first training collection (after update 5 and the head's catch-up round; the last
       scheduled checkpoint is at 0) fails once its episode is saved, as a full disk would: the run is checkpointed
       at update 5, owing that collection with the update's and the catch-up's metrics, naming the training episodes
       from before it (the one it saved is set aside on resume), and with the policy's generator put back (nothing
       but acting draws from it before step 5);
    2. --train-steps 27: redoes the owed collection without repeating the catch-up, then stops between checkpoints
       (20 and 30) at a step the schedule does not log (its final record there is dropped when the run goes on);
       each update takes 10 minutes of a fake wall clock, so `schedule.checkpoint_minutes` (15) checkpoints 20
       minutes after the last checkpoint of any kind: at 7, 9, 12, 14, ... besides the schedule's and the test
       phases' (at 10 and 20);
    3. --train-steps 30, through a collection, a checkpoint and a test phase: every tensor and record equal to the
       never-stopped run's, nothing owed any more."""
    run = tmp_path / "run"
    caplog.set_level("INFO", logger="planet_sac")
    with monkeypatch.context() as patch:
        FullDiskAfterSeedEpisodes(patch)
        with pytest.raises(OSError, match="No space left on device"):
            train_in_process(run, 30)
    assert "step 5: the collection failed; checkpointed" in caplog.text
    assert_the_failed_collection_is_checkpointed_owed(run)
    with monkeypatch.context() as patch:
        saved_at = MinutesPerUpdate(patch, 10).saved_at
        train_in_process(run, 27)
    # by the clock at 7, 9, 12, ...; by the schedule, then the test phase, at 10 and 20; at the end, at 27
    assert saved_at == [7, 9, 10, 10, 12, 14, 16, 18, 20, 20, 22, 24, 26, 27]
    assert "redoing the collection that failed" in caplog.text
    assert _checkpoint_step(run) == 27
    train_in_process(run, 30)
    assert_same_run(never_stopped_30, run)
    assert checkpoint(run)["run_state/owed_collection"] == b""  # owed no more
    # SAC-guided CEM plans with the head's actor and critic: the head catches up before each of its collections (at
    # 5, 10, ..., 30), as before each test phase (at 10, 20, 30)
    records = records_without_wall_clock(run)
    collected = [record["step"] for record in records if "train/return/sac_guided_cem" in record]
    assert collected == [5, 10, 15, 20, 25, 30]
    assert all("catchup/sac/q" in record for record in records if "train/return" in record or record["phase"] == "test")


class MinutesPerUpdate:
    """Patches the Trainer so that each update advances the checkpoint clock's wall clock by `minutes`, and records
    the step of every checkpoint it saves (`saved_at`)."""

    def __init__(self, monkeypatch, minutes: float):
        from planet_sac.training import schedule
        from planet_sac.training.trainer import Trainer

        now = [0.0]
        self.saved_at: list[int] = []
        update, save = Trainer._update, Trainer.save_checkpoint

        def slow_update(trainer, *args, **kwargs):
            now[0] += 60.0 * minutes
            return update(trainer, *args, **kwargs)

        def recorded_save(trainer):
            self.saved_at.append(int(trainer.counters.step.numpy()))
            return save(trainer)

        monkeypatch.setattr(schedule, "monotonic", lambda: now[0])
        monkeypatch.setattr(Trainer, "_update", slow_update)
        monkeypatch.setattr(Trainer, "save_checkpoint", recorded_save)


class FullDiskAfterSeedEpisodes:
    """Patches the run's Actor so that its first training collection (after update 5) fails once its episode is
    saved, as a full disk would."""

    def __init__(self, monkeypatch):
        import planet_sac.training.collection as collection
        from planet_sac.acting.actor import Actor, RandomPolicy

        class FullDisk(Actor):
            def run(self, *args, **kwargs):
                episodes = super().run(*args, **kwargs)
                if not isinstance(self.policy, RandomPolicy):
                    raise OSError(28, "No space left on device")
                return episodes

        monkeypatch.setattr(collection, "Actor", FullDisk)


def assert_the_failed_collection_is_checkpointed_owed(run: Path) -> None:
    """The checkpoint a failed collection leaves: at its update (5, where the last scheduled one is at 0), owing that
    collection with the update's and the catch-up's metrics, and naming the training episodes from before it (the
    one it saved is set aside on resume)."""
    assert _checkpoint_step(run) == 5
    tensors = checkpoint(run)
    owed = json.loads(tensors["run_state/owed_collection"].decode())
    assert owed["step"] == 5 and np.isfinite(owed["update_metrics"]["loss/total"])
    assert np.isfinite(owed["catch_up"]["catchup/sac/q"])  # the head caught up before it: the resume does not again
    named = json.loads(tensors["run_state/train_episodes"].decode())
    on_disk = sorted(path.name for path in (run / "train_episodes").glob("*.npz"))
    assert len(on_disk) == len(named) + 1 and set(named) < set(on_disk)  # 3 seed episodes named, the failed one not
    import tensorflow as tf

    first = tf.train.load_checkpoint(str(run / "checkpoints" / "ckpt-0"))
    # nothing but acting draws from the policy's generator before step 5: put back, it is as at step 0
    np.testing.assert_array_equal(tensors["policy/rng_state"],
                                  first.get_tensor("variables/policy/rng_state/.ATTRIBUTES/VARIABLE_VALUE"))


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear (exit {process.poll()}): {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)


def _checkpoint_step(logdir: Path) -> int:
    try:
        text = (logdir / "checkpoints" / "checkpoint").read_text()
    except FileNotFoundError:
        return -1
    return int(text.split('"')[1].rsplit("-", 1)[1])


@pytest.mark.slow
@pytest.mark.e2e
def test_stopped_by_sigterm_and_killed_thrice_and_resumed_equals_the_never_stopped_run(never_stopped, tmp_path, capsys):
    """SIGTERM once (the run finishes its step, checkpoints, exits 143 and releases its lock), then SIGKILL three times
    (the work since the last checkpoint is lost and redone, its episodes set aside). Stop k comes a random 0-1.5 s
    after the checkpoint at step 10k, so it lands in updates, collections, test phases or a checkpoint's writing; the
    second SIGKILL waits for a training episode written after its checkpoint, and comes a random 0-0.3 s after it.

    Every process is a `planet-sac train` with its own random string hashing (PYTHONHASHSEED=random) and the
    never-stopped run trained in this process: the same seed gives the same run in another process too. While the
    first one trains, the same command in this process is refused: one learner per run directory."""
    logdir = tmp_path / "run"
    rng = random.Random(0)  # a fixed draw: a failure replays
    environment = {**os.environ, "PYTHONHASHSEED": "random"}
    for stop, how in enumerate(["sigterm", "sigkill", "sigkill", "sigkill"], start=1):
        process = subprocess.Popen(command(logdir, 50), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env=environment)
        deadline = time.monotonic() + 120
        while _checkpoint_step(logdir) < 10 * stop and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if how == "sigterm":
            assert_a_second_learner_is_refused(logdir, process, capsys)
        if stop == 3:
            on_disk = len(list((logdir / "train_episodes").glob("*.npz")))
            while len(list((logdir / "train_episodes").glob("*.npz"))) == on_disk and process.poll() is None:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            time.sleep(rng.uniform(0.0, 1.5))
        assert process.poll() is None, "the run ended before it was stopped"
        process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        process.wait(timeout=120)
        if how == "sigterm":  # the graceful stop: checkpoint, 128 + 15 (stopped, not finished), the lock released
            err = process.stderr.read().decode()
            assert process.returncode == 143, err[-2000:]
            assert err.splitlines()[-1].startswith("planet-sac train: stopped by SIGTERM at step ")
            assert err.splitlines()[-1].endswith(" of 50; checkpointed: the same command resumes")
            assert (logdir / LOCK_FILE).read_text() == ""
        assert _checkpoint_step(logdir) < 50
    subprocess.run(command(logdir, 50), cwd=ROOT, check=True, capture_output=True, env=environment)
    assert_same_run(never_stopped, logdir)


def assert_a_second_learner_is_refused(logdir: Path, holder: subprocess.Popen, capsys) -> None:
    """The same `train` command, run in this process while `holder` trains, exits 2 naming the holder, in one line."""
    from planet_sac.cli import main

    capsys.readouterr()
    assert main(command(logdir, 50)[3:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"planet-sac train: error: {logdir} is in use by planet-sac pid {holder.pid} on host {socket.gethostname()}"), err
    assert holder.poll() is None, "the run ended before it was stopped"


@pytest.mark.slow
@pytest.mark.e2e
def test_a_pixel_run_with_two_environment_processes_resumes_exactly(tmp_path):
    """dm_control cartpole from pixels, 2 environment processes, a tiny conv model: SIGKILLed a random 0-1 s after
    its checkpoint at 6, resumed to 12."""
    settings = ["env.task=dmc:cartpole-swingup", "env.obs=image", "env.action_repeat=8", "env.num_envs=2",
                "model.cnn_depth=4", "model.decoder_depth=4", "data.seed_episodes=2", "data.test_seed_episodes=1",
                "schedule.collect_every=3", "schedule.train_phase_steps=6", "schedule.checkpoint_every=6",
                "schedule.log_every=3", "policy.train=sac", "policy.test=sac", "policy.compare=[]", "env.time_limit=12",
                "data.chunk_length=8"]  # the SAC head acts: CEM's graphs over a conv model would take most of the time
    # In processes of their own: a pixel model trained in the test process left later tests' TensorFlow calls there
    # crashing (a segmentation fault in a compiled policy, seen twice in full runs of the suite).
    subprocess.run(command(tmp_path / "never", 12, settings), cwd=ROOT, check=True, capture_output=True)
    resumed = tmp_path / "resumed"
    process = subprocess.Popen(command(resumed, 12, settings), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _checkpoint_step(resumed) < 6 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(random.Random("pixels").uniform(0.0, 1.0))
    assert process.poll() is None, "the run ended before it was killed"
    process.kill()
    process.wait(timeout=60)
    assert _checkpoint_step(resumed) < 12
    subprocess.run(command(resumed, 12, settings), cwd=ROOT, check=True, capture_output=True)
    assert_same_run(tmp_path / "never", tmp_path / "resumed")
