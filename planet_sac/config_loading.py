"""Loading configs: YAML files and `--set` overrides to a validated Config, and back to YAML.

A config is built in three layers: the defaults of the classes in planet_sac.config, then a YAML
file (`load_config`), then `section.key=value` overrides (`apply_overrides`). Every key and every
value is checked: an unknown key or a wrong type is one ConfigError line naming the key and what is
allowed (a silently ignored typo wastes a day of training), then `Config.validate` checks ranges and
combinations. YAML from users is parsed safely (no tags, no aliases, no key twice; `load_yaml`).

The files in `configs/` ship with the package (`planet_sac/configs` in a wheel): `--config pendulum`
names one wherever planet-sac is installed (`find_config_file` has the rule).

Nothing here imports TensorFlow at import time (the environment workers load configs); `save_config`
and `read_config_file` import it when called, for `tf.io.gfile` paths.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
import os
import re
import types
import typing
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import yaml

from planet_sac.config import MAX_INT, Config, ConfigError, _cut, _show

# ----------------------------------------------------------------------------- loading


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults, then the YAML file `path` names, then `section.key=value` overrides.

    `path` is a file's path or a shipped config's name (`pendulum`, `pendulum.yaml`), found by
    `find_config_file`; errors name the file as given (a shipped one by where it was read).
    Raises ConfigError (one line) for a missing or unreadable file, bad YAML, unknown keys or bad values.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        file = find_config_file(path)
        source = str(path) if str(path) and file == Path(path) else str(file)  # "" is the folder "."
        data = _read_yaml(file, source)
    config = from_dict(data, source=source)
    return apply_overrides(config, overrides or [])


def from_dict(data: Mapping[str, Any], source: str = "config") -> Config:
    """A new, validated Config from a nested mapping of sections (as read from YAML); absent keys keep their defaults.

    Raises ConfigError (one line, starting with `source`) for something that is no mapping, an unknown key
    (with a close allowed one, if any), a value of the wrong type, or a value `Config.validate` refuses.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of sections, got {type(data).__name__}")
    config = _build(Config, data, prefix="", source=source)
    config.validate()
    return config


def apply_overrides(config: Config, overrides: list[str]) -> Config:
    """A new, validated Config: `config` with `section.key=value` strings applied in order (a later one wins).

    Values are read as YAML (scalars, lists; an empty value is null; a section's mapping sets the keys it
    names, keeping the others). `config` itself is not changed. Raises ConfigError (one line, `--set ...`)
    for a string without `=`, an unknown key, bad YAML, a wrong type or a value out of range.
    """
    return from_dict(_overridden(config, overrides), source="--set")


def check_override_keys(overrides: list[str]) -> None:
    """Fails on an unknown key or a value of the wrong type in `section.key=value` strings, before the config
    they will apply to exists (a collector waiting for its run): ranges and combinations are checked then."""
    _build(Config, _overridden(Config(), overrides), prefix="", source="--set")


def _overridden(config: Config, overrides: list[str]) -> dict[str, Any]:
    """`config` as a mapping with `overrides` applied (names checked, nothing validated)."""
    data = config.to_dict()
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {_show(item)}: expected section.key=value, e.g. data.batch_size=16")
        key, raw = item.split("=", 1)
        value = load_yaml(raw, f"--set {_cut(key, 60)}") if raw.strip() else None
        node: dict[str, Any] = data
        parts = key.strip().split(".")
        for i, part in enumerate(parts[:-1]):
            if part not in node or not isinstance(node[part], dict):
                raise ConfigError(f"--set {_cut(key, 60)}: " + _unknown_key(".".join(parts[: i + 1]), list(node)))
            node = node[part]
        if parts[-1] not in node:
            raise ConfigError(f"--set {_cut(key, 60)}: " + _unknown_key(key, list(node)))
        if isinstance(node[parts[-1]], dict) and isinstance(value, Mapping):
            value = {**node[parts[-1]], **value}  # `--set env={action_repeat: 3}` sets that key, not the section
        node[parts[-1]] = value
    return data


def save_config(config: Config, path: str) -> None:
    """Writes `config` to `path` as YAML that `read_config_file` reads back equal (through tf.io.gfile, so remote
    paths work); atomically: through `path.tmp`, renamed over `path`. A file that already holds that text is left
    as it is (a resumed run's config.yaml keeps its modification time). Imports TensorFlow."""
    import tensorflow as tf

    text = yaml.safe_dump(config.to_dict(), sort_keys=False)
    try:
        with tf.io.gfile.GFile(path, "r") as file:
            if file.read() == text:
                return
    except (tf.errors.OpError, OSError, UnicodeDecodeError):  # absent or unreadable: written anew
        pass
    temp = f"{path}.tmp"
    with tf.io.gfile.GFile(temp, "w") as file:
        file.write(text)
    tf.io.gfile.rename(temp, path, overwrite=True)  # atomic: a kill never leaves half a config


def read_config_file(path: str) -> Config:
    """The validated Config in the YAML file at `path` (local or tf.io.gfile), as `save_config` writes it; absent
    keys keep their defaults. Raises ConfigError (one line naming `path`) for an unreadable file, bad YAML, or
    keys and values `from_dict` refuses. Imports TensorFlow."""
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path, "rb") as file:
            raw = file.read()
    except (tf.errors.OpError, OSError) as error:
        raise ConfigError(f"{path}: cannot be read ({_reason(error)})") from None
    return from_dict(_parse_mapping(raw, str(path), EMPTY_RUN_CONFIG), source=path)


def diff(a: Config, b: Config) -> list[str]:
    """The dotted keys (`sac.n_step`, `seed`) whose values differ between two configs, in the order of `a`'s fields."""
    flat_a, flat_b = _flatten(a.to_dict()), _flatten(b.to_dict())
    return [key for key in flat_a if flat_a[key] != flat_b.get(key)]


# ----------------------------------------------------------------------------- shipped configs
# configs/ is at the top of the repository, where checkout users and the docs name its files
# (`--config configs/pendulum.yaml`); the wheel carries the same files as planet_sac/configs/*.yaml
# (pyproject.toml maps the folder into the package). Both are found from the planet_sac package
# that is imported, never from another installation or checkout on the path.

SHIPPED_SUFFIX = ".yaml"


def shipped_config_dir() -> Traversable | None:
    """The folder of the configs that ship with planet-sac, or None if this installation has none.

    `planet_sac/configs` of an installed wheel (through importlib.resources); else the `configs/`
    folder of the source checkout the package was imported from (a checkout on the path, or an
    editable install): the folder beside `planet_sac/` when a `pyproject.toml` is there too, so a
    stray `configs/` folder in site-packages is never taken for ours.
    """
    package = importlib.resources.files("planet_sac")
    installed = package.joinpath("configs")
    if installed.is_dir():
        return installed
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "configs").is_dir():
        return root / "configs"
    return None


def shipped_configs() -> dict[str, Traversable]:
    """{name: file} of every shipped `*.yaml` config, sorted by name; the name is the file name without `.yaml`.

    Empty if this installation has no shipped configs (see `shipped_config_dir`).
    """
    folder = shipped_config_dir()
    if folder is None:
        return {}
    files = {entry.name.removesuffix(SHIPPED_SUFFIX): entry for entry in folder.iterdir()
             if entry.name.endswith(SHIPPED_SUFFIX) and not entry.name.startswith(".") and entry.is_file()}
    return dict(sorted(files.items()))


def shipped_config(name: str) -> Traversable | None:
    """The shipped config called `name` (`pendulum` or `pendulum.yaml`), None if there is none.

    Only the names `shipped_configs` lists match: a name is never joined to the folder as a path.
    """
    return shipped_configs().get(name.removesuffix(SHIPPED_SUFFIX))


def find_config_file(path: str | Path) -> Path | Traversable:
    """The file a `--config` value names, by one rule.

    1. `path` is an existing file: that file (a path always wins over a shipped name).
    2. `path` is a bare name (no path separator) of a shipped config, with or without `.yaml`: the shipped
       file (`configs/NAME.yaml` of a checkout, `planet_sac/configs/NAME.yaml` of an installed wheel).
    3. `path` exists but is no file (a folder): `Path(path)`, for the reader to say what it is.
    Otherwise raises ConfigError, one line naming `path`: for a bare name, with the shipped names; for a path
    whose file name is a shipped config's (`configs/pendulum.yaml` outside a checkout), with that name.
    """
    given = Path(path)
    if _probe(given.is_file):
        return given
    text = str(path)
    bare = not any(separator in text for separator in {"/", os.sep, os.altsep or "/"})
    if bare:
        shipped = shipped_config(text)
        if shipped is not None:
            return shipped
    if _probe(given.exists):
        return given
    if bare:
        names = _cut(", ".join(shipped_configs()) or "none in this installation", 320)
        raise ConfigError(f"config file {path} does not exist and no shipped config is named {path} (shipped: {names})")
    if shipped_config(given.name) is not None:  # `configs/pendulum.yaml` of the docs, outside a checkout
        raise ConfigError(f"config file {path} does not exist; --config {given.name.removesuffix(SHIPPED_SUFFIX)} "
                          "names the shipped config of that name")
    raise ConfigError(f"config file {path} does not exist (`planet-sac configs` lists the shipped configs, which "
                      "--config takes by name)")


def config_description(text: str, limit: int = 120) -> str:
    """A config file's one-line description: the first sentence of its opening comment, at most `limit` characters.

    The opening comment is the `#` lines before the first key, blank line or empty `#` line; a sentence ends
    at `.`, `!` or `?` before a space. Longer sentences are cut at a word and end in `...`; '' without a comment.
    """
    lines = []
    for line in text.lstrip("\ufeff").splitlines():
        stripped = line.strip()
        if not stripped.startswith("#") or not stripped.lstrip("#").strip():
            break
        lines.append(stripped.lstrip("#").strip())
    comment = " ".join(lines)
    match = re.match(r"(.+?[.!?])(?=\s|$)", comment)
    sentence = match.group(1) if match else comment
    if len(sentence) <= limit:
        return sentence
    return sentence[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def _probe(check: Callable[[], bool]) -> bool:
    """`check()` (a Path's exists or is_file), False where the OS refuses the question (a name too long)."""
    try:
        return check()
    except OSError:
        return False


# ----------------------------------------------------------------------------- reading YAML


def _read_yaml(path: Path | Traversable, source: str) -> dict[str, Any]:
    """A config file (found by `find_config_file`) as a mapping; a folder, an unreadable file or anything but
    UTF-8 YAML is one ConfigError line naming `source`."""
    if path.is_dir():
        raise ConfigError(f"config file {source} is a directory; pass a YAML file, or a shipped config's name such as smoke")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"config file {source} cannot be read ({_reason(error)})") from None
    return _parse_mapping(raw, source, EMPTY_CONFIG)


EMPTY_CONFIG = ("for PlaNet's defaults say so with --config default (configs/default.yaml), or write `{}` in the "
                "file; `planet-sac configs` lists the shipped configs")
EMPTY_RUN_CONFIG = ("save_config writes a run's config whole, so this one was emptied after the run wrote it; put back "
                    "the run's config (a suite keeps a copy in OUT/results/TASK/seedK/config.yaml)")


def _parse_mapping(raw: bytes, source: str, if_empty: str) -> dict[str, Any]:
    """YAML bytes (UTF-8) to the mapping of sections a config file holds. A file with no YAML value (empty,
    only comments, or `null`) is refused with `if_empty` as the advice: it would silently stand for PlaNet's
    defaults; `{}` says that on purpose."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{source}: not a UTF-8 text file (byte {error.start} is {raw[error.start:error.start + 1]!r}); "
                          "a config is a YAML file") from None
    data = load_yaml(text, source)
    if data is None:
        kind = "empty" if not text.strip() else "only comments" if not _has_value_lines(text) else "null"
        raise ConfigError(f"{source}: holds no settings ({kind}); {if_empty}")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of sections, got {type(data).__name__}")
    return data


def _has_value_lines(text: str) -> bool:
    """Whether some line of YAML `text` is more than a comment or a document marker."""
    return any(line.strip() and not line.strip().startswith("#") and line.strip() not in ("---", "...")
               for line in text.splitlines())


def _reason(error: BaseException) -> str:
    """An OS or gfile error's cause in a few words (`Permission denied`, `Is a directory`), not its paths."""
    reason = getattr(error, "strerror", None) or getattr(error, "message", None) or error.__class__.__name__
    reason = str(reason).splitlines()[0]
    return reason.rsplit("; ", 1)[-1][:120]  # gfile's OpError reads "<path>; <cause>"


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases (`*name`).

    An alias makes the value it names appear again without being written again, so a few
    hundred bytes of nested aliases (a "billion laughs") stand for gigabytes once anything
    walks, copies or prints the value. A config never needs them: refused where the
    alias is composed, before anything is built.
    """

    _source: str  # what the text is (named in errors), set by load_yaml

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A key written twice is refused: YAML would keep the last silently (a second `data:` section dropping
        the first's settings)."""
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, typing.Hashable):
                break  # PyYAML refuses it in its own words
            if key in seen:
                raise ConfigError(f"{self._source}: the key {_show(key)} is written twice (line "
                                  f"{key_node.start_mark.line + 1}); keep one")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ConfigError(f"{self._source}: YAML aliases are not allowed in configs (*{_cut(event.anchor, 40)} "
                              f"at line {event.start_mark.line + 1}); write the value out")
        return super().compose_node(parent, index)


# Numbers as YAML 1.2 reads them. PyYAML follows YAML 1.1, where `1e-4` and `3e6` (no dot) are strings, `1:30` is
# the base-60 number 90 and `010` the octal 8; here `1e-4` is a float, `1:30` a string (refused where a number is
# due) and `010` is 10. Kept from YAML 1.1: `_` between digits (`100_000`), hexadecimal `0x1F`, `.inf` and `.nan`.
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}  # copies: SafeLoader's stay as they are
_ConfigLoader.add_implicit_resolver(_INT, re.compile(r"^(?:[-+]?[0-9][0-9_]*|0x[0-9a-fA-F_]+)$"), list("-+0123456789"))
_ConfigLoader.add_implicit_resolver(_FLOAT, re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """A decimal (leading zeros allowed: `010` is 10, not YAML 1.1's octal 8) or `0x` hexadecimal integer."""
    text = str(loader.construct_scalar(node)).replace("_", "")
    try:
        return int(text[2:], 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise yaml.constructor.ConstructorError(None, None, f"{_cut(text, 40)!r} is not an integer",
                                                node.start_mark) from None


_ConfigLoader.add_constructor(_INT, _construct_int)


def load_yaml(text: str, source: str) -> Any:
    """Parses YAML from a user (config files, `--set` values, a run's config.yaml) safely: no tags, no aliases.

    Errors are one `ConfigError` line naming `source`; nothing of the input is quoted beyond a cut excerpt.
    """
    loader = _ConfigLoader(text)
    loader._source = source
    try:
        return loader.get_single_data()
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: not valid YAML: {_cut(_yaml_problem(error), 160)}") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error's problem and where it is, on one line."""
    problem = getattr(error, "problem", None)
    mark = getattr(error, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(error).split())


# ----------------------------------------------------------------------------- building


def _build(cls: type, data: Mapping[str, Any], prefix: str, source: str) -> Any:
    """An instance of the dataclass `cls` from `data`, sections built recursively, each value coerced to its field's
    type hint (nothing validated); errors name the key as `prefix` + its name, after `source`."""
    fields = {field.name: field for field in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            raise ConfigError(f"{source}: " + _unknown_key(prefix + str(key), list(fields)))
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a section's class (hints are types)
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: {prefix}{name} must be a mapping of keys, got {_show(value)}")
            kwargs[name] = _build(hint, value, prefix=f"{prefix}{name}.", source=source)
        else:
            kwargs[name] = _coerce(value, hint, f"{prefix}{name}", source)
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, key: str, source: str) -> Any:
    """Checks `value` against a type hint; ints are accepted for floats."""
    origin = typing.get_origin(hint)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{source}: {key}={_show(value)} must be a list, e.g. [sac, sac_guided_cem]")
        (item,) = typing.get_args(hint)
        return [_coerce(element, item, f"{key}[{i}]", source) for i, element in enumerate(value)]
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigError(f"{source}: {key}={_show(value)} is not allowed; choose one of {', '.join(map(str, choices))}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, source)
            except ConfigError as error:
                errors.append(error)
        allowed = " or ".join("null" if a is type(None) else a.__name__ for a in args)
        raise ConfigError(f"{source}: {key}={_show(value)} has the wrong type; expected {allowed}")
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise ConfigError(f"{source}: {key}={_show(value)} is too large; a config's integers are at most "
                              f"{MAX_INT:,} in size")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    else:
        raise ConfigError(f"{source}: {key}: unsupported type {hint!r}")
    raise ConfigError(f"{source}: {key}={_show(value)} has the wrong type; expected {hint.__name__}")


def _unknown_key(key: str, allowed: list[str]) -> str:
    """The message for an unknown dotted `key` whose last part is none of `allowed` (the names in its section): the
    closest as a whole dotted key (did you mean), or, with none close, all of them."""
    section, _, leaf = key.rpartition(".")
    close = difflib.get_close_matches(leaf, allowed, n=1)
    if close:
        return f"unknown config key {_show(key)} (did you mean {_show(f'{section}.{close[0]}' if section else close[0])}?)"
    return f"unknown config key {_show(key)}; allowed here: {', '.join(allowed)}"


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as {dotted key: leaf value}."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
