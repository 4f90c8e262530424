"""A run's bookkeeping (training/run_state.py): which episodes on disk a resumed run counts as collected after its checkpoint."""

from __future__ import annotations

import pytest

from planet_sac.config_loading import apply_overrides
from planet_sac.training.run_state import Counters, RunProgress


@pytest.mark.parametrize("step, on_disk, at_checkpoint, expected", [
    (10, 6, 4, 2),  # 2 seed + 10 // 5 = 4 scheduled at the checkpoint: the 2 written after it are collections
    (10, 5, 5, 0),  # nothing written after the checkpoint
    (0, 3, 0, 1),  # seed episodes written after ckpt-0 (2 of them) are no collection: only 3 - 2 = 1 is
    (10, 7, 6, 1),  # a hand-copied episode before the checkpoint: only the one written after it
])
def test_episodes_collected_after_a_checkpoint(smoke_config, step, on_disk, at_checkpoint, expected):
    """Episodes collected after a checkpoint are those beyond both the checkpoint's count and the schedule's."""
    config = apply_overrides(smoke_config, ["data.seed_episodes=2", "schedule.collect_every=5"])
    counters = Counters()
    counters.step.assign(step)
    counters.train_episodes.assign(on_disk)
    progress = RunProgress(config, "unused", counters, None, None, None, None, None, collects=True)  # type: ignore[arg-type]
    assert progress.episodes_collected_after(at_checkpoint) == expected
