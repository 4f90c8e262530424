"""Errors a newcomer meets: each is one line saying what to do (exit status 2) and writes nothing;
programming errors keep their traceback."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.cli import main
from planet_sac.envs import DMCEnv, make_env
from planet_sac.errors import MissingPackageError, SetupError
from planet_sac.training.learner import Learner
from tests.conftest import CONFIGS, OLD_RUN, ROOT

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
    assert "model.deter_sise" in line and "did you mean 'model.deter_size'?)" in line
    assert os.listdir(tmp_path) == [] and snapshot(run) == before


def test_set_with_a_wrong_value_is_one_line_too(tmp_path, capsys):
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--outdir",
                 str(tmp_path / "out"), "--set", "env.image_size=-1"]) == 2
    assert "env.image_size=-1: must be > 0" in one_line_error(capsys, "collect")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["collect", "--seed", "-1"], "argument --seed: -1 must be >= 0"),
    (["evaluate", "--logdir", "x", "--seed", "-2"], "argument --seed: -2 must be >= 0"),
    (["collect", "--seed", "5000000000"], "argument --seed: 5000000000 must be <= 2147483647"),  # dm_control: 2**32
    (["collect", "--action-repeat", "0"], "argument --action-repeat: 0 must be >= 1"),
    (["collect", "--time-limit", "two"], "argument --time-limit: 'two' is not a whole number"),
])
def test_out_of_range_numbers_on_the_command_line_are_usage_errors(argv, message, tmp_path, capsys):
    """Refused by the parser (exit status 2, one error line naming the command), not by gymnasium with a traceback."""
    if argv[0] == "collect":
        argv = [*argv, "--task", "gym:Pendulum-v1", "--episodes", "1", "--outdir", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and message in err
    assert err.startswith(f"planet-sac {argv[0]}: error: argument ") and err.endswith(f"(planet-sac {argv[0]} --help shows the usage)\n")
    assert os.listdir(tmp_path) == []


def test_random_collection_refuses_set_keys_it_would_ignore(tmp_path, capsys):
    """Random collection's task, observations, action repeat and episode length are flags; a `--set` of them
    used to be ignored without a word (a 200-step state episode for env.time_limit=10, env.obs=image)."""
    out = str(tmp_path / "out")
    assert main(["collect", "--task", "gym:Pendulum-v1", "--obs", "state", "--episodes", "1", "--outdir", out,
                 "--set", "env.time_limit=10", "--quiet"]) == 2
    line = one_line_error(capsys, "collect")
    assert "--set env.time_limit=10: random collection takes only env.image_size, env.num_envs, env.shadow_size" in line
    assert "--time-limit" in line and os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv, flag", [
    (["config-reference", "--out", "{missing}/config.md"], "--out"),
    (["bench", "--size", "tiny", "--reps", "1", "--json", "{missing}/bench.json"], "--json"),
])
def test_an_output_file_in_a_missing_folder_is_refused_before_any_work(argv, flag, tmp_path, capsys, monkeypatch):
    import planet_sac.benchmark

    monkeypatch.setattr(planet_sac.benchmark, "run", lambda *args: pytest.fail("timed before checking --json"))
    missing = str(tmp_path / "missing")
    assert main([item.format(missing=missing) for item in argv]) == 2
    line = one_line_error(capsys, argv[0])
    assert f"{flag} {missing}/" in line and f"the folder {missing} does not exist" in line


@pytest.mark.parametrize("flag, relative", [
    ("--json", "config.yaml"), ("--json", "metrics.jsonl"), ("--json", "checkpoints/returns.json"),
    ("--video", "train_episodes/first.gif"),
])
def test_evaluate_refuses_to_write_over_the_runs_own_files(flag, relative, run, capsys):
    before = snapshot(run)
    target = os.path.join(run, relative)
    assert main(["evaluate", "--logdir", run, "--episodes", "1", "--policy", "random", flag, target, "--quiet"]) == 2
    line = one_line_error(capsys, "evaluate")
    assert f"{flag} {target} would overwrite a file of the run in {os.path.realpath(run)}" in line
    assert snapshot(run) == before


def test_an_output_file_is_refused_only_where_a_run_or_an_episode_owns_it(tmp_path):
    from planet_sac.config import ConfigError
    from planet_sac.errors import check_output_file

    run = tmp_path / "suite" / "runs" / "task" / "seed0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "events.out.tfevents.1.host").write_text("")
    (tmp_path / "episode.npz").write_text("")
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "config.yaml").write_text("seed: 0\n")  # a config alone is no run
    for refused in (run / "config.yaml", run / "metrics.jsonl", run / "run.lock", run / "events.out.tfevents.1.host",
                    run / "checkpoints" / "new.json", tmp_path / "episode.npz"):
        with pytest.raises(ConfigError, match="would overwrite"):
            check_output_file(str(refused), "--json")
    for allowed in (run / "returns.json", tmp_path / "suite" / "table.json", tmp_path / "new.npz",
                    tmp_path / "loose" / "config.yaml"):
        check_output_file(str(allowed), "--json")


def test_the_run_layout_the_output_check_protects_is_the_runs(run):
    from planet_sac.errors import RUN_FILES, RUN_FOLDERS

    entries = set(os.listdir(run))
    assert {"config.yaml", "metrics.jsonl", "checkpoints", "train_episodes", "test_episodes"} <= entries
    assert all(name in RUN_FILES + RUN_FOLDERS or name.startswith("events.out.tfevents") for name in entries), entries


def test_suite_out_that_is_a_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "file"
    path.write_text("x")
    assert main(["suite", "--config", SMOKE, "--tasks", "gym:Pendulum-v1", "--action-repeat", "gym:Pendulum-v1=2",
                 "--seeds", "0", "--env-steps", "200", "--out", str(path), "--quiet"]) == 2
    assert f"--out {path} is a file, not a directory" in one_line_error(capsys, "suite")
    assert path.read_text() == "x"


@pytest.mark.parametrize("chunk, time_limit", [(52, 50), (12, 10)])
def test_chunks_longer_than_the_collected_episodes_are_refused_before_the_run_is_written(chunk, time_limit, tmp_path,
                                                                                       capsys):
    """The loader would wait for episodes long enough and fail at the first update, after config.yaml and the
    first checkpoint were written, and the run would then refuse the shorter chunk as a change of config."""
    logdir = str(tmp_path / "run")
    assert main(["train", "--config", SMOKE, "--logdir", logdir, "--set", f"data.chunk_length={chunk}",
                 "--set", f"env.time_limit={time_limit}", "--quiet"]) == 2
    line = one_line_error(capsys, "train")
    assert f"data.chunk_length={chunk} is longer than the episodes the run collects" in line
    assert f"(env.time_limit={time_limit}: {time_limit + 1} steps with the first observation)" in line
    assert not os.path.exists(logdir)


@pytest.mark.parametrize("extra, message", [
    (["--per-checkpoint"], "--per-checkpoint needs --checkpoint LOGDIR and --reload-every SECONDS"),
    (["--set", "env.shadow_size=1024"], "env.shadow_size=1024: applies to dm_control tasks only"),
    (["--set", "env.image_size=32"], "env.image_size=32: image observations are 64x64"),
])
def test_random_collection_refuses_bad_inputs_before_making_the_outdir(extra, message, tmp_path, capsys):
    outdir = tmp_path / "out"
    assert main(["collect", "--task", "gym:Pendulum-v1", "--episodes", "1", "--outdir", str(outdir), *extra]) == 2
    assert message in one_line_error(capsys, "collect")
    assert not outdir.exists()


@pytest.mark.parametrize("extra, message", [
    (["--set", "env.obs=image", "--set", "env.image_size=32"], "env.image_size=32: image observations are 64x64"),
    (["--offline-data", "{tmp}/no_such_folder"], "no_such_folder is not a directory of episodes"),
    (["--restore-from", "{tmp}/no_such_run"], "no checkpoint at"),
    (["--restore-from", "{source}", "--include", "["], "--include '[' is not a regular expression (unterminated"),
    (["--restore-from", "{source}", "--include", "world_model/", "--exclude", "a(", "b"],
     "--exclude 'a(' is not a regular expression (missing ), unterminated subpattern"),
])
def test_train_refuses_bad_inputs_before_making_the_logdir(extra, message, tmp_path, capsys):
    """These used to fail after LOGDIR and its run.lock (and an events file) were made."""
    source = tmp_path / "source"
    if "{source}" in extra:
        assert main(["train", "--config", SMOKE, "--logdir", str(source), "--train-steps", "0", "--quiet"]) == 0
        capsys.readouterr()
    logdir = tmp_path / "run"
    argv = [item.format(tmp=tmp_path, source=source) for item in extra]
    assert main(["train", "--config", SMOKE, "--logdir", str(logdir), *argv, "--quiet"]) == 2
    assert message in one_line_error(capsys, "train")
    assert not logdir.exists()


@pytest.mark.parametrize("folder, message", [
    ("empty", "after 0s (0 files skipped"),
    ("corrupt", "(2 files skipped: 1 empty file, 1 not a zip/npz file)"),
    ("short", "All are shorter than chunk_length 10 (the longest has 4 steps)"),
])
def test_offline_data_without_a_usable_episode_is_refused_before_the_logdir_is_made(folder, message, tmp_path, capsys):
    """It used to fail after the run's config and first checkpoint were written, so that the corrected retry into the
    same logdir was refused as a changed config. Skipped files are still logged, one warning each."""
    data = tmp_path / folder
    data.mkdir()
    if folder == "corrupt":
        (data / "a-5.npz").write_bytes(b"PK\x03\x04 truncated")
        (data / "b-5.npz").write_bytes(b"")
    if folder == "short":
        with np.load(sorted((ROOT / "data" / "pendulum_state").glob("*.npz"))[0]) as shipped:
            np.savez_compressed(data / "s-3.npz", **{key: value[:4] for key, value in shipped.items()})
    logdir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, "--logdir", str(logdir), "--offline-data", str(data),
                 "--set", "data.wait_seconds=0", "--quiet"]) == 2
    *warnings, line = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"planet-sac train: error: No usable episodes in {data} ") and message in line, line
    assert len(warnings) == len(os.listdir(data)) and all(w.startswith("warning: Skipping episode file") for w in warnings)
    assert not logdir.exists()


def test_chunks_longer_than_the_tasks_own_episodes_are_refused_too(tmp_path, capsys):
    """env.time_limit=null: Pendulum-v1's registered 200 steps at action repeat 2 are 100 agent steps (101 with the
    first observation); the loader used to wait for episodes of 102 steps and then fail."""
    logdir = str(tmp_path / "run")
    assert main(["train", "--config", SMOKE, "--logdir", logdir, "--set", "data.chunk_length=102",
                 "--set", "env.time_limit=null", "--set", "env.action_repeat=2", "--quiet"]) == 2
    line = one_line_error(capsys, "train")
    assert ("(env.time_limit=null: the task's own episodes, 100 agent steps at action repeat 2: 101 steps with the "
            "first observation)") in line
    assert not os.path.exists(logdir)


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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("command", ["configs", "config-reference"])  # printed line by line; in one piece at the end
def test_output_piped_into_a_reader_that_stops_early_ends_quietly(command):
    """`planet-sac configs | head -1`: a reader that closed the pipe ends the command quietly (status 141, as a
    command killed by SIGPIPE), with no traceback; the reader here closes before the command writes anything."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen([sys.executable, "-m", "planet_sac", command], stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    os.close(read_end)
    stderr = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 141 and stderr == "", stderr


EMPTY_PATHS = [  # every argument that names a file or folder, left empty ('' as a shell's unset "$VAR" gives)
    ["train", "--config", SMOKE, "--logdir", ""],
    ["train", "--config", "", "--logdir", "{out}"],
    ["train", "--config", SMOKE, "--logdir", "{out}", "--restore-from", ""],
    ["train", "--config", SMOKE, "--logdir", "{out}", "--offline-data", " "],
    ["collect", "--task", "gym:Pendulum-v1", "--episodes", "1", "--outdir", ""],
    ["collect", "--policy", "sac", "--checkpoint", "", "--episodes", "1", "--outdir", "{out}"],
    ["evaluate", "--logdir", ""],
    ["evaluate", "--logdir", "{out}", "--json", ""],
    ["evaluate", "--logdir", "{out}", "--video", ""],
    ["bench", "--json", ""],
    ["export", "--logdir", ""],
    ["export", "--logdir", "{out}", "--out", ""],
    ["suite", "--config", SMOKE, "--out", ""],
    ["suite", "--config", "", "--out", "{out}"],
    ["plot", ""],
    ["plot", "{out}", "--out", ""],
    ["plot", "{out}.json.gz", "--baselines", ""],
    ["variables", ""],
    ["config-reference", "--out", ""],
]


@pytest.mark.parametrize("argv", EMPTY_PATHS, ids=lambda argv: "-".join(a.strip("-") for a in argv if a.startswith("-") or a in ("", " ")))
def test_an_empty_path_is_a_usage_error_before_anything_is_written(argv, tmp_path, capsys, monkeypatch):
    """`--logdir ''` used to write a run into `/` (the empty prefix of `/config.yaml`), `--outdir ''` into the
    working directory, and an empty --json, --video or --restore-from was ignored without a word."""
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "out")
    argv = [item.replace("{out}", out) for item in argv]
    empty = next(argv[i] for i in range(1, len(argv)) if not argv[i].strip())
    flag = argv[argv.index(empty) - 1]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    named = f"argument {flag}" if flag.startswith("--") else "argument "
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"planet-sac {argv[0]}: error: {named}") and f"{empty!r} is an empty path" in err, err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv, named", [
    (["train", "--config", SMOKE, "--logdir", "s3://bucket/run"], "--logdir s3://bucket/run"),
    (["collect", "--task", "gym:Pendulum-v1", "--episodes", "1", "--outdir", "hdfs://cluster/episodes"],
     "--outdir hdfs://cluster/episodes"),
    (["evaluate", "--logdir", "{out}", "--json", "foo://x/returns.json"], "--json foo://x/returns.json"),
    (["variables", "s3://bucket/run"], "CHECKPOINT s3://bucket/run"),
    (["plot", "az://container/run"], "LOGDIR|SCORES.json.gz az://container/run"),
])
def test_a_url_no_file_system_reads_is_one_line_before_any_work(argv, named, tmp_path, capsys, monkeypatch):
    """TensorFlow raised UnimplementedError with its traceback, after the agent was built for some commands."""
    monkeypatch.chdir(tmp_path)
    scheme = named.split(" ")[1].split("://")[0]
    assert main([item.replace("{out}", str(tmp_path / "out")) for item in argv]) == 2
    line = one_line_error(capsys, argv[0])
    assert f"error: {named}: TensorFlow has no file system for {scheme}:// here" in line
    assert "pip install tensorflow-io" in line and os.listdir(tmp_path) == []


def test_the_file_system_check_passes_what_tensorflow_reads_without_a_network_call(monkeypatch):
    from planet_sac.errors import check_file_system

    monkeypatch.setattr(tf.io.gfile, "exists", lambda path: pytest.fail(f"looked up {path}"))
    for path in ("gs://bucket/run", "ram://run", "file:///tmp/run", "/tmp/run", "relative/run", "odd name://x"):
        check_file_system(path, "--logdir")


def test_a_scheme_tensorflow_lacks_loads_the_tensorflow_io_plugin(monkeypatch, tmp_path):
    """tensorflow-io registers s3:// (and hdfs://, az://) when imported; planet-sac imports it when a path asks."""
    from planet_sac.config import ConfigError
    from planet_sac.errors import check_file_system

    plugin = tmp_path / "tensorflow_io.py"
    plugin.write_text("import tensorflow as tf\nREGISTERED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tensorflow_io", raising=False)
    own = tf.io.gfile.get_registered_schemes
    monkeypatch.setattr(tf.io.gfile, "get_registered_schemes",
                        lambda: own() + (["s3"] if "tensorflow_io" in sys.modules else []))
    with pytest.raises(ConfigError, match="hdfs://"):
        check_file_system("hdfs://cluster/run", "--logdir")  # the plugin (this one) does not register it
    check_file_system("s3://bucket/run", "--logdir")
    assert sys.modules["tensorflow_io"].REGISTERED


@pytest.mark.parametrize("text", ["", "# emptied\n"])
def test_a_runs_emptied_config_is_named_on_resume_not_taken_for_the_defaults(text, smoke_run_copy, capsys):
    """An emptied config.yaml was read as PlaNet's defaults: the resume then failed on checkpoint variables
    "not in the model", pointing away from the file."""
    with open(os.path.join(smoke_run_copy, "config.yaml"), "w") as file:
        file.write(text)
    before = snapshot(smoke_run_copy)
    assert main(["train", "--logdir", smoke_run_copy, "--train-steps", "30", "--quiet"]) == 2
    line = one_line_error(capsys, "train")
    assert f"{smoke_run_copy}/config.yaml: holds no settings" in line and "was emptied after the run wrote it" in line
    assert snapshot(smoke_run_copy) == before


@pytest.mark.slow
def test_a_stopped_train_is_no_finished_one_and_chunks_as_long_as_the_episodes_train(tmp_path, capsys, monkeypatch):
    """A SIGTERM used to end `train` with `done: step 3, ...` and exit 0, so `train && evaluate` and job schedulers
    took a stopped run for a finished one. It exits 128 + the signal's number, saying where it stopped.

    One run (three Trainers, where a run per signal and one for the chunks took five) checks:
    - SIGTERM at step 3 of 6: exit 143, no `done:`, the line saying where it stopped and that the command resumes;
    - SIGINT at step 4 of 6, in the resume that command is: exit 130, the same;
    - `train --logdir RUN --train-steps 6` then resumes it and finishes (`done: step 6`);
    - chunks as long as the collected episodes train: env.time_limit=10 gives 11-step episodes (the first
      observation and 10 steps), and chunks of 11 fit them."""
    from planet_sac.training.trainer import Trainer

    update = Trainer._update
    stops = {3: signal.SIGTERM, 4: signal.SIGINT}

    def stop_at(self, batches, window):
        metrics, step = update(self, batches, window)
        if step in stops:
            os.kill(os.getpid(), stops[step])
        return metrics, step

    logdir = str(tmp_path / "run")
    monkeypatch.setattr(Trainer, "_update", stop_at)
    command = ["train", "--config", SMOKE, "--logdir", logdir, "--set", "data.chunk_length=11", "--set",
               "env.time_limit=10", "--set", "schedule.test_episodes=0", "--set", "sac.updates_per_step=0",  # no head read
               "--train-steps", "6", "--quiet"]
    for received, status, at in [(signal.SIGTERM, 143, 3), (signal.SIGINT, 130, 4)]:
        assert main(command) == status, received.name
        captured = capsys.readouterr()
        assert "done:" not in captured.out
        assert captured.err.strip().splitlines()[-1] == (f"planet-sac train: stopped by {received.name} at step {at} of "
                                                         "6; checkpointed: the same command resumes")
    monkeypatch.undo()
    assert main(["train", "--logdir", logdir, "--train-steps", "6", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("done: step 6")


def test_a_restore_into_a_run_that_resumes_is_named_as_not_applied(smoke_run_copy, tmp_path, capsys):
    """A run with checkpoints resumes from them: --restore-from (even a missing one) and --include were dropped
    without a word. The same command line run again must still resume, so it is a warning, not a refusal."""
    assert main(["train", "--logdir", smoke_run_copy, "--restore-from", str(tmp_path / "missing"), "--include", "zzz",
                 "--train-steps", "20"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: --restore-from {tmp_path / 'missing'} --include zzz: not applied: {smoke_run_copy} resumes from "
            "its own checkpoint") in err
    assert f"resumed {smoke_run_copy}/checkpoints/ckpt-20 at step 20" in err


@pytest.mark.parametrize("argv, shown", [
    (["evaluate", "--logdir", "{run}", "--episodes", "1", "--policy", "sac", "--set", "env.obs=image"],
     "--set env.obs=image (the run's: state): the agent these build does not fit the checkpoint in {run} (18 selected"),
    (["collect", "--policy", "sac", "--checkpoint", "{run}", "--episodes", "1", "--outdir", "{tmp}/out", "--set",
      "model.deter_size=17"],
     "--set model.deter_size=17 (the run's: 16): the agent these build does not fit the checkpoint in {run} (shape "
     "mismatch"),
])
def test_a_set_that_changes_the_model_is_named_as_why_the_checkpoint_does_not_fit(argv, shown, tmp_path, capsys):
    """It said `18 selected variables are not in RUN; narrow --include or add --exclude`, flags these commands do
    not have, or a bare shape mismatch."""
    run = str(OLD_RUN)
    assert main([item.format(run=run, tmp=tmp_path) for item in argv]) == 2
    line = one_line_error(capsys, argv[0])
    assert shown.format(run=run) in line and "set only keys that keep the model, such as cem.*" in line
    assert "--include" not in line and os.listdir(tmp_path) == []


@pytest.mark.parametrize("settings, warned", [
    (["sac.updates_per_step=0", "policy.test=sac"], "policy.test=sac acts with the SAC head, which this run never trains"),
    (["sac.updates_per_step=0", "policy.train=sac_guided_cem", "policy.compare=[sac]"],
     "policy.train=sac_guided_cem, policy.compare=sac act with the SAC head, which this run never trains"),
])
def test_a_policy_of_a_head_the_run_never_trains_is_warned_about(settings, warned, tmp_path, capsys):
    """`export --policy sac` refused such a run, while `train` let it act and test with its first random weights."""
    sets = [item for setting in settings for item in ("--set", setting)]
    assert main(["train", "--config", SMOKE, "--logdir", str(tmp_path / "run"), "--train-steps", "0", *sets]) == 0
    assert f"warning: {warned} (sac.updates_per_step=0)" in capsys.readouterr().err


def test_a_task_whose_episodes_may_never_end_is_warned_about(tmp_path, caplog, monkeypatch):
    """A task without a length of its own and env.time_limit=null held training up silently when an episode never
    ended (memory growing, nothing printed under --quiet)."""
    import gymnasium

    from planet_sac.config_loading import load_config
    from planet_sac.training.run_checks import check_start

    monkeypatch.setattr(gymnasium.spec("Pendulum-v1"), "max_episode_steps", None)
    config = load_config(SMOKE, ["env.time_limit=null", "data.chunk_length=10"])
    with caplog.at_level("WARNING", logger="planet_sac"):
        check_start(config, str(tmp_path / "run"), None, True, None, (), ())
        check_start(load_config(SMOKE), str(tmp_path / "run"), None, True, None, (), ())  # a limit: no warning
    assert [record.getMessage()[:110] for record in caplog.records] == [
        "gym:Pendulum-v1 has no episode length of its own (no max_episode_steps) and env.time_limit is null: an episode"]
