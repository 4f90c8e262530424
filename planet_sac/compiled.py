"""`compiled_method`: `tf.function` of one object's method, with TensorFlow's retracing count kept per object."""

from __future__ import annotations

import functools
from typing import Any, Callable

import tensorflow as tf


def compiled_method(method: Callable, **kwargs: Any) -> Callable:
    """`tf.function(method, **kwargs)` for a bound method, whose traces are counted for this object alone.

    TensorFlow keys its "triggered tf.function retracing" warning by the method's code, which every
    instance shares, so a process that builds a few learners or policies (a sweep, an evaluation of
    four policies, the test suite) was warned of excessive retracing although each traced once.
    A `functools.partial` has no code of its own: TensorFlow keys it by the partial itself.
    """
    return tf.function(functools.partial(method), **kwargs)
