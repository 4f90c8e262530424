"""Collectors on a shared directory: a run's policy acting in its own process, following the run's checkpoints."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.acting.collector import Collector
from planet_sac.cli import main
from planet_sac.config import ConfigError
from planet_sac.config_loading import apply_overrides, check_override_keys, load_config
from planet_sac.episodes.folder import list_episodes
from planet_sac.training.trainer import Trainer
from tests.conftest import OLD_RUN, old_run_copy, save_version


@pytest.fixture
def run(tmp_path):
    logdir = tmp_path / "run"
    old_run_copy(logdir)
    return str(logdir)


def acting_values(collector: Collector) -> dict[str, np.ndarray]:
    return {name: variable.numpy().copy() for name, variable in collector.variables.items()}


@pytest.mark.slow
def test_collector_follows_the_runs_checkpoints(run, tmp_path):
    """The collector writes episodes, reloads a newer checkpoint, and with per_checkpoint waits for the next one.

    One per-checkpoint collector: it writes episodes acting with the newest checkpoint (step 10), reloads a newer
    one (11) whole between rounds, keeps its weights when nothing is newer, and in a run of two rounds plays the
    second only once the learner has saved the next checkpoint (40)."""
    outdir = str(tmp_path / "shared")
    collector = Collector(run, outdir, policy="sac", reload_every=0.05, per_checkpoint=True)
    saved, stop = threading.Event(), threading.Event()

    def learner():  # a new checkpoint only after the first round of the two-round run has been written
        while len(list_episodes(outdir)) < 3 and not stop.is_set():
            threading.Event().wait(0.05)
        if not stop.is_set():
            save_version(run, 0.5, step=40)
            saved.set()

    thread = threading.Thread(target=learner)
    try:
        assert collector.step == 10
        first = acting_values(collector)
        (summary,) = collector.run(1)
        assert summary["checkpoint_step"] == 10 and list_episodes(outdir) == [summary["path"]]
        save_version(run, 0.25, step=11)
        time.sleep(0.05)  # reload_every has passed: the next round reloads first
        (summary,) = collector.run(1)
        assert summary["checkpoint_step"] == 11 and len(list_episodes(outdir)) == 2
        after = acting_values(collector)
        assert all(np.all(value == 0.25) for name, value in after.items() if value.dtype.kind == "f")
        assert any(not np.array_equal(first[name], after[name]) for name in first)
        assert collector.reload() and collector.step == 11  # nothing newer: still acting, with the same weights
        assert all(np.array_equal(value, after[name]) for name, value in acting_values(collector).items())

        thread.start()
        first_round, second_round = collector.run(2)
        assert saved.is_set()
        # the second round waited for step 40
        assert (first_round["checkpoint_step"], second_round["checkpoint_step"]) == (11, 40)
        assert len(list_episodes(outdir)) == 4
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        collector.close()


def test_a_checkpoint_prefix_is_acted_with_and_each_seed_has_its_own_policy_noise(run, tmp_path):
    """`--checkpoint LOGDIR/checkpoints/ckpt-10` (which --help offers) used to be refused as 'no checkpoint yet';
    and every collector drew the same policy noise whatever its --seed (the run's seed + 1)."""
    prefix = f"{run}/checkpoints/ckpt-10"
    assert os.path.exists(prefix + ".index")
    states = {}
    for seed in (1, 2, 1):
        collector = Collector(prefix, str(tmp_path / f"out{seed}"), policy="sac", seed=seed)
        try:
            assert collector.prefix == prefix and collector.step == 10
            assert collector.reload()  # a prefix never changes: still acting with it
            state = collector.agent.policy.rng.state.numpy()
            assert states.setdefault(seed, state.tolist()) == state.tolist()  # a seed gives its stream again
        finally:
            collector.close()
    assert states[1] != states[2]
    with pytest.raises(ConfigError, match="is one checkpoint"):  # it would wait forever for a newer one
        Collector(prefix, str(tmp_path / "waits"), policy="sac", reload_every=1, per_checkpoint=True)
    learner = tf.random.Generator.from_seed(load_config(f"{run}/config.yaml").seed + 1).state.numpy().tolist()
    assert learner not in states.values()


def test_a_damaged_newer_checkpoint_is_never_half_applied(run, tmp_path, caplog):
    collector = Collector(run, str(tmp_path / "out"), policy="sac")
    try:
        before = acting_values(collector)
        save_version(run, 0.5, step=12)
        data = os.path.join(run, "checkpoints", "ckpt-12.data-00000-of-00001")
        with open(data, "r+b") as file:  # as if caught while being copied: most of the file is missing
            file.truncate(os.path.getsize(data) // 4)
        readable = 0  # some acting tensors can still be read, some cannot: a naive restore would mix two versions
        reader = tf.train.load_checkpoint(data.split(".data")[0])
        for name in collector.variables:
            try:
                reader.get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE")
                readable += 1
            except (tf.errors.OpError, IndexError, ValueError):
                pass
        assert 0 < readable < len(collector.variables)
        with caplog.at_level(logging.WARNING, logger="planet_sac"):
            assert collector.reload()  # still acting, with the previous weights
        assert collector.step == 10 and any("ckpt-12 is unreadable" in r.getMessage() for r in caplog.records)
        for name, value in acting_values(collector).items():
            np.testing.assert_array_equal(value, before[name])
        save_version(run, 0.75, step=13)  # the next good checkpoint is taken
        assert collector.reload() and collector.step == 13
        assert all(np.all(v == 0.75) for v in acting_values(collector).values() if v.dtype.kind == "f")
    finally:
        collector.close()


@pytest.mark.slow
def test_reloading_while_the_learner_writes_and_rotates_gives_whole_versions(run, tmp_path):
    """Checkpoints written (and old ones deleted, max_to_keep=3) while the collector reloads: never a mix."""
    from planet_sac.training.run_dir import resolve_run_config

    collector = Collector(run, str(tmp_path / "out"), policy="sac")
    trainer = Trainer(resolve_run_config(run), run, progress=False)
    floats = {name: v for name, v in trainer.variables.items()
              if name.startswith(("world_model/", "sac/")) and v.dtype.is_floating}
    done = threading.Event()

    def learner():
        for version in range(1, 31):
            for variable in floats.values():
                variable.assign(np.full(variable.shape, version, variable.dtype.as_numpy_dtype))
            trainer.counters.step.assign(100 + version)
            trainer.checkpointer.save(100 + version)
        done.set()

    thread = threading.Thread(target=learner)
    thread.start()
    seen = set()
    try:
        while not done.is_set() or collector.step != 130:
            collector.reload()
            values = {float(v.flat[0]) for name, v in acting_values(collector).items() if v.dtype.kind == "f"}
            if collector.step > 100:
                assert values == {float(collector.step - 100)}, f"mixed versions {sorted(values)} at step {collector.step}"
                seen.add(collector.step)
        assert 130 in seen
    finally:
        done.set()
        thread.join()
        trainer.close()
        collector.close()


@pytest.mark.parametrize("argv, message", [
    (["--reload-every", "0"], "--reload-every=0: must be a finite number of seconds > 0"),
    (["--reload-every", "-3"], "--reload-every=-3: must be a finite number of seconds > 0"),
    (["--reload-every", "inf"], "--reload-every=inf: must be a finite number of seconds > 0"),  # time.sleep's overflow
    (["--reload-every", "nan"], "--reload-every=nan: must be a finite number of seconds > 0"),
    (["--episodes", "0"], "--episodes=0: must be >= 1"),
])
def test_collect_command_rejects_bad_numbers_before_writing(run, tmp_path, capsys, argv, message):
    outdir = tmp_path / "out"
    base = ["collect", "--policy", "sac", "--checkpoint", run, "--outdir", str(outdir), "--episodes", "1"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not outdir.exists()


def test_a_collector_waiting_for_its_run_refuses_flags_it_cannot_check(tmp_path, capsys, monkeypatch):
    """Before the run has a config, --task/--obs/--action-repeat cannot be compared with it; they used to be
    accepted and never applied."""
    import planet_sac.acting.collector

    monkeypatch.setattr(planet_sac.acting.collector, "Collector", lambda *args, **kwargs: pytest.fail("collector started"))
    outdir = tmp_path / "out"
    assert main(["collect", "--policy", "sac", "--checkpoint", str(tmp_path / "future_run"), "--outdir", str(outdir),
                 "--episodes", "1", "--reload-every", "1", "--task", "gym:Pendulum-v1", "--action-repeat", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--task, --action-repeat:" in err[0] and "has no config yet" in err[0]
    assert not outdir.exists()


def test_a_collector_waiting_for_its_run_checks_its_set_keys_before_writing(tmp_path, capsys, monkeypatch):
    """A typo in --set used to surface only once the learner's first checkpoint appeared, on every collector."""
    import planet_sac.acting.collector

    monkeypatch.setattr(planet_sac.acting.collector, "Collector", lambda *args, **kwargs: pytest.fail("collector started"))
    outdir = tmp_path / "out"
    assert main(["collect", "--policy", "cem", "--checkpoint", str(tmp_path / "future_run"), "--outdir", str(outdir),
                 "--episodes", "forever", "--reload-every", "60", "--set", "env.num_env=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown config key 'env.num_env' (did you mean 'env.num_envs'?)" in err[0]
    assert not outdir.exists()
    # Only names and types: a setting that is valid with the run's config (smoke's cem.top_k=4) is not judged
    # against the defaults (top_k=100 > 50 candidates).
    class Started(Exception):
        pass

    def start(*args, **kwargs):
        raise Started

    monkeypatch.setattr(planet_sac.acting.collector, "Collector", start)
    with pytest.raises(Started):
        main(["collect", "--policy", "cem", "--checkpoint", str(tmp_path / "future_run"), "--outdir", str(outdir),
              "--episodes", "forever", "--reload-every", "60", "--set", "cem.candidates=50"])
    with pytest.raises(ConfigError, match="cem.candidates='many' has the wrong type"):
        check_override_keys(["cem.candidates=many"])


@pytest.mark.slow
def test_trainer_without_collection_learns_from_what_arrives(smoke_config, tmp_path):
    config = apply_overrides(smoke_config, ["schedule.collect=false", "schedule.train_steps=6", "schedule.collect_every=2",
                                            "schedule.checkpoint_every=1000", "schedule.test_episodes=0",
                                            "sac.updates_per_step=0"])  # the model alone: no SAC graphs to trace
    logdir = tmp_path / "run"
    shutil.copytree(OLD_RUN / "train_episodes", logdir / "train_episodes")  # as if written by collectors
    trainer = Trainer(config, str(logdir), progress=False)
    try:
        assert os.path.exists(logdir / "checkpoints" / "ckpt-0.index")  # collectors can start at once
        trainer.run()
        # Only seed episodes were needed: the directory already held enough, so the trainer wrote none.
        assert len(list_episodes(str(logdir / "train_episodes"))) == len(list_episodes(str(OLD_RUN / "train_episodes")))
        steps = sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(logdir / "checkpoints")
                       if name.endswith(".index"))
        assert steps[-3:] == [2, 4, 6]  # every collect_every updates, for the collectors to reload
        assert int(trainer.counters.train_episodes.numpy()) == len(list_episodes(str(OLD_RUN / "train_episodes")))
    finally:
        trainer.close()


def test_reload_every_must_be_positive(run, tmp_path):
    with pytest.raises(ConfigError, match="reload-every"):
        Collector(run, str(tmp_path / "out"), reload_every=0)


def test_per_checkpoint_needs_reload_every(run, tmp_path):
    with pytest.raises(ConfigError, match="--per-checkpoint needs --reload-every"):
        Collector(run, str(tmp_path / "out"), per_checkpoint=True)


@pytest.mark.slow
def test_a_collector_acts_with_its_policy_reloads_only_new_checkpoints_and_collects_what_is_asked(run, tmp_path,
                                                                                                 monkeypatch, capsys):
    """`planet-sac collect --checkpoint RUN --reload-every` follows a run and writes what is asked; --policy sets the
    train phase's policy (the run's own policy.train is cem); a look with no newer checkpoint restores nothing; with 2
    environments, 3 episodes are 3 (the last round runs one environment's)."""
    import planet_sac.acting.collector
    from planet_sac.control.policy import POLICIES

    made = []  # the command's collector
    restores = []  # the restores after its first one (at its start)

    class SpyCollector(planet_sac.acting.collector.Collector):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
            original = self.agent.restore
            monkeypatch.setattr(self.agent, "restore", lambda *args: restores.append(args) or original(*args))

    monkeypatch.setattr(planet_sac.acting.collector, "Collector", SpyCollector)
    outdir = str(tmp_path / "out")
    assert main(["collect", "--policy", "random", "--checkpoint", run, "--outdir", outdir, "--episodes", "3",
                 "--reload-every", "0.5", "--set", "env.num_envs=2", "--quiet"]) == 0
    assert len(list_episodes(outdir)) == 3 and "wrote 3 episodes" in capsys.readouterr().out
    (collector,) = made
    assert collector.config.policy.train == "cem" and collector.config.env.num_envs == 2
    assert int(collector.agent.policy.phase_policy[0].numpy()) == POLICIES.index("random")
    assert len(collector.collected) == 3
    assert collector.reload() and restores == []


def test_random_collection_starts_no_more_environments_than_episodes(tmp_path, monkeypatch):
    """`--episodes 2 --set env.num_envs=40` started 40 processes (about 250 MB each) for two episodes."""
    import planet_sac.acting.collector as collector

    asked = []
    make_envs = collector.make_envs

    def spy(env, **kwargs):
        asked.append(env.num_envs)
        return make_envs(env, **kwargs)

    monkeypatch.setattr(collector, "make_envs", spy)
    summaries = collector.collect_random(str(tmp_path / "out"), 2, "gym:Pendulum-v1", "state", time_limit=5,
                                         overrides=["env.num_envs=40"], progress=False)
    assert asked == [2] and len(summaries) == 2 and len(os.listdir(tmp_path / "out")) == 2


@pytest.mark.parametrize("where, message", [
    ("{run}", "--outdir {run} is a run directory; collect into its train_episodes/"),
    ("{run}/checkpoints", "--outdir {run}/checkpoints is in the checkpoints of the run in {real}; give another folder"),
    ("{run}/checkpoints/more", "--outdir {run}/checkpoints/more is in the checkpoints of the run in {real}"),
])
def test_collecting_into_a_runs_own_folder_or_its_checkpoints_is_refused(where, message, run, tmp_path, capsys):
    """Episodes were written beside the ckpt-* files (or into the run's top folder) without a word."""
    copy = Path(run)  # the fixture's own copy
    before = sorted(str(path) for path in copy.rglob("*"))
    outdir = where.format(run=copy)
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--time-limit", "3",
                 "--outdir", outdir]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"planet-sac collect: error: {message.format(run=copy, real=os.path.realpath(copy))}"] or (
        len(err) == 1 and message.format(run=copy, real=os.path.realpath(copy)) in err[0]), err
    assert sorted(str(path) for path in copy.rglob("*")) == before
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--time-limit", "3",
                 "--outdir", str(copy / "train_episodes"), "--quiet"]) == 0  # a learner's folder, shared: allowed


@pytest.mark.parametrize("target", ["{run}/config.yaml", "{run}/train_episodes"])
def test_a_checkpoint_that_is_no_run_says_what_to_pass(target, run, capsys):
    """It said `no checkpoint in RUN/config.yaml yet; start the trainer first`, as for a run not started."""
    assert main(["collect", "--policy", "sac", "--checkpoint", target.format(run=run), "--episodes", "1", "--outdir",
                 "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"no checkpoint at '{target.format(run=run)}': pass a logdir, its checkpoints/ folder" in err[0]
