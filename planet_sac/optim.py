"""Adam with named slots, and global-norm clipping.

A small Adam (the TF1/PlaNet form, epsilon added to sqrt(v)) instead of a Keras optimizer,
for two reasons: its slot variables get stable names (`optimizer/<owner>/m/<variable name>`)
that filtered restore can select, and its update behaves identically in eager and graph mode.
Each variable takes its step in TensorFlow's fused kernel (`ResourceApplyAdam`, TF1's own):
one op per variable instead of ten, so an update's graph traces faster (its run time is level,
docs/performance.md).
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
        self.strategy = tf.distribute.get_strategy()  # the one the variables were made under (each has copies there)
        with tf.name_scope("optimizer/" + name + "/"):
            self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations")
            self.m = [tf.Variable(tf.zeros_like(v), trainable=False, name="m/" + variable_name(v)) for v in self.variables_]
            self.v = [tf.Variable(tf.zeros_like(v), trainable=False, name="v/" + variable_name(v)) for v in self.variables_]

    def apply(self, grads: Sequence[tf.Tensor], norm: tf.Tensor | None = None) -> tf.Tensor:
        """Clips by global norm (if set) and applies one Adam step; returns the pre-clip norm.

        :param norm: `tf.linalg.global_norm(grads)`, when the caller has it already (a finite check); computed if None.
        """
        if norm is None:
            norm = tf.linalg.global_norm(grads)
        if self.clip:
            grads, _ = tf.clip_by_global_norm(grads, self.clip, use_norm=norm)
        t = tf.cast(self.iterations + 1, tf.float32)
        rate, beta1_power, beta2_power = self.current_learning_rate(), self.beta1 ** t, self.beta2 ** t
        self.iterations.assign_add(1)
        beta1, beta2, epsilon = (tf.constant(value, tf.float32) for value in (self.beta1, self.beta2, self.epsilon))

        def fused_step(var: tf.Variable, m: tf.Variable, v: tf.Variable, grad: tf.Tensor) -> tf.Operation:
            return tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=beta1_power,
                                                beta2_power=beta2_power, lr=rate, beta1=beta1, beta2=beta2,
                                                epsilon=epsilon, grad=grad)

        local = self.strategy.experimental_local_results  # a variable's copies: one per replica, one without a strategy
        for var, m, v, grad in zip(self.variables_, self.m, self.v, grads):
            # every replica's copy of the variable takes the step with its own slots
            for var_copy, m_copy, v_copy in zip(local(var), local(m), local(v)):
                with tf.device(var_copy.device):
                    fused_step(var_copy, m_copy, v_copy, grad)
        return norm

    def reset(self) -> None:
        """Forgets every step taken: the step count and both moment estimates back to zero, as a new Adam starts."""
        self.iterations.assign(0)
        for slot in (*self.m, *self.v):
            slot.assign(tf.zeros_like(slot))

    def current_learning_rate(self) -> tf.Tensor:
        """The learning rate of the next update: PlaNet's linear ramp `min(n / warmup, 1) * lr`.

        `n` counts the updates applied so far, so the first update has rate 0, as in PlaNet
        (`tools.schedule.linear(step, ramp)` with `step` = samples seen before the update).
        """
        if not self.warmup:
            return tf.constant(self.learning_rate, tf.float32)
        done = tf.cast(self.iterations, tf.float32)
        return self.learning_rate * tf.minimum(done / float(self.warmup), 1.0)
