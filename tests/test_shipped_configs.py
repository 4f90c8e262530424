"""The configs in configs/ ship with the package: `--config NAME` finds one wherever planet-sac is installed and
`planet-sac configs` lists them (issue #43).

Expected values come from the files in configs/ (globbed and read here), never from the code under test.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
import yaml

from planet_sac.cli import main
from planet_sac.config import ConfigError, config_description, find_config_file, from_dict, load_config
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
