"""planet_sac: PlaNet world models with CEM planning and a Soft Actor-Critic head, in TensorFlow 2."""

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
