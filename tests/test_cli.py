"""End-to-end runs of the `planet-sac` commands on the smoke config (in-process, a few seconds each)."""

import json
import logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.acting.evaluation import evaluate
from planet_sac.cli import main
from planet_sac.config import POLICIES
from planet_sac.config_loading import load_config
from planet_sac.episodes.folder import list_episodes
from planet_sac.training.trainer import Trainer
from tests.conftest import CONFIGS, DATA

SMOKE = str(CONFIGS / "smoke.yaml")


@pytest.fixture
def trained(smoke_run):
    """The session's smoke run (conftest.smoke_run): 10 updates, resumed to 20."""
    return smoke_run


def records(logdir):
    with open(f"{logdir}/metrics.jsonl") as file:
        return [json.loads(line) for line in file]


def test_run_writes_its_outputs(trained):
    logdir, _ = trained
    assert tf.io.gfile.exists(f"{logdir}/config.yaml")
    assert tf.train.latest_checkpoint(f"{logdir}/checkpoints").endswith("ckpt-20")
    rows = records(logdir)
    assert all({"step", "env_steps", "phase"} <= row.keys() for row in rows)
    train_rows = [row for row in rows if row["phase"] == "train" and "loss/total" in row]
    assert {"loss/state", "loss/reward", "loss/kl", "train/grad_norm", "train/steps_per_second"} <= train_rows[-1].keys()
    assert any("train/return" in row for row in rows)
    assert [row["step"] for row in rows if "test/return" in row] == [10, 20]


def test_metrics_say_where_the_wall_clock_went(trained):
    """time/update_seconds per update, time/collect_seconds per log window and time/test_seconds per test phase:
    positive where work was done, zero where none was, and never more than the wall-clock between records
    (the smoke run: log_every 5, collect_every 10, a test phase every 10 updates, resumed at step 10)."""
    logdir, _ = trained
    rows = records(logdir)
    train_rows = [row for row in rows if row["phase"] == "train" and "loss/total" in row]
    assert [row["step"] for row in train_rows] == [5, 10, 15, 20]
    assert all(row["time/update_seconds"] > 0 for row in train_rows)
    assert [row["step"] for row in train_rows if row["time/collect_seconds"] > 0] == [10, 20]  # collect_every 10
    assert all("train/return" in row for row in train_rows if row["time/collect_seconds"] > 0)
    test_rows = [row for row in rows if row["phase"] == "test"]
    assert [row["step"] for row in test_rows] == [10, 20] and all(row["time/test_seconds"] > 0 for row in test_rows)
    for previous, row in zip(train_rows, train_rows[1:]):
        accounted = row["time/update_seconds"] * (row["step"] - previous["step"]) + row["time/collect_seconds"]
        assert accounted <= row["time"] - previous["time"] + 0.01, (previous, row)


def test_event_files_are_readable(trained):
    logdir, _ = trained
    tags = set()
    for path in tf.io.gfile.glob(f"{logdir}/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    assert {"loss/total", "loss/kl", "test/return", "train/return", "train/grad_norm"} <= tags


def test_resume_continues_and_loses_or_duplicates_nothing(trained):
    logdir, first_train = trained
    steps = [row["step"] for row in records(logdir) if row["phase"] == "train"]
    assert steps == sorted(steps) and steps[-1] == 20  # no step repeated after the resume
    train_files = list_episodes(f"{logdir}/train_episodes")
    assert set(first_train) <= set(train_files)  # nothing collected before the stop is lost
    assert len(train_files) == len(first_train) + 1  # one more episode at step 20, no new seed episodes
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    assert reader.get_tensor("variables/counters/step/.ATTRIBUTES/VARIABLE_VALUE") == 20
    assert reader.get_tensor("variables/optimizer/world_model/iterations/.ATTRIBUTES/VARIABLE_VALUE") == 20


def test_resume_with_conflicting_setting_is_refused(trained, capsys):
    logdir, _ = trained
    assert main(["train", "--logdir", logdir, "--set", "model.deter_size=32", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "changed: model.deter_size" in err and "pass --force" in err and "no update yet" not in err


def test_a_changed_config_of_a_run_that_never_updated_says_to_start_again(tmp_path, capsys):
    """A start that stopped before its first update (ckpt-0 only) is not an experiment worth keeping: the
    refusal says so, instead of offering --force, which could not restore ckpt-0 into other shapes."""
    logdir = str(tmp_path / "run")
    assert main(["train", "--config", SMOKE, "--logdir", logdir, "--train-steps", "0", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", "--logdir", logdir, "--set", "model.deter_size=32", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "changed: model.deter_size" in err and f"it has made no update yet: delete {logdir}" in err


@pytest.mark.slow
def test_evaluate_runs_each_policy_it_names_and_writes_a_video(trained, tmp_path, capsys):
    """One command, four policies on the same environment seed: a row each, four different returns, the
    deterministic SAC mode repeats exactly, and the video is the first policy's episode."""
    logdir, _ = trained
    video, returns_file = tmp_path / "episode.gif", tmp_path / "returns.json"
    assert main(["evaluate", "--logdir", logdir, "--episodes", "1", "--seed", "7", "--video", str(video),
                 "--json", str(returns_file), "--policy", *POLICIES]) == 0
    out = capsys.readouterr().out
    means = {}
    for policy in POLICIES:
        row = re.search(rf"^{policy}\s+(-?\d+\.\d)\s", out, re.M)
        assert row, out
        means[policy] = float(row.group(1))
    assert len(set(means.values())) == len(POLICIES), means
    assert "checkpoint step 20" in out and video.stat().st_size > 1000
    written = json.loads(returns_file.read_text())  # the same episodes, per policy, as the table
    assert (written["checkpoint_step"], written["seed"], written["episodes"]) == (20, 7, 1)
    assert {policy: round(entry["returns"][0], 1) for policy, entry in written["policies"].items()} == means
    assert sorted(path.name for path in tmp_path.iterdir()) == ["episode.gif", "returns.json"]  # no temporary left
    assert out.splitlines()[0].startswith("policy") and out.splitlines()[0].endswith(f"(1 episode, {logdir})")
    assert round(evaluate(logdir, 1, "sac", seed=7)["mean"], 1) == means["sac"]  # the actor's mode in the test phase
    result = evaluate(logdir, 3, "random", seed=7)
    returns = np.array(result["returns"])
    assert len(set(result["returns"])) == 3 and result["step"] == 20
    assert (result["mean"], result["min"], result["max"]) == pytest.approx((returns.mean(), returns.min(), returns.max()))
    assert result["std"] == pytest.approx(np.sqrt(np.mean((returns - returns.mean()) ** 2)))  # population std (ddof 0)


@pytest.mark.slow
def test_an_interrupted_evaluate_keeps_the_policies_it_finished_in_its_json(trained, tmp_path, monkeypatch, capsys):
    """`evaluate --json`: rewritten after each policy, so a stop keeps the finished ones; the same command then
    plays only the others (with a video, the first policy again, to record it), with the same returns.

    It reads the session's smoke run (evaluate writes nothing into it): its policy runs as a graph, where
    tests/fixtures/run_0_1 (the default policy.jit_compile) compiled the policy with XLA in each of the three
    commands, some 7 CPU seconds each."""
    import planet_sac.acting.actor as actor_module

    run, _ = trained
    returns_file = tmp_path / "returns.json"
    argv = ["evaluate", "--logdir", run, "--episodes", "2", "--seed", "3", "--policy", "random", "sac",
            "--json", str(returns_file)]
    played, original, stop_at = [], actor_module.Actor.run, [3]

    def run_or_stop(self, count, *args, **kwargs):
        played.append(count)
        if len(played) in stop_at:  # the first episode of sac
            raise KeyboardInterrupt
        return original(self, count, *args, **kwargs)

    monkeypatch.setattr(actor_module.Actor, "run", run_or_stop)
    assert main(argv) == 130
    saved = json.loads(returns_file.read_text())
    assert list(saved["policies"]) == ["random"] and len(saved["policies"]["random"]["returns"]) == 2
    assert (saved["checkpoint_step"], saved["seed"], saved["episodes"]) == (20, 3, 2)
    random_returns = saved["policies"]["random"]["returns"]
    capsys.readouterr()
    stop_at.clear()
    assert main(argv) == 0
    assert len(played) == 3 + 2  # sac's two episodes only
    saved = json.loads(returns_file.read_text())
    assert list(saved["policies"]) == ["random", "sac"] and saved["policies"]["random"]["returns"] == random_returns
    assert "kept from an earlier evaluation" in capsys.readouterr().err
    assert main([*argv, "--video", str(tmp_path / "episode.gif")]) == 0
    assert len(played) == 5 + 2 and (tmp_path / "episode.gif").stat().st_size > 1000  # random again, for its video
    assert json.loads(returns_file.read_text())["policies"]["random"]["returns"] == random_returns


@pytest.mark.slow
def test_evaluating_a_run_that_has_not_trained_says_so(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    assert main(["train", "--config", SMOKE, "--logdir", logdir, "--train-steps", "0", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--logdir", logdir, "--episodes", "1", "--policy", "random"]) == 0
    captured = capsys.readouterr()
    assert f"checkpoint step 0: {logdir} has not trained yet" in captured.err
    assert "checkpoint step 0" in captured.out


def test_evaluate_refuses_an_output_file_it_could_not_write_before_any_episode(trained, tmp_path, capsys):
    logdir, _ = trained
    (tmp_path / "folder.gif").mkdir()
    for video, message in [(tmp_path / "missing" / "e.gif", f"the folder {tmp_path / 'missing'} does not exist"),
                           (tmp_path / "folder.gif", "folder.gif is a folder; give a file name")]:
        assert main(["evaluate", "--logdir", logdir, "--episodes", "1", "--video", str(video)]) == 2
        out, err = capsys.readouterr()
        assert message in err and "return" not in out
    # the same for the returns' file, before the agent is built
    assert main(["evaluate", "--logdir", logdir, "--episodes", "1", "--json", str(tmp_path / "missing" / "r.json")]) == 2
    out, err = capsys.readouterr()
    assert f"the folder {tmp_path / 'missing'} does not exist" in err and "--json" in err and "policy" not in out


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["cem", "sac"])
def test_collect_with_a_trained_policy(trained, tmp_path, policy):
    logdir, _ = trained
    outdir = tmp_path / policy
    assert main(["collect", "--policy", policy, "--checkpoint", logdir, "--episodes", "2", "--outdir", str(outdir)]) == 0
    assert len(list_episodes(str(outdir))) == 2


def test_collect_random_and_bad_arguments(tmp_path, capsys):
    outdir = str(tmp_path / "random")
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "2", "--outdir", outdir,
                 "--time-limit", "20"]) == 0
    assert [re.search(r"-(\d+)\.npz$", path).group(1) for path in list_episodes(outdir)] == ["20", "20"]
    assert main(["collect", "--policy", "cem", "--episodes", "1", "--outdir", outdir]) == 2
    assert "needs --checkpoint" in capsys.readouterr().err
    assert main(["collect", "--task", "Pendulum-v1", "--episodes", "1", "--outdir", outdir]) == 2
    assert "gym:Pendulum-v1" in capsys.readouterr().err


def test_a_collection_that_fails_before_its_first_episode_leaves_no_folder_it_made(tmp_path, capsys):
    """An unknown gym id is found when the environment starts, after --outdir was made: the folder goes again;
    a folder that existed before stays, empty or not."""
    outdir = tmp_path / "new"
    assert main(["collect", "--task", "gym:Pendulum-v9", "--obs", "state", "--episodes", "1", "--outdir", str(outdir)]) == 2
    assert "Pendulum-v9" in capsys.readouterr().err
    assert not outdir.exists()
    empty, kept = tmp_path / "empty", tmp_path / "kept"
    empty.mkdir()
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    for folder in (empty, kept):
        assert main(["collect", "--task", "gym:Pendulum-v9", "--obs", "state", "--episodes", "1", "--outdir", str(folder)]) == 2
    assert empty.is_dir() and (kept / "notes.txt").read_text() == "mine"


def test_variables_and_filtered_restore_into_a_new_run(trained, tmp_path, capsys, caplog):
    logdir, _ = trained
    assert main(["variables", logdir]) == 0
    listing = capsys.readouterr().out
    assert "world_model/rssm/gru/gates_kernel" in listing and "sac/actor/out/kernel" in listing
    new = str(tmp_path / "new_head")
    with caplog.at_level(logging.INFO, logger="planet_sac"):
        assert main(["train", "--config", SMOKE, "--logdir", new, "--restore-from", logdir, "--include", "world_model/",
                     "--exclude", "world_model/reward/", "--train-steps", "0", "--set", "schedule.test_episodes=0"]) == 0
    names = [name[len("variables/"):-len("/.ATTRIBUTES/VARIABLE_VALUE")] for name, _ in
             tf.train.list_variables(tf.train.latest_checkpoint(f"{logdir}/checkpoints")) if name.startswith("variables/")]
    selected = [name for name in names if name.startswith("world_model/") and not name.startswith("world_model/reward/")]
    assert f"restored {len(selected)} (world_model {len(selected)});" in caplog.text  # --include and --exclude passed on
    assert main(["train", "--config", SMOKE, "--logdir", str(tmp_path / "x"), "--restore-from", logdir,
                 "--include", "nothing_like_this/", "--quiet"]) == 2
    assert "matches no variable" in capsys.readouterr().err


def test_filtered_restore_sets_exactly_the_selected_variables(trained, tmp_path):
    """Right after construction, before any update: selected variables hold the source's values, the rest their own."""
    logdir, _ = trained
    config = load_config(SMOKE, ["schedule.test_episodes=0"])
    fresh = Trainer(config, str(tmp_path / "fresh"), progress=False)  # same seed: the initial values
    initial = {name: variable.numpy() for name, variable in fresh.variables.items()}
    fresh.close()
    trainer = Trainer(config, str(tmp_path / "head"), progress=False, restore_from=logdir,
                      include=["world_model/"], exclude=["world_model/reward/"])
    trainer.close()
    source = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    restored = excluded = 0
    for name, variable in trainer.variables.items():
        value, stored = variable.numpy(), source.get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE")
        if name.startswith("world_model/") and not name.startswith("world_model/reward/"):
            np.testing.assert_array_equal(value, stored, err_msg=name)
            restored += 1
        else:
            np.testing.assert_array_equal(value, initial[name], err_msg=name)
            if not np.array_equal(stored, initial[name]):
                excluded += 1  # the source trained it: not restoring it is visible
    assert restored > 10 and int(trainer.counters.step.numpy()) == 0
    assert any(name.startswith("world_model/reward/") for name in trainer.variables) and excluded > 10
    assert trainer.start_message.startswith(f"from {logdir}: restored {restored} (world_model {restored});")


def test_filtered_restore_of_everything_leaves_the_new_runs_own_state(trained, tmp_path):
    """`--include .*` takes the model, head and optimizer slots, never what belongs to the run: its random-number
    streams (a new seed must draw its own noise) and its counters of steps, episodes, test phases and skipped updates.
    The test-phase counter is the logic of test_planet_fidelity's `e2e` filtered restore: a new run that took the
    source's count of test phases would skip its own first ones."""
    import shutil

    config = load_config(SMOKE, ["schedule.test_episodes=0"])
    logdir = str(tmp_path / "source")
    shutil.copytree(trained[0], logdir)
    with_skips = Trainer(load_config(f"{logdir}/config.yaml"), logdir, progress=False)  # resumes the copy
    with_skips.learner.skipped_updates.assign(3)
    with_skips.learner.consecutive_skips.assign(2)
    with_skips.checkpointer.save(int(with_skips.counters.step.numpy()))
    with_skips.close()
    fresh = Trainer(config, str(tmp_path / "fresh"), progress=False)
    initial = {name: variable.numpy() for name, variable in fresh.variables.items()}
    fresh.close()
    trainer = Trainer(config, str(tmp_path / "all"), progress=False, restore_from=logdir)
    trainer.close()
    source = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    run_state = ["learner/rng_state", "policy/rng_state", "learner/skipped_updates", "learner/consecutive_skips",
                 "counters/step", "counters/env_steps", "counters/train_episodes", "counters/test_episodes",
                 "counters/test_phases", "run_state/replay"]
    for name in run_state:
        np.testing.assert_array_equal(trainer.variables[name].numpy(), initial[name], err_msg=name)
    for name in run_state:  # the source's differ: the check above can fail
        assert not np.array_equal(source.get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE"), initial[name])
    # the new run's own episodes (none yet), not the source's
    assert trainer.variables["run_state/train_episodes"].numpy() == b"[]"
    assert source.get_tensor("variables/run_state/train_episodes/.ATTRIBUTES/VARIABLE_VALUE") != b"[]"
    model = [name for name in trainer.variables if name.startswith(("world_model/", "sac/", "optimizer/"))]
    for name in model:
        np.testing.assert_array_equal(trainer.variables[name].numpy(),
                                      source.get_tensor(f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE"), err_msg=name)
    assert trainer.phase() == "train"  # no test phase owed at step 0 (the source's ran 2)
    assert len(model) + len(run_state) + 3 == len(trainer.variables)  # + three run_state/


@pytest.mark.slow
def test_offline_training_on_a_terminating_task_warns_once(tmp_path):
    """Offline training from the shipped data, with imagination on a task that terminates, warns once.

    Offline training from the shipped episodes (one made to end in a termination): no environment episode is
    collected and no test phase runs. With imagined SAC transitions and no continuation head, the replayed
    termination makes the trainer say so, once over its two log windows."""
    data = tmp_path / "data"
    data.mkdir()
    for index, path in enumerate(list_episodes(str(DATA / "pendulum_state"))):
        with np.load(path) as file:
            episode = dict(file)
        if index == 0:
            episode["discount"][-1] = 0.0
        np.savez_compressed(str(data / os.path.basename(path)), **episode)
    warnings: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = warnings.append
    logging.getLogger("planet_sac").addHandler(handler)
    try:
        logdir = str(tmp_path / "run")
        assert main(["train", "--config", SMOKE, "--logdir", logdir, "--offline-data", str(data), "--train-steps", "10",
                     "--set", "sac.imagination_horizon=3", "--set", "sac.real_ratio=0.5", "--quiet"]) == 0
    finally:
        logging.getLogger("planet_sac").removeHandler(handler)
    messages = [record.getMessage() for record in warnings if "without a continuation head" in record.getMessage()]
    assert len(messages) == 1 and messages[0].startswith("1 replayed episode(s) end in a termination")
    rows = records(logdir)
    assert {row["replay/terminated_episodes"] for row in rows if "replay/terminated_episodes" in row} == {1.0}
    assert [row["step"] for row in rows if "loss/total" in row] == [5, 10]  # both log windows
    assert all(row["phase"] == "train" for row in rows)
    assert not tf.io.gfile.exists(f"{logdir}/train_episodes")


def test_offline_training_closes_the_environment_it_read_the_shapes_from(tmp_path, monkeypatch, smoke_config):
    """Offline, the task's environment only gives the observation and action shapes (no collection, no test
    phases): it is closed at once instead of holding a simulator (for dm_control, MuJoCo) for the whole run."""
    import planet_sac.training.collection as collection_module

    made, closed = [], []

    def spying_make_env(*args, **kwargs):
        env = real_make_env(*args, **kwargs)
        close = env.close
        env.close = lambda: (closed.append(env), close())
        made.append(env)
        return env

    real_make_env = collection_module.restarting_env  # the offline run reads the shapes from the test environment
    monkeypatch.setattr(collection_module, "restarting_env", spying_make_env)
    trainer = Trainer(smoke_config, str(tmp_path / "run"), offline_data=str(DATA / "pendulum_state"), progress=False)
    try:
        assert len(made) == 1 and closed == made and trainer.envs.made() == []
    finally:
        trainer.close()


def test_imagination_termination_warning_needs_both_imagination_and_a_termination(smoke_config):
    from planet_sac.config_loading import apply_overrides
    from planet_sac.training.run_checks import imagination_termination_warning

    imagining = apply_overrides(smoke_config, ["sac.imagination_horizon=3", "sac.real_ratio=0.5"])
    assert imagination_termination_warning(imagining, {"terminated_episodes": 0}) is None
    assert imagination_termination_warning(smoke_config, {"terminated_episodes": 2}) is None
    assert "sac.real_ratio: 1.0" in imagination_termination_warning(imagining, {"terminated_episodes": 2})


def test_version_is_the_installed_package_version(capsys):
    """`planet-sac --version` prints the version the installed metadata holds (pyproject reads it from
    planet_sac.__version__, so the two cannot drift)."""
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"planet-sac {version('planet-sac')}"


def test_logdir_that_is_a_file_fails_fast(tmp_path, capsys):
    path = tmp_path / "file"
    path.write_text("x")
    assert main(["train", "--config", SMOKE, "--logdir", str(path), "--quiet"]) == 2
    assert "is a file" in capsys.readouterr().err


def test_offline_data_with_other_observations_is_a_clear_error(tmp_path, capsys):
    assert main(["train", "--config", SMOKE, "--logdir", str(tmp_path / "x"), "--offline-data",
                 str(DATA / "cartpole_swingup_image"), "--set", "data.wait_seconds=0.5", "--quiet"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "spec mismatch (no 'state' observations, has image)" in error and "env.obs" in error


def test_train_without_a_config_on_a_folder_with_no_run_is_refused_as_a_mistyped_resume(tmp_path, capsys, monkeypatch):
    """`planet-sac train --logdir RUN --train-steps N` resumes RUN; with RUN mistyped it would start PlaNet's full
    pixel run: the command line refuses it in one line, before anything is written."""
    import planet_sac.training.trainer as trainer

    def started(*args, **kwargs):
        raise AssertionError("a new run was started")

    monkeypatch.setattr(trainer, "train", started)
    typo = tmp_path / "cartpol"
    assert main(["train", "--logdir", str(typo), "--train-steps", "5", "--quiet"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"--logdir {typo} holds no run to resume" in error[0] and "give --config" in error[0]
    assert not typo.exists()


def test_a_new_run_without_a_config_is_warned_that_it_takes_planets_full_defaults(tmp_path, caplog):
    from planet_sac.training.run_dir import resolve_run_config

    with caplog.at_level(logging.WARNING, logger="planet_sac"):
        config = resolve_run_config(str(tmp_path / "new"))
        resolve_run_config(str(tmp_path / "other"), str(SMOKE))
    assert config.env.task == "dmc:cheetah-run"  # configs/default.yaml
    warned = [record.getMessage() for record in caplog.records]
    assert len(warned) == 1 and "no --config for the new run" in warned[0]
    assert "dmc:cheetah-run from image, 400000 updates" in warned[0]
