"""Errors the user can fix without touching the code: the CLI prints them as one line (exit status 2).

`ConfigError` (planet_sac.config) covers bad settings and paths; `SetupError` covers the
machine: a missing package, no OpenGL for MuJoCo, too little memory. Anything else is a
bug and keeps its traceback.
"""


class SetupError(RuntimeError):
    """The machine lacks something planet_sac needs; the message says what to install or set."""


class MissingPackageError(SetupError, ImportError):
    """An optional package is not installed; the message names the pip command."""


RUN_FILES = ("config.yaml", "metrics.jsonl", "run.lock")
"""Files at the top of a run directory (the layout `training/run_dir.py` describes); TensorBoard's
`events.out.tfevents.*` files stand beside them."""
RUN_FOLDERS = ("checkpoints", "train_episodes", "test_episodes")
"""Folders of a run directory whose every file is the run's."""


def check_output_file(path: str, flag: str) -> None:
    """Fails before any work if the file `path` (given as `flag`) cannot be written, or must not be.

    Its folder must exist and be writable, and `path` itself must not be a folder. Nor may it be
    one of a run directory's own files (`RUN_FILES`, TensorBoard's event files, anything under
    `RUN_FOLDERS`) or an existing episode (`.npz`): writing a report there would lose what a run
    finished. A run directory is a folder holding `config.yaml` beside `checkpoints/`,
    `metrics.jsonl` or `train_episodes/`. Remote paths (`gs://...`) are left to the writer.
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
    owner = _run_owning(path)
    if owner is not None:
        raise ConfigError(f"{flag} {path} would overwrite a file of the run in {owner}; give another file name")
    if path.endswith(".npz") and os.path.exists(path):
        raise ConfigError(f"{flag} {path} would overwrite an episode; give another file name")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{flag} {path}: the folder {folder} is not writable")


def _run_owning(path: str) -> str | None:
    """The run directory whose own file `path` is (see check_output_file), or None."""
    import os

    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    while True:
        if os.path.isfile(os.path.join(folder, "config.yaml")) and any(
                os.path.exists(os.path.join(folder, name)) for name in ("checkpoints", "metrics.jsonl", "train_episodes")):
            parts = os.path.relpath(target, folder).split(os.sep)
            if parts[0] in RUN_FOLDERS or (len(parts) == 1 and (
                    parts[0] in RUN_FILES or parts[0].startswith("events.out.tfevents"))):
                return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
