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


def test_a_resumed_run_acts_with_its_configs_policies_and_its_checkpoints_random_stream(smoke_config, tmp_path):
    """The checkpoint holds the policy's random stream (`policy/rng_state`) but not which policy acts in each phase:
    a run resumed with other `policy.train` / `policy.test` (`--force`) acts with the ones its config names now."""
    import numpy as np

    from planet_sac.config import POLICIES
    from planet_sac.training.trainer import Trainer

    logdir = str(tmp_path / "run")
    first = Trainer(apply_overrides(smoke_config, ["policy.train=random", "policy.test=cem"]), logdir, progress=False)
    first.agent.policy.rng.reset_from_seed(1234)  # a stream no fresh run starts from
    drawn = first.agent.policy.rng.state.numpy().copy()
    first.save_checkpoint()
    first.close()
    resumed = Trainer(apply_overrides(smoke_config, ["policy.train=sac", "policy.test=random"]), logdir, progress=False,
                      force=True)
    try:
        assert "policy/phase_policy" not in resumed.variables
        assert resumed.agent.policy.phase_policy.numpy().tolist() == [POLICIES.index("sac"), POLICIES.index("random")]
        np.testing.assert_array_equal(resumed.agent.policy.rng.state.numpy(), drawn)
    finally:
        resumed.close()
