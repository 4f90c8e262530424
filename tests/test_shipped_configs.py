"""The configs in configs/ ship with the package and `planet-sac configs` lists them (issue #43).

Expected values come from the files in configs/ (globbed and read here), never from the code under test.
"""

from __future__ import annotations

import tomllib

import pytest

from planet_sac.cli import main
from planet_sac.config import config_description
from tests.conftest import CONFIGS, ROOT

SHIPPED = sorted(path.stem for path in CONFIGS.glob("*.yaml"))


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
