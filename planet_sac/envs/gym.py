"""`GymEnv`: a registered gymnasium environment (`gym:<id>`, `gym:<module>:<id>`) as a `SimEnv`."""

from __future__ import annotations

from typing import Any, cast

import gymnasium
import numpy as np
from gymnasium import spaces

from planet_sac.config import ConfigError
from planet_sac.envs.base import SimEnv, resize_image
from planet_sac.envs.tasks import gym_spec, import_gym_module
from planet_sac.errors import MissingPackageError


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
        spec = gym_spec(name)
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
        try:
            return float(reward), bool(terminated), bool(truncated), info
        except (TypeError, ValueError):
            raise ConfigError(f"gym:{self.name} returned a reward that is not a number: {reward!r:.80}") from None

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
        state = np.asarray(state, np.float32)
        size = spaces.flatdim(self.observation_space["state"])
        if state.shape != (size,):
            raise ConfigError(f"gym:{self.name} returned an observation of {state.size} values where its observation "
                              f"space {self._inner_obs_space} has {size}")
        return {"state": state}

    def render(self) -> np.ndarray:
        """The inner environment's full-resolution RGB frame: uint8, H x W x 3 (gymnasium's `rgb_array`).

        Raises:
            ConfigError: If the environment returns anything else (None, a float frame, another shape): one line,
                since a float frame in [0, 1] would otherwise be stored black.
        """
        try:
            frame = self._env.render()  # render_mode "rgb_array": one RGB frame
        except gymnasium.error.DependencyNotInstalled as err:  # e.g. pygame for the classic-control tasks
            message = " ".join(str(err).split())
            raise MissingPackageError(f"gym:{self.name} cannot render frames: {message}") from None
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
            raise ConfigError(f"gym:{self.name} render() returned {_describe_frame(frame)}, not an RGB frame: "
                              "render_mode='rgb_array' returns a uint8 array of shape (height, width, 3), values 0-255")
        return frame

    def close(self) -> None:
        self._env.close()


def _describe_frame(frame: object) -> str:
    """What a render() returned, in a few words: `None`, `a float32 array of shape (64, 64, 3) with values in [0, 1]`."""
    if not isinstance(frame, np.ndarray):
        return "None" if frame is None else f"a {type(frame).__name__}"
    values = f" with values in [{frame.min():.3g}, {frame.max():.3g}]" if frame.size and frame.dtype.kind in "fiub" else ""
    return f"a {frame.dtype} array of shape {frame.shape}{values}"


def _is_image_space(space: spaces.Space) -> bool:
    """A uint8 H x W x 3 Box: an RGB image observation."""
    return (isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3
            and space.shape[-1] == 3)


def _render_modes(spec: gymnasium.envs.registration.EnvSpec) -> list[str]:
    """Render modes a registered gymnasium environment declares, without creating it."""
    creator: object = spec.entry_point
    if isinstance(creator, str):
        creator = gymnasium.envs.registration.load_env_creator(creator)
    metadata = getattr(creator, "metadata", None)
    return list(metadata.get("render_modes", [])) if isinstance(metadata, dict) else []
