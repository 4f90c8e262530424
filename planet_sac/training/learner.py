"""The learner: one compiled update of the world model (and the SAC head) per batch.

- Gradient accumulation happens inside the graph: the batch is split into
  `optim.accumulate` micro-batches whose gradients are averaged in a `tf.range` loop
  and applied once; no gradient ever travels back to Python.
- All randomness of an update is drawn up front from one `tf.random.Generator`
  for the whole batch, so k micro-batches of size B/k give the same update as one
  batch of B, and eager execution gives the same numbers as the compiled step (up to
  float reassociation: TensorFlow promises closeness, not bitwise equality).
- A non-finite loss or gradient skips the update; the skip is counted, and the
  trainer stops the run after `optim.max_nonfinite_updates` consecutive skips.
  A non-finite SAC loss or gradient skips that SAC update (`sac/skipped_updates`
  counts them per step); a skipped world-model update skips the step's SAC updates.
- With `optim.accumulate` = k, the SAC head trains on the posterior features of all
  k micro-batches, so its updates equal those of one batch of B.
"""

from __future__ import annotations

from typing import Dict, Mapping

import tensorflow as tf

from planet_sac.config import Config, ConfigError
from planet_sac.control.sac import SAC
from planet_sac.control.transitions import Transitions, imagined_transitions, real_transitions
from planet_sac.models.world_model import WorldModel
from planet_sac.optim import Adam

Batch = Mapping[str, tf.Tensor]


class Learner(tf.Module):
    """The compiled `update(batch) -> metrics`: a world-model part and an actor-critic part.

    The world-model part owns the model's optimizer and finite check and hands the posterior
    features (gradients stopped) to the actor-critic part, whose optimizers and finite check
    live in `SAC`. The two parts share nothing else.
    """

    def __init__(self, config: Config, world_model: WorldModel, sac: SAC, seed: int = 0):
        super().__init__(name="learner")
        self.config = config
        self.world_model = world_model
        self.sac = sac
        optim = config.optim
        self.optimizer = Adam(world_model.trainable_variables, optim.learning_rate, optim.adam_epsilon,
                              optim.grad_clip, warmup=optim.warmup_updates, name="world_model")
        with tf.name_scope("learner/"):
            self.rng = tf.random.Generator.from_seed(seed)
            self.skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_updates")
            self.consecutive_skips = tf.Variable(0, dtype=tf.int64, trainable=False, name="consecutive_skips")
        self.update = tf.function(self._update, jit_compile=optim.jit_compile, autograph=False)
        self.evaluate = tf.function(self._evaluate, autograph=False)

    def _evaluate(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """The world model's loss terms on a batch, without an update (held-out loss, as PlaNet's test phase)."""
        size, length = batch["action"].shape[0], batch["action"].shape[1]
        _, metrics, _ = self.world_model.loss(batch, self.world_model.sample_noise(self.rng, size, length))
        return metrics

    def _update(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One world-model update, then the actor-critic's updates on the posterior features it produced."""
        metrics, features, finite = self._world_model_update(batch)
        if self.config.sac.updates_per_step > 0:
            metrics.update(self._actor_critic_update(features, batch, finite))
        return metrics

    def _world_model_update(self, batch: Batch) -> tuple[Dict[str, tf.Tensor], tf.Tensor, tf.Tensor]:
        """Accumulated gradients of the world-model loss, applied once if finite.

        Returns (metrics, posterior features [B, T, F] with gradients stopped, whether the update was applied).
        """
        wm = self.world_model
        k = self.config.optim.accumulate
        size = batch["action"].shape[0]
        length = batch["action"].shape[1]
        if size % k:
            raise ConfigError(f"batch size {size} is not divisible by optim.accumulate={k}; "
                              "set data.batch_size to a multiple of optim.accumulate")
        micro = size // k
        noise = wm.sample_noise(self.rng, size, length)
        variables = wm.trainable_variables

        # [B, ...] -> [k, B/k, ...], so every micro-batch has a static shape inside the loop.
        split = lambda t: tf.reshape(t, [k, micro, *t.shape[1:]])  # noqa: E731
        batches = {key: split(value) for key, value in batch.items()}
        noises = {key: (tf.stack(tf.split(value, k, axis=1)) if key == "overshooting" else split(value))
                  for key, value in noise.items()}

        def micro_step(i):
            with tf.GradientTape() as tape:
                loss, metrics, posts = wm.loss({key: value[i] for key, value in batches.items()},
                                               {key: value[i] for key, value in noises.items()})
            grads = [g / k for g in tape.gradient(loss, variables)]
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

        finite = tf.logical_and(tf.math.is_finite(metrics["loss/total"]),
                                tf.math.is_finite(tf.linalg.global_norm(grads)))
        grad_norm = tf.cond(finite, lambda: self.optimizer.apply(grads), lambda: tf.constant(float("nan")))
        self.skipped_updates.assign_add(tf.cast(tf.logical_not(finite), tf.int64))
        self.consecutive_skips.assign(tf.where(finite, tf.constant(0, tf.int64), self.consecutive_skips + 1))
        metrics = dict(metrics, **{"train/grad_norm": grad_norm, "train/skipped_updates": self.skipped_updates,
                                   "train/learning_rate": self.optimizer.current_learning_rate(),
                                   "train/update_finite": tf.cast(finite, tf.float32)})
        return metrics, features, finite

    def _actor_critic_update(self, features: tf.Tensor, batch: Batch, world_model_finite: tf.Tensor) -> Dict[str, tf.Tensor]:
        """`sac.updates_per_step` SAC updates on the features, each with its own finite check (see SAC.update).

        A batch that broke the world model (NaN/inf) must not reach the SAC head either: then all are skipped.
        """
        updates = self.config.sac.updates_per_step
        whole = {key: tf.convert_to_tensor(value) for key, value in batch.items()}
        skipped = {key: tf.constant(float("nan")) for key in SAC.METRICS}
        skipped.update({"sac/update_finite": tf.constant(0.0), "sac/skipped_updates": tf.constant(float(updates))})
        return tf.cond(world_model_finite, lambda: self._sac_updates(features, whole), lambda: skipped)

    def _sac_updates(self, features: tf.Tensor, batch: Batch) -> Dict[str, tf.Tensor]:
        """SAC updates on n-step transitions of the posterior over the chunk, mixed with imagined ones.

        Each update samples `round(batch_size * real_ratio)` real transitions and fills the
        rest with transitions along fresh rollouts of the model under the current actor,
        started from posterior states of the same chunks (see `control/transitions.py`).
        """
        cfg = self.config.sac
        n = cfg.n_step
        skip = cfg.burn_in  # the first posteriors of a chunk start from a zero state: optionally no transitions from them
        real = real_transitions(features[:, skip:], batch["action"][:, skip:], batch["reward"][:, skip:],
                                batch["discount"][:, skip:], n, cfg.discount)
        count = real.features.shape[0]
        real_take = int(round(cfg.batch_size * cfg.real_ratio))
        imagined_take = cfg.batch_size - real_take
        per_rollout = cfg.imagination_horizon + 1 - n
        starts = flatten_time(features)
        deter_size = self.world_model.rssm.deter_size
        metrics = {}
        skipped = tf.constant(0.0)
        for _ in range(cfg.updates_per_step):
            parts = []
            if real_take:
                parts.append(real.gather(self.rng.uniform([real_take], 0, count, dtype=tf.int64)))
            if imagined_take:
                rollouts = -(-imagined_take // per_rollout)
                start = tf.gather(starts, self.rng.uniform([rollouts], 0, starts.shape[0], dtype=tf.int64))
                start = {"deter": start[:, :deter_size], "stoch": start[:, deter_size:]}
                imagined = imagined_transitions(self.world_model, self._actor_sample, start, cfg.imagination_horizon,
                                                n, cfg.discount, self.rng)
                parts.append(imagined.gather(tf.range(imagined_take)))
            metrics = self.sac.update(*Transitions.concat(parts), rng=self.rng, steps=n)
            skipped += 1.0 - metrics["sac/update_finite"]
        return dict(metrics, **{"sac/skipped_updates": skipped})

    def _actor_sample(self, features: tf.Tensor, noise: tf.Tensor) -> tf.Tensor:
        return self.sac.act(features, noise, False)


def flatten_time(x: tf.Tensor) -> tf.Tensor:
    """[B, T, ...] -> [B * T, ...]."""
    return tf.reshape(x, [-1, *x.shape[2:]])
