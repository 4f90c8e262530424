"""`make_env`: one environment with the observation and action conventions the world model expects."""

from __future__ import annotations

import functools
from typing import Callable

import gymnasium

from planet_sac.config import ConfigError, EnvConfig
from planet_sac.envs.base import SimEnv
from planet_sac.envs.dmc import DMCEnv
from planet_sac.envs.gym import GymEnv
from planet_sac.envs.process import EnvProcess
from planet_sac.envs.tasks import OBS_KEYS, TASK_FORMAT, episode_limit, module_paths, uses_mujoco
from planet_sac.envs.wrappers import NormalizeActions, TimeLimit


def make_env(
    task: str | EnvConfig,
    obs: str | None = None,
    action_repeat: int | None = None,
    time_limit: int | None = None,
    seed: int | None = None,
    image_size: int | None = None,
    shadow_size: int | None = None,
    _spawn: bool = True,
) -> gymnasium.Env:
    """Create an environment for ``task`` with dict observations and actions in [-1, 1].

    As ``gymnasium.make`` takes an id or an ``EnvSpec``, ``task`` is a task name or a whole ``EnvConfig``
    (``make_env(config.env, seed=...)``); with an ``EnvConfig`` only ``seed`` may be given (default: the
    config's), the other fields come from the config (vary them with ``dataclasses.replace``).

    Args:
        task: ``gym:<gymnasium id>``, ``gym:<module>:<gymnasium id>`` or ``dmc:<domain>-<task>``, or an ``EnvConfig``.
        obs: ``"image"`` (default) for rendered RGB frames or ``"state"`` for the flat state vector.
        action_repeat: Simulator steps per agent action (default 1); rewards are summed.
        time_limit: Maximum agent actions per episode; ``None`` keeps the task's default length
            (divided by ``action_repeat``, rounded up).
        seed: Seeds the first ``reset`` and the action space, so equal seeds give equal episodes.
        image_size: Height and width of image observations (default 64).
        shadow_size: MuJoCo's shadow-map size for dm_control frames (None: the model's, 4096); a
            smaller map renders faster on a software rasteriser (docs/performance.md).

    Returns:
        A ``gymnasium.Env`` whose observations are a dict with the one key ``obs`` and whose actions are a
        float32 Box in [-1, 1]. MuJoCo tasks run in a child process (``EnvProcess``).

    Raises:
        ConfigError: For a malformed or unknown task, or an unsupported observation or action space.
        SetupError: When a package or the OpenGL library the task needs is missing (says what to install).
        TypeError: For an ``EnvConfig`` together with fields other than ``seed``.
    """
    if isinstance(task, EnvConfig):
        given = [name for name, value in (("obs", obs), ("action_repeat", action_repeat), ("time_limit", time_limit),
                                          ("image_size", image_size), ("shadow_size", shadow_size)) if value is not None]
        if given:
            raise TypeError(f"make_env(EnvConfig, {', '.join(given)}=...): set them in the EnvConfig "
                            "(dataclasses.replace), only seed may be given beside it")
        config = task
        seed = config.seed if seed is None else seed
        return make_env(config.task, config.obs, config.action_repeat, config.time_limit, seed, config.image_size,
                        config.shadow_size, _spawn=_spawn)
    obs = "image" if obs is None else obs
    action_repeat = 1 if action_repeat is None else action_repeat
    image_size = 64 if image_size is None else image_size
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
        raise ConfigError(f"bad task {task!r}: {TASK_FORMAT}")
    if shadow_size is not None and (source != "dmc" or shadow_size < 1):
        raise ConfigError(f"shadow_size={shadow_size}: a positive size, for dm_control tasks only (got task {task!r})")
    if source == "gym":
        kind: Callable[[str, str, int, int, int | None], SimEnv] = GymEnv
    elif source == "dmc":
        kind = DMCEnv
        if shadow_size is not None:
            kind = functools.partial(DMCEnv, shadow_size=shadow_size)
    else:
        raise ConfigError(f"bad task prefix {source!r} in {task!r}: {TASK_FORMAT}")
    args = (name, obs, action_repeat, image_size, seed)
    own_process = _spawn and uses_mujoco(task)
    env = EnvProcess(kind, *args, python_path=module_paths(task)) if own_process else kind(*args)
    wrapped = TimeLimit(NormalizeActions(env), episode_limit(task, action_repeat, time_limit))
    wrapped.action_space.seed(seed)
    wrapped.observation_space.seed(seed)
    return wrapped


def make_env_here(task: str, obs: str, action_repeat: int, time_limit: int | None, seed: int, image_size: int,
                  shadow_size: int | None = None) -> gymnasium.Env:
    """`make_env` in this process, also for MuJoCo: what an environment's child process builds (it never loads
    TensorFlow, so MuJoCo can stay there)."""
    return make_env(task, obs, action_repeat, time_limit, seed, image_size, shadow_size, _spawn=False)
