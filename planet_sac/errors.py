"""Errors the user can fix without touching the code: the CLI prints them as one line (exit status 2).

`ConfigError` (planet_sac.config) covers bad settings and paths; `SetupError` covers the
machine: a missing package, no OpenGL for MuJoCo, too little memory. Anything else is a
bug and keeps its traceback.
"""


class SetupError(RuntimeError):
    """The machine lacks something planet_sac needs; the message says what to install or set."""


class MissingPackageError(SetupError, ImportError):
    """An optional package is not installed; the message names the pip command."""
