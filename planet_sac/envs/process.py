"""`EnvProcess`: an environment built and stepped in a fresh child Python process, and `serve_env`, the child's side.

Headless MuJoCo rendering and TensorFlow crash in one process (see `EnvProcess`), so every MuJoCo environment
runs in a child that never imports TensorFlow. Messages are pickled `(method, args, kwargs)` tuples over a socket
pair; the child answers `(ok, result or exception)`.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping, Sequence

import gymnasium
import numpy as np
from gymnasium import spaces

from planet_sac.envs.base import SimEnv

log = logging.getLogger("planet_sac")

class EnvCrashed(RuntimeError):
    """The child process of an environment died (killed, segfault) while serving a call."""

    def __init__(self, exit_code: int | None, method: str):
        super().__init__(f"environment process died (exit code {exit_code}) during {method}")
        self.exit_code = exit_code


class EnvProcess(gymnasium.Env):
    """A ``SimEnv`` built and run in a fresh child Python process; calls are forwarded to it.

    Headless MuJoCo renders through Mesa's software rasteriser, which links its own LLVM, while
    TensorFlow exports LLVM symbols of another version: a GL context created in a process that
    has imported TensorFlow segfaults, and importing TensorFlow after dm_control crashes too.
    The child is a new interpreter (not a fork of this one) that never imports TensorFlow.
    Exceptions raised in the child (e.g. ``ConfigError`` for an unknown task) are re-raised here.
    """

    MIRRORED = ("action_space", "observation_space", "obs_key", "action_repeat", "image_size", "render_mode")
    CLOSE_SECONDS = 10.0
    """How long `close` waits for the child to answer before it kills it."""
    # the mirrored attributes, set from the child's environment in __init__
    observation_space: spaces.Dict
    action_space: spaces.Box
    obs_key: str
    action_repeat: int
    image_size: int

    def __init__(self, kind: Callable[..., gymnasium.Env], *args: Any, environment: Mapping[str, str] | None = None,
                 python_path: Sequence[str] = ()) -> None:
        """`python_path`: folders the child also needs on its path (e.g. that of a `gym:<module>:<id>` module)."""
        ours, theirs = socket.socketpair()
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds planet_sac/
        child_env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"), **(environment or {}))
        python_path = [package_root, *python_path, child_env.get("PYTHONPATH", "")]
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, python_path))
        code = "import sys; from planet_sac.envs.process import serve_env; serve_env(int(sys.argv[1]))"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code, str(theirs.fileno())], pass_fds=[theirs.fileno()], env=child_env
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        weakref.finalize(self, _stop_process, self._process, self._conn)
        for name, value in self._call("create", kind, *args).items():
            setattr(self, name, value)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.send(method, *args, **kwargs)
        return self.receive(method)

    def send(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Asks the child to run `method` without waiting for the answer (see `receive`)."""
        try:
            self._conn.send((method, args, kwargs))
        except (EOFError, OSError):
            raise EnvCrashed(self._process.wait(), method) from None

    def receive(self, method: str) -> Any:
        """The answer to the last `send`; re-raises the child's exception; `EnvCrashed` if the child died."""
        try:
            ok, result = self._conn.recv()
        except (EOFError, OSError):
            raise EnvCrashed(self._process.wait(), method) from None
        if not ok:
            raise result
        return result

    @property
    def pid(self) -> int:
        return self._process.pid

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self._call("reset", seed=seed, options=options)

    def step(self, action: np.ndarray):
        return self._call("step", np.asarray(action))

    def render(self) -> np.ndarray:
        return self._call("render")

    def close(self) -> None:
        """Closes the environment in the child and ends the child; one that does not answer in
        `CLOSE_SECONDS` (hung, or stopped) is killed, so closing never blocks."""
        answered = True
        try:
            if self._process.poll() is None and not self._conn.closed:
                self.send("close")
                answered = self._conn.poll(self.CLOSE_SECONDS)
                if answered:
                    self.receive("close")
        except EnvCrashed:
            pass
        finally:
            if not answered:
                log.warning("environment process %d did not answer close in %.0f s; killed it",
                            self._process.pid, self.CLOSE_SECONDS)
                self._process.kill()
            _stop_process(self._process, self._conn)


def serve_env(fd: int) -> None:
    """Child side of ``EnvProcess``: answer (method, args, kwargs) messages on socket ``fd``.

    Ctrl-C is left to the parent, which closes the environment; the child ends (exit code 0, nothing printed) when it
    reads ``close`` or the parent's end of the socket is closed, also when the parent died with an answer unread
    (the socket is then reset rather than ended).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    env: SimEnv | None = None
    while True:
        try:
            method, args, kwargs = conn.recv()
        except (EOFError, ConnectionResetError):
            break
        try:
            if method == "create":
                kind, *init_args = args
                env = kind(*init_args)
                result: Any = {name: getattr(env, name, None) for name in EnvProcess.MIRRORED}
            else:
                result = getattr(env, method)(*args, **kwargs)
            conn.send((True, result))
        except Exception as error:
            try:
                pickle.dumps(error)
            except Exception:
                error = RuntimeError(f"{type(error).__name__}: {error}")
            try:
                setattr(error, "child_traceback", traceback.format_exc())  # kept for the parent's debug log
            except AttributeError:  # an exception type without a __dict__
                pass
            conn.send((False, error))
        if method == "close":
            break


def _stop_process(process: subprocess.Popen, conn: Connection) -> None:
    conn.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
