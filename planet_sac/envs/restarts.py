"""Environments that fail are replaced, a few times: `Restarts` counts, `RestartOnFailure` replaces one in this process.

As Dreamer's `RestartOnException(maxfails=2, window=300)`: an environment that raises (or whose process dies) is
closed and made anew, and one that fails more than `max_restarts` times within `restart_window` seconds is given
up with `EnvFailedError`, one line naming its last error. `ConfigError` and `SetupError` (a wrong task, a broken
contract, a missing package) are never retried. `ParallelEnvs` (envs/batch.py) counts its children's failures
with `Restarts`; `RestartOnFailure` wraps one environment of this process (the training environment of a run
with `env.num_envs=1` and no MuJoCo, and every run's single test environment).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gymnasium

from planet_sac.config import ConfigError
from planet_sac.envs.process import EnvCrashed
from planet_sac.envs.tasks import one_line
from planet_sac.errors import SetupError

log = logging.getLogger("planet_sac")


class EnvFailedError(SetupError):
    """An environment failed (its process died, or it raised) more often than it is restarted."""


class EnvRestarted(RuntimeError):
    """`RestartOnFailure.step`: the environment failed and was replaced; its episode is lost (reset it next)."""


def failures_in_window(failures: list[float], now: float, window: float) -> list[float]:
    """The times of an environment's failures within `window` seconds before `now`, one at `now` included: as
    Dreamer's `RestartOnException`, an environment is given up once more than `max_restarts` of them are."""
    return [moment for moment in failures if now - moment < window] + [now]


def failure_detail(error: Exception) -> str:
    """What a failed environment did, for the messages: its process ended (`EnvCrashed`), or it raised `error`."""
    return str(error).replace("environment process ", "") if isinstance(error, EnvCrashed) else f"raised {one_line(error)}"


class Restarts:
    """The restart count and recent failures of each environment of a batch, capped (module docstring)."""

    def __init__(self, num_envs: int, max_restarts: int, restart_window: float) -> None:
        self.max_restarts, self.restart_window = max_restarts, restart_window
        self.counts = [0] * num_envs
        self.failures: list[list[float]] = [[] for _ in range(num_envs)]

    def count_failure(self, index: int, detail: str) -> None:
        """Counts a failure of environment `index` (`detail`: what it did, for the messages) and its restart, with a
        warning; raises `EnvFailedError` (one line, naming `detail`) past the cap instead."""
        self.failures[index] = failures_in_window(self.failures[index], time.monotonic(), self.restart_window)
        if len(self.failures[index]) > self.max_restarts:
            raise EnvFailedError(
                f"environment {index} failed {len(self.failures[index])} times within {self.restart_window:.0f} s, "
                f"last: {detail}; not restarting it again (fix the environment, or see --verbose)")
        self.counts[index] += 1
        log.warning("environment %d %s; restarted it", index, detail)  # a step's failure: the actor drops the episode


class RestartOnFailure(gymnasium.Wrapper):
    """An environment replaced by `remake(restarts)` when it raises, capped as `Restarts` caps it.

    `reset` retries until a fresh environment resets; `step` replaces the environment and raises `EnvRestarted`,
    which the actor (`LocalEnvs`) takes as a crash: the partial episode is dropped and played again from its reset
    seed. `remake` must seed the new environment apart from the first one, as `environment_seed(seed, 0, restarts)`
    does. Errors that are not the environment's to retry (`ConfigError`, `SetupError`) propagate as they are.
    """

    def __init__(self, env: gymnasium.Env, remake: Callable[[int], gymnasium.Env], max_restarts: int = 3,
                 restart_window: float = 300.0) -> None:
        super().__init__(env)
        self.remake = remake
        self._restarts = Restarts(1, max_restarts, restart_window)

    @property
    def restarts(self) -> int:
        """How often the environment was replaced."""
        return self._restarts.counts[0]

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        while True:
            try:
                return self.env.reset(**kwargs)
            except Exception as error:
                self._replace(error)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        try:
            return self.env.step(action)
        except Exception as error:
            self._replace(error)
            raise EnvRestarted(f"environment raised {one_line(error)}; replaced") from error

    def _replace(self, error: Exception) -> None:
        """Closes the failed environment and makes the next one; raises `EnvFailedError` past the cap, and `error`
        itself where it is not to be retried."""
        if isinstance(error, (ConfigError, SetupError)):
            raise error
        self._restarts.count_failure(0, failure_detail(error))
        try:
            self.env.close()
        except Exception as close_error:  # a broken environment may fail to close too; it is dropped either way
            log.debug("closing the failed environment raised %s", one_line(close_error))
        self.env = self.remake(self.restarts)
