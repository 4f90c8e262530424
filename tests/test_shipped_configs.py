"""The configs in configs/ ship with the package (issue #43): pyproject.toml maps the folder into the wheel."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT


def test_pyproject_ships_every_package_and_the_configs():
    """The packages are listed (configs/ maps into the package, which `packages.find` cannot express): a new
    subpackage missing from the list would be missing from the wheel."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "planet_sac").rglob("__init__.py")}
    assert sorted(setuptools["packages"]) == sorted(packages | {"planet_sac.configs"})
    assert setuptools["package-dir"] == {"planet_sac.configs": "configs"}
    assert setuptools["package-data"] == {"planet_sac.configs": ["*.yaml"]}
