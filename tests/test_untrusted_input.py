"""Input from users is untrusted. Configs: YAML alias bombs, huge values, folders, unreadable and binary files
each end in one short line (exit status 2), never a traceback or a message that quotes the whole value.
Offline data: the task defines the episode format; files in another, folders and dangling symlinks are
skipped and counted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from planet_sac.cli import main
from planet_sac.config import ConfigError
from planet_sac.config_loading import load_config
from planet_sac.episodes.folder import list_episodes
from planet_sac.plotting import _task
from tests.conftest import CONFIGS, DATA

SMOKE = str(CONFIGS / "smoke.yaml")
# 9 ** 5 = 59,049 names from 255 bytes; one more level (`e: &e [*d, ...]`) is half a million, and so on.
BOMB = """a: &a ["sac", "sac", "sac", "sac", "sac", "sac", "sac", "sac", "sac"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
policy:
  compare: [*d, *d, *d, *d, *d, *d, *d, *d, *d]
"""
MAX_LINE = 300  # characters: the longest error line we accept (paths included)


def one_line_error(capsys, command: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"planet-sac {command}: error: "), captured.err[:2000]
    assert len(lines[0]) < MAX_LINE, lines[0][:2000]
    return lines[0]


def train(config: str, logdir: str, *extra: str) -> int:
    return main(["train", "--config", config, "--logdir", logdir, "--train-steps", "1", "--quiet", *extra])


def test_alias_bomb_in_a_config_file_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert path.stat().st_size < 300
    assert train(str(path), str(tmp_path / "run")) == 2
    line = one_line_error(capsys, "train")
    assert "YAML aliases are not allowed" in line and "*a at line 2" in line and str(path) in line
    assert not (tmp_path / "run").exists()


def test_alias_in_a_set_value_is_refused(tmp_path, capsys):
    assert train(SMOKE, str(tmp_path / "run"), "--set", "policy.compare=[&p sac, *p]") == 2
    line = one_line_error(capsys, "train")
    assert "--set policy.compare" in line and "YAML aliases are not allowed" in line


def test_alias_bomb_in_a_runs_saved_config_is_refused(smoke_run_copy, capsys):
    run = Path(smoke_run_copy)  # a finished run: resumed to 2 updates it would have nothing to do (exit status 0)
    (run / "config.yaml").write_text(BOMB)
    assert main(["train", "--logdir", str(run), "--train-steps", "2", "--quiet"]) == 2
    line = one_line_error(capsys, "train")
    assert "config.yaml: YAML aliases are not allowed" in line
    assert main(["evaluate", "--logdir", str(run), "--episodes", "1", "--quiet"]) == 2
    assert "YAML aliases are not allowed" in one_line_error(capsys, "evaluate")
    assert _task(str(run)) is None  # the plots' legend reads it too, and gives up quietly


def test_anchors_without_aliases_still_load(tmp_path):
    path = tmp_path / "anchored.yaml"
    path.write_text("env: &e {task: 'gym:Pendulum-v1', obs: state}\n")
    assert load_config(path).env.task == "gym:Pendulum-v1"


@pytest.mark.slow
def test_huge_values_are_cut_in_messages(tmp_path, capsys):
    # No alias: 10,000 names written out (50 KB, a hundred times the longest line allowed). The message quotes a few.
    path = tmp_path / "long.yaml"
    path.write_text("policy:\n  compare: [" + ", ".join(["sac"] * 10_000) + "]\n")
    assert train(str(path), str(tmp_path / "run")) == 2
    line = one_line_error(capsys, "train")
    assert "policy.compare=['sac', 'sac'," in line and "lists sac more than once" in line
    # A huge string where a number belongs, and a huge unknown key.
    path.write_text("data:\n  batch_size: '" + "x" * 50_000 + "'\n")
    assert train(str(path), str(tmp_path / "run")) == 2
    assert "data.batch_size='xxxx" in one_line_error(capsys, "train")
    path.write_text("data:\n  " + "k" * 1000 + ": 1\n")  # YAML's longest plain key
    assert train(str(path), str(tmp_path / "run")) == 2
    assert "unknown config key 'data.kkkk" in one_line_error(capsys, "train")
    assert train(SMOKE, str(tmp_path / "run"), "--set", "env.task=" + "y" * 50_000) == 2
    assert "env.task='yyyy" in one_line_error(capsys, "train")


@pytest.mark.parametrize("case", ["directory", "missing", "unreadable", "latin-1", "list", "too-deep", "bad-yaml"])
def test_a_config_that_is_not_a_yaml_mapping_file_is_one_line(case, tmp_path, capsys):
    path = tmp_path / "config.yaml"
    if case == "directory":
        path.mkdir()
        expected = "is a directory"
    elif case == "missing":
        expected = "does not exist"
    elif case == "unreadable":
        path = "/proc/self/mem"  # exists, is a file, and read() from its start fails (EIO) even as root
        expected = "/proc/self/mem cannot be read (Input/output error)"
    elif case == "latin-1":
        path.write_bytes("env:\n  task: 'gym:Pendul\xe9'\n".encode("latin-1"))
        expected = "not a UTF-8 text file (byte 24 is b'\\xe9')"  # 5 + 9 + 10 bytes before it
    elif case == "list":
        path.write_text("- env\n- data\n")
        expected = "top level must be a mapping of sections, got list"
    elif case == "too-deep":
        path.write_text("env: " + "[" * 20_000 + "]" * 20_000 + "\n")
        expected = "nested too deeply"
    else:
        path.write_text("env: [unclosed\n  data: {\n")
        expected = "not valid YAML"
    assert train(str(path), str(tmp_path / "run")) == 2
    assert expected in one_line_error(capsys, "train")
    assert not (tmp_path / "run").exists()


def test_a_saved_config_that_is_a_directory_is_one_line(smoke_run_copy, capsys):
    run = Path(smoke_run_copy)  # a finished run, which evaluates without the change (exit status 0)
    os.remove(run / "config.yaml")
    (run / "config.yaml").mkdir()
    assert main(["evaluate", "--logdir", str(run), "--episodes", "1", "--quiet"]) == 2
    line = one_line_error(capsys, "evaluate")
    assert line.endswith(f"{run}/config.yaml: cannot be read (Is a directory)")  # the cause, not a missing file
    shutil.rmtree(run / "config.yaml")


def test_load_config_raises_config_error_for_bombs(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    with pytest.raises(ConfigError, match="aliases"):
        load_config(path)


# ----------------------------------------------------------------------------- offline data in another format


def pendulum_copy(directory, *, first_action_dim: int | None = None) -> list[str]:
    """The shipped Pendulum episodes (1-d actions, 3-d states) copied into `directory`; with `first_action_dim`,
    one more: the first episode with its action repeated into that many columns, named to sort before the rest."""
    directory.mkdir()
    paths = list_episodes(str(DATA / "pendulum_state"))
    for path in paths:
        shutil.copy(path, directory)
    if first_action_dim:
        with np.load(paths[0]) as file:
            episode = dict(file)
        episode["action"] = np.repeat(episode["action"], first_action_dim, axis=1)
        np.savez_compressed(str(directory / "00000000T000000-2d-action-200.npz"), **episode)
    return sorted(os.listdir(directory))


def records(logdir) -> list[dict]:
    with open(os.path.join(logdir, "metrics.jsonl")) as file:
        return [json.loads(line) for line in file]


@pytest.mark.slow
def test_offline_data_is_read_in_the_tasks_format_not_the_first_files(tmp_path, capsys):
    data = tmp_path / "data"
    names = pendulum_copy(data, first_action_dim=2)
    assert names[0].startswith("00000000T000000-2d-action")  # the bad one sorts first: it used to set the format
    os.mkdir(data / "20300101T000000-folder-10.npz")  # named like episodes, but not files
    os.symlink(tmp_path / "gone.npz", data / "20300101T000001-dangling-10.npz")
    logdir = str(tmp_path / "run")
    assert main(["train", "--config", SMOKE, "--logdir", logdir, "--offline-data", str(data), "--train-steps", "5",
                 "--set", "schedule.log_every=5", "--set", "sac.updates_per_step=0", "--quiet"]) == 0  # no head read
    last = records(logdir)[-1]
    assert last["replay/files_loaded"] == 5.0  # the five Pendulum episodes
    assert last["replay/files_mismatched"] == 1.0 and last["replay/files_skipped"] == 3.0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: Skipping episode file")]
    assert sorted(line.split()[4].rstrip(":") for line in warned) == sorted(str(data / name) for name in (  # each once
        names[0], "20300101T000000-folder-10.npz", "20300101T000001-dangling-10.npz"))
    # The model acts in Pendulum's 1-d action space: evaluating it on the task works.
    assert main(["evaluate", "--logdir", logdir, "--episodes", "1", "--quiet"]) == 0


def test_offline_data_in_no_usable_format_says_what_the_task_expects(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    with np.load(list_episodes(str(DATA / "pendulum_state"))[0]) as file:
        episode = dict(file)
    np.savez_compressed(str(data / "a-200.npz"), **dict(episode, action=np.repeat(episode["action"], 2, axis=1)))
    np.savez_compressed(str(data / "b-200.npz"), **dict(episode, action=np.repeat(episode["action"], 2, axis=1)))
    np.savez_compressed(str(data / "c-200.npz"), **dict(episode, state=np.repeat(episode["state"], 2, axis=1)))
    assert main(["train", "--config", SMOKE, "--logdir", str(tmp_path / "run"), "--offline-data", str(data),
                 "--set", "data.wait_seconds=0.5", "--train-steps", "5", "--quiet"]) == 2
    *warnings, line = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 3 and all(warning.startswith("warning: Skipping episode file ") for warning in warnings)
    assert line.startswith("planet-sac train: error: No usable episodes in ")
    assert "(3 files skipped: 2 spec mismatch (action dim 2, expected 1), " \
           "1 spec mismatch ('state' observations of shape (6,), expected (3,)))" in line
    assert "The task expects 'state' observations of shape (3,) and 1-d actions" in line
