"""The learner: one compiled update of the world model (and the SAC head) per batch.

- Gradient accumulation happens inside the graph: the batch is split into
  `optim.accumulate` micro-batches whose gradients are averaged in a `tf.range` loop
  and applied once; no gradient ever travels back to Python.
- All randomness of an update is drawn up front from one `tf.random.Generator`
  for the whole batch, so k micro-batches of size B/k give the same update as one
  batch of B, and eager execution gives the same numbers as the compiled step (up to
  float reassociation: TensorFlow promises closeness, not bitwise equality; under
  mixed_bfloat16 only with Grappler off, `startup.make_tensorflow_deterministic`). With
  `optim.jit_compile` the generator draws another stream under XLA: reproducible with
  itself, not with the non-XLA update (docs/determinism.md).
- A non-finite loss or gradient skips the update; the skip is counted, and the
  trainer stops the run after `optim.max_nonfinite_updates` consecutive skips.
  A non-finite SAC loss or gradient skips that SAC update (`sac/skipped_updates`
  counts them per step); a skipped world-model update skips the step's SAC updates.
- The `sac.updates_per_step` SAC updates after a model update run in one `tf.while_loop`
  and share one pool of imagined transitions, made once per model update (as Dreamer
  imagines once per update); their `sac/*` metrics are means over the loop. The rollouts
  start from the posteriors of this update's loss but run the model after its step
  (Dreamer imagines with the model before the step).
- With `optim.accumulate` = k, the SAC head trains on the posterior features of all
  k micro-batches, so its updates equal those of one batch of B.
- Under a `tf.distribute` strategy (`optim.strategy`, see `training/distribute.py`) the
  world-model part is data-parallel: each of R replicas takes B/R rows of the global batch
  and of its noise (drawn once, as above), accumulates its gradients in k micro-batches,
  and the gradients and metrics are all-reduced (mean). The mean gradients are identical on
  every replica, so the finite check agrees, and Adam is applied once in cross-replica
  context, which writes the same values into every replica's copy of each variable. The
  actor-critic part is cheap: the posterior features and the batch's action, reward and
  discount are all-gathered, and the SAC updates run in cross-replica context on the
  global batch with the learner's generator, identically on every worker. So R replicas
  make the update of one device with the same global batch (up to float reassociation).
"""

from __future__ import annotations

from typing import Dict, Mapping

import tensorflow as tf

from planet_sac.compiled import compiled_method
from planet_sac.config import Config, ConfigError, SACConfig
from planet_sac.control.dynamics_actor import METRICS as DYNAMICS_METRICS
from planet_sac.control.dynamics_actor import dynamics_actor_update
from planet_sac.control.sac import SAC, reset_seed
from planet_sac.control.transitions import Transitions, imagined_lambda_transitions, imagined_transitions, real_transitions, value_loss
from planet_sac.diagnostics import foreground_errors
from planet_sac.models.world_model import WorldModel
from planet_sac.optim import Adam
from planet_sac.training import distribute

Batch = Mapping[str, tf.Tensor]


class NonFiniteError(RuntimeError):
    """Too many consecutive updates had a NaN/inf loss or gradient (`Learner.consecutive_skips`)."""


class Learner(tf.Module):
    """The compiled `update(batch) -> metrics`: a world-model part and an actor-critic part.

    The world-model part owns the model's optimizer and finite check and hands the posterior
    features (gradients stopped) to the actor-critic part, whose optimizers and finite check
    live in `SAC`. The two parts share nothing else, but for `model.value_scale` > 0: then the
    world model's loss also holds the critics' TD loss on its posteriors (`transitions.value_loss`),
    whose gradient reaches the encoder and RSSM through the posteriors' GRU state `deter` only (not
    their sampled `stoch`), and never the critics, which learn in the SAC updates alone.

    `strategy` is the `tf.distribute.Strategy` the world model and SAC head were built under
    (default: the current one); `update` takes this worker's share of the global batch.
    """

    def __init__(self, config: Config, world_model: WorldModel, sac: SAC, seed: int = 0,
                 strategy: tf.distribute.Strategy | None = None):
        super().__init__(name="learner")
        self.config = config
        self.world_model = world_model
        self.sac = sac
        self.strategy = strategy or tf.distribute.get_strategy()
        outside = [variable.name for variable in (*world_model.variables, *sac.variables)
                   if not self.strategy.extended.variable_created_in_scope(variable)]
        if outside:
            raise ValueError(f"{outside[0]} was not created under the learner's strategy: build the world model and "
                             "SAC head inside `with strategy.scope():`")
        optim = config.optim
        with self.strategy.scope():
            self.optimizer = Adam(world_model.trainable_variables, optim.learning_rate, optim.adam_epsilon,
                                  optim.grad_clip, warmup=optim.warmup_updates, name="world_model")
            with tf.name_scope("learner/"):
                self.rng = tf.random.Generator.from_seed(seed)
                self.skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_updates")
                self.consecutive_skips = tf.Variable(0, dtype=tf.int64, trainable=False, name="consecutive_skips")
        self.update = compiled_method(self._update, jit_compile=optim.jit_compile, autograph=False)
        self.evaluate = compiled_method(self._evaluate, autograph=False)
        self.catch_up = compiled_method(self._catch_up, jit_compile=optim.jit_compile, autograph=False)

    def _evaluate(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """The world model's loss terms (`loss/*`) on a batch, without an update (held-out loss, as PlaNet's test
        phase), on unshifted images; for images also the reconstruction's error on moving pixels and on the
        rest (`diagnostics.foreground_errors`, against the 5-bit bin centres the decoder is trained towards)."""
        wm = self.world_model
        size, length = batch["action"].shape[0], batch["action"].shape[1]
        noise = wm.sample_noise(self.rng, size, length)
        noise.pop("shift", None)  # held-out images are seen as they are (model.augment_shift augments training only)
        _, metrics, posts = wm.loss(batch, noise)
        metrics = {key: value for key, value in metrics.items() if key.startswith("loss/")}
        if wm.obs_key == "image":
            metrics.update(foreground_errors(wm.target_image(batch["image"]), wm.decode(posts)))
        return metrics

    def _catch_up(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One round of the actor-critic part alone: its updates on the batch's posterior features, the model frozen.

        The SAC head trails a world model that changes every update (docs/sac_head.md); rounds
        without a model update let it catch up with the current features.
        """
        obs = batch[self.world_model.obs_key]
        embed = self.world_model.embed(obs, self.world_model.observation_noise(self.rng, obs))
        return head_round(self.world_model, self.sac, embed, batch, self.rng)

    def reset_head(self, step: int) -> None:
        """Starts the SAC head over after model update `step` (`SAC.reset`), with a seed of the run's and the step's
        (`sac.reset_seed`): a resumed run resets as the never-stopped one did. Eager, in the strategy's scope."""
        with self.strategy.scope():
            self.sac.reset(reset_seed(self.config.seed, step))

    def _update(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One world-model update, then the actor-critic's updates on the posterior features it produced."""
        metrics, chunks, finite = self._world_model_update(batch)
        if self.config.sac.updates_per_step > 0:
            metrics.update(self._actor_critic_update(chunks, finite))
        return metrics

    def _world_model_update(self, batch: Batch) -> tuple[Dict[str, tf.Tensor], Batch, tf.Tensor]:
        """Data-parallel gradients of the world-model loss, all-reduced, applied once if finite.

        The noise is drawn once for the global batch (every worker draws the same), and replica r
        of R takes rows [r * B / R, (r + 1) * B / R) of the global batch and of its noise, so the
        update does not depend on how many replicas share it (up to float reassociation).

        Returns (metrics, the global batch's posterior features [B, T, F] (gradients stopped)
        with its action, reward and discount, whether the update was applied).
        """
        strategy = self.strategy
        local = distribute.local_replicas(strategy)
        size, length = batch["action"].shape[0], batch["action"].shape[1]
        k = self.config.optim.accumulate
        if size % (local * k):
            parts = f"optim.accumulate={k}" if local == 1 else f"{local} replicas x optim.accumulate={k}"
            raise ConfigError(f"batch size {size} is not divisible by {parts}; "
                              f"set data.batch_size to a multiple of {strategy.num_replicas_in_sync * k}")
        workers = distribute.num_workers(strategy)
        if workers > 1 and size * workers != self.config.data.batch_size:  # else the collectives fail obscurely
            raise ConfigError(f"this worker's batch has {size} chunks, but data.batch_size={self.config.data.batch_size} "
                              f"over {workers} workers is {self.config.data.batch_size // workers} per worker")
        shard = size // local
        noise = self.world_model.sample_noise(self.rng, size * workers, length)
        if self.config.model.value_scale:  # the next actions of the critics' targets in `value_loss`
            starts = length - self.config.sac.burn_in - self.config.sac.n_step
            noise["value"] = self.rng.normal([size * workers, starts, self.sac.action_size])

        def rows(value: tf.Tensor, index: int, axis: int = 0) -> tf.Tensor:
            return value[(slice(None),) * axis + (slice(index * shard, (index + 1) * shard),)]

        def replica_inputs(context: tf.distribute.experimental.ValueContext) -> tuple[Batch, Batch]:
            replica = context.replica_id_in_sync_group  # global id: workers own consecutive replicas
            return ({key: rows(value, replica % local) for key, value in batch.items()},
                    {key: rows(value, replica, axis=1 if key == "overshooting" else 0) for key, value in noise.items()})

        inputs = strategy.experimental_distribute_values_from_function(replica_inputs)
        results = strategy.run(self._replica_gradients, args=inputs)
        # Every replica returns the same all-reduced / all-gathered values: take this worker's first copy.
        grads, metrics, chunks = tf.nest.map_structure(lambda value: strategy.experimental_local_results(value)[0], results)

        norm = tf.linalg.global_norm(grads)
        finite = tf.logical_and(tf.math.is_finite(metrics["loss/total"]), tf.math.is_finite(norm))
        # Applied in cross-replica context: every assignment updates the variable on every replica alike.
        grad_norm = tf.cond(finite, lambda: self.optimizer.apply(grads, norm), lambda: tf.constant(float("nan")))
        self.skipped_updates.assign_add(tf.cast(tf.logical_not(finite), tf.int64))
        self.consecutive_skips.assign(tf.where(finite, tf.constant(0, tf.int64), self.consecutive_skips + 1))
        metrics = dict(metrics, **{"train/grad_norm": grad_norm, "train/skipped_updates": self.skipped_updates,
                                   "train/learning_rate": self.optimizer.current_learning_rate(),
                                   "train/update_finite": tf.cast(finite, tf.float32)})
        return metrics, chunks, finite

    def _replica_gradients(self, batch: Batch, noise: Batch) -> tuple[list[tf.Tensor], Dict[str, tf.Tensor], Batch]:
        """One replica's share: accumulated gradients of its rows, then the mean over replicas.

        Returns (mean gradients, mean metrics, posterior features of the global batch with its
        action, reward and discount), identical on every replica.
        """
        wm = self.world_model
        k = self.config.optim.accumulate
        size, length = batch["action"].shape[0], batch["action"].shape[1]
        micro = size // k
        variables = wm.trainable_variables

        # [B, ...] -> [k, B/k, ...], so every micro-batch has a static shape inside the loop.
        split = lambda t: tf.reshape(t, [k, micro, *t.shape[1:]])  # noqa: E731
        batches = {key: split(value) for key, value in batch.items()}
        noises = {key: (tf.stack(tf.split(value, k, axis=1)) if key == "overshooting" else split(value))
                  for key, value in noise.items()}

        value_scale = self.config.model.value_scale

        def micro_step(i):
            micro_batch = {key: value[i] for key, value in batches.items()}
            micro_noise = {key: value[i] for key, value in noises.items()}
            value_noise = micro_noise.pop("value", None)
            with tf.GradientTape() as tape:
                loss, metrics, posts = wm.loss(micro_batch, micro_noise)
                if value_noise is not None:  # model.value_scale: the critics' TD loss, into the model only,
                    # through the GRU state (bounded by its tanh); through the posterior's sample too it diverged
                    value_features = wm.rssm.features({"deter": posts["deter"], "stoch": tf.stop_gradient(posts["stoch"])})
                    values = value_loss(self.sac, value_features, micro_batch, value_noise)
                    loss += value_scale * values
                    metrics = dict(metrics, **{"loss/value": values, "loss/total": loss})
            grads = tape.gradient(loss, variables)
            if k > 1:  # the mean over micro-batches (x / 1 is x: no ops for it, a smaller graph to trace)
                grads = [g / k for g in grads]
                metrics = {key: value / k for key, value in metrics.items()}
            return grads, metrics, tf.stop_gradient(wm.rssm.features(posts))

        def accumulate(i, grads, metrics, features):
            micro_grads, micro_metrics, micro_features = micro_step(i)
            grads = [g + mg for g, mg in zip(grads, micro_grads)]
            metrics = {key: metrics[key] + micro_metrics[key] for key in metrics}
            return i + 1, grads, metrics, features.write(i, micro_features)

        grads, metrics, first = micro_step(0)
        # The posterior features of every micro-batch, so the SAC head sees the whole batch, as with k = 1.
        features = tf.TensorArray(tf.float32, size=k, element_shape=first.shape).write(0, first)
        if k > 1:  # an in-graph loop: gradients never leave the graph between micro-batches
            _, grads, metrics, features = tf.while_loop(lambda i, *_: i < k, accumulate,
                                                        (tf.constant(1), grads, metrics, features))
        features = tf.reshape(features.stack(), [size, length, first.shape[-1]])  # back in batch order

        # Every loss term is a mean over equal shards, so the mean over replicas is the global batch's.
        context = tf.distribute.get_replica_context()
        grads, metrics = context.all_reduce(tf.distribute.ReduceOp.MEAN, (grads, metrics))
        # Inputs made outside the replica have no device, which all_gather needs: copy them here, on the replica's.
        chunks = {"features": features, **{key: tf.identity(batch[key]) for key in ("action", "reward", "discount")}}
        global_rows = size * context.num_replicas_in_sync  # all_gather forgets static shapes; the SAC part needs them
        chunks = {key: tf.reshape(value, [global_rows, *chunks[key].shape[1:]])
                  for key, value in context.all_gather(chunks, axis=0).items()}
        return grads, metrics, chunks

    def _actor_critic_update(self, chunks: Batch, world_model_finite: tf.Tensor) -> Dict[str, tf.Tensor]:
        """`sac.updates_per_step` SAC updates on the posterior features, each with its own finite check (see SAC.update).

        `chunks` holds the global batch's features, action, reward and discount on every worker, and
        the updates run in cross-replica context with the learner's generator, so every replica and
        worker makes the same SAC updates as one device would. A batch that broke the world model
        (NaN/inf) must not reach the SAC head either: then all are skipped.
        """
        updates = self.config.sac.updates_per_step
        skipped = {key: tf.constant(float("nan")) for key in sac_metric_names(self.config.sac)}
        skipped.update({"sac/update_finite": tf.constant(0.0), "sac/skipped_updates": tf.constant(float(updates))})
        return tf.cond(world_model_finite,
                       lambda: actor_critic_updates(self.world_model, self.sac, chunks["features"], chunks, self.rng),
                       lambda: skipped)


def actor_critic_updates(world_model: WorldModel, sac: SAC, features: tf.Tensor, batch: Batch,
                         rng: tf.random.Generator) -> Dict[str, tf.Tensor]:
    """`sac.config.updates_per_step` SAC updates on n-step transitions of posterior features, mixed with imagined ones.

    `features` are the posterior features [B, T, F] of the chunks in `batch` (its action, reward
    and discount); the first `sac.burn_in` steps of every chunk (filtered from a zero state) start
    no transition, real or imagined. Each update samples `round(batch_size * real_ratio)` real
    transitions and takes the rest from one pool of imagined ones: rollouts of the model under the
    current actor, made once here for all the updates (as Dreamer imagines once per model update)
    and split among them, so no imagined transition is used twice (see `imagination_pool`).
    The updates run in one in-graph loop (`tf.while_loop`, traced once whatever their number);
    their metrics are the means over the loop, `sac/skipped_updates` the count of skipped ones.
    With `sac.actor_grad: dynamics` the loop trains the critics only, and the actor and the temperature
    then take one step through the model from every posterior state (`dynamics_actor_update`, as
    Dreamer's actor does once per model update); `sac/actor_loss` is then that step's.
    The learner calls this after every world-model update; `head_round` on a frozen model.
    """
    cfg = sac.config
    n = cfg.n_step
    updates = cfg.updates_per_step
    features = features[:, cfg.burn_in:]  # the first posteriors of a chunk start from a zero state: optionally none
    real = real_transitions(features, batch["action"][:, cfg.burn_in:], batch["reward"][:, cfg.burn_in:],
                            batch["discount"][:, cfg.burn_in:], n, cfg.discount)
    count = real.features.shape[0]
    real_take, imagined_take = sac_batch_split(cfg)
    dynamics = cfg.actor_grad == "dynamics"  # then the loop leaves the actor and temperature to dynamics_actor_update
    if imagined_take:  # [updates, imagined_take, ...]: update i takes slice i
        pool = imagination_pool(world_model, sac, features, updates * imagined_take, rng)
        imagined = Transitions(*(tf.reshape(field, [updates, imagined_take, *field.shape[1:]]) for field in pool))

    def body(i: tf.Tensor, sums: Dict[str, tf.Tensor]) -> tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        parts = []
        if real_take:
            parts.append(real.gather(rng.uniform([real_take], 0, count, dtype=tf.int64)))
        if imagined_take:
            parts.append(Transitions(*(field[i] for field in imagined)))
        metrics = sac.update(*Transitions.concat(parts), rng=rng, steps=n, real_size=real_take,
                             train_actor=not dynamics)
        return i + 1, {key: sums[key] + metrics[key] for key in sums}

    sums = {key: tf.constant(0.0) for key in SAC.metric_names(real_take, imagined_take)}
    # One iteration at a time: each update reads the weights the previous one wrote.
    _, sums = tf.while_loop(lambda i, _: i < updates, body, (tf.constant(0), sums), parallel_iterations=1)
    metrics = {key: value / updates for key, value in sums.items()}
    metrics["sac/skipped_updates"] = updates - sums["sac/update_finite"]
    if dynamics:
        metrics.update(dynamics_actor_update(world_model, sac, features, rng))
    return metrics


def sac_metric_names(config: SACConfig) -> tuple[str, ...]:
    """The keys `actor_critic_updates` returns besides `sac/skipped_updates`."""
    names = SAC.metric_names(*sac_batch_split(config))
    return names + (DYNAMICS_METRICS if config.actor_grad == "dynamics" else ())


def sac_batch_split(config: SACConfig) -> tuple[int, int]:
    """(real, imagined) transitions in each SAC batch: `round(batch_size * real_ratio)` real, the rest imagined."""
    real = int(round(config.batch_size * config.real_ratio))
    return real, config.batch_size - real


def imagination_pool(world_model: WorldModel, sac: SAC, features: tf.Tensor, size: int,
                     rng: tf.random.Generator) -> Transitions:
    """`size` imagined transitions in random order, from rollouts started at posterior features [B, T, F].

    Their critic targets are `sac.n_step` returns (`imagined_transitions`), or with `sac.imagined_targets: lambda`
    soft lambda-returns over the whole rollout (`imagined_lambda_transitions`: every state but the last starts one).

    Enough rollouts of `sac.imagination_horizon` steps under the actor (sampling, as it explores)
    start from posterior states drawn uniformly (with replacement) from `features`; their
    transitions are shuffled, so consecutive slices mix many rollouts, as each SAC update's did
    when it imagined alone.
    """
    cfg = sac.config
    lambda_targets = cfg.imagined_targets == "lambda"
    per_rollout = cfg.imagination_horizon if lambda_targets else cfg.imagination_horizon + 1 - cfg.n_step
    starts = flatten_time(features)
    rollouts = -(-size // per_rollout)
    start = tf.gather(starts, rng.uniform([rollouts], 0, starts.shape[0], dtype=tf.int64))
    deter_size = world_model.rssm.deter_size
    start = {"deter": start[:, :deter_size], "stoch": start[:, deter_size:]}
    if lambda_targets:
        pool = imagined_lambda_transitions(world_model, sac, start, cfg.imagination_horizon, cfg.return_lambda, rng)
    else:
        actor_sample = lambda f, noise: sac.act(f, noise, False)  # noqa: E731
        pool = imagined_transitions(world_model, actor_sample, start, cfg.imagination_horizon, cfg.n_step,
                                    cfg.discount, rng)
    order = tf.argsort(rng.uniform([rollouts * per_rollout]))[:size]
    return pool.gather(order)


def head_round(world_model: WorldModel, sac: SAC, embed: tf.Tensor, batch: Batch,
               rng: tf.random.Generator) -> Dict[str, tf.Tensor]:
    """The actor-critic part on a frozen model: filter the chunks' posteriors from their embeddings [B, T, E]
    (sampled latents, as in training), then `actor_critic_updates`. `Learner.catch_up` and `research/sac_head.py` use it."""
    size, length = batch["action"].shape[0], batch["action"].shape[1]
    posts, _ = world_model.rssm.observe(embed, batch["action"], rng.normal([size, length, world_model.rssm.stoch_size]))
    features = tf.stop_gradient(world_model.rssm.features(posts))
    return actor_critic_updates(world_model, sac, features, batch, rng)


def flatten_time(x: tf.Tensor) -> tf.Tensor:
    """[B, T, ...] -> [B * T, ...]."""
    return tf.reshape(x, [-1, *x.shape[2:]])
