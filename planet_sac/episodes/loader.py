"""Streaming replay of episode files: PlaNet's recent/cache scheme.

Every *pass* yields up to ``every`` chunks, one random chunk per yielded
episode: about half from episodes whose files appeared since the previous
scan ("recent", each yielded at most once as recent), the rest drawn uniformly
from the in-memory cache. After choosing a pass, the recent episodes join the
cache, the oldest episodes beyond ``max_episodes`` are dropped, and after the
pass the directories are scanned again for new files. Files written while
training runs are therefore picked up without a restart.

Files that cannot be used are skipped with one warning each on the
``planet_sac`` logger; they stay on disk. A rejected file is read again only
when its size or modification time changes, so a file caught half-written by a
non-atomic writer (plain ``cp``) is loaded once it is complete.

Sampling is a function of the seed and the episodes' contents only: episodes are drawn in
an order set by a checksum of their actions and rewards, never by their file names (which
hold a random uuid). With batches drawn on demand (``make_dataset(prefetch=0)``, as the
trainer does) a seeded run therefore replays the same chunks every time. The one
exception: with ``max_episodes``, which of two episodes saved within the same second is
dropped first can differ between runs.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import os
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import tensorflow as tf

from planet_sac.episodes.folder import EpisodeFolder
from planet_sac.episodes.storage import BadEpisodeError, EpisodeSpec, load_episode

logger = logging.getLogger("planet_sac")


class NoEpisodesError(TimeoutError):
    """No usable episode appeared in the directories within ``wait_seconds`` (the message says why)."""

Episode = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class ChunkInfo:
    """Where a yielded chunk came from."""

    path: str
    start: int  # index of the chunk's first step in the episode arrays
    source: str  # "recent" or "cache"


class EpisodeReplay:
    """Iterable of random fixed-length chunks streamed from episode directories.

    Args:
      directory: one directory or several (their union is used); may be ``gs://``. Each is read as an
        `EpisodeFolder`: its episodes are the `.npz` files directly inside it, hidden names and subfolders
        (a run's `interrupted/`, a test phase's staging folder) left out.
      chunk_length: steps per chunk. A shorter episode that ended in a termination is
        padded with its absorbing state (`pad_with_absorbing_state`); other shorter
        episodes are skipped (not deleted).
      absorbing_steps: absorbing steps appended to every terminated episode, so that chunks can
        end after the termination: with n-step SAC targets (n - 1 of them, the trainer's choice)
        the last n - 1 states before it start transitions too, as they do in a buffer that cuts
        the n-step window at an episode's end. 0 = only pad episodes shorter than a chunk.
      every: chunks yielded per pass between two directory scans.
      max_episodes: cache capacity; the oldest episodes are dropped first.
        ``None`` keeps everything.
      keys: keys to keep and yield (default: all keys of the spec). Dropped keys
        are not kept in memory.
      wait_seconds: how long to wait for the first usable episode before
        raising ``TimeoutError`` (with the reasons files were skipped).
      poll_seconds: rescan interval while waiting.
      seed: seed for ``np.random.default_rng``.
      spec: the episode format to accept (observation key and shape, action size), e.g.
        `EpisodeSpec.for_task` of the run's task. Files that differ are skipped and counted
        (``files_mismatched``, ``mismatch_reasons``). Without it, the first usable file
        decides the format for the rest.

    Iterating never ends. Images stay uint8 in the cache, so memory is about
    the raw size of the cached arrays (``stats["cache_bytes"]``).
    """

    def __init__(
        self,
        directory: str | Sequence[str],
        chunk_length: int,
        every: int = 100,
        max_episodes: int | None = None,
        keys: Sequence[str] | None = None,
        wait_seconds: float = 60.0,
        poll_seconds: float = 1.0,
        seed: int | None = None,
        spec: EpisodeSpec | None = None,
        absorbing_steps: int = 0,
    ):
        if chunk_length < 1:
            raise ValueError(f"chunk_length must be >= 1, got {chunk_length}")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if max_episodes is not None and max_episodes < 1:
            raise ValueError(f"max_episodes must be >= 1 or None, got {max_episodes}")
        self.directories = [directory] if isinstance(directory, str) else list(directory)
        if not self.directories:
            raise ValueError("need at least one episode directory")
        self._folders = [EpisodeFolder(path) for path in self.directories]  # listed by the folders' one rule
        if absorbing_steps < 0:
            raise ValueError(f"absorbing_steps must be >= 0, got {absorbing_steps}")
        self.chunk_length = chunk_length
        self.absorbing_steps = absorbing_steps
        self.every = every
        self.max_episodes = max_episodes
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds
        self._requested_keys = tuple(keys) if keys is not None else None
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._spec: EpisodeSpec | None = spec
        self._given_spec = spec is not None
        self._usable = False  # a usable episode was loaded (the first one decides the spec unless one was given)
        self._seen: set[str] = set()  # loaded, rejected, too short or ignored: not read again
        self._rejected: dict[str, tuple[int, int] | None] = {}  # bad file -> (size, mtime) when it was read
        self._unreadable: dict[str, str] = {}  # file the last scan could not read (I/O error) -> the error
        self._recent: dict[str, Episode] = {}
        self._cache: collections.OrderedDict[str, Episode] = collections.OrderedDict()  # oldest first
        self._content: dict[str, int] = {}  # path -> checksum of its actions and rewards (_content_key)
        self._pending: list[tuple[str, Episode, str]] = []  # the current pass's episodes not yet yielded
        self._scan_due = False  # a pass was used up: scan before choosing the next one
        self.stats: dict = {
            "files_loaded": 0,
            "files_skipped": 0,  # bad files (see skipped_reasons), directories and dangling symlinks named *.npz included
            "files_mismatched": 0,  # of files_skipped: valid episodes in another format than the spec (see mismatch_reasons)
            "mismatch_reasons": collections.Counter(),
            "files_retried": 0,  # rejected files read again because their size or mtime changed
            "files_unreadable": 0,  # files the last scan could not read (permissions, a flaky disk): retried each scan
            "skipped_reasons": collections.Counter(),
            "too_short_skipped": 0,
            "too_short_longest": 0,  # steps of the longest episode skipped as too short
            "padded_episodes": 0,  # terminated episodes shorter than a chunk, padded with their absorbing state
            "terminated_episodes": 0,  # loaded episodes that end in a true termination (a discount of 0)
            "files_ignored": 0,  # older than the newest max_episodes new files of one scan
            "cache_episodes": 0,
            "cache_bytes": 0,
            "cache_dropped": 0,
            "recent_yielded": 0,
            "cache_yielded": 0,
            "scans": 0,
            "passes": 0,
        }

    # ----------------------------------------------------------------- public

    @property
    def spec(self) -> EpisodeSpec:
        """The given spec, or that of the first usable episode (waits up to ``wait_seconds`` for a usable one)."""
        self._wait_for_first_episode()
        assert self._spec is not None
        return self._spec

    @property
    def keys(self) -> tuple[str, ...]:
        """Keys of the yielded chunks."""
        keys = self._requested_keys or self.spec.keys
        unknown = [key for key in keys if key not in self.spec.keys]
        if unknown:
            raise ValueError(f"unknown keys {unknown}; episodes have {list(self.spec.keys)}")
        return keys

    def __iter__(self) -> Iterator[Episode]:
        """Yield one random chunk per yielded episode, forever."""
        for chunk, _ in self.iter_with_info():
            yield chunk

    def iter_with_info(self) -> Iterator[tuple[Episode, ChunkInfo]]:
        """Like ``iter(self)`` but also says which file and source each chunk came from.

        Continues where the replay stands: after `restore`, from the restored pass.
        """
        _ = self.keys  # waits for the first episode and checks the requested keys
        while True:
            if not self._pending:
                if self._scan_due:
                    self._scan()
                self._pending = self._next_pass()
                self._scan_due = True
            path, episode, source = self._pending.pop(0)
            length = len(next(iter(episode.values())))
            start = int(self._rng.integers(0, length - self.chunk_length + 1))
            chunk = {key: value[start : start + self.chunk_length] for key, value in episode.items()}
            self.stats[f"{source}_yielded"] += 1
            yield chunk, ChunkInfo(path, start, source)

    # ----------------------------------------------------------- state

    def state(self) -> dict:
        """Everything the replay's future depends on, as JSON-able data: the random generator, which files are in
        the cache and recent (in order), which it has seen or rejected, the current pass's remaining episodes, and the
        counts. `restore(state)` on a new replay over the same directories continues exactly where this one stands,
        as long as the files it names are still there. Paths are kept relative to the directories."""
        with self._lock:
            known = set(self._recent) | set(self._cache)
            return {
                "version": 1,
                "rng": self._rng.bit_generator.state,
                "recent": [self._relative(path) for path in self._recent],
                "cache": [self._relative(path) for path in self._cache],
                "pending": [[self._relative(path), source] for path, _, source in self._pending],
                "scan_due": self._scan_due,
                "seen": sorted(self._relative(path) for path in self._seen - known),
                "rejected": {self._relative(path): signature for path, signature in self._rejected.items()},
                "usable": self._usable,
                "stats": {key: dict(value) if isinstance(value, collections.Counter) else value
                          for key, value in self.stats.items()},
            }

    def restore(self, state: Mapping) -> None:
        """Continues from a `state()` of a replay over the same directories: its episodes are read again from their
        files (a file that is gone or changed since is left out with a warning: the replay then differs from the
        one that made the state)."""
        if state.get("version") != 1:
            raise ValueError(f"unknown replay state version {state.get('version')!r}")
        with self._lock:
            absolute = {name: self._absolute(name) for key in ("recent", "cache") for name in state[key]}
            absolute.update({name: self._absolute(name) for name, _ in state["pending"]})
            loaded: dict[str, Episode] = {}
            for name, path in absolute.items():
                episode = self._reload(path)
                if episode is not None:
                    loaded[path] = episode
                    self._content[path] = _content_key(episode)
            self._recent = {absolute[name]: loaded[absolute[name]] for name in state["recent"] if absolute[name] in loaded}
            self._cache = collections.OrderedDict((absolute[name], loaded[absolute[name]]) for name in state["cache"]
                                                  if absolute[name] in loaded)
            self._pending = [(absolute[name], loaded[absolute[name]], source) for name, source in state["pending"]
                             if absolute[name] in loaded]
            self._scan_due = bool(state["scan_due"])
            self._seen = {self._absolute(name) for name in state["seen"]} | set(absolute.values())
            self._rejected = {self._absolute(name): tuple(signature) if signature is not None else None
                              for name, signature in state["rejected"].items()}
            self._usable = bool(state["usable"]) or bool(loaded)
            self._rng.bit_generator.state = state["rng"]
            self.stats.update({key: collections.Counter(value) if isinstance(self.stats.get(key), collections.Counter)
                               else value for key, value in state["stats"].items()})

    def _reload(self, path: str) -> Episode | None:
        """An episode of a restored state, prepared as `_load` prepares it (the counts it changes are restored after)."""
        episode = self._load(path, {})
        if episode is None:
            logger.warning("replay state: episode %s could not be read again; the replay continues without it", path)
        return episode

    def _relative(self, path: str) -> str:
        """`path` as `<directory index>:<name>`, so that a state survives moving the run's folder."""
        for index, directory in enumerate(self.directories):
            if os.path.dirname(path) == directory.rstrip("/"):
                return f"{index}:{os.path.basename(path)}"
        return path

    def _absolute(self, name: str) -> str:
        index, sep, base = name.partition(":")
        if sep and index.isdigit() and int(index) < len(self.directories):
            return os.path.join(self.directories[int(index)].rstrip("/"), base)
        return name

    # ------------------------------------------------------------ one pass

    def _next_pass(self) -> list[tuple[str, Episode, str]]:
        """Choose this pass's episodes, then merge recent into the cache and trim it."""
        with self._lock:
            # Sampled in an order set by the episodes' contents, not by when or under which name they were saved,
            # so that the same seed draws the same chunks from the same episodes (see _content_key).
            recent = sorted(self._recent.items(), key=self._sampling_order)
            cache = sorted(self._cache.items(), key=self._sampling_order)
            if cache:
                num_recent = min(len(recent), math.ceil(self.every / 2))
            else:
                num_recent = min(len(recent), self.every)
            num_cache = self.every - num_recent if cache else 0

            chosen = [(*recent[i], "recent") for i in self._rng.permutation(len(recent))[:num_recent]]
            chosen += [(*cache[i], "cache") for i in self._rng.integers(0, len(cache), num_cache)]

            self._cache.update(self._recent)  # recent episodes not chosen go straight to the cache
            self._recent = {}
            while self.max_episodes is not None and len(self._cache) > self.max_episodes:
                self._content.pop(self._cache.popitem(last=False)[0], None)
                self.stats["cache_dropped"] += 1
            self.stats["cache_episodes"] = len(self._cache)
            self.stats["cache_bytes"] = sum(_nbytes(episode) for episode in self._cache.values())
            self.stats["passes"] += 1
        return chosen

    def _sampling_order(self, item: tuple[str, Episode]) -> tuple[int, str]:
        return self._content[item[0]], os.path.basename(item[0])

    # ----------------------------------------------------------------- scan

    def _scan(self) -> None:
        """Load files that appeared since the last scan into ``recent``."""
        with self._lock:
            self.stats["scans"] += 1
            try:
                new = [path for folder in self._folders for path in folder.paths()]
            except (OSError, tf.errors.OpError) as error:  # e.g. a flaky gs:// listing: try again next pass
                logger.warning("Could not list episode directories (will retry): %s", error)
                return
            self._forget_changed_rejects()
            new = sorted((path for path in new if path not in self._seen), key=os.path.basename)
            unreadable, self._unreadable = self._unreadable, {}
            # With a cap, older files would be dropped from the cache right away: never load them. The newest
            # `max_episodes` are read (oldest first, as without a cap), then older ones only for those unusable.
            end = len(new)
            loaded: list[tuple[str, Episode]] = []
            while end > 0 and (self.max_episodes is None or len(loaded) < self.max_episodes):
                start = 0 if self.max_episodes is None else max(0, end - (self.max_episodes - len(loaded)))
                loaded = [(path, episode) for path in new[start:end]
                          if (episode := self._load(path, unreadable)) is not None] + loaded
                end = start
            if end:
                self._seen.update(new[:end])
                self.stats["files_ignored"] += end
            self.stats["files_unreadable"] = len(self._unreadable)
            for path, episode in loaded:
                self._content[path] = _content_key(episode)
            # The cache keeps arrival order (oldest dropped first); files of one second by content, not by uuid.
            for path, episode in sorted(loaded, key=lambda item: (_second(item[0]), self._content[item[0]])):
                self._recent[path] = episode

    def _forget_changed_rejects(self) -> None:
        """Rejected files whose size or modification time changed are read again at this scan."""
        for path, signature in list(self._rejected.items()):
            if _signature(path) != signature:
                del self._rejected[path]
                self._seen.discard(path)
                self.stats["files_retried"] += 1

    def _load(self, path: str, unreadable: Mapping[str, str]) -> Episode | None:
        """One usable episode restricted to the wanted keys, or None (warned once per version of the file).

        A file that cannot be read (an I/O error, not bad content) is not marked seen: the next scan tries it
        again. It is warned about when it first fails, or fails differently, than at the previous scan.
        """
        signature = _signature(path)  # before reading: a write during the read shows as a change later
        try:
            episode = load_episode(path, spec=self._spec)
        except BadEpisodeError as error:
            self._seen.add(path)
            self._rejected[path] = signature
            self.stats["files_skipped"] += 1
            self.stats["skipped_reasons"][error.reason] += 1
            if error.reason == "spec mismatch":
                self.stats["files_mismatched"] += 1
                self.stats["mismatch_reasons"][str(error).split(": ", 1)[-1]] += 1
            logger.warning("Skipping episode file %s: %s (read again if it changes)", path, error)
            return None
        except (OSError, tf.errors.OpError) as error:
            self._unreadable[path] = f"{type(error).__name__}: {error}"
            if unreadable.get(path) != self._unreadable[path]:
                logger.warning("Could not read episode file %s (retried at every scan): %s", path, self._unreadable[path])
            return None
        self._seen.add(path)

        length = len(episode["action"])
        terminated = "discount" in episode and bool(episode["discount"][-1] == 0.0)
        if length < self.chunk_length and not terminated:
            self.stats["too_short_skipped"] += 1
            self.stats["too_short_longest"] = max(self.stats["too_short_longest"], length)
            logger.warning(
                "Skipping episode file %s: too short (%d steps < chunk_length %d); it stays on disk",
                path, length, self.chunk_length,
            )
            return None
        if length < self.chunk_length:
            self.stats["padded_episodes"] += 1
        padded_length = max(self.chunk_length, length + self.absorbing_steps) if terminated else length
        if padded_length > length:
            episode = pad_with_absorbing_state(episode, padded_length)

        if terminated:
            self.stats["terminated_episodes"] += 1
        if self._spec is None:
            self._spec = EpisodeSpec.from_episode(episode)
        self._usable = True
        keys = self._requested_keys or self._spec.keys
        episode = {key: episode[key] for key in keys if key in episode}
        for value in episode.values():
            value.flags.writeable = False  # chunks are views into the cache
        self.stats["files_loaded"] += 1
        return episode

    def _wait_for_first_episode(self) -> None:
        """Scan until a usable episode exists; raise after ``wait_seconds``."""
        deadline = time.monotonic() + self.wait_seconds
        while not self._usable:
            self._scan()
            if self._usable:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NoEpisodesError(self._no_episodes_message())
            time.sleep(min(self.poll_seconds, remaining))

    def _no_episodes_message(self) -> str:
        reasons = collections.Counter(self.stats["skipped_reasons"])
        if self.stats["files_mismatched"]:  # which formats the files had, beside the one wanted
            del reasons["spec mismatch"]
            reasons.update({f"spec mismatch ({detail})": count for detail, count in self.stats["mismatch_reasons"].items()})
        if self.stats["too_short_skipped"]:
            reasons[f"shorter than chunk_length {self.chunk_length}"] = self.stats["too_short_skipped"]
        if self._unreadable:
            reasons[f"unreadable, e.g. {next(iter(self._unreadable.values()))[:120]}"] = len(self._unreadable)
        skipped = sum(reasons.values())
        detail = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common()) or "none found"
        where = ", ".join(self.directories)
        if skipped and skipped == len(self._unreadable):
            advice = "Check the files' permissions and the disk; they are read again at every scan"
        elif skipped and skipped == self.stats["too_short_skipped"]:  # more episodes of the same task would not help
            advice = (f"All are shorter than chunk_length {self.chunk_length} (the longest has "
                      f"{self.stats['too_short_longest']} steps): lower data.chunk_length or collect longer episodes")
        elif self.stats["files_mismatched"] and self._given_spec and self._spec is not None:
            advice = (f"The task expects {self._spec.describe()}: collect episodes of this task "
                      f"(planet-sac collect --outdir {self.directories[0]}) or set env.task/env.obs to the data's")
        else:
            advice = f"Collect some with: planet-sac collect --task TASK --episodes 5 --outdir {self.directories[0]}"
        return f"No usable episodes in {where} after {self.wait_seconds:g}s ({skipped} files skipped: {detail}). {advice}"


def make_dataset(
    directory: str | Sequence[str],
    batch_size: int,
    chunk_length: int,
    every: int = 100,
    max_episodes: int | None = None,
    keys: Sequence[str] | None = None,
    wait_seconds: float = 60.0,
    seed: int | None = None,
    prefetch: int = tf.data.AUTOTUNE,
    spec: EpisodeSpec | None = None,
    absorbing_steps: int = 0,
    state: Mapping | None = None,
) -> tuple[tf.data.Dataset, EpisodeReplay]:
    """Batches of chunks, ``{key: [batch_size, chunk_length, ...]}``, plus the replay (for stats).

    Waits for the first usable episode before building the dataset. Shapes and dtypes
    come from `spec` (the task's format; files in another are skipped and counted), else
    from the first usable episode. With ``prefetch=0`` batches are drawn only when asked for:
    a background thread drawing ahead would scan the directories at moments set by timing,
    so which new episodes a batch contains (and a seeded run) would vary. `state`: an
    `EpisodeReplay.state()` to continue from (the seed is then not used).
    """
    replay = EpisodeReplay(
        directory, chunk_length, every=every, max_episodes=max_episodes, keys=keys,
        wait_seconds=wait_seconds, seed=seed, spec=spec, absorbing_steps=absorbing_steps,
    )
    if state is not None:
        replay.restore(state)
    shapes, dtypes = replay.spec.step_shapes(), replay.spec.dtypes()
    signature = {
        key: tf.TensorSpec((chunk_length, *shapes[key]), tf.as_dtype(dtypes[key])) for key in replay.keys
    }
    dataset = tf.data.Dataset.from_generator(replay.__iter__, output_signature=signature)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if prefetch:
        dataset = dataset.prefetch(prefetch)
    else:  # no batch is drawn ahead of the consumer, so which episodes it sees depends on the consumer only
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        dataset = dataset.with_options(options)
    return dataset, replay


def pad_with_absorbing_state(episode: Episode, length: int) -> Episode:
    """A terminated episode extended to `length` steps by the state it ended in.

    The padding repeats the last observation with action 0, reward 0 and discount 0: after a
    termination nothing happens and nothing is earned (the absorbing state of Kostrikov et al.'s
    DAC). Random episodes of gymnasium's terminating MuJoCo tasks last 3-45 steps, shorter than
    any useful chunk; PlaNet and Dreamer skip such episodes, which leaves nothing to train on.
    """
    missing = length - len(episode["action"])
    padded = {}
    for key, value in episode.items():
        if key in ("action", "reward", "discount"):
            fill = np.zeros((missing, *value.shape[1:]), value.dtype)
        else:
            fill = np.repeat(value[-1:], missing, axis=0)
        padded[key] = np.concatenate([value, fill])
    return padded


def _content_key(episode: Episode) -> int:
    """A checksum of an episode's actions and rewards (of all its arrays if it has neither).

    File names (`{UTC second}-{uuid4}-{length}.npz`) carry a random uuid and the time of saving;
    ordering episodes by them would make two runs of the same seed sample different chunks.
    """
    keys: list[str] = [key for key in ("action", "reward") if key in episode] or sorted(episode)
    return zlib.crc32(b"".join(np.ascontiguousarray(episode[key]).tobytes() for key in keys))


def _second(path: str) -> str:
    """The UTC second in an episode file's name (its arrival order at one-second resolution)."""
    return os.path.basename(path).split("-", 1)[0]


def _signature(path: str) -> tuple[int, int] | None:
    """(size, modification time in ns) of a file, or None if it cannot be stat'ed (e.g. it is gone)."""
    try:
        stat = tf.io.gfile.stat(path)
    except (OSError, tf.errors.OpError):
        return None
    return stat.length, stat.mtime_nsec


def _nbytes(episode: Episode) -> int:
    return sum(value.nbytes for value in episode.values())
