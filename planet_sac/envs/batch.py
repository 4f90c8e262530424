"""Environments stepped together: the `EnvBatch` the actor steps, in this process (`LocalEnvs`) or in child
processes that are restarted when they fail (`ParallelEnvs`), built by `make_envs` from an `EnvConfig`.

Seeds: `environment_seed` gives each parallel environment (and each restart) its own; `episode_seed` gives each
episode of a run's stream its reset seed, so a resumed run resets as the never-stopped one did.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Mapping, Protocol, cast

import gymnasium
import numpy as np
from gymnasium import spaces

from planet_sac.config import ConfigError, EnvConfig
from planet_sac.envs.make import make_env, make_env_here
from planet_sac.envs.process import EnvCrashed, EnvProcess
from planet_sac.envs.restarts import EnvFailedError, EnvRestarted, RestartOnFailure, Restarts, failure_detail
from planet_sac.envs.tasks import import_gym_module, module_paths, uses_mujoco
from planet_sac.errors import SetupError

log = logging.getLogger("planet_sac")


@dataclasses.dataclass
class StepResult:
    """One environment's step inside a batch; `crashed`: its process died and was restarted (reset it next)."""

    obs: dict[str, np.ndarray] | None
    reward: float
    terminated: bool
    truncated: bool
    crashed: bool = False


class EnvBatch(Protocol):
    """Environments the actor steps together; spaces are those of one environment."""

    num_envs: int
    observation_space: spaces.Dict
    action_space: spaces.Box

    def reset(self, index: int, seed: int | None = None) -> dict[str, np.ndarray]: ...

    def step(self, actions: Mapping[int, np.ndarray]) -> dict[int, StepResult]: ...

    def close(self) -> None: ...


class LocalEnvs:
    """A batch of one environment stepped in this process.

    An environment that replaces itself when it fails (`RestartOnFailure`, as `make_envs` builds it) raises
    `EnvRestarted` from `step`: the step result says `crashed`, as `ParallelEnvs` reports a replaced child. Other
    errors are the environment's own and propagate as they are.
    """

    num_envs = 1

    def __init__(self, env: gymnasium.Env) -> None:
        self.env = env
        # the EnvBatch spaces: those of make_env's environments (a Dict observation, Box actions)
        self.observation_space = cast(spaces.Dict, env.observation_space)
        self.action_space = cast(spaces.Box, env.action_space)

    def reset(self, index: int, seed: int | None = None) -> dict[str, np.ndarray]:
        return self.env.reset(seed=seed)[0]

    def step(self, actions: Mapping[int, np.ndarray]) -> dict[int, StepResult]:
        try:
            obs, reward, terminated, truncated, _ = self.env.step(actions[0])
        except EnvRestarted:
            return {0: StepResult(None, 0.0, False, False, crashed=True)}
        return {0: StepResult(obs, float(reward), bool(terminated), bool(truncated))}

    def close(self) -> None:
        self.env.close()


def episode_seed(seed: int, stream: int, index: int) -> int:
    """The reset seed of episode `index` of a run's episode stream `stream` (0 training, 1 test, ...): a hash of the
    three (numpy's SeedSequence), so a run that restarts from a checkpoint resets its environments as before."""
    return int(np.random.SeedSequence([seed, 1_000 + stream, index]).generate_state(1)[0] % (2**31 - 1))


def environment_seed(seed: int, index: int, restarts: int = 0) -> int:
    """The seed of parallel environment `index` after `restarts` restarts: `seed` itself for the first
    environment's first start (so one environment plays what `make_env(seed)` plays), otherwise a hash of all
    three (numpy's SeedSequence), which no neighbouring seed, index or restart count shares."""
    if index == 0 and restarts == 0:
        return seed
    return int(np.random.SeedSequence([seed, index, restarts]).generate_state(1)[0] % (2**31 - 1))


class ParallelEnvs:
    """N environments, each built by `make_env` inside its own child process, stepped at the same time.

    Environment 0 is seeded with `seed`, environment i > 0 with a hash of (seed, i) (`environment_seed`), so that
    collectors with neighbouring `--seed`s never share an environment's seed. `step` sends every action before it reads any
    result, so the children simulate and render concurrently, each renderer with its share of
    the cores (`LP_NUM_THREADS`). A child that dies, or whose environment raises in `reset` or
    `step`, is replaced by a fresh one (seeded with a hash of (seed, i, restarts)): its step result says
    `crashed`, and the caller resets it before stepping it again; the other environments are not
    disturbed. As Dreamer's `RestartOnException(maxfails=2, window=300)`, restarts are capped: an
    environment that fails more than `max_restarts` times within `restart_window` seconds (e.g. one
    that raises on every reset) ends the run with `EnvFailedError`, one line naming its last error.
    `ConfigError` and `SetupError` (a wrong task, a missing package) are never retried.
    Why not `gymnasium.vector.AsyncVectorEnv`: docs/scaling.md.
    """

    def __init__(self, config: EnvConfig, seed: int, num_envs: int, max_restarts: int = 3,
                 restart_window: float = 300.0):
        """`config`: the environment (its `seed` and `num_envs` are replaced by the arguments)."""
        self.num_envs = num_envs
        self.config = config
        self.seed = seed
        self._restarts = Restarts(num_envs, max_restarts, restart_window)
        if config.task.startswith("gym:"):
            import_gym_module(config.task[len("gym:"):])  # a bad module or id: one line here, before any process starts
        self._python_path = module_paths(config.task)
        # Mesa's software renderer starts one thread per core in every process: N renderers would fight over
        # the cores. Each child gets its share instead (unless LP_NUM_THREADS is set), measured in docs/scaling.md.
        shared = os.environ.get("LP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // num_envs))
        self._threads = {"LP_NUM_THREADS": shared}
        self._envs: list[EnvProcess] = []
        try:
            for index in range(num_envs):
                self._envs.append(self._start(index))
        except BaseException:
            self.close()
            raise
        self.observation_space = self._envs[0].observation_space
        self.action_space = self._envs[0].action_space

    @property
    def restarts(self) -> list[int]:
        """How often each environment was replaced."""
        return self._restarts.counts

    def _start(self, index: int) -> EnvProcess:
        c = self.config
        seed = environment_seed(self.seed, index, self.restarts[index])
        return EnvProcess(make_env_here, c.task, c.obs, c.action_repeat, c.time_limit, seed, c.image_size, c.shadow_size,
                          environment=self._threads, python_path=self._python_path)

    def _replace(self, index: int, error: Exception) -> None:
        """Restarts environment `index` after `error`; raises `EnvFailedError` past the cap."""
        detail = failure_detail(error)
        child_traceback = getattr(error, "child_traceback", None)
        if child_traceback:
            log.debug("environment %d: %s", index, child_traceback)
        self._restarts.count_failure(index, detail)
        self._envs[index].close()
        self._envs[index] = self._start(index)

    def pids(self) -> list[int]:
        """Process ids of the environments' children (e.g. to watch or stop one)."""
        return [env.pid for env in self._envs]

    def reset(self, index: int, seed: int | None = None) -> dict[str, np.ndarray]:
        """Environment `index`'s first observation of a new episode (seeded with `seed` if given); restarts it
        (capped) until one resets."""
        while True:
            try:
                return self._envs[index].reset(seed=seed)[0]
            except (ConfigError, SetupError):
                raise
            except Exception as error:  # EnvCrashed, or raised by the environment
                self._replace(index, error)

    def step(self, actions: Mapping[int, np.ndarray]) -> dict[int, StepResult]:
        sent, results = [], {}
        for index, action in actions.items():
            try:
                self._envs[index].send("step", np.asarray(action))
                sent.append(index)
            except EnvCrashed as error:
                self._replace(index, error)
                results[index] = StepResult(None, 0.0, False, False, crashed=True)
        failure: Exception | None = None
        for index in sent:  # every answer is read, so no child's pipe is left out of step
            try:
                obs, reward, terminated, truncated, _ = self._envs[index].receive("step")
                results[index] = StepResult(obs, float(reward), bool(terminated), bool(truncated))
            except (ConfigError, SetupError) as error:
                failure = failure or error
            except Exception as error:  # EnvCrashed, or raised by the environment: restart it (capped)
                try:
                    self._replace(index, error)
                except EnvFailedError as given_up:
                    failure = failure or given_up
                results[index] = StepResult(None, 0.0, False, False, crashed=True)
        if failure is not None:
            raise failure
        return {index: results[index] for index in actions}

    def close(self) -> None:
        for env in self._envs:
            env.close()


def restarting_env(config: EnvConfig, seed: int) -> RestartOnFailure:
    """`make_env(config, seed=seed)`, replaced when it fails (`RestartOnFailure`) by one seeded
    `environment_seed(seed, 0, restarts)`, as `ParallelEnvs` replaces its first environment."""
    return RestartOnFailure(make_env(config, seed=seed),
                            remake=lambda restarts: make_env(config, seed=environment_seed(seed, 0, restarts)))


def make_envs(config: EnvConfig, seed: int | None = None, num_envs: int | None = None) -> EnvBatch:
    """The environments of `config` as one batch: the one constructor every part of planet_sac builds them with.

    :param config: the environment (task, observations, action repeat, time limit, image and shadow size).
    :param seed: seeds environment 0 (the others: `environment_seed`); default `config.seed`.
    :param num_envs: how many; default `config.num_envs`.
    :return: `ParallelEnvs` (each environment in a child process of its own, replaced when it dies, also when
        it is the only one), or for one environment that needs no child process, `LocalEnvs` in this process.
    """
    seed = config.seed if seed is None else seed
    num_envs = config.num_envs if num_envs is None else num_envs
    if num_envs < 1:
        raise ConfigError(f"env.num_envs={num_envs}: must be >= 1")
    if num_envs == 1 and not uses_mujoco(config.task):
        return LocalEnvs(restarting_env(config, seed))
    return ParallelEnvs(config, seed, num_envs)
