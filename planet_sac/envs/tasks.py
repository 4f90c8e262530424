"""Task names: parsing `gym:` and `dmc:` tasks, importing the module a `gym:<module>:<id>` task names, episode lengths.

Nothing here builds an environment; `planet_sac.envs.make` does. Read from gymnasium's registry only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence

import gymnasium

from planet_sac.config import ConfigError
from planet_sac.errors import MissingPackageError, SetupError

OBS_KEYS = ("image", "state")


DMC_DEFAULT_STEPS = 1000
"""Episode length of the dm_control suite tasks in control steps (before action repeat)."""

TASK_FORMAT = (
    "expected 'gym:<gymnasium id>' (e.g. 'gym:Pendulum-v1'), 'gym:<module>:<id>' (e.g. 'gym:myenvs:MyReach-v0') "
    "or 'dmc:<domain>-<task>' (e.g. 'dmc:cartpole-swingup')"
)


def uses_mujoco(task: str) -> bool:
    """Whether `task` simulates with MuJoCo (dm_control, gymnasium's MuJoCo tasks): such environments run in a
    child process of their own (see `EnvProcess`)."""
    source, _, name = task.partition(":")
    if source == "dmc":
        return True
    if source == "gym":
        entry_point = getattr(gymnasium.envs.registry.get(import_gym_module(name)), "entry_point", "")
        return "mujoco" in str(entry_point)
    return False


def episode_limit(task: str, action_repeat: int, time_limit: int | None) -> int | None:
    """Agent steps after which `make_env`'s episodes end: `time_limit`, else the task's own length divided by the
    action repeat (rounded up), None when the task has none. Read from the registry: no environment is built."""
    if time_limit is not None:
        return time_limit
    source, _, name = task.partition(":")
    if source == "dmc":
        default: int | None = DMC_DEFAULT_STEPS
    elif source == "gym":
        try:
            default = gymnasium.spec(import_gym_module(name)).max_episode_steps
        except gymnasium.error.Error:
            return None  # an unknown id: make_env says so
    else:
        return None
    return None if default is None else math.ceil(default / action_repeat)


def check_task(task: str) -> None:
    """Fails unless `task` names a task this installation can build; reads the registries, builds no environment.

    Raises:
        ConfigError: For a malformed task, an unknown gymnasium id (its module imported first) or an unknown
            dm_control task (one line each, as `make_env` says them).
        MissingPackageError, SetupError: If dm_control, which a `dmc:` task needs, cannot be imported.
    """
    source, sep, name = task.partition(":")
    if not sep or not name:
        raise ConfigError(f"bad task {task!r}: {TASK_FORMAT}")
    if source == "gym":
        gym_spec(name)
    elif source == "dmc":
        domain, _, task_name = name.partition("-")
        if (domain, task_name) not in dmc_tasks():
            raise unknown_dmc_task(name, dmc_tasks())
    else:
        raise ConfigError(f"bad task prefix {source!r} in {task!r}: {TASK_FORMAT}")


NO_DM_CONTROL = ("dmc tasks need dm_control and mujoco: install the dmc extra with pip install -e '.[dmc]' (in the "
                 "planet_sac checkout)")


@functools.lru_cache(maxsize=1)
def dmc_tasks() -> tuple[tuple[str, str], ...]:
    """dm_control suite's (domain, task) pairs (`suite.ALL_TASKS`), read once in a child process.

    Not imported here: importing dm_control loads its OpenGL back-end, and MuJoCo's GL in a process that runs
    TensorFlow crashes it later (environments run in their own processes for that reason, `EnvProcess`).

    Raises:
        MissingPackageError: If dm_control is not installed.
        SetupError: If the child cannot read the list (its last error line).
    """
    if importlib.util.find_spec("dm_control") is None:
        raise MissingPackageError(NO_DM_CONTROL)
    code = "import json\nfrom dm_control import suite\nprint(json.dumps(sorted(suite.ALL_TASKS)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "MUJOCO_GL": "disable"})  # the list needs no renderer
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        error = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise SetupError(f"dm_control's task list could not be read: {error[:200]}")
    return tuple((domain, task) for domain, task in json.loads(lines[-1]))


def unknown_dmc_task(name: str, tasks: Sequence[tuple[str, str]]) -> ConfigError:
    """The one-line error for a `dmc:` task dm_control's suite does not have: the domain's tasks, or all of them."""
    domain = name.partition("-")[0]
    names = [f"{d}-{t}" for d, t in tasks if d == domain] or [f"{d}-{t}" for d, t in tasks]
    return ConfigError(f"unknown dm_control task 'dmc:{name}'; use 'dmc:<domain>-<task>' with one of: " + ", ".join(names))


def gym_spec(name: str) -> gymnasium.envs.registration.EnvSpec:
    """The registered spec of the gymnasium task `name` (`Pendulum-v1` or `module:id`, the module imported first).

    Raises:
        ConfigError: If the module cannot be imported or the id is not registered (one line).
    """
    env_id = import_gym_module(name)
    try:
        return gymnasium.spec(env_id)
    except gymnasium.error.Error as err:
        message = " ".join(str(err).split())
        raise ConfigError(f"unknown gymnasium id {name!r} ({message}); use 'gym:<id>' with a registered id, "
                          "e.g. 'gym:Pendulum-v1', or 'gym:<module>:<id>' for an id your module registers") from None


def import_gym_module(name: str) -> str:
    """The gymnasium id of ``module:id`` (or a bare ``id``), after importing ``module`` so that it registers ``id``.

    As ``gymnasium.make("module:id")``: the module is imported before the id is looked up. It is
    looked for on ``sys.path`` and then in the working directory (``planet-sac`` is a console script,
    whose ``sys.path`` does not hold the directory it is run from).

    Raises:
        ConfigError: If the module cannot be imported, or does not register ``id`` (one line).
    """
    module, sep, env_id = name.rpartition(":")
    if not sep:
        return name
    if not module or not env_id:
        raise ConfigError(f"bad task 'gym:{name}': {TASK_FORMAT}")
    before = set(gymnasium.envs.registry)
    try:
        _import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not (module == error.name or module.startswith(error.name + ".")):
            raise ConfigError(f"gym:{name}: importing module {module!r} failed: {one_line(error)}") from None
        raise ConfigError(f"gym:{name}: no module named {module!r} on the Python path or in the working directory "
                          f"{os.getcwd()}; add its folder to PYTHONPATH") from None
    except Exception as error:  # the module's own code failed: its message, in one line
        raise ConfigError(f"gym:{name}: importing module {module!r} failed: {one_line(error)}") from None
    _REGISTERED.setdefault(module, set()).update(set(gymnasium.envs.registry) - before)
    if env_id not in gymnasium.envs.registry:
        own = sorted(_REGISTERED[module] | {key for key, spec in gymnasium.envs.registry.items()
                                             if _registered_by(spec, module)})
        registered = f"it registers {', '.join(own)}" if own else "it registers no gymnasium id"
        raise ConfigError(f"gym:{name}: module {module!r} did not register {env_id!r} ({registered}); "
                          f"call gymnasium.register(id={env_id!r}, entry_point=...) in it")
    return env_id


_REGISTERED: dict[str, set[str]] = {}
"""The gymnasium ids each module imported by `import_gym_module` registered when it was imported."""


def _import_module(module: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        here = os.getcwd()
        on_path = {os.path.abspath(entry or os.curdir) for entry in sys.path}
        if here in on_path or error.name is None or not (module == error.name or module.startswith(error.name + ".")):
            raise
        sys.path.append(here)
        importlib.import_module(module)


def _registered_by(spec: gymnasium.envs.registration.EnvSpec, module: str) -> bool:
    entry = spec.entry_point
    where = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    return where == module or where.startswith(module + ".")


def one_line(error: BaseException) -> str:
    message = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def module_paths(task: str) -> list[str]:
    """The folder an environment process needs on its path to import the module of ``gym:<module>:<id>`` (else [])."""
    source, _, name = task.partition(":")
    module, sep, _ = name.rpartition(":")
    if source != "gym" or not sep or module not in sys.modules:
        return []
    path = getattr(sys.modules[module], "__file__", None)
    if not path:
        return []
    root = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path).startswith("__init__."):
        root = os.path.dirname(root)
    for _ in range(module.count(".")):
        root = os.path.dirname(root)
    return [root]
