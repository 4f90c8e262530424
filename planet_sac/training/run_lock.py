"""A run directory's single-writer lock (`LOGDIR/run.lock`): one learner per run.

`lock_run(logdir)` takes it or raises `RunLockedError` naming the holder; `RunLock` says what is
guaranteed where. Free of TensorFlow, so a process that only locks (or a test holding a lock) starts
in a fraction of a second.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
from typing import IO

log = logging.getLogger("planet_sac")

LOCK_FILE = "run.lock"


class RunLockedError(RuntimeError):
    """Another learner holds the run directory's lock; the message names its pid and host."""


class RunLock:
    """The exclusive lock of one learner on a run directory (`LOGDIR/run.lock`), as a database's data directory.

    The lock is the operating system's: `flock(LOCK_EX | LOCK_NB)` on the lock file, held for as
    long as the file stays open, and released by the kernel whenever the process ends, however it
    ends (exit, exception, SIGINT, SIGTERM, SIGKILL, a crash). The file's text, `{"pid", "host",
    "started"}` of the holder, only serves the messages: a second learner is refused with one
    line naming them; a record left by a process that ended without releasing (the kernel
    released its lock) is taken over with a warning. A clean release empties the record; the
    file itself is never deleted (deleting a lock file lets two processes lock two different files).

    On a local filesystem the lock is exact. On NFS, Linux emulates `flock` with POSIX byte-range
    locks through the NFS lock manager (NLM for NFSv3, the protocol itself for v4), so learners on
    different hosts exclude each other too, unless the mount uses `nolock` or `local_lock=...`;
    a lock of a host that died is freed only when the server's lease expires (NFSv4: about 90 s).
    A record from another host cannot be checked for liveness: when the OS lock is free it is
    taken over with a warning naming that host. On filesystems without working locks (some FUSE
    mounts, object stores through tf.io.gfile) nothing is enforced: one writer per run directory
    is then up to the user.
    """

    _held: set[str] = set()  # real paths locked by this process: flock's emulation on NFS does not exclude one process from itself
    _held_guard = threading.Lock()

    def __init__(self, logdir: str):
        self.logdir = logdir.rstrip("/")
        self.path = f"{self.logdir}/{LOCK_FILE}"
        self._file: IO[str] | None = None
        self._key = os.path.realpath(self.path)

    def acquire(self) -> "RunLock":
        """Takes the lock, or raises RunLockedError naming the holder. A path that is not local is not locked."""
        if "://" in self.logdir:  # gs://, s3://, ...: no OS lock exists there
            log.warning("%s is not a local path: no lock keeps a second learner out of it", self.logdir)
            return self
        with RunLock._held_guard:
            if self._key in RunLock._held:
                raise RunLockedError(f"{self.logdir} is in use by another Trainer in this process (pid {os.getpid()}); "
                                     "close it first")
            file = open(self.path, "a+")
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                holder = _read_record(file)
                file.close()
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise RunLockedError(f"cannot lock {self.path} ({error.strerror}); "
                                         "the filesystem may not support locks") from None
                raise RunLockedError(f"{self.logdir} is in use by planet-sac {_describe(holder)}; "
                                     "wait for it to end or use another --logdir") from None
            previous = _read_record(file)
            if previous:
                self._report_stale(previous)
            file.seek(0)
            file.truncate()
            file.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                   "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
            file.flush()
            self._file = file
            RunLock._held.add(self._key)
        return self

    def _report_stale(self, previous: dict) -> None:
        pid, host = previous.get("pid"), previous.get("host")
        if host == socket.gethostname() and isinstance(pid, int) and pid != os.getpid():
            state = "no longer running" if not _alive(pid) else "running, but without the lock"
            log.warning("took over the stale lock of %s: pid %s (%s) ended without releasing it", self.logdir, pid, state)
        else:
            log.warning("took over the lock of %s left by %s: its OS lock was free, so that process has ended "
                        "(unless the filesystem does not share locks between hosts)", self.logdir, _describe(previous))

    def release(self) -> None:
        """Empties the record and releases the lock (idempotent)."""
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.seek(0)
            file.truncate()
            file.flush()
        except OSError:  # a full disk: the kernel still releases the lock below
            pass
        finally:
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)
            file.close()
            with RunLock._held_guard:
                RunLock._held.discard(self._key)

    def __del__(self) -> None:  # a Trainer dropped without close(): its file is closed (and unlocked) anyway
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit the modules may be gone; the kernel unlocks anyway
            pass

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_record(file) -> dict:
    try:
        file.seek(0)
        record = json.loads(file.read() or "{}")
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def _describe(record: dict) -> str:
    if not record:
        return "another process (its lock file holds no pid)"
    return f"pid {record.get('pid')} on host {record.get('host')}" + (f" (since {record['started']})" if "started" in record else "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_run(logdir: str) -> RunLock:
    """The learner's exclusive lock on `logdir` (see RunLock); raises RunLockedError if another learner holds it."""
    return RunLock(logdir).acquire()
