"""The config reference, docs/config.md, generated from the config classes (`planet-sac config-reference`).

Each key's type and default come from its field, its meaning from the field's trailing comment, its
allowed values from its type or from the checks `validate()` makes (planet_sac.config.Checks), so the
reference cannot drift from what is enforced: tests/test_config_reference.py compares the file with it.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import tokenize
import types
import typing
from typing import Any, Callable, Literal, cast

import yaml

from planet_sac.config import Checks, Config, ConfigError


def config_reference() -> str:
    """docs/config.md: Markdown tables of every key (type, default, allowed values, meaning), from the classes.

    One table per section of `Config`, in field order. Meanings are the trailing comments of the fields
    (`_field_comments`); allowed values are the ones the checks of `validate()` on the default config state,
    collected in a `Checks(record=True)` of this call only, so the text depends on the code alone: the same
    on every call, whatever else validates meanwhile. Raises ConfigError for a field without a comment.
    """
    checks = Checks(record=True)
    Config().validate(checks)
    ranges = checks.allowed or {}
    lines = [
        "# Config reference",
        "",
        "Generated from `planet_sac/config.py` by `planet-sac config-reference --out docs/config.md`; "
        "do not edit by hand (a test compares this file with the code).",
        "",
        "Set keys in a YAML file (`--config FILE`, see `configs/default.yaml`; `--config NAME` takes a shipped "
        "config by name, and `planet-sac configs` lists them) or on the command line with "
        "`--set section.key=value`. Unknown keys, wrong types and values outside the allowed range are "
        "rejected with a one-line error.",
        "",
    ]
    hints = typing.get_type_hints(Config)
    sections = [(None, Config)] + [(field.name, hints[field.name]) for field in dataclasses.fields(Config)
                                   if dataclasses.is_dataclass(hints[field.name])]
    for section, cls in sections:
        cls_hints, comments = typing.get_type_hints(cls), _field_comments(cls)
        rows = [_reference_row(section, field, cls_hints[field.name], ranges, comments)
                for field in dataclasses.fields(cls) if not dataclasses.is_dataclass(cls_hints[field.name])]
        title = [f"## `{section}`", "", (cls.__doc__ or "").strip()] if section else ["## top level"]
        lines += [*title, "", "| key | type | default | allowed | meaning |", "|---|---|---|---|---|", *rows, ""]
    return "\n".join(lines).rstrip() + "\n"


def _reference_row(section: str | None, field: dataclasses.Field, hint: Any, ranges: dict[str, str],
                   comments: dict[str, str]) -> str:
    """The table row of one key: its type, default, allowed values (from its type, else `ranges`) and meaning."""
    key = f"{section}.{field.name}" if section else field.name
    default = field.default if field.default is not dataclasses.MISSING else cast(Callable[[], Any], field.default_factory)()
    allowed = ranges.get(key, "")
    if typing.get_origin(hint) is Literal:
        allowed = " or ".join(f"`{choice}`" for choice in typing.get_args(hint))
    elif typing.get_origin(hint) is list and typing.get_origin(typing.get_args(hint)[0]) is Literal:
        choices = ", ".join(f"`{choice}`" for choice in typing.get_args(typing.get_args(hint)[0]))
        allowed = f"any of {choices}" + (f"; {allowed}" if allowed else "")
    elif hint is bool:
        allowed = "`true` or `false`"
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
    if optional and allowed and "`null`" not in allowed:
        allowed += " or `null`"
    meaning = comments.get(field.name, "")
    if not meaning:
        raise ConfigError(f"{key} has no meaning: add a trailing comment to its field in planet_sac/config.py")
    return f"| `{key}` | {_type_name(hint)} | `{yaml.safe_dump(default).splitlines()[0].removesuffix(' ...')}` | " \
           f"{allowed or 'any'} | {meaning.replace('|', chr(92) + '|')} |"


def _type_name(hint: Any) -> str:
    """A type hint as the reference names it: `int`, `float or null`, `list of str` (a Literal is a str)."""
    if typing.get_origin(hint) is Literal:
        return "str"
    if typing.get_origin(hint) is list:
        return f"list of {_type_name(typing.get_args(hint)[0])}"
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join("null" if arg is type(None) else _type_name(arg) for arg in typing.get_args(hint))
    return hint.__name__


def _field_comments(cls: type) -> dict[str, str]:
    """{field: its trailing comment} read from the class source."""
    comments: dict[str, str] = {}
    source = inspect.getsource(cls)
    lines = source.splitlines()
    names = {field.name for field in dataclasses.fields(cls)}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            name = lines[token.start[0] - 1].split(":", 1)[0].strip()  # `    name: type = default  # meaning`
            if name in names:
                comments.setdefault(name, token.string.lstrip("#").strip())
    return comments
