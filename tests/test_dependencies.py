"""pyproject.toml declares every package the code imports, and nothing that nothing imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

import pytest

from tests.conftest import ROOT

# Declared on purpose although no file imports them, with the reason.
NOT_IMPORTED = {
    "tf-keras": "tensorflow-probability loads it at run time (tf.keras is Keras 3)",
    "mujoco": "dm_control's simulator, declared to keep it below 4.0 (dm_control 1.0.50 only asks >=3.17)",
    "ruff": "the linter `make test` runs before pytest: a command, not a library",
    "pytest-xdist": "a pytest plugin `make test` turns on with -n (the suite on 3 processes)",
    "mypy": "the type checker `make test` runs over planet_sac/ (pyproject.toml [tool.mypy]): a command, not a library",
    "types-pyyaml": "type stubs mypy reads for `import yaml`; never imported at run time",
    "types-tqdm": "type stubs mypy reads for `from tqdm import tqdm`; never imported at run time",
}

# Imported when installed, never required (planet_sac runs without it), with the reason.
OPTIONAL_PLUGINS = {
    "tensorflow-io": "planet_sac/errors.py imports it for a path whose URL scheme TensorFlow lacks (s3://, hdfs://, "
                     "az://): importing it registers those file systems",
}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalize(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))


def declared() -> dict[str, set[str]]:
    """{'': main dependencies, extra: its dependencies} as normalized distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"": {requirement_name(item) for item in project["dependencies"]}}
    groups.update({extra: {requirement_name(item) for item in items} for extra, items in project["optional-dependencies"].items()})
    return groups


def third_party_imports(folder: str) -> dict[str, set[str]]:
    """{distribution: files importing it} for the non-standard-library imports under `folder`."""
    distributions = packages_distributions()
    found: dict[str, set[str]] = {}
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("planet_sac", "tests", "bench", "research", "__future__"):
                    continue
                for distribution in distributions.get(top, [top]):
                    found.setdefault(normalize(distribution), set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.slow
def test_every_import_is_declared_where_it_is_needed():
    groups = declared()
    where = {"planet_sac": groups[""] | groups["dmc"] | set(OPTIONAL_PLUGINS), "examples": groups[""],
             "tests": groups[""] | groups["dmc"] | groups["test"],
             "bench": groups[""] | groups["dmc"] | groups["bench"],
             "research": groups[""] | groups["dmc"] | groups["test"] | groups["bench"], "scripts": groups[""] | groups["dmc"]}
    for folder, allowed in where.items():
        missing = {name: files for name, files in third_party_imports(folder).items() if name not in allowed}
        assert not missing, f"{folder}/ imports undeclared packages: {missing}"


def test_nothing_is_declared_that_nothing_imports():
    imported = set()
    for folder in ("planet_sac", "examples", "tests", "bench", "research", "scripts"):
        imported |= set(third_party_imports(folder))
    unused = set().union(*declared().values()) - imported - set(NOT_IMPORTED)
    assert not unused, f"declared but never imported: {sorted(unused)}"
