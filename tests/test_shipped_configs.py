"""The configs in configs/ ship with the package: `--config NAME` finds one wherever planet-sac is installed,
`planet-sac configs` lists them, and a wheel built from the checkout carries them (issue #43).

Expected values come from the files in configs/ (globbed and read here), never from the code under test.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from planet_sac.cli import main
from planet_sac.config import ConfigError
from planet_sac.config_loading import config_description, find_config_file, from_dict, load_config
from tests.conftest import CONFIGS, ROOT

SHIPPED = sorted(path.stem for path in CONFIGS.glob("*.yaml"))


def read_directly(name: str):
    """configs/NAME.yaml parsed with PyYAML and built into a Config, without load_config's file lookup."""
    return from_dict(yaml.safe_load((CONFIGS / f"{name}.yaml").read_text()), source=name)


def one_line_error(capsys, command: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"planet-sac {command}: error: "), captured.err
    return lines[0]


def test_configs_folder_holds_the_configs_these_tests_expect():
    assert {"pendulum", "smoke", "dmc_vision_cpu", "default"} <= set(SHIPPED)


@pytest.mark.parametrize("name", ["pendulum", "pendulum.yaml", "dmc_vision_cpu"])
def test_a_name_reads_the_shipped_file(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of that name here: the name is looked up among the shipped configs
    stem = name.removesuffix(".yaml")
    assert find_config_file(name).read_bytes() == (CONFIGS / f"{stem}.yaml").read_bytes()
    assert load_config(name) == read_directly(stem)
    assert load_config(name, ["seed=3"]).seed == 3


def test_an_existing_path_wins_over_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("pendulum", "pendulum.yaml"):
        Path(name).write_text("seed: 7\n")  # differs from configs/pendulum.yaml, which sets no seed and a task
        assert load_config(name).seed == 7 and load_config(name).env.task == "dmc:cheetah-run", name
        os.remove(name)
    assert load_config(CONFIGS / "smoke.yaml") == read_directly("smoke")  # a path into configs/ works as before
    assert load_config(str(CONFIGS / "smoke.yaml")) == read_directly("smoke")
    Path("pendulum").mkdir()  # a folder is no config file: the name still finds the shipped one
    assert load_config("pendulum") == read_directly("pendulum")


def test_an_unknown_name_is_one_line_listing_the_shipped_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        load_config("pendulm")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("config file pendulm does not exist and no shipped config is named pendulm (shipped: ")
    assert ", ".join(SHIPPED) in message
    with pytest.raises(ConfigError) as error:  # a path is never looked up by name; its file name is suggested
        load_config("configs/pendulum.yaml")
    assert str(error.value) == ("config file configs/pendulum.yaml does not exist; --config pendulum names the shipped "
                                "config of that name")
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "nope.yaml")
    assert str(error.value) == (f"config file {tmp_path / 'nope.yaml'} does not exist (`planet-sac configs` lists the "
                                "shipped configs, which --config takes by name)")


def test_a_name_is_never_joined_to_the_configs_folder_as_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("", ".yaml", "configs", "../configs/pendulum", "PENDULUM"):
        with pytest.raises(ConfigError):
            load_config(name)
    with pytest.raises(ConfigError, match=r"^config file \. is a directory"):  # as before names were looked up
        load_config("")


def test_train_takes_a_name(tmp_path, monkeypatch, capsys):
    """`planet-sac train --config pendulum` from a folder without configs/ trains configs/pendulum.yaml (+ --set)."""
    import planet_sac.training.trainer as trainer

    given = {}

    def fake_train(config, logdir, **kwargs):
        given.update(config=config, logdir=logdir)
        return {"step": 0}

    monkeypatch.setattr(trainer, "train", fake_train)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", "pendulum", "--logdir", "run", "--set", "seed=5", "--quiet"]) == 0
    assert given["config"] == from_dict({**read_directly("pendulum").to_dict(), "seed": 5})
    assert main(["train", "--config", "pendulm", "--logdir", "run", "--quiet"]) == 2
    assert "no shipped config is named pendulm (shipped: " in one_line_error(capsys, "train")
    assert not (tmp_path / "run").exists()


def test_suite_takes_a_name(tmp_path, monkeypatch, capsys):
    """The suite reads the config by name: its own check of data.seed_episodes (made on the loaded config, before
    anything is written) is what stops it, not a missing file."""
    monkeypatch.chdir(tmp_path)
    assert main(["suite", "--config", "dmc_vision_cpu", "--out", "out", "--set", "data.seed_episodes=0", "--quiet"]) == 2
    assert "data.seed_episodes=0: the suite reads" in one_line_error(capsys, "suite")
    assert main(["suite", "--config", "dmc_vison_cpu", "--out", "out", "--quiet"]) == 2
    assert "no shipped config is named dmc_vison_cpu" in one_line_error(capsys, "suite")
    assert not (tmp_path / "out").exists()


def test_shipped_configs_are_the_visible_yaml_files_of_the_folder(tmp_path, monkeypatch):
    """Only `*.yaml` files count, not hidden ones (an editor's `.x.yaml` swap copy), other files or folders."""
    from planet_sac import config_loading

    for name in ("a.yaml", ".hidden.yaml", "b.yml", "notes.txt"):
        (tmp_path / name).write_text("seed: 1\n")
    (tmp_path / "folder.yaml").mkdir()
    monkeypatch.setattr(config_loading, "shipped_config_dir", lambda: tmp_path)
    assert list(config_loading.shipped_configs()) == ["a"]
    assert config_loading.shipped_config(".hidden") is None


def test_configs_command_lists_every_shipped_file(capsys):
    assert main(["configs"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.startswith(f"{len(SHIPPED)} shipped configs in {CONFIGS} ")
    listed = {}
    for row in rows:
        name, description = row.split(maxsplit=1)
        listed[name] = description
    assert sorted(listed) == SHIPPED
    for name, description in listed.items():
        comment = []  # the file's opening comment, as one line
        for line in (CONFIGS / f"{name}.yaml").read_text().splitlines():
            if not line.startswith("#") or not line.strip("# "):
                break
            comment.append(line.lstrip("#").strip())
        assert comment, f"configs/{name}.yaml has no opening comment to describe it"
        assert " ".join(comment).startswith(description.removesuffix("...")), name


def test_config_description_by_hand():
    assert config_description("# Pendulum, fast. More here.\n# And here.\nenv: {}\n") == "Pendulum, fast."
    assert config_description("# A first sentence that goes\n# on: over two lines.\n#\n# Later.\n") == \
        "A first sentence that goes on: over two lines."
    assert config_description("env:\n  obs: state\n# not an opening comment\n") == ""
    assert config_description("# no full stop at all\n") == "no full stop at all"
    assert config_description("# a title without a stop\n#\n# The body. More.\n") == "a title without a stop"  # `#` ends it
    assert config_description("# Batch 2.5x as large. Next.\n") == "Batch 2.5x as large."  # a stop before a space
    assert config_description("# " + "word " * 40 + "end.\n", limit=30) == "word word word word word..."


def test_config_reference_help_mentions_the_configs_command(capsys):
    with pytest.raises(SystemExit):
        main(["config-reference", "--help"])
    assert "planet-sac configs" in " ".join(capsys.readouterr().out.split())


def test_pyproject_ships_every_package_and_the_configs():
    """The packages are listed (configs/ maps into the package, which `packages.find` cannot express): a new
    subpackage missing from the list would be missing from the wheel."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "planet_sac").rglob("__init__.py")}
    assert sorted(setuptools["packages"]) == sorted(packages | {"planet_sac.configs"})
    assert setuptools["package-dir"] == {"planet_sac.configs": "configs"}
    assert setuptools["package-data"] == {"planet_sac.configs": ["*.yaml"]}


# ----------------------------------------------------------------------------- installed outside the checkout


def uv() -> str:
    """The uv beside this interpreter (`make install` puts it there) or on PATH; skips the test without one."""
    found = Path(sys.executable).with_name("uv")
    command = str(found) if found.exists() else shutil.which("uv")
    if command is None:
        pytest.skip("needs uv (make install puts it in .venv/bin) to build and install without downloading")
    return command


@contextmanager
def building_in_checkout(tmp_path_factory):
    """Held while a build writes into the checkout (setuptools' planet_sac.egg-info): one build at a time across
    pytest-xdist workers, which share the parent of their base temporary directories."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    with open(root / "checkout-build.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def fresh_venv(path: Path) -> Path:
    """A new virtual environment at `path` that sees this interpreter's site-packages (TensorFlow and the other
    dependencies, never downloaded again) after its own, through a .pth file; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))  # this venv's, in order
    (Path(own) / "dependencies_of_the_test_venv.pth").write_text("".join(f"{folder}\n" for folder in ours))
    return python


def run_elsewhere(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`command` in `cwd`, outside the checkout, without PYTHONPATH (nothing of the checkout on the path)."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def uv_run(*args: str) -> None:
    """`uv ARGS` offline (the build's setuptools from uv's cache, as `make install` left it), online if that fails."""
    for offline in (["--offline"], []):
        result = subprocess.run([uv(), *args, *offline], capture_output=True, text=True, timeout=300)
        if result.returncode == 0:
            return
    raise AssertionError(f"uv {' '.join(args)} failed:\n{result.stderr}")


TINY = ["env.time_limit=10", "data.chunk_length=5", "data.batch_size=2", "data.seed_episodes=1", "data.test_seed_episodes=1",
        "model.deter_size=8", "model.stoch_size=2", "model.hidden_size=8", "model.mlp_units=8", "model.reward_units=8",
        "sac.updates_per_step=0", "sac.catchup_rounds=0", "schedule.train_steps=2", "schedule.log_every=1",
        "schedule.test_episodes=0", "policy.jit_compile=false"]
"""`--set`s that shrink configs/pendulum.yaml to 2 updates of a tiny model on one 10-step seed episode, no test phase
and no SAC update (seconds, most of them TensorFlow's import)."""


@pytest.mark.slow
@pytest.mark.e2e
def test_a_wheel_installed_outside_the_checkout_trains_a_shipped_config_by_name(tmp_path, tmp_path_factory):
    """`pip install planet-sac` from a wheel: `planet-sac configs` and `planet-sac train --config pendulum` work in a
    folder without configs/, from the installed package (not the checkout)."""
    dist = tmp_path / "dist"
    with building_in_checkout(tmp_path_factory):
        # As from a fresh clone: setuptools adds the files an earlier build's SOURCES.txt lists to the sdist, and
        # include-package-data then ships them, which hid a package or package-data missing from pyproject.toml.
        shutil.rmtree(ROOT / "planet_sac.egg-info", ignore_errors=True)
        uv_run("build", "--quiet", "--out-dir", str(dist), str(ROOT))  # an sdist, then the wheel from the sdist
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:  # configs/ as files (no symlink), where the sdist's wheel build finds them
        shipped = sorted(Path(member.name).stem for member in archive.getmembers()
                         if member.isfile() and Path(member.name).parent.name == "configs" and member.name.endswith(".yaml"))
    assert shipped == SHIPPED
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = set(archive.namelist())
    assert sorted(name for name in files if name.startswith("planet_sac/configs/")) == \
        [f"planet_sac/configs/{name}.yaml" for name in SHIPPED]
    sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / "planet_sac").rglob("*.py")}
    assert sources <= files, sorted(sources - files)

    python = fresh_venv(tmp_path / "venv")
    uv_run("pip", "install", "--quiet", "--no-deps", "--python", str(python), str(wheel))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = run_elsewhere([str(python), "-c", "import planet_sac; print(planet_sac.__file__)"], elsewhere).stdout.strip()
    assert Path(site).is_relative_to(tmp_path / "venv"), site

    command = str(python.with_name("planet-sac"))
    listing = run_elsewhere([command, "configs"], elsewhere).stdout.splitlines()
    assert listing[0].startswith(f"{len(SHIPPED)} shipped configs in {Path(site).parent / 'configs'} ")
    assert [row.split()[0] for row in listing[1:]] == SHIPPED

    run_elsewhere([command, "train", "--config", "pendulum", "--logdir", "run", "--quiet",
                   *[item for setting in TINY for item in ("--set", setting)]], elsewhere)
    saved = yaml.safe_load((elsewhere / "run" / "config.yaml").read_text())
    expected = load_config(CONFIGS / "pendulum.yaml", TINY).to_dict()
    assert saved == expected  # configs/pendulum.yaml's task, elu and obs_std 0.1, with the --set values
    records = [json.loads(line) for line in (elsewhere / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == [1, 2]


@pytest.mark.slow
def test_an_editable_install_finds_the_checkouts_configs(tmp_path, tmp_path_factory):
    """`pip install -e CHECKOUT` (as `make install`): the names work from any folder, read from the checkout's configs/."""
    python = fresh_venv(tmp_path / "venv")
    with building_in_checkout(tmp_path_factory):
        uv_run("pip", "install", "--quiet", "--no-deps", "--python", str(python), "--editable", str(ROOT))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = run_elsewhere([str(python), "-c", "import planet_sac, planet_sac.config_loading as c; print(planet_sac.__file__); "
                           "print(c.find_config_file('pendulum'))"], elsewhere).stdout.split()
    assert found == [str(ROOT / "planet_sac" / "__init__.py"), str(CONFIGS / "pendulum.yaml")]
    listing = run_elsewhere([str(python.with_name("planet-sac")), "configs"], elsewhere).stdout.splitlines()
    assert listing[0].startswith(f"{len(SHIPPED)} shipped configs in {CONFIGS} ")
    assert [row.split()[0] for row in listing[1:]] == SHIPPED


def flat(config) -> dict:
    """A Config as {"section.key": value} (and {"key": value} for top-level fields)."""
    import dataclasses

    out = {}
    for name, value in dataclasses.asdict(config).items():
        if isinstance(value, dict):
            out.update({f"{name}.{key}": item for key, item in value.items()})
        else:
            out[name] = value
    return out


# what `planet-sac suite` sets for each run of a benchmark (docs/suite.md): everything else is the config's
PER_RUN = {"env.task", "env.action_repeat", "env.seed", "seed"}
# the benchmark configs kept under their version's name, and the folder of their published runs
VERSIONED = sorted(CONFIGS.glob("dmc_vision_cpu_v*.yaml"))


@pytest.mark.parametrize("path", VERSIONED, ids=lambda path: path.stem)
def test_a_kept_benchmark_config_is_what_its_published_runs_ran(path):
    """configs/dmc_vision_cpu_vN.yaml reproduces bench/results/dmc_vision_vN (v1: dmc_vision): every published run's
    config.yaml holds the same values but for what the suite sets per run."""
    version = path.stem.rsplit("_", 1)[1]
    folder = ROOT / "bench" / "results" / ("dmc_vision" if version == "v1" else f"dmc_vision_{version}")
    runs = sorted(folder.glob("results/*/seed*/config.yaml"))
    assert runs, f"no published run of {path.name} in {folder}"
    ours = flat(load_config(path))
    for run in runs:
        theirs = flat(load_config(run))
        different = sorted(key for key in (ours.keys() | theirs.keys()) - PER_RUN if ours.get(key) != theirs.get(key))
        assert not different, f"{run.relative_to(ROOT)}: {[(key, ours.get(key), theirs.get(key)) for key in different]}"


def test_the_benchmark_config_is_its_last_version_with_the_keys_its_docs_name():
    """configs/dmc_vision_cpu.yaml (v5) is v4 with the exploration schedule ending at 50k env steps (`explsched50`,
    docs/results.md): no other key moved when v4 was kept under its name."""
    assert [path.stem for path in VERSIONED][-1] == "dmc_vision_cpu_v4"
    current, last = flat(load_config(CONFIGS / "dmc_vision_cpu.yaml")), flat(load_config(VERSIONED[-1]))
    assert {key: (last[key], current[key]) for key in current if current[key] != last[key]} == \
        {"sac.exploration_steps": (100000, 50000)}
