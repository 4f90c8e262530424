"""Kills, concurrent writers and numerical faults: nothing finished is ever lost."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.config_loading import load_config
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.loader import EpisodeReplay
from planet_sac.episodes.storage import load_episode
from planet_sac.training.learner import NonFiniteError
from planet_sac.training.run_dir import prepare_logdir
from planet_sac.training.trainer import Trainer, train
from tests.conftest import CONFIGS, ROOT


def load_bench(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.e2e
def test_survives_sigkill_at_random_moments(tmp_path):
    kill_resume = load_bench("kill_resume")
    # Two kills: one during start-up, one while training (cycle % 5 decides); bench/kill_resume.py runs 50.
    summary = kill_resume.kill_cycles(str(tmp_path / "run"), kills=2, seed=1, log=lambda *_: None)
    assert summary["kills_survived"] == 2
    assert summary["final_step"] >= 4  # the second kill came after the run had checkpointed, then 4 more updates
    assert summary["episodes"] > 0


@pytest.mark.slow
@pytest.mark.e2e
def test_two_collectors_and_a_reader_share_one_directory(tmp_path):
    directory = str(tmp_path / "shared")
    command = [sys.executable, "-m", "planet_sac", "collect", "--task", "gym:Pendulum-v1", "--obs", "state",
               "--episodes", "6", "--time-limit", "15", "--outdir", directory]
    logs = [tmp_path / f"collector{seed}.log" for seed in (1, 2)]
    collectors = []
    for seed, log in zip((1, 2), logs):
        with log.open("w") as stderr:  # the child holds its own copy of the file
            collectors.append(subprocess.Popen(command + ["--seed", str(seed)], stdout=subprocess.DEVNULL, stderr=stderr))
    replay = EpisodeReplay(directory, chunk_length=5, every=4, wait_seconds=60, seed=0)
    recent_paths = []
    chunks = replay.iter_with_info()
    while any(c.poll() is None for c in collectors) or replay.stats["files_loaded"] < 12:
        chunk, info = next(chunks)
        assert chunk["state"].shape == (5, 3)
        if info.source == "recent":
            recent_paths.append(info.path)
        if replay.stats["passes"] > 5000:
            break
    assert [c.wait() for c in collectors] == [0, 0], [log.read_text()[-2000:] for log in logs]
    files = list_episodes(directory)
    assert len(files) == 12 and len({os.path.basename(f).split("-")[1] for f in files}) == 12  # no name collision
    assert replay.stats["files_skipped"] == 0  # never saw a partial file
    assert len(recent_paths) == len(set(recent_paths))  # no episode yielded twice as "recent"
    for path in files:
        load_episode(path)


def test_two_processes_preparing_one_folder_at_once_both_succeed(tmp_path, monkeypatch):
    """The interleaving that failed a collector in CI: the second writer tests the folder between the first's
    write test and its clean-up. Each removes only its own probe, and no probe is left behind."""
    folder = str(tmp_path / "shared")
    remove = tf.io.gfile.remove
    interleaved = []

    def remove_after_the_other_writer(path):
        if not interleaved:
            interleaved.append(path)
            prepare_logdir(folder, "--outdir")  # the other collector, from start to end
        remove(path)

    monkeypatch.setattr(tf.io.gfile, "remove", remove_after_the_other_writer)
    prepare_logdir(folder, "--outdir")
    assert interleaved and os.path.basename(interleaved[0]).startswith(".")  # hidden: no folder lists it
    assert os.listdir(folder) == []


@pytest.mark.slow
def test_nan_updates_stop_the_run_and_keep_its_last_good_checkpoint(tmp_path, monkeypatch):
    """NaN updates stop a run with its checkpoint intact, a Trainer resumes it, and a finished run stays unchanged.

    Consecutive NaN updates stop the run (NonFiniteError) and leave its last good checkpoint, all finite, the latest.

    Then Trainer(...).run() on that logdir continues the run from it; it never starts over and overwrites the
    checkpoints. Then `train` on a run already at its train_steps (the same command run twice) says the step it
    is at and adds no update, episode or metrics record; scripts use that step to see the run finished."""
    config = load_config(CONFIGS / "smoke.yaml", ["optim.max_nonfinite_updates=3", "schedule.checkpoint_every=2",
                                                  "schedule.test_episodes=0", "sac.updates_per_step=0"])  # the model's NaN
    logdir = str(tmp_path / "run")
    first = Trainer(config, logdir, progress=False)
    first.run(train_steps=4)  # good updates, checkpoint at step 4
    good = tf.train.latest_checkpoint(f"{logdir}/checkpoints")
    assert good.endswith("ckpt-4")
    update = first.learner.update
    monkeypatch.setattr(first.learner, "update",
                        lambda batch: update(dict(batch, reward=tf.fill(tf.shape(batch["reward"]), np.nan))))
    with pytest.raises(NonFiniteError, match="3 consecutive updates had a NaN/inf"):
        first.run(train_steps=100)
    first.close()
    assert tf.train.latest_checkpoint(f"{logdir}/checkpoints") == good
    saved = tf.train.load_checkpoint(good)
    for name, _ in tf.train.list_variables(good):
        value = saved.get_tensor(name)
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            assert np.all(np.isfinite(value)), name

    second = Trainer(config, logdir, progress=False)  # no restore call: construction restores
    assert second.start_message.startswith(f"resumed {good} at step 4")
    assert int(second.counters.step.numpy()) == 4
    for name, variable in second.variables.items():
        np.testing.assert_array_equal(variable.numpy(), saved.get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE"),
                                      err_msg=name)
    assert second.run(train_steps=6)["step"] == 6
    second.close()
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    assert reader.get_tensor("variables/counters/step/.ATTRIBUTES/VARIABLE_VALUE") == 6
    assert reader.get_tensor("variables/optimizer/world_model/iterations/.ATTRIBUTES/VARIABLE_VALUE") == 6
    kept = tf.train.load_checkpoint(good)  # the good checkpoint is still there, unchanged
    assert kept.get_tensor("variables/optimizer/world_model/iterations/.ATTRIBUTES/VARIABLE_VALUE") == 4

    # The run is finished at 6: training it again to 6 returns its last training record and changes nothing.
    episodes = sorted(os.listdir(f"{logdir}/train_episodes"))
    with open(f"{logdir}/metrics.jsonl") as file:
        records = file.read()
    last_train = [json.loads(line) for line in records.splitlines() if json.loads(line).get("phase") == "train"][-1]
    assert train(config, logdir, train_steps=6, progress=False) == last_train  # what it last logged
    assert last_train["step"] == 6
    assert sorted(os.listdir(f"{logdir}/train_episodes")) == episodes
    with open(f"{logdir}/metrics.jsonl") as file:
        assert file.read() == records
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    assert reader.get_tensor("variables/optimizer/world_model/iterations/.ATTRIBUTES/VARIABLE_VALUE") == 6
