"""Environments with the observation and action conventions the world model expects.

``make_env`` returns a ``gymnasium.Env`` whose observations are a dict with exactly one key,
``"image"`` (uint8, ``image_size x image_size x 3``) or ``"state"`` (flat float32 vector), and
whose actions are a float32 Box in ``[-1, 1]``; ``make_envs(config.env, seed=...)`` returns the
``EnvBatch`` the actor steps. Two sources:

* ``gym:<id>``: any registered gymnasium environment with a continuous (Box) action space;
  ``gym:<module>:<id>`` first imports ``module`` (which registers ``id``), as
  ``gymnasium.make("module:id")`` does, in this process and in every environment process (``gym.py``).
* ``dmc:<domain>-<task>``: a dm_control suite task (needs ``pip install 'planet-sac[dmc]'``; ``dmc.py``).

The time limit counts agent steps, i.e. steps after action repeat, and ends episodes with
``truncated=True``; ``terminated`` is only ever set by the task itself.

One concern per module: ``tasks`` (task names, episode lengths), ``base`` (``SimEnv``), ``gym``, ``dmc``,
``process`` (an environment in a child process), ``wrappers``, ``make`` (``make_env``), ``restarts``
(failing environments replaced, capped), ``batch`` (``make_envs``, ``ParallelEnvs``, seeds).
Environments that simulate with MuJoCo run in a child process
(``EnvProcess``): headless MuJoCo rendering and TensorFlow crash in one process. This package and
``planet_sac/__init__.py`` must therefore never import TensorFlow.
"""

from planet_sac.envs.base import SimEnv, resize_image
from planet_sac.envs.batch import EnvBatch, LocalEnvs, ParallelEnvs, StepResult, environment_seed, episode_seed, make_envs, restarting_env
from planet_sac.envs.dmc import CAMERAS, DMCEnv
from planet_sac.envs.gym import GymEnv
from planet_sac.envs.make import make_env
from planet_sac.envs.process import EnvCrashed, EnvProcess, serve_env
from planet_sac.envs.restarts import EnvFailedError, EnvRestarted, RestartOnFailure
from planet_sac.envs.tasks import DMC_DEFAULT_STEPS, OBS_KEYS, episode_limit, import_gym_module, module_paths, uses_mujoco
from planet_sac.envs.wrappers import EnvWrapper, NormalizeActions, TimeLimit

__all__ = [
    "CAMERAS", "DMC_DEFAULT_STEPS", "OBS_KEYS", "DMCEnv", "EnvBatch", "EnvCrashed", "EnvFailedError", "EnvProcess",
    "EnvRestarted", "EnvWrapper", "GymEnv", "LocalEnvs", "NormalizeActions", "ParallelEnvs", "RestartOnFailure", "SimEnv",
    "StepResult", "TimeLimit", "environment_seed", "episode_limit", "episode_seed", "import_gym_module", "make_env",
    "make_envs", "module_paths", "resize_image", "restarting_env", "serve_env", "uses_mujoco",
]
