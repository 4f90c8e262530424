"""`DMCEnv`: a dm_control suite task (`dmc:<domain>-<task>`) as a `SimEnv`, and importing dm_control headless.

dm_control chooses its OpenGL back-end (`MUJOCO_GL`, default here `egl`) when it is imported; a failure to
import or to render the first frame is the machine's set-up and is reported as a `SetupError` saying what to
install. Build it through `make_env`, which runs it in a child process (`planet_sac.envs.process`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
from gymnasium import spaces

from planet_sac.envs.base import SimEnv
from planet_sac.envs.tasks import NO_DM_CONTROL, unknown_dmc_task
from planet_sac.errors import MissingPackageError, SetupError

CAMERAS = {"quadruped": 2}
"""dm_control camera per domain, as PlaNet and Dreamer render (camera 0 elsewhere); quadruped's camera 0 films
the whole arena from 10 m, where the body is a few pixels of a 64x64 frame."""


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
        if (domain, task) not in suite.ALL_TASKS:
            raise unknown_dmc_task(name, suite.ALL_TASKS)
        self.camera_id = CAMERAS.get(domain, 0)
        self._env = suite.load(
            domain, task, task_kwargs={"random": seed, "time_limit": float("inf")}
        )
        visual = self._env.physics.model.vis  # read when the first frame creates the rendering context
        if shadow_size is not None:
            visual.quality.shadowsize = shadow_size
        # The offscreen buffer (640 x 480 by default) as large as a frame: the same pixels, rendered 1.05-1.25x
        # faster in software (docs/performance.md, "Rendering dm_control frames"); larger frames become possible.
        visual.global_.offwidth = visual.global_.offheight = image_size
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
        raise MissingPackageError(NO_DM_CONTROL) from None
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
