"""Adam with named slots, and global-norm clipping.

A small hand-written Adam (the TF1/PlaNet form, epsilon added to sqrt(v)) instead of a
Keras optimizer, for two reasons: its slot variables get stable names
(`optimizer/<owner>/m/<variable name>`) that filtered restore can select, and its
update is a handful of tensor ops that behave identically in eager and graph mode.
"""

from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

from planet_sac.checkpoints import variable_name


class Adam(tf.Module):
    """Adam over a fixed list of variables, with optional global-norm clipping."""

    def __init__(self, variables: Sequence[tf.Variable], learning_rate: float, epsilon: float = 1e-8,
                 clip: float | None = None, beta1: float = 0.9, beta2: float = 0.999, warmup: int = 0,
                 name: str = "adam"):
        super().__init__(name=name)
        self.variables_ = list(variables)
        self.learning_rate = learning_rate
        self.warmup = warmup
        self.epsilon = epsilon
        self.clip = clip if clip is not None and math.isfinite(clip) else None  # inf: no clipping (inf * 0 is NaN)
        self.beta1 = beta1
        self.beta2 = beta2
        with tf.name_scope("optimizer/" + name + "/"):
            self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations")
            self.m = [tf.Variable(tf.zeros_like(v), trainable=False, name="m/" + variable_name(v)) for v in self.variables_]
            self.v = [tf.Variable(tf.zeros_like(v), trainable=False, name="v/" + variable_name(v)) for v in self.variables_]

    def apply(self, grads: Sequence[tf.Tensor]) -> tf.Tensor:
        """Clips by global norm (if set) and applies one Adam step; returns the pre-clip norm."""
        norm = tf.linalg.global_norm(grads)
        if self.clip:
            grads, _ = tf.clip_by_global_norm(grads, self.clip, use_norm=norm)
        step_size = self.current_learning_rate() * self._bias_correction(self.iterations + 1)
        self.iterations.assign_add(1)
        for var, m, v, g in zip(self.variables_, self.m, self.v, grads):
            m.assign(self.beta1 * m + (1.0 - self.beta1) * g)
            v.assign(self.beta2 * v + (1.0 - self.beta2) * tf.square(g))
            var.assign_sub(step_size * m / (tf.sqrt(v) + self.epsilon))
        return norm

    def current_learning_rate(self) -> tf.Tensor:
        """The learning rate of the next update: PlaNet's linear ramp `min(n / warmup, 1) * lr`.

        `n` counts the updates applied so far, so the first update has rate 0, as in PlaNet
        (`tools.schedule.linear(step, ramp)` with `step` = samples seen before the update).
        """
        if not self.warmup:
            return tf.constant(self.learning_rate, tf.float32)
        done = tf.cast(self.iterations, tf.float32)
        return self.learning_rate * tf.minimum(done / float(self.warmup), 1.0)

    def _bias_correction(self, t: tf.Tensor) -> tf.Tensor:
        t = tf.cast(t, tf.float32)
        return tf.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
