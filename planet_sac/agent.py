"""The agent: the world model, the SAC head on its latent state, and the compiled policy that uses both.

`Agent.build` makes one from a config and the data's shapes (new runs, the trainer);
`load_agent` makes one from a run's logdir and restores its latest checkpoint (evaluation,
collectors, scripts).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence, cast

import tensorflow as tf
from gymnasium import spaces

from planet_sac.checkpoints import (
    CheckpointError,
    RestoreReport,
    find_run_config,
    named_variables,
    resolve,
    restore_filtered,
)
from planet_sac.config import POLICIES, Config
from planet_sac.config_loading import apply_overrides, diff
from planet_sac.control.policy import Policy
from planet_sac.control.sac import SAC
from planet_sac.envs import restarting_env
from planet_sac.models.world_model import WorldModel

ACTING_VARIABLES = ("world_model/", "sac/")
"""Name patterns of the variables an agent needs to act (no optimizer state, no counters)."""


@dataclasses.dataclass
class Agent:
    """The learnable parts of a run and the phase-gated policy built on them."""

    world_model: WorldModel
    sac: SAC
    policy: Policy

    @classmethod
    def build(cls, config: Config, obs_key: str, obs_shape: Sequence[int], action_size: int,
              policies: Sequence[str] = POLICIES) -> "Agent":
        """:param policies: what the policy can act by besides `policy.train` and `policy.test` (`Policy`); a run
            passes `run_policies(config)`, an evaluation its list; the default, all of them."""
        world_model = WorldModel(config.model, obs_key, tuple(obs_shape), action_size, seed=config.seed,
                                 precision=config.optim.precision)
        sac = SAC(config.sac, world_model.rssm.feature_size, action_size, seed=config.seed)
        # XLA cannot read variables mirrored on other devices, so a distributed run acts without it.
        jit_compile = config.policy.jit_compile and config.optim.strategy == "default"
        policy = Policy(world_model, sac, config.cem, config.policy.train, config.policy.test,
                        seed=config.seed + 1, jit_compile=jit_compile, policies=policies)
        return cls(world_model, sac, policy)

    def acting_variables(self) -> dict[str, tf.Variable]:
        """The variables `load_agent` and collectors restore, by checkpoint name (no optimizer slots)."""
        return {name: variable for name, variable in named_variables([self.world_model, self.sac]).items()
                if name.startswith(ACTING_VARIABLES)}

    def restore(self, checkpoint: str, include: Sequence[str] = ACTING_VARIABLES) -> RestoreReport:
        """Restores the acting variables matching `include` from the newest readable checkpoint of `checkpoint`.

        `checkpoint` is a logdir, its checkpoints/ folder or a prefix. A damaged newest checkpoint is
        skipped with a warning (`read_checkpoint`); none readable is one CheckpointError line. The
        report names the checkpoint restored (`.prefix`) and its step (`.step`).
        `include=["world_model/"]` keeps the SAC head as built: a trained world model under a new head.
        """
        return restore_filtered(self.acting_variables(), checkpoint, include=list(include))


def run_policies(config: Config) -> tuple[str, ...]:
    """The policies a run of `config` acts by: `policy.train` and `policy.test`, the compared ones, and the SAC head
    where it collects a share of the training episodes (`policy.sac_share`)."""
    policy = config.policy
    named = {policy.train, policy.test, *policy.compare, *(["sac"] if policy.sac_share > 0 else [])}
    return tuple(name for name in POLICIES if name in named)


def load_agent(checkpoint: str | os.PathLike, overrides: Sequence[str] = (), seed: int = 0,
               include: Sequence[str] = ACTING_VARIABLES, policies: Sequence[str] = POLICIES):
    """Builds a run's agent and environment and restores the agent from the run's latest checkpoint.

    Returns (config, agent, env, checkpoint step); `overrides` are `--set` strings applied to the run's
    config, `include` selects what is restored (see `Agent.restore`), `policies` what its policy can act by
    (`Agent.build`; fewer compile faster). The environment is replaced when it fails
    (`envs.restarting_env`): the actor then plays the lost episode again.
    """
    checkpoint = os.fspath(checkpoint)
    run_config = find_run_config(checkpoint)
    config = apply_overrides(run_config, list(overrides))
    resolve(checkpoint)  # fails with a clear message before an environment is started
    env = restarting_env(config.env, seed)
    obs_space = cast(spaces.Box, cast(spaces.Dict, env.observation_space)[config.env.obs])  # make_env: Dict of Boxes
    agent = Agent.build(config, config.env.obs, obs_space.shape, cast(spaces.Box, env.action_space).shape[0], policies)
    try:
        step = agent.restore(checkpoint, include).step
    except CheckpointError as error:
        env.close()
        raise overrides_that_change_the_model(error, checkpoint, run_config, config) from None
    except BaseException:
        env.close()
        raise
    return config, agent, env, step


def overrides_that_change_the_model(error: CheckpointError, checkpoint: str, run_config: Config,
                                    config: Config) -> CheckpointError:
    """`error` (a checkpoint that does not fit the agent built from `config`), or, where `--set` changed the
    run's config, an error naming those keys as the cause (the restore's own advice is for --include/--exclude)."""
    changed = diff(run_config, config)
    if not changed:
        return error
    flat_run, flat_new = run_config.to_dict(), config.to_dict()
    shown = []
    for key in changed[:4]:
        section, _, name = key.rpartition(".")
        old = (flat_run.get(section, {}) if section else flat_run).get(name)
        new = (flat_new.get(section, {}) if section else flat_new).get(name)
        shown.append(f"{key}={new} (the run's: {old})")
    return CheckpointError(f"--set {', '.join(shown)}: the agent these build does not fit the checkpoint in "
                           f"{checkpoint} ({str(error).split(';')[0]}); set only keys that keep the model, such as "
                           "cem.* or sac.test_action")
