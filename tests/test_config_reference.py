"""docs/config.md is generated from the config classes and agrees with what validation enforces."""

from __future__ import annotations

import dataclasses
import re
import sys
import types

import pytest
import yaml

from planet_sac.config import Checks, Config, ConfigError
from planet_sac.config_docs import _field_comments, config_reference
from planet_sac.config_loading import apply_overrides, load_config
from tests.conftest import ROOT

REFERENCE = ROOT / "docs" / "config.md"
ROW = re.compile(r"^\| `([\w.]+)` \| ([^|]+) \| `([^`]*)` \| ([^|]+) \| (.+) \|$")


def documented() -> dict[str, tuple[str, str, str, str]]:
    """{key: (type, default, allowed, meaning)} from the rows of docs/config.md."""
    rows = {}
    for line in REFERENCE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = tuple(part.strip() for part in match.groups()[1:])
    return rows


def flat_defaults() -> dict[str, object]:
    flat = {}
    for section, value in Config().to_dict().items():
        if isinstance(value, dict):
            flat.update({f"{section}.{key}": item for key, item in value.items()})
        else:
            flat[section] = value
    return flat


def test_reference_file_is_up_to_date():
    assert REFERENCE.read_text() == config_reference(), (
        "docs/config.md differs from the config classes: run planet-sac config-reference --out docs/config.md"
    )


def test_every_key_is_documented_with_its_default_and_a_meaning():
    rows, defaults = documented(), flat_defaults()
    assert sorted(rows) == sorted(defaults)
    for key, default in defaults.items():
        assert yaml.safe_load(rows[key][1]) == default, key
        assert len(rows[key][3]) > 10, key  # one line of meaning


def test_readme_links_the_reference():
    assert "docs/config.md" in (ROOT / "README.md").read_text()


def _outside_and_inside(allowed: str, key: str) -> tuple[list, list]:
    """Values the documented range excludes and includes, computed from its text."""
    if allowed == "> 0":
        default = flat_defaults()[key]
        return [0, -1], [default if default is not None else 1]
    if allowed == ">= 0":
        return [-1], [0]
    if match := re.fullmatch(r">= (\d+)", allowed):
        low = int(match.group(1))
        return [low - 1], [low]
    if match := re.fullmatch(r"in ([\[(])([\d.]+), ([\d.]+)\]", allowed):
        low, high = float(match.group(2)), float(match.group(3))
        inside = [high] + ([] if match.group(1) == "(" else [low])
        return [low - 1, high + 1] + ([low] if match.group(1) == "(" else []), inside
    if allowed == "> 0 and <= cem.candidates":
        return [0, Config().cem.candidates + 1], [Config().cem.candidates]
    return [], []


def test_documented_ranges_are_the_ones_validation_enforces():
    checked = 0
    for key, (_, _, allowed, _) in documented().items():
        outside, inside = _outside_and_inside(allowed.removesuffix(" or `null`"), key)
        for value in outside:
            with pytest.raises(ConfigError, match=re.escape(key)):
                apply_overrides(Config(), [f"{key}={value}"])
        for value in inside:  # allowed by the range (another key's constraint may still object)
            try:
                apply_overrides(Config(), [f"{key}={value}"])
            except ConfigError as error:
                assert f"{key}={value}: must be" not in str(error)
        checked += bool(outside)
    assert checked >= 40  # nearly every numeric key has a documented, enforced range


def test_a_field_without_a_meaning_is_refused():
    @dataclasses.dataclass
    class Section:
        documented: int = 1  # what it means
        undocumented: int = 2

    assert _field_comments(Section) == {"documented": "what it means"}


def config_module_state() -> dict[str, str]:
    """The repr of every value the config modules hold between calls: their globals and their classes' attributes
    (functions, imported modules and typing forms aside), objects by their attributes."""
    state = {}
    for module_name, module in sorted(sys.modules.items()):
        if module_name != "planet_sac.config" and not module_name.startswith("planet_sac.config_"):
            continue
        for name, value in vars(module).items():
            if name.startswith("__") or isinstance(value, (types.ModuleType, types.FunctionType)) \
                    or getattr(value, "__module__", None) == "typing":
                continue
            if isinstance(value, type):
                if value.__module__ == module_name:
                    state.update({f"{module_name}.{name}.{attribute}": repr(item) for attribute, item in vars(value).items()
                                  if not attribute.startswith("__") and not callable(item)})
                continue
            state[f"{module_name}.{name}"] = repr(getattr(value, "__dict__", value))
    return state


def test_validation_records_nothing_outside_the_reference():
    config_reference()  # imports every config module
    before = config_module_state()
    checks = Checks()
    Config().validate(checks)
    assert checks.allowed is None
    apply_overrides(Config(), ["sac.n_step=2", "cem.top_k=10"])
    load_config(ROOT / "configs" / "smoke.yaml")
    with pytest.raises(ConfigError, match=re.escape("cem.top_k=2000: must be <= cem.candidates (is 1000)")):
        apply_overrides(Config(), ["cem.top_k=2000"])
    assert config_module_state() == before
    config_reference()
    assert config_module_state() == before  # the reference's records went with its Checks


def test_the_reference_is_the_same_twice_and_amid_other_validations(monkeypatch):
    """The ranges the reference documents are its own validation's: another one made meanwhile (another caller,
    another thread) neither adds to them nor sees them."""
    first = config_reference()
    assert config_reference() == first
    note, interleaved = Checks.note, []

    def note_amid_other_validations(self: Checks, key: str, allowed: str) -> None:
        if not interleaved:  # once, while the reference records its first key
            interleaved.append(key)
            plain = Checks()
            Config().validate(plain)
            apply_overrides(Config(), ["sac.n_step=2"])
            assert plain.allowed is None
        note(self, key, allowed)

    monkeypatch.setattr(Checks, "note", note_amid_other_validations)
    assert config_reference() == first
    assert interleaved == ["env.task"]
