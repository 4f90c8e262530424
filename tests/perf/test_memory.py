"""Memory that must not grow with the length of a run: TensorFlow's cache of converted Python numbers."""

from __future__ import annotations

import os

import numpy as np
import pytest

from planet_sac.training.logger import Logger, untracked


def rss_mb() -> float:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.slow
def test_logging_new_values_does_not_keep_memory(tmp_path):
    """8,000 new scalar values through `Logger.scalars` (as 200 log records of a run).

    TensorFlow keeps the tensor of every Python float it converts, for good: handed Python floats, these
    records kept about 6 MB (0.8 KB per value, measured with `tf.summary.scalar(key, float(value))`),
    the soak's linear growth. Handed numpy values, nothing stays.
    """
    logger = Logger(str(tmp_path))
    rng = np.random.default_rng(0)

    def log(first: int, records: int) -> None:
        for step in range(first, first + records):
            logger.scalars(step, {f"loss/{index}": float(value) for index, value in enumerate(rng.normal(size=40))})

    log(0, 20)  # file writer, summary ops and the allocator's first pages
    before = rss_mb()
    log(20, 200)
    assert rss_mb() - before < 3.0
    logger.close()


def test_untracked_is_a_numpy_value_of_the_dtype():
    value = untracked(3.25)
    assert isinstance(value, np.ndarray) and value.dtype == np.float32 and value.shape == () and value == 3.25
    step = untracked(10**12, np.int64)
    assert step.dtype == np.int64 and int(step) == 10**12
