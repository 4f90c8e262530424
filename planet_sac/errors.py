"""Errors the user can fix without touching the code: the CLI prints them as one line (exit status 2).

`ConfigError` (planet_sac.config) covers bad settings and paths; `SetupError` covers the
machine: a missing package, no OpenGL for MuJoCo, too little memory. Anything else is a
bug and keeps its traceback.
"""


class SetupError(RuntimeError):
    """The machine lacks something planet_sac needs; the message says what to install or set."""


class MissingPackageError(SetupError, ImportError):
    """An optional package is not installed; the message names the pip command."""


def check_output_file(path: str, flag: str) -> None:
    """Fails before any work if the file `path` (given as `flag`) cannot be written.

    Its folder must exist and be writable, and `path` itself must not be a folder. Remote paths
    (`gs://...`) are left to the writer.
    """
    import os

    from planet_sac.config import ConfigError

    if "://" in path:
        return
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise ConfigError(f"{flag} {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {path} is a folder; give a file name")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{flag} {path}: the folder {folder} is not writable")
