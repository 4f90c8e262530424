"""Typed, validated configuration: the schema of a run's settings and the checks of their values.

A config is a tree of dataclasses whose defaults are PlaNet's published settings; each field's
trailing comment is its meaning in the generated reference (docs/config.md, planet_sac.config_docs).
`Config.validate` checks every value's range and the combinations across sections, each failure one
ConfigError line naming the key and what it allows, through `Checks`, which states every range it
enforces. Types are checked where configs are built from YAML and `--set` overrides:
planet_sac.config_loading, whose public functions (`load_config`, `apply_overrides`, ...) are
importable from here too. This module imports neither YAML nor TensorFlow.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import reprlib
from typing import Any, Literal

POLICIES = ("random", "cem", "sac", "sac_guided_cem")
PolicyName = Literal["random", "cem", "sac", "sac_guided_cem"]


MAX_ENVS = 256
"""The most environment processes a config may ask for (`env.num_envs`, `env.test_envs`): each takes about 250 MB."""
MAX_INT = 2**31 - 1
"""The largest integer a config holds (TensorFlow's int32 shapes and counters); larger ones are typos."""
MAX_SEED = 2**31 - 1  # seeds get offsets added (test environments, restarts, collectors); dm_control takes < 2**32


class ConfigError(ValueError):
    """A configuration problem, described in one line."""


@dataclasses.dataclass
class EnvConfig:
    """Which environment to run and how observations look."""

    task: str = "dmc:cheetah-run"  # the task: a gymnasium id (gym:<module>:<id> imports module first) or a dm_control domain-task pair
    obs: Literal["image", "state"] = "image"  # image: 64x64x3 uint8 frames; state: the flat state vector
    action_repeat: int = 4  # simulator steps per agent action (rewards summed)
    time_limit: int | None = None  # agent steps per episode; None = the task's own limit
    image_size: int = 64  # height and width of image observations (the conv decoder needs 64)
    seed: int = 0  # seeds the training environment (the test environment uses seed + 10000)
    num_envs: int = 1  # environments stepped in parallel processes while collecting (1: here, or in its own for MuJoCo; a failing one is restarted)
    test_envs: int = 1  # environments playing a test phase's episodes at once (> 1: each in its own process; image tasks)
    shadow_size: int | None = None  # dm_control: MuJoCo shadow-map size (None = the model's 4096; 1024: same pixels, faster; docs/performance.md)

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        checks.note("env.task", "`gym:<id>`, `gym:<module>:<id>` or `dmc:<domain>-<task>`")
        if not (self.task.startswith("gym:") or self.task.startswith("dmc:")) or len(self.task) < 5:
            raise ConfigError(
                f"env.task={_show(self.task)}: must look like 'gym:Pendulum-v1' or 'dmc:cartpole-swingup'"
            )
        checks.positive("env.action_repeat", self.action_repeat)
        checks.in_range("env.num_envs", self.num_envs, low=1, high=MAX_ENVS)  # each a process of about 250 MB
        checks.in_range("env.test_envs", self.test_envs, low=1, high=MAX_ENVS)
        checks.note("env.test_envs", "> 1 with env.obs=image only")
        if self.test_envs > 1 and self.obs != "image":
            raise ConfigError(f"env.test_envs={self.test_envs}: parallel test episodes are for image tasks (their cost is "
                              "rendering); a state task's eval video renders one environment, so use env.test_envs=1")
        checks.positive("env.time_limit", self.time_limit)
        checks.positive("env.image_size", self.image_size)
        checks.note("env.image_size", "64 with env.obs=image")
        if self.obs == "image" and self.image_size != 64:
            raise ConfigError(f"env.image_size={self.image_size}: image observations are 64x64 for PlaNet's conv "
                              "encoder and decoder; use env.image_size=64")
        checks.positive("env.shadow_size", self.shadow_size)
        checks.in_range("env.seed", self.seed, low=0, high=MAX_SEED)
        if self.shadow_size is not None and not self.task.startswith("dmc:"):
            raise ConfigError(f"env.shadow_size={self.shadow_size}: applies to dm_control tasks only (env.task={self.task!r})")


@dataclasses.dataclass
class DataConfig:
    """Replay: how chunks are streamed from the episode directories."""

    batch_size: int = 50  # sequences per world-model update
    chunk_length: int = 50  # time steps per sequence
    every: int = 10  # episodes yielded per scan of the directory (PlaNet's scan_episodes_every)
    max_episodes: int | None = None  # cache cap; oldest episodes are dropped first; None = keep all
    wait_seconds: float = 60.0  # how long an empty directory is waited for before failing (.inf: forever)
    seed_episodes: int = 5  # random episodes collected before training starts
    test_seed_episodes: int = 5  # random episodes in test_episodes/, for the held-out model loss

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        checks.positive("data.batch_size", self.batch_size)
        checks.in_range("data.chunk_length", self.chunk_length, low=2)
        checks.positive("data.every", self.every)
        checks.positive("data.max_episodes", self.max_episodes)
        checks.non_negative("data.wait_seconds", self.wait_seconds, allow_inf=True)
        checks.non_negative("data.seed_episodes", self.seed_episodes)
        checks.non_negative("data.test_seed_episodes", self.test_seed_episodes)


@dataclasses.dataclass
class ModelConfig:
    """The recurrent state-space model (RSSM) and its heads."""

    deter_size: int = 200  # deterministic (GRU) state size of the RSSM
    stoch_size: int = 30  # stochastic (Gaussian) state size of the RSSM
    hidden_size: int = 200  # hidden layer width inside the RSSM's prior and posterior
    min_stddev: float = 0.1  # lower bound of the stochastic state's standard deviation
    cnn_depth: int = 32  # conv encoder channels 32/64/128/256 as in PlaNet
    decoder_depth: int | None = None  # conv decoder channels 128/64/32 for 32 (PlaNet); None = cnn_depth; fewer cut its cost
    mlp_units: int = 200  # encoder/decoder/reward MLP width for state observations
    mlp_layers: int = 2  # hidden layers of those MLPs
    reward_units: int = 100  # width of the reward head's two hidden layers (PlaNet's feed_forward)
    activation: Literal["relu", "elu"] = "relu"  # of the RSSM, reward head and state MLPs (PlaNet: relu; Dreamer: elu)
    free_nats: float = 3.0  # floor on the KL of every time step (PlaNet: elementwise, before the mean)
    kl_scale: float = 1.0  # weight of the KL term in the loss
    kl_balance: float | None = None  # None = PlaNet's KL; b = b * KL(sg(post)||prior) + (1 - b) * KL(post||sg(prior)), each floored (DreamerV2: 0.8)
    augment_shift: int = 0  # 0 = off; else the encoder's training input is shifted by up to this many pixels per chunk (DrQ: 4)
    augment_target: Literal["unshifted", "shifted"] = "unshifted"  # augment_shift's image target: as recorded (DrQ), or shifted too
    reward_scale: float = 10.0  # PlaNet's reward_scale
    value_scale: float = 0.0  # 0 = off (PlaNet); else weight of the SAC critics' TD loss on the posteriors, into encoder and RSSM via the GRU state
    obs_std: float = 1.0  # std of the decoder's Gaussian over observations (PlaNet, Dreamer: 1); below 1 asks for precision
    foreground_weight: float = 1.0  # 1 = PlaNet's image loss; w > 1 multiplies the squared error of a chunk's moving pixels by w
    foreground_mask: Literal["chunk", "chunk_or_batch"] = "chunk"  # w's pixels: off the chunk's median frame, or also off the batch's
    foreground_batch_threshold: float = 0.1  # chunk_or_batch: how far off the batch background a pixel is weighted (pixel range 1)
    continuation_scale: float = 0.0  # 0 = no continuation head (PlaNet); else weight of its loss (Dreamer's pcont_scale 10)
    overshooting_distance: int = 0  # 0 = off; else KL terms at open-loop distances 2..D+1 (as PlaNet for D >= 2; its D = 1 adds nothing)
    overshooting_scale: float = 0.0  # weight of the latent overshooting KL
    image_bits: int = 5  # bit depth images are quantised to before encoding (PlaNet: 5)

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        for name in ("deter_size", "stoch_size", "hidden_size", "cnn_depth", "mlp_units", "mlp_layers", "reward_units"):
            checks.positive(f"model.{name}", getattr(self, name))
        checks.positive("model.decoder_depth", self.decoder_depth)
        checks.positive("model.min_stddev", self.min_stddev)
        checks.positive("model.obs_std", self.obs_std)
        checks.in_range("model.foreground_weight", self.foreground_weight, low=1.0)
        checks.note("model.foreground_mask", "chunk_or_batch only with model.foreground_weight above 1")
        if self.foreground_mask != "chunk" and self.foreground_weight == 1.0:
            raise ConfigError(f"model.foreground_mask={self.foreground_mask} chooses the pixels that "
                              "model.foreground_weight weights, and it is 1 (no weight); set model.foreground_weight "
                              "above 1 or leave model.foreground_mask=chunk")
        checks.in_range("model.foreground_batch_threshold", self.foreground_batch_threshold, low=0.0, high=1.0,
                        low_open=True)
        checks.note("model.foreground_batch_threshold", "other than 0.1 only with model.foreground_mask=chunk_or_batch")
        if self.foreground_batch_threshold != 0.1 and self.foreground_mask != "chunk_or_batch":
            raise ConfigError(f"model.foreground_batch_threshold={self.foreground_batch_threshold} sets how far off "
                              f"the batch's background a pixel is weighted, and model.foreground_mask="
                              f"{self.foreground_mask} does not look at the batch; set model.foreground_mask="
                              "chunk_or_batch or leave the threshold at 0.1")
        for name in ("free_nats", "kl_scale", "reward_scale", "value_scale", "continuation_scale", "overshooting_scale"):
            checks.non_negative(f"model.{name}", getattr(self, name))
        checks.non_negative("model.overshooting_distance", self.overshooting_distance)
        checks.note("model.overshooting_distance", "> 0 only with model.overshooting_scale > 0")
        if self.overshooting_distance and not self.overshooting_scale:
            raise ConfigError(f"model.overshooting_distance={self.overshooting_distance} computes a latent overshooting "
                              "KL that model.overshooting_scale=0 leaves out of the loss; set model.overshooting_scale "
                              "above 0 or model.overshooting_distance=0")
        checks.in_range("model.image_bits", self.image_bits, low=1, high=8)
        checks.note("model.kl_balance", "in (0, 1) or `null`")
        if self.kl_balance is not None and not 0.0 < self.kl_balance < 1.0:
            raise ConfigError(f"model.kl_balance={self.kl_balance}: must be in (0, 1) (DreamerV2: 0.8), or null for "
                              "PlaNet's KL, which trains prior and posterior alike")
        checks.in_range("model.augment_shift", self.augment_shift, low=0, high=16)
        checks.note("model.augment_target", "shifted only with model.augment_shift above 0")
        if self.augment_target == "shifted" and not self.augment_shift:
            raise ConfigError("model.augment_target=shifted shifts the image target as model.augment_shift shifts "
                              "the encoder's input, and model.augment_shift=0 shifts nothing; set "
                              "model.augment_shift above 0 (DrQ: 4) or leave model.augment_target=unshifted")


@dataclasses.dataclass
class OptimConfig:
    """The world model's optimiser and its compiled update step."""

    learning_rate: float = 1e-3  # Adam learning rate of the world model
    warmup_updates: int = 200  # linear learning-rate ramp from 0 (PlaNet: ramp 10000 samples / batch 50)
    adam_epsilon: float = 1e-4  # Adam epsilon
    grad_clip: float = 1000.0  # global gradient norm is clipped to this (.inf: no clipping)
    accumulate: int = 1  # micro-batches whose gradients are averaged in-graph per update (lowers memory, same batch)
    jit_compile: bool = False  # compile the update with XLA (slower on CPU, docs/performance.md)
    precision: Literal["auto", "float32", "mixed_bfloat16"] = "auto"  # auto: mixed_bfloat16 (bf16 conv nets) with amx_bf16, or avx512_bf16 on AMD
    max_nonfinite_updates: int = 10  # consecutive skipped (NaN/inf) updates before the run stops
    strategy: Literal["default", "mirrored", "multi_worker"] = "default"  # data parallelism: none, over local GPUs, or over the TF_CONFIG cluster

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        checks.positive("optim.learning_rate", self.learning_rate)
        checks.non_negative("optim.warmup_updates", self.warmup_updates)
        checks.positive("optim.adam_epsilon", self.adam_epsilon)
        checks.positive("optim.grad_clip", self.grad_clip, allow_inf=True)
        checks.positive("optim.accumulate", self.accumulate)
        checks.positive("optim.max_nonfinite_updates", self.max_nonfinite_updates)
        if self.jit_compile and self.strategy != "default":
            raise ConfigError(f"optim.jit_compile=true works with optim.strategy=default only, not {self.strategy}; "
                              "set optim.jit_compile=false")


@dataclasses.dataclass
class CEMConfig:
    """Cross-entropy method planning in latent space."""

    horizon: int = 12  # planning horizon in agent steps
    candidates: int = 1000  # action sequences evaluated per iteration
    iterations: int = 10  # refinements of the action distribution per action
    top_k: int = 100  # best sequences the distribution is refitted to
    discount: float = 0.99  # discount of predicted rewards in the planning objective (PlaNet's planner: 0.99)
    precision: Literal["float32", "bfloat16"] = "float32"  # dtype of the imagined rollouts (bfloat16: CPUs with AVX512-BF16/AMX)
    warm_start: bool = False  # start each step's search from the previous step's plan, shifted by one step (iCEM, TD-MPC)
    exploration_noise: float = 0.3  # Gaussian noise added to planned actions in the train phase
    guide_fraction: float = 0.5  # sac_guided_cem: share of the population drawn from the actor
    value_weight: float = 1.0  # sac_guided_cem: weight of the critic's value at the horizon in each candidate's score
    actor_mean: bool = False  # sac_guided_cem: start the search at the mean of the actor's trajectories (else zero / warm start)
    actor_std: float | None = None  # sac_guided_cem: null = actor trajectories sample SAC's policy; x = its mode + N(0, x) (TD-MPC: 0.05)
    select: Literal["mean", "elite"] = "mean"  # action taken: first of the final mean (PlaNet) or of one final elite (TD-MPC)
    temperature: float = 0.5  # select=elite: the elite is drawn with probability ~ exp(temperature * score) (TD-MPC's 0.5)

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        for name in ("horizon", "candidates", "iterations", "top_k"):
            checks.positive(f"cem.{name}", getattr(self, name))
        checks.in_range("cem.top_k", self.top_k, high=self.candidates, high_name="cem.candidates")
        checks.in_range("cem.discount", self.discount, low=0.0, high=1.0, low_open=True)
        checks.non_negative("cem.exploration_noise", self.exploration_noise)
        checks.in_range("cem.guide_fraction", self.guide_fraction, low=0.0, high=1.0)
        checks.non_negative("cem.value_weight", self.value_weight)
        checks.positive("cem.temperature", self.temperature)
        checks.non_negative("cem.actor_std", self.actor_std)
        checks.note("cem.actor_mean", "needs cem.guide_fraction > 0")
        if self.actor_mean and self.guide_fraction == 0:
            raise ConfigError("cem.actor_mean=true starts the search at the actor's trajectories, which "
                              "cem.guide_fraction=0 never draws; set cem.guide_fraction above 0")


@dataclasses.dataclass
class SACConfig:
    """Soft Actor-Critic head on the world model's latent features."""

    units: int = 256  # hidden width of actor and critics
    layers: int = 2  # hidden layers of actor and critics
    actor_lr: float = 3e-4  # Adam learning rate of the actor
    critic_lr: float = 3e-4  # Adam learning rate of the critics
    alpha_lr: float = 3e-4  # Adam learning rate of the temperature
    init_alpha: float = 0.1  # initial entropy temperature (alpha)
    target_entropy: float | None = None  # entropy the temperature steers towards; None = -|A|
    discount: float = 0.99  # discount of the critics' targets
    tau: float = 0.005  # Polyak rate of the target critics
    updates_per_step: int = 10  # SAC updates per world-model update (cheap next to a conv model; 1 starves the head)
    batch_size: int = 256  # transitions per SAC update
    n_step: int = 3  # n-step returns for the critic's target
    burn_in: int = 0  # chunk steps whose posteriors (filtered from a zero state) start no real transition
    imagination_horizon: int = 0  # 0 = off; else also train on rollouts of this length in the model (MBPO/Dreamer)
    real_ratio: float = 1.0  # share of each SAC batch from real chunks; the rest is imagined
    catchup_rounds: int = 0  # 0 = off; else SAC-only rounds on the frozen model before each test phase and SAC-collected episode
    reset_every: int = 0  # 0 = off; else the head starts over (weights, temperature, optimizers) every this many model updates (Nikishin 2022)
    reset_rounds: int = 0  # SAC-only rounds on the frozen model right after each reset, before the head acts again
    action_bounds: Literal["tanh", "invert_gradients"] = "tanh"  # squash actions, or invert gradients at the bounds
    exploration_noise: float = 0.0  # train phase: N(0, this) added to the actor's sample, clipped (Dreamer's expl_amount 0.3); 0 = off
    exploration_steps: int = 0  # env steps over which that noise goes linearly to sac.exploration_final (DrQ-v2's linear schedule); 0 = constant
    exploration_final: float = 0.0  # the noise from sac.exploration_steps on (DrQ-v2: linear(1.0, 0.1, 100000 agent steps))
    exploration_share: float = 1.0  # share of training collections acting with that noise, spread evenly (0.5: every other one); the rest act without
    min_std: float = math.exp(-5.0)  # floor of the actor's std before the squash (DreamerV2/V3: 0.1)
    min_alpha: float = 0.0  # floor of the entropy temperature; 0 = none
    return_normalization: bool = False  # the actor's Q divided by max(1, P95 - P5) of the critic targets (DreamerV3's retnorm)
    test_action: Literal["mode", "sample"] = "mode"  # the head's test-phase action: its mode (SAC, DrQ-v2, CURL) or a sample (DreamerV3)
    actor_grad: Literal["critic", "dynamics"] = "critic"  # actor follows min Q (SAC) or the imagined return through the model (Dreamer)
    return_lambda: float = 0.95  # lambda of the imagined returns with actor_grad: dynamics or imagined_targets: lambda (Dreamer's 0.95)
    imagined_targets: Literal["n_step", "lambda"] = "n_step"  # imagined half's critic targets: n-step, or soft lambda-returns (Dreamer)

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        for name in ("units", "layers", "batch_size"):
            checks.positive(f"sac.{name}", getattr(self, name))
        for name in ("actor_lr", "critic_lr", "alpha_lr", "init_alpha"):
            checks.positive(f"sac.{name}", getattr(self, name))
        checks.note("sac.target_entropy", "a finite number or `null`")
        if self.target_entropy is not None and not math.isfinite(self.target_entropy):
            raise ConfigError(f"sac.target_entropy={self.target_entropy}: must be a finite number (or null: -|A|)")
        checks.non_negative("sac.updates_per_step", self.updates_per_step)
        checks.positive("sac.n_step", self.n_step)
        checks.non_negative("sac.burn_in", self.burn_in)
        checks.non_negative("sac.imagination_horizon", self.imagination_horizon)
        checks.note("sac.imagination_horizon", "> 0 only with sac.real_ratio < 1 or sac.actor_grad: dynamics")
        if self.imagination_horizon and self.real_ratio == 1.0 and self.actor_grad == "critic":
            raise ConfigError(f"sac.imagination_horizon={self.imagination_horizon} imagines rollouts that "
                              "sac.real_ratio=1.0 never uses (every SAC batch comes from real chunks); set "
                              "sac.real_ratio below 1 (e.g. 0.5) or sac.imagination_horizon=0")
        checks.non_negative("sac.catchup_rounds", self.catchup_rounds)
        checks.note("sac.catchup_rounds", "needs sac.updates_per_step > 0")
        if self.catchup_rounds and not self.updates_per_step:
            raise ConfigError(f"sac.catchup_rounds={self.catchup_rounds} repeats sac.updates_per_step SAC updates per round, "
                              "which is 0; set sac.updates_per_step above 0")
        checks.non_negative("sac.reset_every", self.reset_every)
        checks.note("sac.reset_every", "needs sac.updates_per_step > 0")
        if self.reset_every and not self.updates_per_step:
            raise ConfigError(f"sac.reset_every={self.reset_every} starts over a head that sac.updates_per_step=0 never "
                              "trains; set sac.updates_per_step above 0 or sac.reset_every=0")
        checks.non_negative("sac.reset_rounds", self.reset_rounds)
        checks.note("sac.reset_rounds", "only with sac.reset_every > 0")
        if self.reset_rounds and not self.reset_every:
            raise ConfigError(f"sac.reset_rounds={self.reset_rounds} trains the head after each reset, and "
                              "sac.reset_every=0 makes none; set sac.reset_every or drop the key")
        checks.in_range("sac.real_ratio", self.real_ratio, low=0.0, high=1.0)
        checks.note("sac.real_ratio", "below 1 needs sac.imagination_horizon >= sac.n_step (n-step imagined targets)")
        if self.real_ratio < 1.0 and self.imagined_targets == "n_step" and self.imagination_horizon < self.n_step:
            raise ConfigError(
                f"sac.real_ratio={self.real_ratio} mixes in imagined transitions, which need "
                f"sac.imagination_horizon >= sac.n_step={self.n_step} (it is {self.imagination_horizon})"
            )
        checks.note("sac.actor_grad", "dynamics needs sac.imagination_horizon > 0")
        if self.actor_grad == "dynamics" and not self.imagination_horizon:
            raise ConfigError("sac.actor_grad=dynamics differentiates imagined rollouts of sac.imagination_horizon steps, "
                              "which is 0; set it (Dreamer: 15)")
        checks.in_range("sac.return_lambda", self.return_lambda, low=0.0, high=1.0)
        checks.note("sac.return_lambda", "only with sac.actor_grad: dynamics or sac.imagined_targets: lambda")
        if self.return_lambda != 0.95 and self.actor_grad != "dynamics" and self.imagined_targets != "lambda":
            raise ConfigError(f"sac.return_lambda={self.return_lambda} weighs the imagined returns of "
                              "sac.actor_grad=dynamics or sac.imagined_targets=lambda, both off; set one or drop the key")
        checks.note("sac.imagined_targets", "lambda needs an imagined half: sac.real_ratio < 1 and sac.imagination_horizon > 0")
        if self.imagined_targets == "lambda" and (self.real_ratio == 1.0 or not self.imagination_horizon):
            raise ConfigError(f"sac.imagined_targets=lambda sets the targets of imagined transitions, but "
                              f"sac.real_ratio={self.real_ratio} and sac.imagination_horizon={self.imagination_horizon} "
                              "train on none; set sac.real_ratio below 1 and sac.imagination_horizon (Dreamer: 15)")
        checks.in_range("sac.discount", self.discount, low=0.0, high=1.0)
        checks.in_range("sac.tau", self.tau, low=0.0, high=1.0, low_open=True)
        checks.non_negative("sac.exploration_noise", self.exploration_noise)
        checks.non_negative("sac.exploration_steps", self.exploration_steps)
        checks.non_negative("sac.exploration_final", self.exploration_final)
        checks.note("sac.exploration_steps", "> 0 only with sac.exploration_noise > 0")
        if self.exploration_steps and not self.exploration_noise:
            raise ConfigError(f"sac.exploration_steps={self.exploration_steps} schedules sac.exploration_noise, which "
                              "is 0 (off); set sac.exploration_noise (the noise at env step 0, DrQ-v2: 1.0)")
        checks.note("sac.exploration_final", "only with sac.exploration_steps > 0")
        if self.exploration_final and not self.exploration_steps:
            raise ConfigError(f"sac.exploration_final={self.exploration_final} is the end of a schedule that "
                              "sac.exploration_steps=0 turns off; set sac.exploration_steps or drop the key")
        checks.in_range("sac.exploration_share", self.exploration_share, low=0.0, high=1.0, low_open=True)
        checks.note("sac.exploration_share", "below 1 only with sac.exploration_noise > 0")
        if self.exploration_share < 1 and not self.exploration_noise:
            raise ConfigError(f"sac.exploration_share={self.exploration_share} spreads sac.exploration_noise, which is 0 "
                              "(off), over the collections; set sac.exploration_noise or drop the key")
        checks.in_range("sac.min_std", self.min_std, low=0.0, high=1.0, low_open=True)
        checks.non_negative("sac.min_alpha", self.min_alpha)
        checks.note("sac.min_alpha", "at most sac.init_alpha")
        if self.min_alpha > self.init_alpha:
            raise ConfigError(f"sac.min_alpha={self.min_alpha} is above sac.init_alpha={self.init_alpha}: the temperature "
                              "would start below its floor; lower sac.min_alpha or raise sac.init_alpha")

    def exploration_at(self, env_steps: int) -> float:
        """The train phase's noise on the head's actions after `env_steps` env steps: `exploration_noise`, or with
        `exploration_steps` DrQ-v2's linear schedule from it to `exploration_final` (reached, and kept, there)."""
        if not self.exploration_steps:
            return self.exploration_noise
        mix = min(1.0, max(0.0, env_steps / self.exploration_steps))
        return (1.0 - mix) * self.exploration_noise + mix * self.exploration_final


@dataclasses.dataclass
class PolicyConfig:
    """Which policy acts in each phase."""

    train: PolicyName = "cem"  # collects training episodes
    test: PolicyName = "cem"  # evaluates in the test phase; its episodes go to test_episodes/
    compare: list[PolicyName] = dataclasses.field(default_factory=list)  # also evaluated each test phase, not saved
    sac_share: float = 0.0  # share of training episodes the SAC head collects instead of `train` (0.5: every other one)
    jit_compile: bool = True  # act through XLA (faster on CPU, see planet-sac bench); off under optim.strategy other than default

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        checks.note("policy.compare", "each at most once")
        if len(set(self.compare)) != len(self.compare):
            twice = sorted(name for name, count in collections.Counter(self.compare).items() if count > 1)
            raise ConfigError(f"policy.compare={_show(self.compare)}: lists {', '.join(twice)} more than once")
        checks.in_range("policy.sac_share", self.sac_share, low=0.0, high=1.0)


@dataclasses.dataclass
class ScheduleConfig:
    """PlaNet's phases: `train_phase_steps` updates, then a test phase, repeated."""

    train_steps: int = 400_000  # total updates; PlaNet's max_steps 2e7 samples / batch 50 (about 399.2k: test batches count too)
    train_phase_steps: int = 1000  # updates per train phase; PlaNet's train_steps 50000 samples / batch 50
    first_test_phase: int | None = None  # update of the first test phase (the next every train_phase_steps); None = train_phase_steps
    collect_every: int = 100  # updates per collected training episode; PlaNet's collect_every 5000 / 50
    collect: bool = True  # false: collect nothing here, learn from episodes `planet-sac collect --reload-every` writes
    test_episodes: int = 1  # evaluation episodes per test phase
    log_every: int = 100  # updates between metrics.jsonl / TensorBoard records
    checkpoint_every: int = 1000  # updates between checkpoints
    checkpoint_minutes: float | None = 15.0  # also checkpoint this many minutes after the last (Dreamer's 900 s); None: off; multi-worker: off
    video_every: int = 10_000  # open-loop prediction summaries (image tasks)

    def validate(self, checks: Checks | None = None) -> None:
        """Raises ConfigError (one line) for a value out of range; see Config.validate."""
        checks = checks or Checks()
        for name in ("train_steps", "train_phase_steps", "collect_every", "log_every", "checkpoint_every", "video_every"):
            checks.positive(f"schedule.{name}", getattr(self, name))
        checks.non_negative("schedule.test_episodes", self.test_episodes)
        checks.positive("schedule.checkpoint_minutes", self.checkpoint_minutes)
        checks.positive("schedule.first_test_phase", self.first_test_phase)

    def test_phases_due(self, step: int) -> int:
        """How many test phases a run at update `step` has had: at `first_test_phase`, then every `train_phase_steps`."""
        first = self.train_phase_steps if self.first_test_phase is None else self.first_test_phase
        return 0 if step < first else (step - first) // self.train_phase_steps + 1


@dataclasses.dataclass
class Config:
    """The whole configuration of a run."""

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    cem: CEMConfig = dataclasses.field(default_factory=CEMConfig)
    sac: SACConfig = dataclasses.field(default_factory=SACConfig)
    policy: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    seed: int = 0  # seeds model initialisation, replay sampling and the policy's noise

    def validate(self, checks: Checks | None = None) -> None:
        """Checks every section's values and the combinations across sections; returns None if all are allowed.

        Raises ConfigError (one line naming the key and what it allows) at the first value outside its
        range. Types are not checked here: `from_dict` builds configs from checked types. `checks` makes
        the checks: pass `Checks(record=True)` to collect the allowed values of every key (as
        `config_reference` does); by default a fresh `Checks()` that records nothing.
        """
        checks = checks or Checks()
        for field in dataclasses.fields(self):
            section = getattr(self, field.name)
            if dataclasses.is_dataclass(section) and hasattr(section, "validate"):
                section.validate(checks)
        for key in ("sac.burn_in", "sac.n_step"):
            checks.note(key, "sac.burn_in + sac.n_step <= data.chunk_length - 1")
        checks.note("model.overshooting_distance", "<= data.chunk_length - 2")
        for key in ("sac.catchup_rounds", "sac.reset_rounds"):
            checks.note(key, "not with optim.strategy=multi_worker")
        checks.in_range("seed", self.seed, low=0, high=MAX_SEED)
        checks.note("optim.accumulate", "divides data.batch_size")
        if self.data.batch_size % self.optim.accumulate:
            raise ConfigError(f"optim.accumulate={self.optim.accumulate} splits each batch into equal micro-batches, "
                              f"so it must divide data.batch_size={self.data.batch_size}")
        for key in ("catchup_rounds", "reset_rounds"):
            if getattr(self.sac, key) and self.optim.strategy == "multi_worker":
                raise ConfigError(f"sac.{key} runs on one worker's batches, which would give each worker a "
                                  "different SAC head; set it to 0 under optim.strategy=multi_worker")
        if self.sac.burn_in + self.sac.n_step > self.data.chunk_length - 1:
            raise ConfigError(f"sac.burn_in={self.sac.burn_in} + sac.n_step={self.sac.n_step} must be at most "
                              f"data.chunk_length - 1 = {self.data.chunk_length - 1}")
        checks.note("model.value_scale", "above 0 only with sac.updates_per_step above 0")
        if self.model.value_scale and not self.sac.updates_per_step:
            raise ConfigError(f"model.value_scale={self.model.value_scale} trains the model with the SAC critics' TD "
                              "loss, and sac.updates_per_step=0 never trains the critics; set sac.updates_per_step "
                              "above 0 or model.value_scale=0")
        checks.note("model.foreground_weight", "above 1 only with env.obs=image")
        if self.model.foreground_weight != 1.0 and self.env.obs != "image":
            raise ConfigError(f"model.foreground_weight={self.model.foreground_weight} weighs moving pixels, and "
                              f"env.obs={self.env.obs}; set model.foreground_weight=1 for state observations")
        checks.note("model.augment_shift", "> 0 only with env.obs=image")
        if self.model.augment_shift and self.env.obs != "image":
            raise ConfigError(f"model.augment_shift={self.model.augment_shift} shifts images, and env.obs={self.env.obs}; "
                              "set model.augment_shift=0 for state observations")
        if self.model.overshooting_distance > self.data.chunk_length - 2:
            raise ConfigError(
                f"model.overshooting_distance={self.model.overshooting_distance} needs chunks of at least "
                f"{self.model.overshooting_distance + 2} steps (data.chunk_length={self.data.chunk_length})"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- value checks


class Checks:
    """The value checks `validate()` makes, each stating in words the values it allows.

    Each check raises one ConfigError line naming the key and its allowed values when a value is outside
    them (`positive` and `non_negative` pass None: optional keys). `Checks()` only checks. `Checks(record=True)` also collects the
    statements in `allowed`: {key: allowed values}, in the order first stated, a key stated twice joined
    with " and ". `config_reference` documents that mapping, so docs/config.md reads the ranges from the
    calls that enforce them. An instance keeps only what the validations it is passed to state: nothing
    is recorded elsewhere, and without `record` nothing is recorded at all (`allowed` stays None).
    """

    def __init__(self, record: bool = False) -> None:
        self.allowed: dict[str, str] | None = {} if record else None

    def note(self, key: str, allowed: str) -> None:
        """States what `key` allows, for a check `validate()` makes itself next to this call."""
        if self.allowed is not None:
            self.allowed[key] = f"{self.allowed[key]} and {allowed}" if key in self.allowed else allowed

    def positive(self, key: str, value: float | None, allow_inf: bool = False) -> None:
        """value > 0, finite unless `allow_inf`."""
        self.note(key, "> 0 (.inf allowed)" if allow_inf else "> 0")
        if value is not None and not (0 < value < math.inf or (allow_inf and value == math.inf)):
            raise ConfigError(f"{key}={value}: must be {'a finite number ' if value == math.inf or value != value else ''}> 0")

    def non_negative(self, key: str, value: float | None, allow_inf: bool = False) -> None:
        """value >= 0, finite unless `allow_inf`."""
        self.note(key, ">= 0 (.inf allowed)" if allow_inf else ">= 0")
        if value is not None and not (0 <= value < math.inf or (allow_inf and value == math.inf)):
            raise ConfigError(f"{key}={value}: must be {'a finite number ' if value == math.inf or value != value else ''}>= 0")

    def in_range(self, key: str, value: float, low: float | None = None, high: float | None = None, low_open: bool = False,
                 high_name: str | None = None) -> None:
        """low <= value <= high (low < value with `low_open`), finite; `high_name` names a key the upper bound comes from."""
        if low is not None and high is not None and high_name is None:
            allowed = f"in {'(' if low_open else '['}{low}, {high}]"
        else:
            parts = [f"{'>' if low_open else '>='} {low}"] if low is not None else []
            parts += [f"<= {high_name or high}"] if high is not None else []
            allowed = " and ".join(parts)
        self.note(key, allowed)
        too_low = low is not None and (value <= low if low_open else value < low)
        if too_low or (high is not None and value > high) or not math.isfinite(value):
            raise ConfigError(f"{key}={value}: must be {allowed}" + (f" (is {high})" if high_name else ""))


# ----------------------------------------------------------------------------- messages

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = 6
_repr.maxdict = 4
_repr.maxlevel = 3


def _cut(value: Any, limit: int = 80) -> str:
    """At most about `limit` characters of `value` (a str as is, anything else as its repr), for messages."""
    text = value if isinstance(value, str) else _repr.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show(value: Any) -> str:
    """A user's value as quoted in an error message: its repr, cut to about 80 characters (never the whole of a huge value)."""
    return _cut(_repr.repr(value))
