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


def check_file_system(path: str, flag: str) -> None:
    """Fails (ConfigError, one line) if `path` (given as `flag`) is a URL whose scheme no file system reads.

    Local paths and `file://` always pass. Other schemes are TensorFlow's (`tf.io.gfile`: `gs://`, `ram://`,
    and what an imported plugin registers); for a scheme TensorFlow lacks, the `tensorflow_io` plugin is
    imported if installed (it registers `s3://`, `hdfs://`, `az://`, `http://`). Only the scheme is checked,
    without a network call.
    """
    from planet_sac.config import ConfigError

    scheme, sep, _ = path.partition("://")
    if not sep or scheme in ("", "file"):
        return
    if not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return  # not a URL: a local name that holds "://" further in (as `a b://c`)
    import tensorflow as tf

    if scheme not in tf.io.gfile.get_registered_schemes():
        try:
            import tensorflow_io  # type: ignore[import-not-found]  # noqa: F401  (registers its file systems)
        except ImportError:
            pass
    schemes = sorted(name for name in tf.io.gfile.get_registered_schemes() if name not in ("", "file"))
    if scheme not in schemes:
        raise ConfigError(f"{flag} {path}: TensorFlow has no file system for {scheme}:// here (it reads local paths"
                          f"{''.join(f', {name}://' for name in schemes)}); s3://, hdfs:// and az:// come with "
                          "pip install tensorflow-io")


def check_episode_folder(path: str, flag: str) -> None:
    """Fails if the folder `path` (given as `flag`) is a run directory itself or lies in its `checkpoints/`:
    episodes written there would mix with the run's own files. A run's `train_episodes/` (collectors share it)
    and `test_episodes/` are fine. Remote paths are left to the writer."""
    import os

    from planet_sac.config import ConfigError

    if "://" in path:
        return
    target = os.path.realpath(path)
    run = _enclosing_run(target)
    if run is None:
        return
    parts = os.path.relpath(target, run).split(os.sep)
    if parts == ["."]:
        raise ConfigError(f"{flag} {path} is a run directory; collect into its train_episodes/ (what its learner "
                          "trains on) or a folder of its own")
    if parts[0] == "checkpoints":
        raise ConfigError(f"{flag} {path} is in the checkpoints of the run in {run}; give another folder")


def _enclosing_run(folder: str) -> str | None:
    """The nearest run directory at or above the real path `folder` (a folder holding config.yaml beside
    checkpoints/, metrics.jsonl or train_episodes/), or None."""
    import os

    while True:
        if os.path.isfile(os.path.join(folder, "config.yaml")) and any(
                os.path.exists(os.path.join(folder, name)) for name in ("checkpoints", "metrics.jsonl", "train_episodes")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _run_owning(path: str) -> str | None:
    """The run directory whose own file `path` is (see check_output_file), or None."""
    import os

    target = os.path.realpath(path)
    folder = _enclosing_run(os.path.dirname(target))
    while folder is not None:
        parts = os.path.relpath(target, folder).split(os.sep)
        if parts[0] in RUN_FOLDERS or (len(parts) == 1 and (
                parts[0] in RUN_FILES or parts[0].startswith("events.out.tfevents"))):
            return folder
        parent = os.path.dirname(folder)
        folder = None if parent == folder else _enclosing_run(parent)
    return None
