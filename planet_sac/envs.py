"""Environments with the observation and action conventions the world model expects.

``make_env`` returns a ``gymnasium.Env`` whose observations are a dict with exactly one key,
``"image"`` (uint8, ``image_size x image_size x 3``) or ``"state"`` (flat float32 vector), and
whose actions are a float32 Box in ``[-1, 1]``. Two sources are supported:

* ``gym:<id>``: any registered gymnasium environment with a continuous (Box) action space;
  ``gym:<module>:<id>`` first imports ``module`` (which registers ``id``), as
  ``gymnasium.make("module:id")`` does, in this process and in every environment process.
* ``dmc:<domain>-<task>``: a dm_control suite task (needs ``pip install 'planet-sac[dmc]'``).

Observations of gymnasium environments (see ``GymEnv``): a ``Dict`` observation space is mapped to
``image`` (its one uint8 ``H x W x 3`` key, resized to ``image_size``) or ``state`` (all its other
keys, sorted by name, each flattened to float32 and concatenated); an observation that is itself a
uint8 ``H x W x 3`` image is the image; any other environment's image is its ``render()`` frame.

Action repeat lives inside the base environments rather than in a wrapper so that an image is
rendered once per agent step, not once per simulator step (rendering dominates the cost).
The time limit counts agent steps, i.e. steps after action repeat, and ends episodes with
``truncated=True``; ``terminated`` is only ever set by the task itself.

Environments that simulate with MuJoCo (every dmc task, gymnasium's mujoco envs) run in a child
process, see ``EnvProcess``: headless MuJoCo rendering and TensorFlow crash in one process.
This module and ``planet_sac/__init__.py`` must therefore never import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping, Protocol, Sequence, cast

import gymnasium
import numpy as np
from gymnasium import spaces
from PIL import Image

from planet_sac.config import ConfigError
from planet_sac.errors import MissingPackageError, SetupError

log = logging.getLogger("planet_sac")

OBS_KEYS = ("image", "state")
CAMERAS = {"quadruped": 2}
"""dm_control camera per domain, as PlaNet and Dreamer render (camera 0 elsewhere); quadruped's camera 0 films
the whole arena from 10 m, where the body is a few pixels of a 64x64 frame."""

DMC_DEFAULT_STEPS = 1000
"""Episode length of the dm_control suite tasks in control steps (before action repeat)."""

_TASK_FORMAT = (
    "expected 'gym:<gymnasium id>' (e.g. 'gym:Pendulum-v1'), 'gym:<module>:<id>' (e.g. 'gym:myenvs:MyReach-v0') "
    "or 'dmc:<domain>-<task>' (e.g. 'dmc:cartpole-swingup')"
)


def make_env(
    task: str,
    obs: str = "image",
    action_repeat: int = 1,
    time_limit: int | None = None,
    seed: int | None = None,
    image_size: int = 64,
    shadow_size: int | None = None,
    _spawn: bool = True,
) -> gymnasium.Env:
    """Create an environment for ``task`` with dict observations and actions in [-1, 1].

    Args:
        task: ``gym:<gymnasium id>``, ``gym:<module>:<gymnasium id>`` or ``dmc:<domain>-<task>``.
        obs: ``"image"`` for rendered RGB frames or ``"state"`` for the flat state vector.
        action_repeat: Simulator steps per agent action; rewards are summed.
        time_limit: Maximum agent actions per episode; ``None`` keeps the task's default length
            (divided by ``action_repeat``, rounded up).
        seed: Seeds the first ``reset`` and the action space, so equal seeds give equal episodes.
        image_size: Height and width of image observations.
        shadow_size: MuJoCo's shadow-map size for dm_control frames (None: the model's, 4096); a
            smaller map renders faster on a software rasteriser (docs/performance.md).

    Raises:
        ConfigError: For a malformed or unknown task, or an unsupported observation or action space.
        SetupError: When a package or the OpenGL library the task needs is missing (says what to install).
    """
    if obs not in OBS_KEYS:
        raise ConfigError(f"obs must be one of {OBS_KEYS}, got {obs!r}")
    if action_repeat < 1:
        raise ConfigError(f"action_repeat must be >= 1, got {action_repeat}")
    if time_limit is not None and time_limit < 1:
        raise ConfigError(f"time_limit must be >= 1 or None, got {time_limit}")
    if image_size < 1:
        raise ConfigError(f"image_size must be >= 1, got {image_size}")
    source, sep, name = task.partition(":")
    if not sep or not name:
        raise ConfigError(f"bad task {task!r}: {_TASK_FORMAT}")
    if shadow_size is not None and (source != "dmc" or shadow_size < 1):
        raise ConfigError(f"shadow_size={shadow_size}: a positive size, for dm_control tasks only (got task {task!r})")
    if source == "gym":
        kind: Callable[[str, str, int, int, int | None], SimEnv] = GymEnv
    elif source == "dmc":
        kind = DMCEnv
        if shadow_size is not None:
            kind = functools.partial(DMCEnv, shadow_size=shadow_size)
    else:
        raise ConfigError(f"bad task prefix {source!r} in {task!r}: {_TASK_FORMAT}")
    args = (name, obs, action_repeat, image_size, seed)
    own_process = _spawn and uses_mujoco(task)
    env = EnvProcess(kind, *args, python_path=module_paths(task)) if own_process else kind(*args)
    wrapped = TimeLimit(NormalizeActions(env), episode_limit(task, action_repeat, time_limit))
    wrapped.action_space.seed(seed)
    wrapped.observation_space.seed(seed)
    return wrapped


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
        raise ConfigError(f"bad task 'gym:{name}': {_TASK_FORMAT}")
    before = set(gymnasium.envs.registry)
    try:
        _import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not (module == error.name or module.startswith(error.name + ".")):
            raise ConfigError(f"gym:{name}: importing module {module!r} failed: {_one_line(error)}") from None
        raise ConfigError(f"gym:{name}: no module named {module!r} on the Python path or in the working directory "
                          f"{os.getcwd()}; add its folder to PYTHONPATH") from None
    except Exception as error:  # the module's own code failed: its message, in one line
        raise ConfigError(f"gym:{name}: importing module {module!r} failed: {_one_line(error)}") from None
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


def _one_line(error: BaseException) -> str:
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


class SimEnv(gymnasium.Env):
    """Base environment: dict observations, native action bounds, built-in action repeat.

    Subclasses implement ``_reset``, ``_advance`` (one simulator step) and ``_observe``.
    A seed given at construction is used by the first ``reset`` that is not given its own.
    """

    metadata = {"render_modes": ["rgb_array"]}
    render_mode: str | None = "rgb_array"
    observation_space: spaces.Dict
    action_space: spaces.Box

    def __init__(self, obs_key: str, action_repeat: int, image_size: int, seed: int | None) -> None:
        self.obs_key = obs_key
        self.action_repeat = action_repeat
        self.image_size = image_size
        self._pending_seed = seed

    def _reset(self, seed: int | None) -> None:
        raise NotImplementedError

    def _advance(self, action: np.ndarray) -> tuple[float, bool, bool, dict[str, Any]]:
        """Step the simulator once; returns (reward, terminated, truncated, info)."""
        raise NotImplementedError

    def _observe(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        super().reset(seed=seed)
        self._reset(seed)
        return self._observe(), {}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        total = 0.0
        for _ in range(self.action_repeat):
            reward, terminated, truncated, info = self._advance(action)
            total += reward
            if terminated or truncated:
                break
        return self._observe(), total, terminated, truncated, info


class GymEnv(SimEnv):
    """A gymnasium environment (without its own time limit) as a ``SimEnv``.

    ``name`` is a registered id or ``module:id`` (the module is imported first, see
    ``import_gym_module``). Observations are mapped as follows:

    * a ``Dict`` space: the image is its one uint8 ``H x W x 3`` key (two such keys are refused); the
      state is every other key, in sorted order of the key names, each flattened (``spaces.flatten``)
      to float32 and concatenated;
    * a uint8 ``H x W x 3`` Box: the observation is the image (``obs="state"`` flattens it);
    * any other space: the state is the flattened observation, the image the ``render()`` frame.

    Images of another size are resized to ``image_size x image_size`` by area averaging (``resize_image``).
    """

    def __init__(
        self, name: str, obs_key: str, action_repeat: int, image_size: int, seed: int | None
    ) -> None:
        super().__init__(obs_key, action_repeat, image_size, seed)
        self.name = name
        env_id = import_gym_module(name)
        try:
            spec = gymnasium.spec(env_id)
        except gymnasium.error.Error as err:
            message = " ".join(str(err).split())
            raise ConfigError(
                f"unknown gymnasium id {name!r} ({message}); use 'gym:<id>' with a registered id, "
                "e.g. 'gym:Pendulum-v1', or 'gym:<module>:<id>' for an id your module registers"
            ) from None
        try:  # loading the environment's module imports what it needs (Box2D, pygame, ...)
            can_render = "rgb_array" in _render_modes(spec)
            self.render_mode = "rgb_array" if can_render else None
            kwargs: dict[str, Any] = {"render_mode": "rgb_array"} if can_render else {}
            self._env = gymnasium.make(env_id, max_episode_steps=-1, **kwargs)
        except gymnasium.error.DependencyNotInstalled as err:
            message = " ".join(str(err).split())
            raise MissingPackageError(f"gym:{name} needs a package that is not installed: {message}") from None
        action_space = self._env.action_space
        if not isinstance(action_space, spaces.Box):
            raise ConfigError(
                f"gym:{name} has a {type(action_space).__name__} action space; only continuous "
                "(Box) action spaces are supported, e.g. 'gym:Pendulum-v1'"
            )
        if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
            raise ConfigError(f"gym:{name} has unbounded actions; bounded Box actions are needed")
        self.action_space = action_space
        inner = self._inner_obs_space = self._env.observation_space
        self._image_key: str | None = None  # where the image comes from: a Dict key, "" (the observation), None (render)
        self._state_keys: list[str] | None = None  # the Dict keys of the state, None: the whole observation
        if isinstance(inner, spaces.Dict):
            images = [key for key, space in inner.spaces.items() if _is_image_space(space)]
            if len(images) > 1:
                raise ConfigError(f"gym:{name} has {len(images)} uint8 HxWx3 image observations "
                                  f"({', '.join(map(str, images))}); planet_sac takes one image key")
            self._image_key = images[0] if images else None
            self._state_keys = sorted(key for key in inner.spaces if key != self._image_key)
        elif _is_image_space(inner):
            self._image_key = ""
        if obs_key == "image":
            if self._image_key is None and not can_render:
                self._env.close()
                raise ConfigError(f"gym:{name} has no image observation and cannot render rgb_array frames; "
                                  "use obs='state'")
            self.observation_space = spaces.Dict(
                image=spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
            )
        else:
            parts = [inner] if self._state_keys is None else [cast(spaces.Dict, inner)[key] for key in self._state_keys]
            try:
                size = sum(spaces.flatdim(part) for part in parts)
            except ValueError as error:  # Sequence, Graph: no fixed size
                self._env.close()
                raise ConfigError(f"gym:{name}'s observation space {inner} has no fixed size "
                                  f"({' '.join(str(error).split())}); planet_sac needs Box, Discrete, Tuple or Dict "
                                  "observations of a fixed size") from None
            if size == 0:
                self._env.close()
                raise ConfigError(f"gym:{name} has no state keys beside its image {self._image_key!r}; use obs='image'")
            self.observation_space = spaces.Dict(
                state=spaces.Box(-np.inf, np.inf, (size,), np.float32)
            )
        self._last_obs: Any = None

    def _reset(self, seed: int | None) -> None:
        self._last_obs, _ = self._env.reset(seed=seed)

    def _advance(self, action: np.ndarray) -> tuple[float, bool, bool, dict[str, Any]]:
        self._last_obs, reward, terminated, truncated, info = self._env.step(action)
        return float(reward), bool(terminated), bool(truncated), info

    def _observe(self) -> dict[str, np.ndarray]:
        obs = self._last_obs
        if self.obs_key == "image":
            if self._image_key is None:
                frame = self.render()
            else:
                frame = obs[self._image_key] if self._image_key else obs
            return {"image": resize_image(frame, self.image_size)}
        if self._state_keys is None:
            state = spaces.flatten(self._inner_obs_space, obs)
        else:
            inner = cast(spaces.Dict, self._inner_obs_space)  # the state keys are those of a Dict observation
            parts = [np.asarray(spaces.flatten(inner[key], obs[key]), np.float32).ravel()
                     for key in self._state_keys]
            state = np.concatenate(parts)
        return {"state": np.asarray(state, np.float32)}

    def render(self) -> np.ndarray:
        """The inner environment's full-resolution RGB frame."""
        try:
            return cast(np.ndarray, self._env.render())  # render_mode "rgb_array": one RGB frame
        except gymnasium.error.DependencyNotInstalled as err:  # e.g. pygame for the classic-control tasks
            message = " ".join(str(err).split())
            raise MissingPackageError(f"gym:{self.name} cannot render frames: {message}") from None

    def close(self) -> None:
        self._env.close()


def _is_image_space(space: spaces.Space) -> bool:
    """A uint8 H x W x 3 Box: an RGB image observation."""
    return (isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3
            and space.shape[-1] == 3)


class DMCEnv(SimEnv):
    """A dm_control suite task as a ``SimEnv``.

    The task's own time limit is disabled (``make_env`` applies one counted in agent steps), so a
    dm_control episode end seen here is a real termination, reported as ``terminated`` when its
    discount is 0 and as ``truncated`` otherwise. The state vector concatenates the flattened
    observation values in the order the task defines them.
    """

    def __init__(
        self, name: str, obs_key: str, action_repeat: int, image_size: int, seed: int | None,
        shadow_size: int | None = None,
    ) -> None:
        super().__init__(obs_key, action_repeat, image_size, seed)
        os.environ.setdefault("MUJOCO_GL", "egl")
        suite = _import_dm_control_suite()
        self._rendered = False
        domain, _, task = name.partition("-")
        self.camera_id = CAMERAS.get(domain, 0)
        if (domain, task) not in suite.ALL_TASKS:
            tasks = [f"{d}-{t}" for d, t in suite.ALL_TASKS if d == domain] or [
                f"{d}-{t}" for d, t in suite.ALL_TASKS
            ]
            raise ConfigError(
                f"unknown dm_control task 'dmc:{name}'; use 'dmc:<domain>-<task>' with one of: "
                + ", ".join(tasks)
            )
        self._env = suite.load(
            domain, task, task_kwargs={"random": seed, "time_limit": float("inf")}
        )
        if shadow_size is not None:  # read when the first frame creates the rendering context
            self._env.physics.model.vis.quality.shadowsize = shadow_size
        spec = self._env.action_spec()
        self.action_space = spaces.Box(
            spec.minimum.astype(np.float32), spec.maximum.astype(np.float32), spec.shape, np.float32
        )
        space: spaces.Box
        if obs_key == "image":
            space = spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
        else:
            size = sum(int(np.prod(v.shape)) for v in self._env.observation_spec().values())
            space = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.observation_space = spaces.Dict({obs_key: space})
        self._last_obs: Any = None

    def _reset(self, seed: int | None) -> None:
        if seed is not None:
            self._env.task.random.seed(seed)
        self._last_obs = self._env.reset().observation

    def _advance(self, action: np.ndarray) -> tuple[float, bool, bool, dict[str, Any]]:
        time_step = self._env.step(action)
        self._last_obs = time_step.observation
        ended = time_step.last()
        terminated = bool(ended and time_step.discount == 0.0)
        return float(time_step.reward or 0.0), terminated, ended and not terminated, {}

    def _observe(self) -> dict[str, np.ndarray]:
        if self.obs_key == "image":
            return {"image": self.render()}
        values = [np.asarray(v, np.float32).ravel() for v in self._last_obs.values()]
        return {"state": np.concatenate(values)}

    def render(self) -> np.ndarray:
        """An ``image_size`` square RGB frame from the task's camera (`CAMERAS`)."""
        if self._rendered:
            return self._env.physics.render(self.image_size, self.image_size, camera_id=self.camera_id)
        try:  # the first frame creates the OpenGL context: a failure here is the machine's set-up
            frame = self._env.physics.render(self.image_size, self.image_size, camera_id=self.camera_id)
        except Exception as err:
            raise SetupError(_opengl_hint(err)) from None
        self._rendered = True
        return frame

    def close(self) -> None:
        self._env.close()


class _DeprecatedTotalMass(logging.Filter):
    """Drops MuJoCo's one known deprecation warning, which dm_control's model files trigger on every load."""

    MESSAGE = "compiler attribute 'settotalmass' is deprecated"

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.MESSAGE)


def _silence_known_warnings() -> None:
    """MuJoCo warns through dm_control's callback on absl's logger (`WARNING:absl:compiler attribute
    'settotalmass' is deprecated ...`, cheetah's XML uses it): that message alone is dropped, every
    other absl warning is kept."""
    absl_logger = logging.getLogger("absl")
    if not any(isinstance(existing, _DeprecatedTotalMass) for existing in absl_logger.filters):
        absl_logger.addFilter(_DeprecatedTotalMass())


def _import_dm_control_suite() -> Any:
    """dm_control's suite; it chooses its OpenGL back-end (MUJOCO_GL) when imported."""
    _silence_known_warnings()
    try:
        from dm_control import suite
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in ("dm_control", "mujoco"):
            raise SetupError(_opengl_hint(err)) from None
        raise MissingPackageError(
            "dmc tasks need dm_control and mujoco: install the dmc extra with pip install -e '.[dmc]' "
            "(in the planet_sac checkout)"
        ) from None
    except Exception as err:
        raise SetupError(_opengl_hint(err)) from None
    return suite


def _opengl_hint(error: Exception) -> str:
    detail = " ".join(str(error).split())[:160]
    return (
        f"MuJoCo cannot render with MUJOCO_GL={os.environ.get('MUJOCO_GL', '')} ({type(error).__name__}: {detail}); "
        "on a machine without a display set MUJOCO_GL=egl (Debian/Ubuntu: apt-get install libegl1) "
        "or MUJOCO_GL=osmesa (apt-get install libosmesa6)"
    )


class EnvCrashed(RuntimeError):
    """The child process of an environment died (killed, segfault) while serving a call."""

    def __init__(self, exit_code: int | None, method: str):
        super().__init__(f"environment process died (exit code {exit_code}) during {method}")
        self.exit_code = exit_code


class EnvProcess(gymnasium.Env):
    """A ``SimEnv`` built and run in a fresh child Python process; calls are forwarded to it.

    Headless MuJoCo renders through Mesa's software rasteriser, which links its own LLVM, while
    TensorFlow exports LLVM symbols of another version: a GL context created in a process that
    has imported TensorFlow segfaults, and importing TensorFlow after dm_control crashes too.
    The child is a new interpreter (not a fork of this one) that never imports TensorFlow.
    Exceptions raised in the child (e.g. ``ConfigError`` for an unknown task) are re-raised here.
    """

    MIRRORED = ("action_space", "observation_space", "obs_key", "action_repeat", "image_size", "render_mode")
    CLOSE_SECONDS = 10.0
    """How long `close` waits for the child to answer before it kills it."""
    # the mirrored attributes, set from the child's environment in __init__
    observation_space: spaces.Dict
    action_space: spaces.Box
    obs_key: str
    action_repeat: int
    image_size: int

    def __init__(self, kind: Callable[..., gymnasium.Env], *args: Any, environment: Mapping[str, str] | None = None,
                 python_path: Sequence[str] = ()) -> None:
        """`python_path`: folders the child also needs on its path (e.g. that of a `gym:<module>:<id>` module)."""
        ours, theirs = socket.socketpair()
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        child_env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"), **(environment or {}))
        python_path = [package_root, *python_path, child_env.get("PYTHONPATH", "")]
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, python_path))
        code = "import sys; from planet_sac.envs import serve_env; serve_env(int(sys.argv[1]))"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code, str(theirs.fileno())], pass_fds=[theirs.fileno()], env=child_env
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        weakref.finalize(self, _stop_process, self._process, self._conn)
        for name, value in self._call("create", kind, *args).items():
            setattr(self, name, value)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.send(method, *args, **kwargs)
        return self.receive(method)

    def send(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Asks the child to run `method` without waiting for the answer (see `receive`)."""
        try:
            self._conn.send((method, args, kwargs))
        except (EOFError, OSError):
            raise EnvCrashed(self._process.wait(), method) from None

    def receive(self, method: str) -> Any:
        """The answer to the last `send`; re-raises the child's exception; `EnvCrashed` if the child died."""
        try:
            ok, result = self._conn.recv()
        except (EOFError, OSError):
            raise EnvCrashed(self._process.wait(), method) from None
        if not ok:
            raise result
        return result

    @property
    def pid(self) -> int:
        return self._process.pid

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self._call("reset", seed=seed, options=options)

    def step(self, action: np.ndarray):
        return self._call("step", np.asarray(action))

    def render(self) -> np.ndarray:
        return self._call("render")

    def close(self) -> None:
        """Closes the environment in the child and ends the child; one that does not answer in
        `CLOSE_SECONDS` (hung, or stopped) is killed, so closing never blocks."""
        answered = True
        try:
            if self._process.poll() is None and not self._conn.closed:
                self.send("close")
                answered = self._conn.poll(self.CLOSE_SECONDS)
                if answered:
                    self.receive("close")
        except EnvCrashed:
            pass
        finally:
            if not answered:
                log.warning("environment process %d did not answer close in %.0f s; killed it",
                            self._process.pid, self.CLOSE_SECONDS)
                self._process.kill()
            _stop_process(self._process, self._conn)


def serve_env(fd: int) -> None:
    """Child side of ``EnvProcess``: answer (method, args, kwargs) messages on socket ``fd``.

    Ctrl-C is left to the parent, which closes the environment; the child ends when it reads
    ``close`` or the parent's end of the socket is closed.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    env: SimEnv | None = None
    while True:
        try:
            method, args, kwargs = conn.recv()
        except EOFError:
            break
        try:
            if method == "create":
                kind, *init_args = args
                env = kind(*init_args)
                result: Any = {name: getattr(env, name, None) for name in EnvProcess.MIRRORED}
            else:
                result = getattr(env, method)(*args, **kwargs)
            conn.send((True, result))
        except Exception as error:
            try:
                pickle.dumps(error)
            except Exception:
                error = RuntimeError(f"{type(error).__name__}: {error}")
            try:
                setattr(error, "child_traceback", traceback.format_exc())  # kept for the parent's debug log
            except AttributeError:  # an exception type without a __dict__
                pass
            conn.send((False, error))
        if method == "close":
            break


def _stop_process(process: subprocess.Popen, conn: Connection) -> None:
    conn.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class EnvWrapper(gymnasium.Wrapper):
    """Wrapper base that forwards the ``SimEnv`` metadata (gymnasium wrappers do not)."""

    env: SimEnv | EnvProcess | EnvWrapper

    @property
    def obs_key(self) -> str:
        """The single observation key, ``"image"`` or ``"state"``."""
        return self.env.obs_key

    @property
    def action_repeat(self) -> int:
        """Simulator steps per agent action."""
        return self.env.action_repeat


class NormalizeActions(EnvWrapper):
    """Expose actions in [-1, 1]; they are clipped and rescaled to the true bounds."""

    def __init__(self, env: SimEnv | EnvProcess | EnvWrapper) -> None:
        super().__init__(env)
        space = cast(spaces.Box, env.action_space)  # make_env's environments have Box actions
        self._low = space.low.astype(np.float64)
        self._high = space.high.astype(np.float64)
        self._dtype = space.dtype
        self.action_space = spaces.Box(-1.0, 1.0, space.shape, np.float32)

    def step(self, action: np.ndarray):
        unit = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
        scaled = self._low + (unit + 1.0) / 2.0 * (self._high - self._low)
        return self.env.step(scaled.astype(self._dtype))


class TimeLimit(EnvWrapper):
    """Truncate episodes after ``max_episode_steps`` agent steps (None: never)."""

    def __init__(self, env: SimEnv | EnvProcess | EnvWrapper, max_episode_steps: int | None) -> None:
        super().__init__(env)
        self.max_episode_steps = max_episode_steps
        self._steps = 0

    def reset(self, **kwargs: Any):
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        if self.max_episode_steps is not None and self._steps >= self.max_episode_steps:
            truncated = truncated or not terminated
        return obs, reward, terminated, truncated, info


def _render_modes(spec: gymnasium.envs.registration.EnvSpec) -> list[str]:
    """Render modes a registered gymnasium environment declares, without creating it."""
    creator: object = spec.entry_point
    if isinstance(creator, str):
        creator = gymnasium.envs.registration.load_env_creator(creator)
    metadata = getattr(creator, "metadata", None)
    return list(metadata.get("render_modes", [])) if isinstance(metadata, dict) else []


def resize_image(frame: np.ndarray, size: int) -> np.ndarray:
    """Area-average resize of an RGB frame to ``size x size`` uint8."""
    frame = np.asarray(frame, np.uint8)
    if frame.shape[:2] == (size, size):
        return frame
    return np.asarray(Image.fromarray(frame).resize((size, size), Image.Resampling.BOX))


@dataclasses.dataclass
class StepResult:
    """One environment's step inside a batch; `crashed`: its process died and was restarted (reset it next)."""

    obs: dict[str, np.ndarray] | None
    reward: float
    terminated: bool
    truncated: bool
    crashed: bool = False


class EnvBatch(Protocol):
    """Environments the actor steps together; spaces are those of one environment."""

    num_envs: int
    observation_space: spaces.Dict
    action_space: spaces.Box

    def reset(self, index: int, seed: int | None = None) -> dict[str, np.ndarray]: ...

    def step(self, actions: Mapping[int, np.ndarray]) -> dict[int, StepResult]: ...

    def close(self) -> None: ...


class LocalEnvs:
    """A batch of one environment stepped in this process (through its own child process for MuJoCo)."""

    num_envs = 1

    def __init__(self, env: gymnasium.Env) -> None:
        self.env = env
        # the EnvBatch spaces: those of make_env's environments (a Dict observation, Box actions)
        self.observation_space = cast(spaces.Dict, env.observation_space)
        self.action_space = cast(spaces.Box, env.action_space)

    def reset(self, index: int, seed: int | None = None) -> dict[str, np.ndarray]:
        return self.env.reset(seed=seed)[0]

    def step(self, actions: Mapping[int, np.ndarray]) -> dict[int, StepResult]:
        obs, reward, terminated, truncated, _ = self.env.step(actions[0])
        return {0: StepResult(obs, float(reward), bool(terminated), bool(truncated))}

    def close(self) -> None:
        self.env.close()


class EnvFailedError(SetupError):
    """An environment failed (its process died, or it raised) more often than `ParallelEnvs` restarts it."""


def episode_seed(seed: int, stream: int, index: int) -> int:
    """The reset seed of episode `index` of a run's episode stream `stream` (0 training, 1 test, ...): a hash of the
    three (numpy's SeedSequence), so a run that restarts from a checkpoint resets its environments as before."""
    return int(np.random.SeedSequence([seed, 1_000 + stream, index]).generate_state(1)[0] % (2**31 - 1))


def environment_seed(seed: int, index: int, restarts: int = 0) -> int:
    """The seed of parallel environment `index` after `restarts` restarts: `seed` itself for the first
    environment's first start (so one environment plays what `make_env(seed)` plays), otherwise a hash of all
    three (numpy's SeedSequence), which no neighbouring seed, index or restart count shares."""
    if index == 0 and restarts == 0:
        return seed
    return int(np.random.SeedSequence([seed, index, restarts]).generate_state(1)[0] % (2**31 - 1))


class ParallelEnvs:
    """N environments, each built by `make_env` inside its own child process, stepped at the same time.

    Environment 0 is seeded with `seed`, environment i > 0 with a hash of (seed, i) (`environment_seed`), so that
    collectors with neighbouring `--seed`s never share an environment's seed. `step` sends every action before it reads any
    result, so the children simulate and render concurrently, each renderer with its share of
    the cores (`LP_NUM_THREADS`). A child that dies, or whose environment raises in `reset` or
    `step`, is replaced by a fresh one (seeded with a hash of (seed, i, restarts)): its step result says
    `crashed`, and the caller resets it before stepping it again; the other environments are not
    disturbed. As Dreamer's `RestartOnException(maxfails=2, window=300)`, restarts are capped: an
    environment that fails more than `max_restarts` times within `restart_window` seconds (e.g. one
    that raises on every reset) ends the run with `EnvFailedError`, one line naming its last error.
    `ConfigError` and `SetupError` (a wrong task, a missing package) are never retried.

    Why not `gymnasium.vector.AsyncVectorEnv`: it steps every environment on every call and
    resets a finished one by itself (on the next step, or in the same step with `final_obs` in
    `info`), while the actor steps only the environments that still have an episode to play,
    saves each episode with its own last observation, and resets one when it decides to. A worker
    that dies there closes the whole vector (no per-environment restart, no crash counted as a
    dropped episode). And its workers are `multiprocessing` children (forked from, or re-importing
    `__main__` of, a process that holds TensorFlow), whereas MuJoCo's headless renderer needs a
    fresh interpreter that never imports TensorFlow (see `EnvProcess`).
    """

    def __init__(self, task: str, obs: str, action_repeat: int, time_limit: int | None, seed: int, image_size: int,
                 num_envs: int, max_restarts: int = 3, restart_window: float = 300.0, shadow_size: int | None = None):
        self.num_envs = num_envs
        self._args = (task, obs, action_repeat, time_limit, seed, image_size, shadow_size)
        self.restarts = [0] * num_envs
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self._failures: list[list[float]] = [[] for _ in range(num_envs)]
        if task.startswith("gym:"):
            import_gym_module(task[len("gym:"):])  # a bad module or id: one line here, before any process starts
        self._python_path = module_paths(task)
        # Mesa's software renderer starts one thread per core in every process: N renderers would fight over
        # the cores. Each child gets its share instead (unless LP_NUM_THREADS is set), measured in docs/scaling.md.
        shared = os.environ.get("LP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // num_envs))
        self._threads = {"LP_NUM_THREADS": shared}
        self._envs: list[EnvProcess] = []
        try:
            for index in range(num_envs):
                self._envs.append(self._start(index))
        except BaseException:
            self.close()
            raise
        self.observation_space = self._envs[0].observation_space
        self.action_space = self._envs[0].action_space

    def _start(self, index: int) -> EnvProcess:
        task, obs, action_repeat, time_limit, seed, image_size, shadow_size = self._args
        seed = environment_seed(seed, index, self.restarts[index])
        return EnvProcess(_local_env, task, obs, action_repeat, time_limit, seed, image_size, shadow_size,
                          environment=self._threads,
                          python_path=self._python_path)

    def _replace(self, index: int, error: Exception) -> None:
        """Restarts environment `index` after `error`; raises `EnvFailedError` past the cap."""
        now = time.monotonic()
        self._failures[index] = [t for t in self._failures[index] if now - t < self.restart_window] + [now]
        detail = (str(error).replace("environment process ", "") if isinstance(error, EnvCrashed)
                  else f"raised {_one_line(error)}")
        child_traceback = getattr(error, "child_traceback", None)
        if child_traceback:
            log.debug("environment %d: %s", index, child_traceback)
        if len(self._failures[index]) > self.max_restarts:
            raise EnvFailedError(
                f"environment {index} failed {len(self._failures[index])} times within {self.restart_window:.0f} s, "
                f"last: {detail}; not restarting it again (fix the environment, or see --verbose)")
        self.restarts[index] += 1
        log.warning("environment %d %s; restarted it, its partial episode is dropped", index, detail)
        self._envs[index].close()
        self._envs[index] = self._start(index)

    def pids(self) -> list[int]:
        """Process ids of the environments' children (e.g. to watch or stop one)."""
        return [env.pid for env in self._envs]

    def reset(self, index: int, seed: int | None = None) -> dict[str, np.ndarray]:
        """Environment `index`'s first observation of a new episode (seeded with `seed` if given); restarts it
        (capped) until one resets."""
        while True:
            try:
                return self._envs[index].reset(seed=seed)[0]
            except (ConfigError, SetupError):
                raise
            except Exception as error:  # EnvCrashed, or raised by the environment
                self._replace(index, error)

    def step(self, actions: Mapping[int, np.ndarray]) -> dict[int, StepResult]:
        sent, results = [], {}
        for index, action in actions.items():
            try:
                self._envs[index].send("step", np.asarray(action))
                sent.append(index)
            except EnvCrashed as error:
                self._replace(index, error)
                results[index] = StepResult(None, 0.0, False, False, crashed=True)
        failure: Exception | None = None
        for index in sent:  # every answer is read, so no child's pipe is left out of step
            try:
                obs, reward, terminated, truncated, _ = self._envs[index].receive("step")
                results[index] = StepResult(obs, float(reward), bool(terminated), bool(truncated))
            except (ConfigError, SetupError) as error:
                failure = failure or error
            except Exception as error:  # EnvCrashed, or raised by the environment: restart it (capped)
                try:
                    self._replace(index, error)
                except EnvFailedError as given_up:
                    failure = failure or given_up
                results[index] = StepResult(None, 0.0, False, False, crashed=True)
        if failure is not None:
            raise failure
        return {index: results[index] for index in actions}

    def close(self) -> None:
        for env in self._envs:
            env.close()


def _local_env(task: str, obs: str, action_repeat: int, time_limit: int | None, seed: int, image_size: int,
               shadow_size: int | None = None) -> gymnasium.Env:
    """`make_env` inside an environment's child process (which never loads TensorFlow, so MuJoCo can stay here)."""
    return make_env(task, obs, action_repeat, time_limit, seed, image_size, shadow_size, _spawn=False)


def make_envs(task: str, obs: str, action_repeat: int, time_limit: int | None, seed: int, image_size: int,
              num_envs: int = 1, shadow_size: int | None = None) -> EnvBatch:
    """`num_envs` environments as one batch: `ParallelEnvs`, or for one environment that needs no child process
    of its own, that environment in this process. A child that dies is replaced (`ParallelEnvs`), also when it
    is the only one."""
    if num_envs < 1:
        raise ConfigError(f"env.num_envs={num_envs}: must be >= 1")
    if num_envs == 1 and not uses_mujoco(task):
        return LocalEnvs(make_env(task, obs, action_repeat, time_limit, seed, image_size, shadow_size))
    return ParallelEnvs(task, obs, action_repeat, time_limit, seed, image_size, num_envs, shadow_size=shadow_size)
