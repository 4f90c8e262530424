"""A run's bookkeeping (training/run_state.py): which episodes on disk a resumed run counts as collected after its checkpoint."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from planet_sac.config import POLICIES
from planet_sac.config_loading import apply_overrides
from planet_sac.episodes.folder import EpisodeFolder, list_episodes
from planet_sac.episodes.storage import EpisodeSpec
from planet_sac.training.run_state import Counters, RunProgress, RunState
from planet_sac.training.trainer import Trainer
from tests.conftest import DATA


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


def test_a_replay_without_a_checkpointed_state_is_seeded_by_the_seed_plus_the_step(smoke_config, tmp_path):
    """A checkpoint without the replay's state (from before exact resume) resumes with a replay seeded `seed` + its
    step: at step 7 it draws the chunks a run of seed + 7 draws at its start, not those its own start drew again."""
    folder = tmp_path / "train_episodes"
    folder.mkdir()
    for path in list_episodes(str(DATA / "pendulum_state")):
        shutil.copy(path, folder)
    spec = EpisodeSpec(obs=(("state", (3,), "float32"),), action_dim=1)

    def first_batch(seed: int, step: int) -> np.ndarray:
        counters = Counters()
        counters.step.assign(step)
        config = apply_overrides(smoke_config, [f"seed={seed}"])
        progress = RunProgress(config, "unused", counters, RunState(), None, None, EpisodeFolder(str(folder)), None,  # type: ignore[arg-type]
                               collects=True)
        dataset, _ = progress.train_replay(4, spec)
        return next(iter(dataset))["state"].numpy()

    resumed = first_batch(seed=3, step=7)
    np.testing.assert_array_equal(resumed, first_batch(seed=10, step=0))
    assert not np.array_equal(resumed, first_batch(seed=3, step=0))
