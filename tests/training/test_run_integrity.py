"""Run integrity: one writer per run directory, verified checkpoint reads, full disks, atomic videos.

Each fault is made for real: a second process holding the lock, checkpoint files truncated,
deleted or with a flipped byte, a small tmpfs filled up (an injected ENOSPC only where the
test cannot mount one), an encoding interrupted half-way.
"""

from __future__ import annotations

import collections
import datetime as dt
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.checkpoints import Checkpointer, CheckpointError, checkpoint_files, named_variables, read_checkpoint
from planet_sac.cli import main
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode
from planet_sac.training.run_lock import LOCK_FILE, RunLockedError, lock_run
from tests.conftest import CONFIGS, DATA, ROOT, logged_warnings, old_run_copy, save_version

SMOKE = str(CONFIGS / "smoke.yaml")


@pytest.fixture
def warnings():
    yield from logged_warnings("planet_sac")


@pytest.fixture
def run(tmp_path):
    logdir = tmp_path / "run"
    old_run_copy(logdir)
    return str(logdir)


def messages(records) -> str:
    return "\n".join(record.getMessage() for record in records)


# ---------------------------------------------------------------- one writer per run directory

HOLDER = """
import sys, time
from planet_sac.training.run_lock import lock_run
lock = lock_run(sys.argv[1])
assert "tensorflow" not in sys.modules, "run_lock imported TensorFlow"  # a process that only locks starts fast
print("locked", flush=True)
time.sleep(600)
"""


def hold_lock(logdir: str) -> subprocess.Popen:
    """Another process that takes the run's lock (as a learner does) and keeps it until killed; it checks that
    taking the lock did not import TensorFlow (`run_lock` is TensorFlow-free)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, logdir], stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
    assert holder.stdout.readline().strip() == "locked"
    return holder


@pytest.mark.slow
def test_a_second_learner_is_refused_and_a_stale_lock_taken_over(run, tmp_path, capsys, warnings):
    """A second learner is refused with the holder's pid and host, and a killed holder's stale lock is taken over.

    While another process holds the run's lock, a second learner (command line or Python API) is refused and
    writes nothing (that readers of a locked run are not refused: the fall-back test below). Then the holder is
    SIGKILLed: its lock is stale, and the next learner takes it over with a warning."""
    holder = hold_lock(run)
    try:
        before = sorted(os.listdir(run))
        assert main(["train", "--logdir", run, "--train-steps", "20", "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"is in use by planet-sac pid {holder.pid} on host {socket.gethostname()}" in err[0], err
        assert sorted(os.listdir(run)) == before  # nothing written: no metrics, no config, no checkpoint
        assert checkpoint_files(f"{run}/checkpoints")[-1].endswith("ckpt-10")
        from planet_sac.training.run_dir import resolve_run_config
        from planet_sac.training.trainer import Trainer, train

        with pytest.raises(RunLockedError, match=f"pid {holder.pid}"):
            Trainer(resolve_run_config(run), run, progress=False)  # the Python API takes the same lock
        with pytest.raises(RunLockedError, match=f"pid {holder.pid}"):
            train(resolve_run_config(run), run, progress=False)
    finally:
        holder.send_signal(signal.SIGKILL)  # dies without releasing: its record stays, the kernel frees the OS lock
        holder.wait()
    assert_a_stale_lock_is_taken_over_with_a_warning(run, holder.pid, warnings)


def assert_a_stale_lock_is_taken_over_with_a_warning(logdir: str, killed_pid: int, warnings) -> None:
    with open(f"{logdir}/{LOCK_FILE}") as file:
        assert json.load(file)["pid"] == killed_pid
    warnings.clear()
    lock = lock_run(logdir)
    try:
        assert f"took over the stale lock of {logdir}: pid {killed_pid} (no longer running)" in messages(warnings)
        with open(f"{logdir}/{LOCK_FILE}") as file:
            record = json.load(file)
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        with pytest.raises(RunLockedError, match="in this process"):
            lock_run(logdir)  # the same process twice (flock emulated on NFS would not refuse it)
        other = subprocess.run([sys.executable, "-c", HOLDER, logdir], capture_output=True, text=True, cwd=str(ROOT),
                               timeout=120)
        assert other.returncode != 0 and f"is in use by planet-sac pid {os.getpid()}" in other.stderr
    finally:
        lock.release()
    with open(f"{logdir}/{LOCK_FILE}") as file:
        assert file.read() == ""  # released cleanly: an empty record
    warnings.clear()
    lock_run(logdir).release()
    assert not warnings  # nothing stale after a clean release


def test_a_record_from_another_host_is_taken_over_naming_that_host(tmp_path, warnings):
    """A pid from another host cannot be checked for liveness: the warning names the host instead of guessing."""
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": os.getpid() + 1, "host": "elsewhere", "started": "then"}))
    lock_run(str(tmp_path)).release()
    text = messages(warnings)
    assert "left by pid %d on host elsewhere (since then)" % (os.getpid() + 1) in text and "stale lock" not in text


def test_a_process_of_another_user_counts_as_alive(monkeypatch):
    """os.kill(pid, 0) raises PermissionError for a live process this user may not signal: it is running."""
    from planet_sac.training import run_lock

    def kill(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(run_lock.os, "kill", kill)
    assert run_lock._alive(1)


def test_a_remote_logdir_is_not_locked_and_says_so(warnings):
    """gs://, s3://: no OS lock exists there; acquiring warns and opens nothing."""
    from planet_sac.training.run_lock import RunLock

    lock = RunLock("gs://bucket/run").acquire()
    assert "gs://bucket/run is not a local path: no lock keeps a second learner out of it" in messages(warnings)
    lock.release()


# A learner stopped by SIGTERM releases the lock, and a second one meanwhile is refused: checked on the way in
# tests/test_exact_resume.py's SIGTERM stop (SIGINT goes through the same graceful stop).


# ---------------------------------------------------------------- verified checkpoint reads


def damage(prefix: str, how: str, key: str | None = None) -> None:
    """Damages the checkpoint at `prefix` on disk, as a crash, a bad copy or a bad disk would.

    `flipped` flips one bit in the middle of the tensor stored under `key` (else of the file).
    """
    (data,) = tf.io.gfile.glob(prefix + ".data-*")
    size = os.path.getsize(data)
    if key is not None:
        with open(data, "rb") as file:
            start = file.read().find(tf.train.load_checkpoint(prefix).get_tensor(key).tobytes())
        assert start >= 0
        size = 2 * start + tf.train.load_checkpoint(prefix).get_tensor(key).nbytes
    if how == "truncated":
        with open(data, "r+b") as file:
            file.truncate(64)  # a copy cut short
    elif how == "deleted":
        os.remove(data)
    elif how == "flipped":  # one byte in the middle of the tensors: only TensorFlow's checksums see it
        with open(data, "r+b") as file:
            file.seek(size // 2)
            byte = file.read(1)
            file.seek(size // 2)
            file.write(bytes([byte[0] ^ 0x01]))
    elif how == "index":
        with open(prefix + ".index", "r+b") as file:
            file.truncate(100)
    else:
        raise ValueError(how)


def acting_key(run: str) -> str:
    """A world-model tensor's checkpoint key."""
    return next(key for key, _ in tf.train.list_variables(f"{run}/checkpoints/ckpt-10")
                if key.startswith("variables/world_model/") and "kernel" in key)


@pytest.mark.slow
def test_every_reader_falls_back_past_damaged_newer_checkpoints_to_the_newest_readable_one(run, tmp_path, capsys,
                                                                                          warnings):
    """evaluate, collect and train --restore-from on one run whose three newest checkpoints are damaged three ways
    (a truncated, a deleted and a bit-flipped data file), while a learner holds the run's lock (readers take no
    lock): each reader names all three as unreadable and acts with, or restores, ckpt-10; none of them moves or
    deletes anything."""
    save_version(run, 0.5, step=12)
    # ckpt-13 a copy of ckpt-12; ckpt-14 a copy of ckpt-10, whose trained values make the flipped tensor's bytes
    # unique in the file (in ckpt-12 every float is 0.5: the flip could land in a tensor a reader skips)
    for source, step in ((12, 13), (10, 14)):
        for path in tf.io.gfile.glob(f"{run}/checkpoints/ckpt-{source}.*"):
            shutil.copy(path, path.replace(f"ckpt-{source}.", f"ckpt-{step}."))
    key = acting_key(run)  # a world-model tensor: every reader here reads it
    damaged = {12: "truncated", 13: "deleted", 14: "flipped"}
    for step, how in damaged.items():
        damage(f"{run}/checkpoints/ckpt-{step}", how, key=key)

    def each_named_unreadable() -> bool:
        return all(f"checkpoint {run}/checkpoints/ckpt-{step} is unreadable" in messages(warnings) for step in damaged)

    lock = lock_run(run)  # a learner holds the run: this process, so a reader taking the lock would be refused
    try:
        assert main(["evaluate", "--logdir", run, "--episodes", "1", "--policy", "sac", "--quiet"]) == 0
        assert "checkpoint step 10" in capsys.readouterr().out
        assert each_named_unreadable()

        warnings.clear()
        outdir = str(tmp_path / "collected")
        assert main(["collect", "--policy", "sac", "--checkpoint", run, "--outdir", outdir, "--episodes", "1",
                     "--time-limit", "5", "--quiet"]) == 0
        assert len(list_episodes(outdir)) == 1 and each_named_unreadable()

        warnings.clear()
        new = str(tmp_path / "new")
        assert main(["train", "--config", SMOKE, "--logdir", new, "--restore-from", run, "--include", "world_model/",
                     "--train-steps", "0", "--quiet"]) == 0
        assert each_named_unreadable()
        restored = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{new}/checkpoints")).get_tensor(key)
        np.testing.assert_array_equal(restored, tf.train.load_checkpoint(f"{run}/checkpoints/ckpt-10").get_tensor(key))
        assert not np.all(restored == 0.5)  # ckpt-10's values, not a damaged checkpoint's
    finally:
        lock.release()

    for step in (10, *damaged):  # readers never move or delete anything
        assert os.path.exists(f"{run}/checkpoints/ckpt-{step}.index")


def test_when_no_checkpoint_is_readable_each_reader_says_so_in_one_line(run, tmp_path, capsys):
    damage(f"{run}/checkpoints/ckpt-10", "flipped", key=acting_key(run))
    commands = {
        "evaluate": ["evaluate", "--logdir", run, "--episodes", "1", "--quiet"],
        "collect": ["collect", "--policy", "cem", "--checkpoint", run, "--outdir", str(tmp_path / "out"),
                    "--episodes", "1", "--quiet"],
        "train": ["train", "--config", SMOKE, "--logdir", str(tmp_path / "new"), "--restore-from", run,
                  "--train-steps", "0", "--quiet"],
    }
    for command, argv in commands.items():
        assert main(argv) == 2, command
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"planet-sac {command}: error: no readable checkpoint in {run}"), err
        assert "ckpt-10" in err[0] and "Checksum does not match" in err[0]


def test_a_run_whose_checkpoints_were_deleted_is_not_started_over_on_top_of_its_metrics(smoke_run_copy, capsys):
    """Every run saves a checkpoint before it logs anything, so metrics without one mean lost checkpoints: training
    there again is refused in one line (starting over would append a second run to the first one's metrics)."""
    run = smoke_run_copy
    metrics = (Path(run) / "metrics.jsonl").read_bytes()
    assert metrics
    shutil.rmtree(f"{run}/checkpoints")
    assert main(["train", "--logdir", run, "--train-steps", "30", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a run's metrics.jsonl (up to step 20) but no checkpoint" in err[0], err
    assert (Path(run) / "metrics.jsonl").read_bytes() == metrics
    assert not os.path.exists(f"{run}/checkpoints") or not os.listdir(f"{run}/checkpoints")


class Net(tf.Module):
    def __init__(self, value: float):
        super().__init__(name="net")
        with tf.name_scope("world_model/"):
            self.kernel = tf.Variable(tf.fill([64, 64], value), name="kernel")


def test_a_damaged_checkpoint_does_not_keep_its_place_while_good_ones_are_rotated_out(tmp_path, warnings):
    directory = str(tmp_path / "checkpoints")
    net = Net(1.0)
    writer = Checkpointer(directory, named_variables([net]), max_to_keep=3)
    for step in (1, 2, 3):
        net.kernel.assign(tf.fill([64, 64], float(step)))
        writer.save(step)
    damage(f"{directory}/ckpt-3", "flipped")

    restored = Net(0.0)
    resumed = Checkpointer(directory, named_variables([restored]), max_to_keep=3)
    assert resumed.restore_latest() == f"{directory}/ckpt-2"
    np.testing.assert_array_equal(restored.kernel.numpy(), 2.0)
    assert f"checkpoint {directory}/ckpt-3 is unreadable (TensorBundle" in messages(warnings)
    resumed.save(4)  # keeps the good ckpt-1: max_to_keep counts good checkpoints only
    assert [os.path.basename(p) for p in checkpoint_files(directory)] == ["ckpt-1", "ckpt-2", "ckpt-4"]
    assert os.path.exists(f"{directory}/damaged/ckpt-3.index")  # kept for a post-mortem, out of the rotation


def test_an_explicit_damaged_prefix_is_not_replaced_by_another(tmp_path):
    directory = str(tmp_path / "checkpoints")
    net = Net(1.0)
    writer = Checkpointer(directory, named_variables([net]))
    writer.save(1)
    writer.save(2)
    damage(f"{directory}/ckpt-1", "index")
    with pytest.raises(CheckpointError, match="no readable checkpoint in .*ckpt-1: 1 unreadable"):
        read_checkpoint(f"{directory}/ckpt-1", lambda stored: list(stored))
    assert read_checkpoint(directory, lambda stored: list(stored)).prefix.endswith("ckpt-2")


# ---------------------------------------------------------------- a full disk

def mount_tmpfs(path: str, size_kb: int) -> bool:
    os.makedirs(path, exist_ok=True)
    if shutil.which("mount") is None:
        return False
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", path], capture_output=True)
    return result.returncode == 0


def fill(path: str, leave_kb: int) -> str:
    """Fills the filesystem of `path` up to `leave_kb` free; returns the filler file."""
    stat = os.statvfs(path)
    free_kb = stat.f_bavail * stat.f_frsize // 1024
    filler = os.path.join(path, "filler")
    with open(filler, "wb") as file:
        file.write(b"\0" * max(0, free_kb - leave_kb) * 1024)
    return filler


@pytest.mark.slow
@pytest.mark.e2e
def test_a_full_disk_is_reported_as_such_and_the_run_resumes_once_space_is_freed(tmp_path, monkeypatch, capsys):
    """The run (ckpt-10) trains to 20 (an episode written on the nearly full disk) and fails saving ckpt-20; once
    space is freed it resumes from ckpt-10."""
    mount = str(tmp_path / "disk")
    real = mount_tmpfs(mount, 3072)
    try:
        logdir = f"{mount}/run"
        old_run_copy(Path(logdir))
        if real:
            filler = fill(mount, leave_kb=150)  # less than a checkpoint (~270 kB)
        else:  # no mount allowed here (not root, or no CAP_SYS_ADMIN): TensorFlow's own error for ENOSPC, injected
            save = tf.train.CheckpointManager.save

            def full(self, *args, **kwargs):
                raise tf.errors.ResourceExhaustedError(
                    None, None, f"{self.directory}/ckpt-20_temp/part-00000-of-00001.data-00000-of-00001.tempstate1; "
                                "No space left on device")

            monkeypatch.setattr(tf.train.CheckpointManager, "save", full)
        assert main(["train", "--logdir", logdir, "--train-steps", "20", "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "out of memory" not in err[0], err
        assert err[0].startswith("planet-sac train: error: no space left on the device (writing ")
        assert logdir in err[0] and "the run resumes from its last checkpoint" in err[0]
        # Nothing finished was lost: every checkpoint and episode on the disk reads whole.
        for prefix in checkpoint_files(f"{logdir}/checkpoints"):
            read_checkpoint(prefix, lambda stored: list(stored))
        for directory in ("train_episodes", "test_episodes"):
            for path in list_episodes(f"{logdir}/{directory}"):
                load_episode(path)
        with open(f"{logdir}/{LOCK_FILE}") as file:
            assert file.read() == ""  # released: emptying the record needs no space

        if real:
            os.remove(filler)
        else:
            monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
        # One update past the last checkpoint (ckpt-10) is enough to see the run resume and save.
        assert main(["train", "--logdir", logdir, "--train-steps", "11", "--quiet"]) == 0
        assert "done: step 11" in capsys.readouterr().out
        assert checkpoint_files(f"{logdir}/checkpoints")[-1].endswith("ckpt-11")
        with open(f"{logdir}/metrics.jsonl") as file:
            rows = [json.loads(line) for line in file if line.strip()]
        steps = [row["step"] for row in rows if "loss/total" in row and row["phase"] == "train"]
        # the lost steps' records (15 and 20, written before the failed checkpoint at 20) are gone, the redone one once
        assert steps == sorted(set(steps)) and steps[-1] == 11
    finally:
        if real:
            subprocess.run(["umount", "-l", mount], check=False)


def test_a_full_disk_is_not_mistaken_for_out_of_memory_nor_the_reverse(monkeypatch, capsys):
    from planet_sac import cli

    def enospc(args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/runs/a/train_episodes/.tmp-1.npz")

    def oom(args):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[4096,4096]")

    monkeypatch.setattr(cli, "_collect", enospc)
    assert main(["collect", "--task", "gym:Pendulum-v1", "--episodes", "1", "--outdir", "/data/runs/a/train_episodes"]) == 2
    err = capsys.readouterr().err
    assert "no space left on the device (writing /data/runs/a/train_episodes/.tmp-1.npz)" in err
    assert "every finished episode is intact" in err
    monkeypatch.setattr(cli, "_train", oom)
    assert main(["train", "--logdir", "/nonexistent", "--quiet"]) == 2
    assert "out of memory; lower the batch" in capsys.readouterr().err


# ---------------------------------------------------------------- --include / --exclude, videos

def test_include_and_exclude_selecting_nothing_is_refused_like_an_include_alone(run, tmp_path, capsys):
    new = str(tmp_path / "new")
    for patterns, message in ((["--include", "world_model/", "--exclude", ".*"],
                               "--include world_model/ with --exclude .* selects no variable;"),  # the user's patterns only
                              (["--include", "nothing/"], "--include 'nothing/' matches no variable"),
                              (["--include", "counters/"], "--include counters/ selects only what belongs to a run")):
        assert main(["train", "--config", SMOKE, "--logdir", new, "--restore-from", run, *patterns,
                     "--train-steps", "0", "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert not os.path.exists(f"{new}/config.yaml") and not checkpoint_files(f"{new}/checkpoints")
    assert main(["train", "--config", SMOKE, "--logdir", new, "--restore-from", run, "--include", "world_model/",
                 "--train-steps", "0", "--quiet"]) == 0  # the corrected command starts the run


@pytest.mark.slow
@pytest.mark.parametrize("name", ["video.mp4", "video.gif"])
def test_an_interrupted_video_leaves_no_file_and_a_finished_one_is_whole(tmp_path, name):
    import imageio.v2 as imageio

    from planet_sac.acting.evaluation import write_video

    frames = list(np.random.default_rng(0).integers(0, 255, (40, 64, 64, 3), np.uint8))  # noise: ffmpeg writes early

    path = str(tmp_path / name)
    during = []

    def interrupted():
        for index, frame in enumerate(frames):
            if index == 30:
                time.sleep(1.0)  # let the encoder write what it has
                during.append(os.path.exists(path))  # a SIGKILL now would leave whatever is under the name
                raise KeyboardInterrupt  # Ctrl-C while encoding
            yield frame

    with pytest.raises(KeyboardInterrupt):
        write_video(path, interrupted())
    assert during == [False]
    assert os.listdir(tmp_path) == []  # neither a partial file under the name nor a temporary one
    write_video(path, frames)
    assert os.listdir(tmp_path) == [name]
    assert len(imageio.mimread(path)) == 40


@pytest.mark.slow
@pytest.mark.e2e
def test_evaluating_several_policies_builds_once_and_gives_each_policys_own_result(run, monkeypatch):
    from planet_sac.acting import evaluation

    short = ["env.time_limit=10"]  # episodes of 10 steps: the same for every evaluation, and enough to differ
    separate = {policy: evaluation.evaluate(run, 2, policy, seed=5, overrides=short)["returns"] for policy in ("cem", "sac")}
    builds = []
    load_agent = evaluation.load_agent
    monkeypatch.setattr(evaluation, "load_agent", lambda *args, **kwargs: builds.append(1) or load_agent(*args, **kwargs))
    together = dict(evaluation.evaluate_policies(run, 2, ["random", "sac", "cem"], seed=5, overrides=short))
    assert len(builds) == 1
    assert together["cem"]["returns"] == separate["cem"] and together["sac"]["returns"] == separate["sac"]
    assert together["random"]["returns"] != separate["cem"]


@pytest.mark.parametrize("test_pending", [False, True])
def test_resume_drops_exactly_the_records_the_restored_checkpoint_does_not_hold(tmp_path, test_pending):
    from planet_sac.training.logger import Logger

    rows = [{"step": 5, "phase": "train"}, {"step": 10, "phase": "train"}, {"step": 10, "phase": "test"},
            {"step": 15, "phase": "train"}, {"step": 20, "phase": "test"}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"step": 2')
    logger = Logger(str(tmp_path))  # ends the partial line of a killed run first
    try:
        # Restored at step 10: 15 and 20 were lost; the test phase at 10 too if the checkpoint predates it.
        expected = rows[:2] if test_pending else rows[:3]
        assert logger.drop_after(10, test_pending=test_pending) == 5 - len(expected)
        with open(tmp_path / "metrics.jsonl") as file:
            assert [json.loads(line) for line in file] == expected
        assert logger.drop_after(10, test_pending=test_pending) == 0
    finally:
        logger.close()


@pytest.mark.parametrize("test_pending", [False, True])
def test_resume_drops_the_same_events_from_tensorboard(tmp_path, test_pending):
    """TensorBoard drew both versions of every redone step (4 -> 4.0 and 4 -> 104.0): the event files keep only what
    metrics.jsonl keeps, and the redone steps are then written once."""
    from planet_sac.training.logger import Logger

    first = Logger(str(tmp_path))
    for step in range(1, 6):
        first.scalars(step, {"loss/total": float(step)}, phase="train")
    first.scalars(3, {"test/return": 30.0}, phase="test")
    first.video(3, "eval/video", np.zeros((2, 4, 4, 3), np.uint8))
    first.video(3, "openloop/truth_model_error", np.zeros((2, 4, 4, 3), np.uint8))
    first.close()
    with open(next(tmp_path.glob("events.out.tfevents.*")), "ab") as file:
        file.write(b"\x05\x00\x00")  # a record cut short by the kill

    second = Logger(str(tmp_path))
    second.drop_after(3, test_pending=test_pending)
    for step in (4, 5):
        second.scalars(step, {"loss/total": 100.0 + step}, phase="train")
    if test_pending:
        second.scalars(3, {"test/return": 33.0}, phase="test")
    second.close()

    seen = collections.Counter()
    values = {}
    for path in tmp_path.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                seen[(value.tag, event.step)] += 1
                if value.tag != "eval/video" and not value.tag.startswith("openloop"):
                    values[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
    assert set(seen.values()) == {1}  # every tag at every step once
    assert values == {("loss/total", 1): 1.0, ("loss/total", 2): 2.0, ("loss/total", 3): 3.0,
                      ("loss/total", 4): 104.0, ("loss/total", 5): 105.0,
                      ("test/return", 3): 33.0 if test_pending else 30.0}
    assert ("eval/video", 3) in seen if not test_pending else ("eval/video", 3) not in seen
    assert ("openloop/truth_model_error", 3) in seen  # the training's video at the checkpoint's step stays
    assert [p.name for p in tmp_path.iterdir() if "rewrite" in p.name] == []


RESUME_SETTINGS = ["schedule.collect_every=5", "schedule.checkpoint_every=10", "schedule.test_episodes=0",
                   "data.seed_episodes=2"]


def _trainer(logdir):
    from planet_sac.config_loading import load_config
    from planet_sac.training.trainer import Trainer

    return Trainer(load_config(SMOKE, RESUME_SETTINGS), str(logdir), progress=False)


def _copy_an_episode(logdir) -> None:
    """Another training episode on disk, as a collection writes one (a new file name, the same data)."""
    from planet_sac.episodes.storage import save_episode

    folder = str(logdir / "train_episodes")
    save_episode(folder, load_episode(list_episodes(folder)[-1]))


@pytest.mark.slow
@pytest.mark.e2e
def test_episodes_written_after_the_checkpoint_are_set_aside_and_their_collection_redone(tmp_path):
    """A run killed after a collection but before the next checkpoint redoes the collection as the uninterrupted run
    did it: the episode on disk moves to train_episodes/interrupted/ (kept, never read), and the run ends with the
    episodes an uninterrupted run collects (2 seed + one per 5 updates), not more env steps. Killed between
    checkpoints here; before the first update: `test_a_run_set_aside_killed_midway_and_resumed_past_...`."""
    logdir = tmp_path / "run"
    trainer = _trainer(logdir)
    trainer.run(10)  # checkpoint at 10 after the collections at 5 and 10
    _copy_an_episode(logdir)  # the collection at step 15, written before the kill; no checkpoint at 15
    total = 20
    written = {path.name for path in (logdir / "train_episodes").glob("*.npz")}
    trainer.close()
    trainer = _trainer(logdir)
    set_aside = 1
    assert f"{set_aside} training episode(s) written after that checkpoint moved to" in trainer.start_message
    assert_set_aside_and_counted(logdir, trainer, set_aside, written, test_episodes=1)
    trainer.run(total)
    trainer.close()
    assert_collections_redone(logdir, written, total)


@pytest.mark.slow
@pytest.mark.e2e
def test_a_damaged_file_named_as_a_collection_is_set_aside_and_named_as_unreadable(tmp_path, warnings):
    """A file the checkpoint does not hold, named as a collection but not an episode (damaged, or junk copied in),
    moves to interrupted/ with the episodes written after the checkpoint, byte for byte, and the resume says which
    file it is and why, not only that an episode moved."""
    from planet_sac.episodes.storage import episode_filename

    logdir = tmp_path / "run"
    trainer = _trainer(logdir)
    trainer.run(10)
    trainer.close()
    written = {path.name for path in (logdir / "train_episodes").glob("*.npz")}
    name = episode_filename(50, dt.datetime(2099, 1, 1))  # the newest name, a collection's length suffix
    (logdir / "train_episodes" / name).write_bytes(b"not a zip")
    trainer = _trainer(logdir)
    assert ("1 training episode(s) written after that checkpoint moved to" in trainer.start_message
            and f"(1 of those files not a readable episode, e.g. {name}: not a zip/npz file" in trainer.start_message)
    assert (logdir / "train_episodes" / "interrupted" / name).read_bytes() == b"not a zip"
    assert {path.name for path in (logdir / "train_episodes").glob("*.npz")} == written
    assert int(trainer.counters.train_episodes.numpy()) == len(written)
    assert [r.getMessage() for r in warnings if name in r.getMessage() and "not a readable episode" in r.getMessage()]
    trainer.close()


def assert_set_aside_and_counted(logdir: Path, trainer, set_aside: int, written: set[str], test_episodes: int) -> None:
    """`set_aside` training episodes in train_episodes/interrupted/; from the restore on, the counters count the
    files (the test seed episodes too: a checkpoint written before them does not count them)."""
    assert len(list((logdir / "train_episodes" / "interrupted").glob("*.npz"))) == set_aside
    on_disk = len(list_episodes(str(logdir / "train_episodes")))  # from the restore on, the counters count the files
    assert int(trainer.counters.train_episodes.numpy()) == on_disk == len(written) - set_aside
    assert int(trainer.counters.env_steps.numpy()) == on_disk * 50 * 2
    assert int(trainer.counters.test_episodes.numpy()) == len(list_episodes(str(logdir / "test_episodes"))) \
        == test_episodes


def assert_collections_redone(logdir: Path, written: set[str], total: int) -> None:
    """The run at `total` updates holds an uninterrupted run's training episodes (2 seed + one per 5 updates) and
    env steps, and every episode written before a kill is kept (in the folder or in interrupted/)."""
    assert len(list_episodes(str(logdir / "train_episodes"))) == 2 + total // 5
    kept = {path.name for path in (logdir / "train_episodes").glob("*.npz")} | {
        path.name for path in (logdir / "train_episodes" / "interrupted").glob("*.npz")}
    assert written <= kept  # nothing written is lost
    records = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["episodes"] == 2 + total // 5 and records[-1]["env_steps"] == (2 + total // 5) * 50 * 2  # time_limit 50 x action_repeat 2


@pytest.mark.slow
@pytest.mark.e2e
def test_a_collection_half_written_before_a_kill_is_redone_whole_and_logged_on_resume(tmp_path):
    """Two environments: one finished its episode (saved at once) before the kill, the other did not. The resumed
    run sets the finished one aside and redoes the whole collection, ending with an uninterrupted run's 6 episodes,
    and logs that collection's return."""
    from planet_sac.config_loading import load_config
    from planet_sac.training.trainer import Trainer

    def trainer():
        return Trainer(load_config(SMOKE, [*RESUME_SETTINGS, "env.num_envs=2"]), str(logdir), progress=False)

    logdir = tmp_path / "run"
    first = trainer()
    first.run(10)  # 2 seed episodes + the collection at 10 (2 episodes), checkpoint at 10
    first.close()
    _copy_an_episode(logdir)  # env 0's episode of the collection at step 20; no checkpoint after 10
    second = trainer()
    assert "1 training episode(s) written after that checkpoint" in second.start_message
    second.run(20)
    second.close()
    assert len(list_episodes(str(logdir / "train_episodes"))) == 6
    records = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["episodes"] == 6 and records[-1]["env_steps"] == 6 * 50 * 2
    assert [r["step"] for r in records if "train/return" in r] == [10, 20]


@pytest.mark.slow
def test_a_run_set_aside_killed_midway_and_resumed_past_a_damaged_checkpoint_ends_as_the_uninterrupted_run(
        tmp_path, monkeypatch, warnings):
    """One run stopped four ways, each time resumed by a new Trainer, as a new process would be:

    1. killed before its first update, after its seed episodes and the episode of the collection at step 5 were
       written (ckpt-0 names none of them): the resumed run sets all 3 aside in train_episodes/interrupted/ (kept,
       never read), its counters count the files from the restore on, and it redoes the collections;
    2. killed in the test phase at 10 after its record was written (the record at its step is then dropped on
       resume, as the checkpoint does not hold the phase);
    3. killed in the test phase at 15 after it saved its episode, before its record was written;
    4. its newest checkpoint (ckpt-15) then damaged: the resume skips it, moves it out of the rotation (to
       checkpoints/damaged/) and warns once, resumes from ckpt-10, sets aside the collection at 15 and redoes 11..15
       with its test phase, logging the lost steps once; the new ckpt-15 is whole.
    Each resumed run redoes what its checkpoint does not hold, and the run ends with an uninterrupted run's records
    (one per logged step and phase), test episodes (2 seed + 1 per phase; each killed attempt's episode kept aside
    in test_episodes/interrupted/: it used to join the held-out data, one too many) and training episodes (2 seed +
    one per 5 updates), not more env steps. SAC updates are off: none of this depends on them."""
    from planet_sac.config_loading import load_config
    from planet_sac.training import testing as test_phase_module
    from planet_sac.training.trainer import Trainer

    settings = ["schedule.train_phase_steps=5", "schedule.test_episodes=1", "data.test_seed_episodes=2",
                "schedule.checkpoint_every=5", "sac.updates_per_step=0"]
    config = load_config(SMOKE, [*RESUME_SETTINGS, *settings])
    logdir = tmp_path / "run"
    total = 15

    def run(killed: str | None = None, check=lambda trainer: None) -> None:
        """Trains the run to `total` in a new Trainer, after `check(trainer)`; `killed`: a KeyboardInterrupt ends it
        in its second test phase, `before its record` or `after its record`."""
        real_critic, real_log = test_phase_module.critic_vs_returns, Trainer._log
        calls = []

        def critic_vs_returns(*args, **kwargs):  # runs after the phase's episode is saved, before its record
            calls.append(1)
            if killed == "before its record" and len(calls) == 2:
                raise KeyboardInterrupt
            return real_critic(*args, **kwargs)

        def log(trainer, values, phase):  # the record written, its checkpoint not yet
            record = real_log(trainer, values, phase)
            if killed == "after its record" and phase == "test" and len(calls) == 2:
                raise KeyboardInterrupt
            return record

        with monkeypatch.context() as patch:
            patch.setattr(test_phase_module, "critic_vs_returns", critic_vs_returns)
            patch.setattr(Trainer, "_log", log)
            trainer = Trainer(config, str(logdir), progress=False)
            try:
                check(trainer)
                if killed is None:
                    trainer.run(total)
                else:
                    with pytest.raises(KeyboardInterrupt):
                        trainer.run(total)
            finally:
                trainer.close()

    def records() -> list[dict]:
        return [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]

    def test_records() -> list[int]:
        return [r["step"] for r in records() if r.get("phase") == "test"]

    trainer = Trainer(config, str(logdir), progress=False)
    trainer.collect_seed_episodes()  # seed episodes after the first checkpoint (step 0, no episodes)
    _copy_an_episode(logdir)  # the collection at step 5
    written = {path.name for path in (logdir / "train_episodes").glob("*.npz")}
    trainer.close()

    def set_aside(trainer) -> None:
        assert "3 training episode(s) written after that checkpoint moved to" in trainer.start_message
        # the seed episodes too (ckpt-0 has none); the test seed episodes counted (ckpt-0, written before them, does not)
        assert_set_aside_and_counted(logdir, trainer, 3, written, test_episodes=2)

    run(killed="after its record", check=set_aside)  # in the test phase at 10
    assert test_records() == [5, 10]
    run(killed="before its record")  # redoes the phase at 10, then killed in the one at 15
    assert test_records() == [5, 10]
    written |= {path.name for path in (logdir / "train_episodes").glob("*.npz")}  # the collection at 15 among them

    checkpoints = f"{logdir}/checkpoints"
    assert [os.path.basename(prefix) for prefix in checkpoint_files(checkpoints)][-2:] == ["ckpt-10", "ckpt-15"]
    damage(f"{checkpoints}/ckpt-15", "flipped")
    warnings.clear()
    run()  # resumes ckpt-10, redoes 11..15
    assert messages(warnings).count(f"checkpoint {checkpoints}/ckpt-15 is unreadable") == 1
    assert sorted(os.listdir(f"{checkpoints}/damaged")) == ["ckpt-15.data-00000-of-00001", "ckpt-15.index"]
    loaded = read_checkpoint(str(logdir), lambda stored: list(stored))  # the new ckpt-15 is whole, by the redone steps
    assert loaded.prefix.endswith("ckpt-15") and loaded.step == 15 and not loaded.damaged

    rows = records()
    keys = [(row["step"], row["phase"], tuple(sorted(k for k in row if k != "time"))) for row in rows]
    assert len(keys) == len(set(keys)), "a record of the lost steps appears twice"
    phases = test_records()
    assert phases == [5, 10, 15]  # each phase redone, once
    assert [row["step"] for row in rows if "loss/total" in row and row["phase"] == "train"] == [5, 10, 15]
    assert len(list_episodes(str(logdir / "test_episodes"))) == 2 + len(phases)
    assert len(list_episodes(str(logdir / "test_episodes" / "interrupted"))) == 2  # one per killed phase
    assert [name for name in os.listdir(logdir / "test_episodes") if name.startswith(".")] == []
    assert len(list_episodes(str(logdir / "train_episodes" / "interrupted"))) == 3 + 1  # and the collection at 15
    assert_collections_redone(logdir, written, total)


def test_a_resumed_offline_run_never_moves_its_data_even_when_the_folder_grew(tmp_path):
    """Offline, the training folder is the user's data: a resume sets nothing aside, also when episodes were added to
    it after the checkpoint (which a collecting run would take for its own collections, written after it). The run
    starts (its checkpoint at 0 counts 3 episodes), the data grows, and the resumed run trains on it (without SAC
    updates: none of this depends on them)."""
    from planet_sac.config_loading import load_config
    from planet_sac.training.trainer import Trainer

    data = tmp_path / "data"
    data.mkdir()
    shipped = list_episodes(str(DATA / "pendulum_state"))
    for path in shipped[:3]:
        shutil.copy(path, data)
    config = load_config(SMOKE, [*RESUME_SETTINGS, "sac.updates_per_step=0"])
    trainer = Trainer(config, str(tmp_path / "run"), offline_data=str(data), progress=False)
    trainer.close()
    assert checkpoint_files(str(tmp_path / "run" / "checkpoints"))[-1].endswith("ckpt-0")
    for path in shipped[3:]:  # the data grew after the checkpoint at 0
        shutil.copy(path, data)
    trainer = Trainer(config, str(tmp_path / "run"), offline_data=str(data), progress=False)
    assert trainer.start_message.startswith("resumed ") and "after that checkpoint" not in trainer.start_message
    trainer.run(10)
    trainer.close()
    assert sorted(os.listdir(data)) == sorted(os.path.basename(path) for path in shipped)  # nothing moved, no interrupted/


@pytest.mark.slow
@pytest.mark.e2e
def test_a_resumed_run_still_collects_on_top_of_episodes_that_were_there_before_it(tmp_path):
    """Episodes a user put into train_episodes before the run started are not collections the run skips."""
    logdir = tmp_path / "run"
    trainer = _trainer(logdir)
    trainer.collect_seed_episodes()
    trainer.close()
    for _ in range(2):
        _copy_an_episode(logdir)
    shutil.rmtree(logdir / "checkpoints")  # a new run over a folder of 4 episodes
    (logdir / "metrics.jsonl").unlink(missing_ok=True)
    trainer = _trainer(logdir)
    trainer.run(10)
    trainer.close()
    trainer = _trainer(logdir)  # resumed at 10 with nothing written after its checkpoint
    assert "after that checkpoint" not in trainer.start_message
    trainer.run(20)
    trainer.close()
    assert len(list_episodes(str(logdir / "train_episodes"))) == 4 + 20 // 5


def test_a_runs_episode_counts_are_its_named_episodes_and_ignore_other_npz_files(tmp_path):
    """A run counts (and reconciles collections against) files named as it names episodes; a junk.npz dropped into
    train_episodes is neither an episode collected nor a step taken (by hand: 2 episodes, 30 + 45 steps)."""
    from planet_sac.episodes.folder import EpisodeFolder
    from planet_sac.episodes.storage import episode_filename

    folder = tmp_path / "train_episodes"
    folder.mkdir()
    for second, length in ((1, 30), (2, 45)):
        (folder / episode_filename(length, now=dt.datetime(2026, 1, 1, 0, 0, second))).write_bytes(b"")
    (folder / "junk.npz").write_bytes(b"not an episode")
    assert EpisodeFolder(str(folder)).counts() == (2, 75)
    assert EpisodeFolder(str(folder)).counts(oldest=1) == (1, 30)
    assert [os.path.basename(path)[-7:] for path in EpisodeFolder(str(folder)).collected()] == ["-30.npz", "-45.npz"]
