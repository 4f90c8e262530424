"""The phase-gated policy: one compiled function that acts by random, CEM, SAC or SAC-guided CEM.

`policy(obs, state, phase)` filters the latent state with the posterior (the new
observation and the previous action), then dispatches with `tf.switch_case` on a
tensor index looked up from the phase. The mapping phase -> policy lives in a
variable, so switching phase or policy never retraces the function. Only the
policies it is built with are compiled into it (all four by default): a run's agent
takes the ones its config can select (`Agent.build`), as a smaller function traces
and compiles faster (docs/testing.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf

from planet_sac.compiled import compiled_method
from planet_sac.config import POLICIES, CEMConfig
from planet_sac.control import cem
from planet_sac.control.sac import SAC
from planet_sac.models.rssm import State
from planet_sac.models.world_model import WorldModel

PHASES = ("train", "test")
PolicyState = tuple[State, tf.Tensor, tf.Tensor]  # (latent posterior, previous action, CEM plan [B, H, A])


class Policy(tf.Module):
    """Acts for a batch of environments; `traces` counts how often the function was traced.

    `jit_compile` compiles the acting function with XLA (once per batch size): it fuses the
    small per-step ops that dominate a batch-1 action (see docs/performance.md).
    """

    def __init__(self, world_model: WorldModel, sac: SAC, cem_config: CEMConfig, train: str = "cem",
                 test: str = "cem", seed: int = 0, jit_compile: bool = False, policies: Sequence[str] = POLICIES):
        """:param policies: the policies compiled into the function besides `train` and `test`; `set_policies` takes
            only these (one of POLICIES each)."""
        super().__init__(name="policy")
        unknown = sorted(set(policies) - set(POLICIES))
        if unknown:
            raise ValueError(f"unknown policy {unknown[0]!r}; choose from {', '.join(POLICIES)}")
        # POLICIES' order, so the same set always gives the same function
        self.policies = tuple(name for name in POLICIES if name in {*policies, train, test})
        self.world_model = world_model
        self.sac = sac
        self.cem_config = cem_config
        self.rng = tf.random.Generator.from_seed(seed)
        self.phase_policy = tf.Variable([POLICIES.index(train), POLICIES.index(test)], trainable=False,
                                        dtype=tf.int32, name="policy/phase_policy")
        # The train phase's N(0, this) on the head's actions, read when `sac.exploration_noise` > 0 (its schedule sets
        # it before each collection); not checkpointed: a function of the run's env steps.
        self.sac_exploration = tf.Variable(sac.config.exploration_noise, trainable=False, dtype=tf.float32,
                                           name="policy/sac_exploration")
        self.traces = 0
        rssm = world_model.rssm
        latent_spec = {key: tf.TensorSpec([None, size], tf.float32) for key, size in
                       (("mean", rssm.stoch_size), ("std", rssm.stoch_size), ("stoch", rssm.stoch_size), ("deter", rssm.deter_size))}
        obs_dtype = tf.uint8 if world_model.obs_key == "image" else tf.float32
        self.compiled = compiled_method(self._act, autograph=False, jit_compile=jit_compile, input_signature=[
            tf.TensorSpec([None, *world_model.obs_shape], obs_dtype),
            (latent_spec, tf.TensorSpec([None, world_model.action_size], tf.float32),
             tf.TensorSpec([None, cem_config.horizon, world_model.action_size], tf.float32)),
            tf.TensorSpec([], tf.int32),
        ])

    def __call__(self, obs: tf.Tensor, state: PolicyState, phase: tf.Tensor) -> tuple[tf.Tensor, PolicyState]:
        """The compiled policy: obs [B, ...], state from `initial_state`, phase 0 (train) or 1 (test)."""
        return self.compiled(obs, state, phase)

    def set_policies(self, train: str | None = None, test: str | None = None) -> None:
        """Chooses the policy of each phase; takes effect without retracing."""
        for index, name in enumerate((train, test)):
            if name is not None:
                if name not in POLICIES:
                    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
                if name not in self.policies:
                    raise ValueError(f"policy {name!r} is not compiled into this policy (it acts by "
                                     f"{', '.join(self.policies)}); build it with policies=[..., {name!r}]")
                self.phase_policy[index].assign(POLICIES.index(name))

    def set_sac_exploration(self, noise: float) -> None:
        """The std of the train phase's noise on the head's actions (`SACConfig.exploration_at`); no retracing.
        Has an effect only where `sac.exploration_noise` > 0, which puts the noise into the traced function."""
        self.sac_exploration.assign(noise)

    def initial_state(self, batch_size: int) -> PolicyState:
        action_size, horizon = self.world_model.action_size, self.cem_config.horizon
        return (self.world_model.rssm.initial(batch_size), tf.zeros([batch_size, action_size]),
                tf.zeros([batch_size, horizon, action_size]))

    def _act(self, obs: tf.Tensor, state: PolicyState, phase: tf.Tensor) -> tuple[tf.Tensor, PolicyState]:
        self.traces += 1  # Python side effect: runs once per trace, never per call.
        latent, prev_action, previous_plan = state
        batch = tf.shape(obs)[0]
        action_size = self.world_model.action_size
        rssm = self.world_model.rssm
        training = tf.equal(phase, 0)
        explore_scale = tf.cast(training, tf.float32)
        # Both phases sample the posterior, as the model and SAC train on samples and as PlaNet
        # (MPCAgent.perform -> RSSM._posterior) and Dreamer (policy -> obs_step) act; the test
        # phase differs only in acting without exploration noise (the actor's mode, or with sac.test_action=sample
        # a sample as DreamerV3 evaluates; CEM's mean).
        latent_noise = self.rng.normal([batch, rssm.stoch_size])
        embed = self.world_model.embed(obs, self.world_model.observation_noise(self.rng, obs))  # as in training
        latent, _ = rssm.obs_step(latent, prev_action, embed, latent_noise)
        features = rssm.features(latent)
        noise = self.cem_config.exploration_noise * explore_scale
        warm = cem.shift_plan(previous_plan) if self.cem_config.warm_start else None

        def explore(action: tf.Tensor) -> tf.Tensor:
            return tf.clip_by_value(action + noise * self.rng.normal(tf.shape(action)), -1.0, 1.0)

        def random() -> tuple[tf.Tensor, tf.Tensor]:
            return self.rng.uniform([batch, action_size], -1.0, 1.0), previous_plan

        def plan() -> tuple[tf.Tensor, tf.Tensor]:
            action, mean = cem.search(self.world_model, latent, self.cem_config, self.rng, initial_mean=warm)
            return explore(action), mean

        def actor() -> tuple[tf.Tensor, tf.Tensor]:
            deterministic = tf.logical_not(training) if self.sac.config.test_action == "mode" else False
            action = self.sac.act(features, self.rng.normal([batch, action_size]), deterministic)
            if self.sac.config.exploration_noise:  # read at trace time: when off, no extra draw from the stream
                scale = self.sac_exploration * explore_scale
                action = tf.clip_by_value(action + scale * self.rng.normal(tf.shape(action)), -1.0, 1.0)
            return action, previous_plan

        def guided() -> tuple[tf.Tensor, tf.Tensor]:
            action, mean = cem.search(self.world_model, latent, self.cem_config, self.rng, self.sac,
                                      self.cem_config.guide_fraction, initial_mean=warm)
            return explore(action), mean

        branches = {"random": random, "cem": plan, "sac": actor, "sac_guided_cem": guided}
        # phase_policy holds POLICIES.index(name) of each phase's policy; `position` maps it to its compiled branch
        position = tf.constant([self.policies.index(name) if name in self.policies else -1 for name in POLICIES])
        index = tf.gather(position, tf.gather(self.phase_policy, phase))
        action, mean = tf.switch_case(index, [branches[name] for name in self.policies])
        action = tf.ensure_shape(action, [None, action_size])
        return action, (latent, action, mean)

    def act(self, obs: Mapping[str, tf.Tensor] | tf.Tensor, state: PolicyState, phase: str) -> tuple[tf.Tensor, PolicyState]:
        """The compiled policy from Python: `obs` a batch [B, ...] (or a dict holding it under the model's key), `state`
        of the same B (`initial_state(B)`, then the state returned), `phase` "train" or "test".

        Raises:
            ValueError: One line for a phase, observation or batch the policy cannot take (an unbatched observation,
                another size or dtype); state observations of another float precision are cast to float32.
        """
        if phase not in PHASES:
            raise ValueError(f"phase {phase!r}: one of {', '.join(PHASES)}")
        if isinstance(obs, Mapping):
            obs = obs[self.world_model.obs_key]
        obs = tf.convert_to_tensor(obs)
        image = self.world_model.obs_key == "image"
        if not image and obs.dtype.is_floating and obs.dtype != tf.float32:
            obs = tf.cast(obs, tf.float32)
        expected = (tf.uint8 if image else tf.float32, tuple(self.world_model.obs_shape))
        if obs.dtype != expected[0] or tuple(obs.shape[1:]) != expected[1]:
            hint = "; add the batch axis (obs[None])" if tuple(obs.shape) == expected[1] else ""
            raise ValueError(f"observations of dtype {obs.dtype.name} and shape {tuple(obs.shape)}: this policy takes "
                             f"{expected[0].name} of shape (batch, {', '.join(map(str, expected[1]))}){hint}")
        batch = int(state[1].shape[0])
        if obs.shape[0] != batch:
            raise ValueError(f"a batch of {obs.shape[0]} observations for a state of {batch} environments: "
                             "initial_state(batch) makes one")
        return self.compiled(obs, state, tf.constant(PHASES.index(phase), tf.int32))
