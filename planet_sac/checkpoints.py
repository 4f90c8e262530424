"""Checkpoints keyed by stable variable names, exact resume, and filtered restore.

The store of variables that the learner writes and the actors read (Acme's variable
source): it sits at the bottom layer, beside the config, so trainer, collector,
evaluation and agent all read checkpoints through the same code.

A checkpoint stores every variable of a run under its hierarchical name
(`world_model/rssm/gru/kernel`, `optimizer/world_model/m/...`, `sac/actor/...`,
`counters/step`, ...), so the names a user sees in `planet-sac variables` are the
names that `--include` / `--exclude` select, as PlaNet's `add_saver(include, exclude)`
did. Patterns are Python regular expressions matched at the start of a name
(`re.match`): `world_model/` selects the model but not its optimizer slots.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import posixpath
import re
import time
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import read_config_file

log = logging.getLogger("planet_sac")

_PREFIX = "variables/"
_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be found, read or matched, described in one line."""


def variable_name(variable: tf.Variable) -> str:
    """A variable's stable name without the `:0` suffix."""
    return variable.name.split(":")[0]


def named_variables(modules: Iterable[tf.Module], extra: Mapping[str, tf.Variable] | None = None) -> dict[str, tf.Variable]:
    """All variables of `modules` by stable name, plus `extra` ones named explicitly."""
    named: dict[str, tf.Variable] = {}
    for module in modules:
        for variable in module.variables:
            name = variable_name(variable)
            if name in named and named[name] is not variable:
                raise CheckpointError(f"two different variables are both named {name!r}")
            named[name] = variable
    named.update(extra or {})
    return dict(sorted(named.items()))


def _tree(variables: Mapping[str, tf.Variable]) -> tf.Module:
    """A nested object whose attribute paths are the variable names, for tf.train.Checkpoint."""
    root = tf.Module(name="variables")
    for name, variable in variables.items():
        node = root
        *parents, leaf = name.split("/")
        for part in parents:
            child = getattr(node, part, None)
            if child is None:
                child = tf.Module(name=part)
                setattr(node, part, child)
            node = child
        setattr(node, leaf, variable)
    return root


def checkpoint_files(directory: str) -> list[str]:
    """Prefixes of every `ckpt-N` in `directory` that has its index file, oldest (smallest N) first."""
    numbered = []
    for index in tf.io.gfile.glob(f"{directory.rstrip('/')}/ckpt-*.index"):
        prefix = index[:-len(".index")]
        number = prefix.rsplit("ckpt-", 1)[1]
        if number.isdigit():
            numbered.append((int(number), prefix))
    return [prefix for _, prefix in sorted(numbered)]


def _name(prefix: str) -> str:
    return prefix.rsplit("/", 1)[-1]


def newest_checkpoint(directory: str) -> str | None:
    """The newest `ckpt-N` in `directory` by N (whatever its state file says), else the state file's latest, else None."""
    prefixes = checkpoint_files(directory)
    return prefixes[-1] if prefixes else tf.train.latest_checkpoint(directory)


def reconcile_state(directory: str) -> None:
    """Rewrites `directory`'s `checkpoint` state file if it does not list every checkpoint there with a timestamp.

    tf.train.CheckpointManager resumes from, and rotates, only the checkpoints its state file lists
    with timestamps newer than its `last_preserved_timestamp`. A state file that lost them (copied or
    trimmed by hand or by a tool), that is missing, or that is older than
    a save which finished writing its files would otherwise make a run start from scratch beside
    its own checkpoints. Timestamps come from the index files' modification times.
    """
    prefixes = checkpoint_files(directory)
    if not prefixes:
        return
    state = tf.train.get_checkpoint_state(directory)
    names = [_name(prefix) for prefix in prefixes]
    if state is not None:
        listed = [_name(path) for path in state.all_model_checkpoint_paths]
        listed_stamps = state.all_model_checkpoint_timestamps
        if (listed == names and len(listed_stamps) == len(names) and _name(state.model_checkpoint_path) == names[-1]
                and all(stamp > state.last_preserved_timestamp for stamp in listed_stamps)):
            return
    now = time.time()
    stamps = [min(tf.io.gfile.stat(prefix + ".index").mtime_nsec / 1e9, now) for prefix in prefixes]
    # The state file's text format, with names relative to the folder as CheckpointManager writes them
    # (so a run directory still resumes after it is moved or cloned elsewhere).
    lines = [f'model_checkpoint_path: "{names[-1]}"', *(f'all_model_checkpoint_paths: "{name}"' for name in names),
             *(f"all_model_checkpoint_timestamps: {stamp!r}" for stamp in stamps),
             f"last_preserved_timestamp: {min(stamps) - 1.0!r}"]
    path = f"{directory.rstrip('/')}/checkpoint"
    with tf.io.gfile.GFile(path + ".rebuilt", "w") as file:
        file.write("\n".join(lines) + "\n")
    tf.io.gfile.rename(path + ".rebuilt", path, overwrite=True)
    report = log.warning if state is None or _name(state.model_checkpoint_path) != names[-1] else log.info
    report("checkpoint state of %s rebuilt from its files: %s", directory, ", ".join(names))


def latest_checkpoint(path: str) -> str | None:
    """The newest checkpoint prefix of a logdir or its `checkpoints/` folder, or None if it has none yet."""
    for directory in (f"{path.rstrip('/')}/checkpoints", path):
        if tf.io.gfile.isdir(directory):
            latest = newest_checkpoint(directory)
            if latest:
                return latest
    return None


def resolve(path: str) -> str:
    """A checkpoint prefix from a logdir, its `checkpoints/` folder, or a prefix itself."""
    latest = latest_checkpoint(path)
    if latest:
        return latest
    if tf.io.gfile.exists(path + ".index"):
        return path
    raise CheckpointError(
        f"no checkpoint at {path!r}: pass a logdir, its checkpoints/ folder, or a checkpoint prefix such as LOGDIR/checkpoints/ckpt-10"
    )


def list_variables(path: str) -> list[tuple[str, list[int]]]:
    """(name, shape) of every variable stored in the checkpoint at `path`."""
    prefix = resolve(path)
    try:
        return _stored_variables(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise CheckpointError(f"cannot read checkpoint {prefix}: {_first_line(error)}") from None


class Checkpointer:
    """Saves and restores all named variables of a run in `directory` (keeps the last few)."""

    def __init__(self, directory: str, variables: Mapping[str, tf.Variable], max_to_keep: int = 3,
                 optional: Iterable[str] = ()):
        """`optional`: names a checkpoint may lack (written before they existed); they keep their values then."""
        self.variables = dict(variables)
        self.optional = set(optional)
        self.max_to_keep = max_to_keep
        self.checkpoint = tf.train.Checkpoint(variables=_tree(self.variables))
        reconcile_state(directory)
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=max_to_keep)

    @property
    def latest(self) -> str | None:
        return self.manager.latest_checkpoint

    def save(self, step: int) -> str:
        return self.manager.save(checkpoint_number=step)

    def restore_latest(self) -> str | None:
        """Restores the newest readable checkpoint exactly (every variable); None if the folder has none.

        Reads through `read_checkpoint`: a damaged newer checkpoint is skipped with a warning, and
        moved out of the rotation (`quarantine`) so the manager never deletes good checkpoints
        while it keeps a damaged one. Only the run's single writer (the trainer) calls this.
        """
        directory = self.manager.directory
        if not checkpoint_files(directory):
            return None
        def select(stored: Mapping[str, list[int]]) -> list[str]:
            names = [name for name in self.variables if name in stored or name not in self.optional]
            missing = [name for name in names if name not in stored]
            if missing:
                raise CheckpointError(f"{len(missing)} variables of this run are not in the checkpoints of {directory}, "
                                      f"e.g. {missing[0]!r}; it was written by another model: use a new logdir")
            for name in names:
                want, have = list(self.variables[name].shape), list(stored[name])
                if want != have:
                    raise CheckpointError(f"shape mismatch for {name}: the checkpoints of {directory} have {have}, "
                                          f"this run needs {want}; use a new logdir")
            return names

        loaded = read_checkpoint(directory, select)
        for name, value in loaded.values.items():
            self.variables[name].assign(value)
        if loaded.damaged:
            quarantine(directory, loaded.damaged)
            reconcile_state(directory)
            self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=self.max_to_keep)
        return loaded.prefix


@dataclasses.dataclass
class RestoreReport:
    restored: list[str]
    skipped: list[str]  # in the checkpoint but not selected, or not in this run
    untouched: list[str]  # in this run but not restored: they keep their initial values
    prefix: str = ""  # the checkpoint restored (an older one when newer ones were damaged)
    step: int | None = None  # its counters/step, if it has one

    def summary(self) -> str:
        """One line: how many variables were restored, left in the checkpoint and left at their initial values, each
        with its count per top-level name (`world_model`, `sac`, `optimizer`, ...)."""
        return (f"restored {_by_group(self.restored)}; not taken from the checkpoint {_by_group(self.skipped)}; "
                f"at their initial values {_by_group(self.untouched)}")


def _by_group(names: list[str]) -> str:
    """`3 (sac 1, world_model 2)`: the count of `names`, then per first path component."""
    counts = collections.Counter(name.split("/", 1)[0] for name in names)
    return f"{len(names)}" + (f" ({', '.join(f'{group} {n}' for group, n in sorted(counts.items()))})" if names else "")


@dataclasses.dataclass
class Loaded:
    """The tensors read from one checkpoint, all of them verified."""

    prefix: str
    values: dict[str, np.ndarray]
    stored: dict[str, list[int]]  # every variable in the checkpoint: shape
    step: int | None  # counters/step, if stored
    damaged: list[str]  # newer checkpoints skipped because they could not be read


def read_checkpoint(path: str, select: Callable[[Mapping[str, list[int]]], Sequence[str]]) -> Loaded:
    """Reads the variables `select(stored shapes)` names from the newest readable checkpoint at `path`.

    The one reader of checkpoints (resume, `--restore-from`, evaluate, collectors): it reads every
    tensor the caller needs before returning, so a truncated or deleted `.data` file, a damaged
    `.index` or a flipped byte (TensorFlow's per-tensor CRC32C) is found before anything is assigned.
    A damaged checkpoint is skipped with a warning naming it and the next older one is tried; when
    none is readable, one CheckpointError line says so. `path` may be a logdir or its `checkpoints/`
    folder (newest first, with fallback) or a checkpoint prefix (that one only: the caller chose it).
    `select` raises CheckpointError for a checkpoint that does not fit (no fallback: all would not).
    """
    directory = _checkpoint_folder(path)
    candidates = list(reversed(checkpoint_files(directory))) if directory else []
    if not candidates:
        if directory is None and tf.io.gfile.exists(path + ".index"):
            candidates = [path]
        else:
            candidates = [resolve(path)]  # a state file naming a checkpoint elsewhere, or the one-line "no checkpoint"
    reasons: dict[str, str] = {}  # damaged prefix -> why it could not be read
    for prefix in candidates:
        try:
            stored = dict(_stored_variables(prefix))
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - a damaged file raises many types; all mean "try older"
            reasons[prefix] = _first_line(error)
        if prefix not in reasons:
            names = list(select(stored))  # outside the try: a checkpoint that does not fit is no damage
            try:
                reader = tf.train.load_checkpoint(prefix)
                values = {name: reader.get_tensor(_PREFIX + name + _SUFFIX) for name in names}
                step = int(reader.get_tensor(_PREFIX + _STEP + _SUFFIX)) if _STEP in stored else None
                return Loaded(prefix, values, stored, step, list(reasons))
            except MemoryError:
                raise
            except Exception as error:  # noqa: BLE001
                reasons[prefix] = _first_line(error)
        if len(reasons) < len(candidates):  # the last one's failure is the error below, in one line
            log.warning("checkpoint %s is unreadable (%s); trying an older one", prefix, reasons[prefix])
    raise CheckpointError(f"no readable checkpoint in {directory or path}: {len(reasons)} unreadable, the newest "
                          f"{_name(candidates[0])} ({reasons[candidates[0]]})")


_STEP = "counters/step"


def _stored_variables(prefix: str) -> list[tuple[str, list[int]]]:
    return [(key[len(_PREFIX):-len(_SUFFIX)], shape) for key, shape in tf.train.list_variables(prefix)
            if key.startswith(_PREFIX) and key.endswith(_SUFFIX)]


def _checkpoint_folder(path: str) -> str | None:
    """The folder holding a logdir's checkpoints (its `checkpoints/` or itself), None for a prefix."""
    path = path.rstrip("/")
    for directory in (f"{path}/checkpoints", path):
        if tf.io.gfile.isdir(directory) and checkpoint_files(directory):
            return directory
    return None


def quarantine(directory: str, prefixes: Sequence[str]) -> None:
    """Moves damaged checkpoints' files into `directory/damaged/`, out of the rotation (nothing is deleted)."""
    target = f"{directory.rstrip('/')}/damaged"
    tf.io.gfile.makedirs(target)
    for prefix in prefixes:
        for path in tf.io.gfile.glob(prefix + ".*"):
            tf.io.gfile.rename(path, f"{target}/{posixpath.basename(path)}", overwrite=True)
        log.warning("moved damaged checkpoint %s to %s/", _name(prefix), target)


def compile_patterns(patterns: Sequence[str], flag: str = "--include") -> list[re.Pattern]:
    """The regular expressions of `flag` (--include, --exclude); a bad one is one CheckpointError line naming
    the flag and the pattern."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as error:
            raise CheckpointError(f"{flag} {pattern!r} is not a regular expression ({error})") from None
    return compiled


def restore_filtered(variables: Mapping[str, tf.Variable], path: str, include: Sequence[str] = (".*",),
                     exclude: Sequence[str] = (), never: Sequence[str] = ()) -> RestoreReport:
    """Restores the variables whose names match an include pattern and no exclude pattern.

    `never` are patterns of variables that are not restored whatever the user's patterns (a
    run's own state); errors quote only `include` and `exclude`, as the user typed them.

    Fails before assigning anything if an include pattern matches no variable of the run, if
    include and exclude together select none, or if a selected variable is missing from the
    checkpoint or has another shape. Reads through `read_checkpoint` (verified, with fallback).
    """
    include = list(include) or [".*"]
    include_re, exclude_re = compile_patterns(include, "--include"), compile_patterns(exclude, "--exclude")
    never_re = compile_patterns(never, "never")

    for pattern, regex in zip(include, include_re):
        if not any(regex.match(name) for name in variables):
            raise CheckpointError(f"--include {pattern!r} matches no variable; list them with: planet-sac variables {path}")
    chosen_by_user = [name for name in variables
                      if any(r.match(name) for r in include_re) and not any(r.match(name) for r in exclude_re)]
    selected = [name for name in chosen_by_user if not any(r.match(name) for r in never_re)]
    if not selected:
        patterns = f"--include {' '.join(include)}" + (f" with --exclude {' '.join(exclude)}" if exclude else "")
        if chosen_by_user:
            raise CheckpointError(f"{patterns} selects only what belongs to a run (counters, random-number streams, skip "
                                  f"counts), which is never taken from another run; list the variables with: "
                                  f"planet-sac variables {path}")
        raise CheckpointError(f"{patterns} selects no variable; list them with: planet-sac variables {path}")

    def select(stored: Mapping[str, list[int]]) -> list[str]:
        missing = [name for name in selected if name not in stored]
        if missing:
            raise CheckpointError(f"{len(missing)} selected variables are not in {path}, e.g. {missing[0]!r}; "
                                  "narrow --include or add --exclude")
        for name in selected:
            want, have = list(variables[name].shape), list(stored[name])
            if want != have:
                raise CheckpointError(f"shape mismatch for {name}: checkpoint has {have}, this run needs {want}")
        return selected

    # Every tensor is read before any variable is assigned: a checkpoint that fails to read
    # (damaged, or deleted by another process's rotation meanwhile) never leaves a half-restored model.
    loaded = read_checkpoint(path, select)
    for name in selected:
        variables[name].assign(loaded.values[name])
    chosen = set(selected)
    return RestoreReport(restored=selected, skipped=sorted(set(loaded.stored) - chosen),
                         untouched=sorted(set(variables) - chosen), prefix=loaded.prefix, step=loaded.step)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else error.__class__.__name__


def checkpoint_step(prefix: str) -> int:
    """The run's update counter stored in the checkpoint at `prefix`."""
    return int(tf.train.load_checkpoint(prefix).get_tensor("variables/counters/step/.ATTRIBUTES/VARIABLE_VALUE"))


def find_run_config(checkpoint: str) -> Config:
    """The config.yaml of the run that wrote `checkpoint` (a logdir, its checkpoints/ or a prefix)."""
    path = checkpoint.rstrip("/")
    for _ in range(3):
        if tf.io.gfile.exists(f"{path}/config.yaml"):
            return read_config_file(f"{path}/config.yaml")
        path = posixpath.dirname(path)
    raise ConfigError(f"{checkpoint} is not a training run (it has no config.yaml); pass the --logdir of a run")
