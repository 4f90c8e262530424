"""Episodes on disk: one compressed ``.npz`` per finished episode.

Layout (PlaNet's aligned layout): every array has length ``T + 1`` where ``T``
is the number of actions taken. Index 0 holds the reset observation together
with a zero action and a zero reward; index ``t`` holds the observation that
followed action ``t`` and the reward it earned.

========== =================== ==============================================
key        dtype               shape
========== =================== ==============================================
image      uint8               ``[T+1, H, W, 3]``   (``image`` and/or ``state``)
state      float32             ``[T+1, D]``
action     float32             ``[T+1, A]``, in [-1, 1] (``make_env``'s scale)
reward     float32             ``[T+1]``
discount   float32             ``[T+1]``, in [0, 1]; 0 only at the last step, after a termination
========== =================== ==============================================

Files are named ``{UTC %Y%m%dT%H%M%S}-{uuid4 hex}-{T}.npz`` so that sorting by
name sorts by time (``episode_filename`` writes the name, ``episode_length``
reads ``T`` back from it). All file I/O goes through ``tf.io.gfile`` (so directories
may live on ``gs://``), and files are written under a hidden temporary name and then
renamed, so readers never see a partial episode. Which files of a folder are its
episodes is the folder's rule (``planet_sac.episodes.folder``).

``load_episode`` treats every file as untrusted: it never unpickles, checks
the declared sizes before decompressing anything, and validates dtypes,
shapes, lengths and values. Every problem is a :class:`BadEpisodeError` with a
one-line message.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import math
import os
import re
import uuid
import zipfile
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import tensorflow as tf

OBS_KEYS = ("image", "state")
REQUIRED_KEYS = ("action", "reward", "discount")
FLOAT_KEYS = ("state", "action", "reward", "discount")
ACTION_TOLERANCE = 1e-6
"""How far beyond [-1, 1] a stored action may lie (float32 rounding of a rescaled bound), and no further."""
TEMP_PREFIX = ".tmp-"
TEMP_SUFFIX = ".npz.part"


class BadEpisodeError(ValueError):
    """An episode (in memory or on disk) that must not be used.

    ``str(error)`` is a one-line message; ``error.reason`` is a short category
    (e.g. ``"wrong dtype"``) suitable for counting.
    """

    def __init__(self, reason: str, detail: str | None = None):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
    """Per-step shapes and dtypes that every episode of one run must share.

    ``obs`` holds ``(key, per-step shape, dtype name)`` for each observation
    key present, e.g. ``(("image", (64, 64, 3), "uint8"),)``.
    """

    obs: tuple[tuple[str, tuple[int, ...], str], ...]
    action_dim: int

    @classmethod
    def from_episode(cls, episode: Mapping[str, np.ndarray]) -> EpisodeSpec:
        """Spec of an episode that already passed :func:`validate_episode`."""
        obs = tuple(
            (key, tuple(int(n) for n in episode[key].shape[1:]), "uint8" if key == "image" else "float32")
            for key in OBS_KEYS
            if key in episode
        )
        return cls(obs=obs, action_dim=int(episode["action"].shape[1]))

    @classmethod
    def for_task(cls, obs_key: str, obs_shape: tuple[int, ...], action_dim: int) -> EpisodeSpec:
        """The format a run's task defines: its observation key with the per-step shape, and its action size."""
        return cls(obs=((obs_key, tuple(int(n) for n in obs_shape), "uint8" if obs_key == "image" else "float32"),),
                   action_dim=int(action_dim))

    def describe(self) -> str:
        """E.g. `'state' observations of shape (3,) and 1-d actions`."""
        obs = " and ".join(f"{key!r} observations of shape {shape}" for key, shape, _ in self.obs)
        return f"{obs} and {self.action_dim}-d actions"

    @property
    def keys(self) -> tuple[str, ...]:
        """All keys the spec describes: observation keys, then action, reward, discount."""
        return tuple(key for key, _, _ in self.obs) + REQUIRED_KEYS

    def step_shapes(self) -> dict[str, tuple[int, ...]]:
        """Shape of one time step for every key (without the time axis)."""
        shapes = {key: shape for key, shape, _ in self.obs}
        shapes.update(action=(self.action_dim,), reward=(), discount=())
        return shapes

    def dtypes(self) -> dict[str, np.dtype]:
        """Numpy dtype for every key."""
        dtypes = {key: np.dtype(dtype) for key, _, dtype in self.obs}
        dtypes.update({key: np.dtype(np.float32) for key in REQUIRED_KEYS})
        return dtypes


def episode_filename(length: int, now: dt.datetime | None = None) -> str:
    """``{UTC %Y%m%dT%H%M%S}-{uuid4 hex}-{length}.npz``; ``length`` = number of actions.

    A naive ``now`` is taken to be UTC already.
    """
    if length < 0:
        raise ValueError(f"episode length must be >= 0, got {length}")
    now = now or dt.datetime.now(dt.timezone.utc)
    if now.tzinfo is not None:
        now = now.astimezone(dt.timezone.utc)
    return f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex}-{int(length)}.npz"


_LENGTH_SUFFIX = re.compile(r"-(\d+)\.npz$")
"""The end of a name that `episode_filename` wrote: the episode's length in agent steps."""


def episode_length(path: str) -> int | None:
    """The length (agent steps, i.e. actions) that the name of `path` ends in, as `episode_filename` writes it
    (`...-<length>.npz`); None for a name without that suffix. Reads the name only, never the file."""
    match = _LENGTH_SUFFIX.search(path)
    return int(match.group(1)) if match else None


_SAVEZ_ARGUMENTS = frozenset({"file", "allow_pickle"})


def save_episode(directory: str, episode: Mapping[str, np.ndarray]) -> str:
    """Validate ``episode``, write it atomically into ``directory`` and return its path.

    Floating arrays are stored as float32. The data is first written to a
    hidden temporary file in the same directory (a name starting with ``.``, which
    no folder lists: ``planet_sac.episodes.folder``) and then renamed to its final
    name, ``episode_filename(T)``.
    """
    validate_episode(episode)
    reserved = sorted(set(episode) & _SAVEZ_ARGUMENTS)
    if reserved:  # np.savez would take them as its own arguments: 'file' fails, 'allow_pickle' is silently dropped
        raise BadEpisodeError("reserved key", f"{', '.join(map(repr, reserved))} is an argument name of np.savez; rename it")
    arrays = _canonical(episode)
    length = len(arrays["action"]) - 1
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **cast(dict[str, Any], arrays))  # no key binds file or allow_pickle (checked above)

    tf.io.gfile.makedirs(directory)
    final = os.path.join(directory, episode_filename(length))
    temp = os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}")
    try:
        with tf.io.gfile.GFile(temp, "wb") as file:
            file.write(buffer.getvalue())
        tf.io.gfile.rename(temp, final, overwrite=False)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)
        raise
    return final


def validate_episode(episode: Mapping[str, np.ndarray], spec: EpisodeSpec | None = None) -> None:
    """Raise :class:`BadEpisodeError` unless ``episode`` follows the layout (and ``spec``).

    Floating arrays of any precision are accepted (they are cast to float32
    on save/load); images must be uint8.
    """
    missing = [key for key in REQUIRED_KEYS if key not in episode]
    if missing:
        raise BadEpisodeError("missing key", f"{', '.join(missing)} (have {sorted(episode)})")
    if not any(key in episode for key in OBS_KEYS):
        raise BadEpisodeError("missing key", f"need 'image' and/or 'state' (have {sorted(episode)})")

    arrays = {key: np.asarray(value) for key, value in episode.items()}
    for key, array in arrays.items():
        if array.dtype.hasobject:
            raise BadEpisodeError("object arrays are not allowed", f"key {key!r}")
        if key == "image" and array.dtype != np.uint8:
            raise BadEpisodeError("wrong dtype", f"'image' is {array.dtype}, expected uint8")
        if key in FLOAT_KEYS and array.dtype.kind != "f":
            raise BadEpisodeError("wrong dtype", f"{key!r} is {array.dtype}, expected float32")

    expected_ndim = {"image": 4, "state": 2, "action": 2, "reward": 1, "discount": 1}
    for key, ndim in expected_ndim.items():
        if key in arrays and arrays[key].ndim != ndim:
            raise BadEpisodeError("wrong shape", f"{key!r} has shape {arrays[key].shape}, expected {ndim} dims")
    if "image" in arrays and (arrays["image"].shape[-1] != 3 or 0 in arrays["image"].shape[1:]):
        raise BadEpisodeError("wrong shape", f"'image' has shape {arrays['image'].shape}, expected [T+1, H, W, 3]")
    for key in ("state", "action"):
        if key in arrays and arrays[key].shape[1] == 0:
            raise BadEpisodeError("wrong shape", f"{key!r} has shape {arrays[key].shape}, expected a non-empty last dim")

    lengths = {key: (len(array) if array.ndim else None) for key, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise BadEpisodeError("length mismatch", ", ".join(f"{k}={n}" for k, n in lengths.items()))
    assert lengths["action"] is not None  # 'action' has 2 dims (checked above)
    if lengths["action"] < 2:
        raise BadEpisodeError("too few steps", f"{lengths['action']} (need >= 2: reset + one step)")

    for key, array in arrays.items():
        if array.dtype.kind != "f":
            continue
        if not np.isfinite(array).all():
            raise BadEpisodeError("non-finite values", f"{key!r} contains NaN or inf")
        if key in FLOAT_KEYS and array.dtype.itemsize > 4 and np.abs(array).max() > np.finfo(np.float32).max:
            # Checked before the cast to float32 turns it into inf.
            raise BadEpisodeError("non-finite values", f"{key!r} holds values beyond float32's range (±3.4e38)")
    discount = arrays["discount"]
    if discount.min() < 0 or discount.max() > 1:
        raise BadEpisodeError("discount out of range", f"values in [{discount.min()}, {discount.max()}], expected [0, 1]")
    ended = np.flatnonzero(discount[:-1] == 0)
    if ended.size:  # a termination ends the episode: what follows it is no experience of the task
        raise BadEpisodeError("discount 0 before the end", f"at step {ended[0]} of {len(discount) - 1}; an episode ends "
                                                           "at its termination (discount 0 only at the last step)")
    action = arrays["action"]
    if np.abs(action).max() > 1 + ACTION_TOLERANCE:
        raise BadEpisodeError("action out of range", f"values in [{action.min():.4g}, {action.max():.4g}], expected "
                              "[-1, 1]: episodes hold actions scaled to [-1, 1] (make_env's), rescale the task's own range")

    if spec is not None:
        _check_spec(arrays, spec)


def load_episode(path: str, spec: EpisodeSpec | None = None, max_bytes: int = 2**31) -> dict[str, np.ndarray]:
    """Read, check and return one episode; floating arrays come back as float32.

    Raises :class:`BadEpisodeError` for anything unusable: empty or non-zip
    files, truncated/corrupt archives, archives declaring more than
    ``max_bytes`` uncompressed bytes, pickled/object arrays, a directory or a
    dangling symlink named like an episode, and everything
    :func:`validate_episode` rejects. I/O errors (e.g. a vanished file) are
    raised unchanged.
    """
    if tf.io.gfile.isdir(path):
        raise BadEpisodeError("not a file", "a directory named like an episode")
    if "://" not in path and os.path.islink(path) and not os.path.exists(path):
        raise BadEpisodeError("not a file", f"a dangling symlink (to {os.readlink(path)[:200]!r})")
    size = tf.io.gfile.stat(path).length
    if size == 0:
        raise BadEpisodeError("empty file")
    if size > max_bytes:
        raise BadEpisodeError("too large", f"file has {size} bytes > max_bytes={max_bytes}")
    with tf.io.gfile.GFile(path, "rb") as file:
        data = file.read()
    if not zipfile.is_zipfile(io.BytesIO(data)) or not data.startswith(_NPZ_STARTS):
        raise BadEpisodeError("not a zip/npz file", f"{len(data)} bytes, truncated or wrong format")

    try:
        _check_archive(data, max_bytes)
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            episode = {key: npz[key] for key in npz.files}
    except BadEpisodeError:
        raise
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise BadEpisodeError("object arrays are not allowed") from error
        raise BadEpisodeError("corrupt archive", _one_line(error)) from error
    except Exception as error:  # noqa: BLE001 - parsed from bytes in memory: whatever fails is the file's content
        # zipfile alone raises BadZipFile, zlib.error, EOFError, KeyError, NotImplementedError (an unsupported
        # compression method or zip version) and RuntimeError (an encrypted member) for damaged bytes.
        raise BadEpisodeError("corrupt archive", _one_line(error)) from error

    validate_episode(episode, spec)
    return _canonical(episode)


_NPZ_STARTS = (b"PK\x03\x04", b"PK\x05\x06")
"""How a file np.load reads as a zip begins (a member, or an empty archive's end); zipfile also finds an archive behind
other bytes, which np.load would try to unpickle."""


def _check_archive(data: bytes, max_bytes: int) -> None:
    """Inspect the zip members and their npy headers without decompressing the data."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        if not members:
            raise BadEpisodeError("empty archive")
        declared = sum(member.file_size for member in members)
        if declared > max_bytes:
            raise BadEpisodeError(
                "too large", f"members declare {declared} uncompressed bytes > max_bytes={max_bytes}"
            )
        for member in members:
            if not member.filename.endswith(".npy"):
                raise BadEpisodeError("unexpected archive member", repr(member.filename))
            with archive.open(member) as file:
                version = np.lib.format.read_magic(file)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(file)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(file)
                else:
                    raise BadEpisodeError("unsupported npy version", f"{version} in {member.filename!r}")
            if dtype.hasobject:
                raise BadEpisodeError("object arrays are not allowed", f"member {member.filename!r}")
            if math.prod(shape) * dtype.itemsize > member.file_size:
                raise BadEpisodeError(
                    "corrupt archive", f"{member.filename!r} header shape {shape} exceeds its declared size"
                )


def _check_spec(arrays: Mapping[str, np.ndarray], spec: EpisodeSpec) -> None:
    """The spec's observation keys with its per-step shapes, and its action size (other observation keys may be present)."""
    have = {key: tuple(arrays[key].shape[1:]) for key in OBS_KEYS if key in arrays}
    want = {key: shape for key, shape, _ in spec.obs}
    for key, shape in want.items():
        if key not in have:
            raise BadEpisodeError("spec mismatch", f"no {key!r} observations, has {', '.join(have) or 'none'}")
        if have[key] != shape:
            raise BadEpisodeError("spec mismatch", f"{key!r} observations of shape {have[key]}, expected {shape}")
    if arrays["action"].shape[1] != spec.action_dim:
        raise BadEpisodeError("spec mismatch", f"action dim {arrays['action'].shape[1]}, expected {spec.action_dim}")


def _canonical(episode: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays with floating keys cast to float32 (no copy when already float32)."""
    return {
        key: np.asarray(value, np.float32) if key in FLOAT_KEYS else np.asarray(value)
        for key, value in episode.items()
    }


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]
