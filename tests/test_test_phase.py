"""The test phase: every policy in `policy.compare` is evaluated on the same model and logged by name."""

from __future__ import annotations

import json
import os

import pytest

from planet_sac.config import ConfigError, apply_overrides
from planet_sac.training import trainer as trainer_module


@pytest.fixture
def compare_config(smoke_config):
    return apply_overrides(smoke_config, ["schedule.train_steps=10", "schedule.train_phase_steps=10",
                                          "policy.test=cem", "policy.compare=[random, sac, cem]"])


def test_each_compared_policy_acts_and_is_logged_by_name(compare_config, tmp_path, monkeypatch):
    from planet_sac.config import POLICIES
    from planet_sac.training.trainer import Trainer

    trainer = Trainer(compare_config, str(tmp_path / "run"), progress=False)
    acting = []  # the policy the compiled test-phase branch points at while each test-phase actor runs

    class SpyActor(trainer_module.Actor):
        def run(self, num_episodes, progress=False):
            if self.phase == "test":
                acting.append(POLICIES[int(trainer.agent.policy.phase_policy.numpy()[1])])
            return super().run(num_episodes, progress)

    monkeypatch.setattr(trainer_module, "Actor", SpyActor)
    try:
        trainer.run()
    finally:
        trainer.close()
    # The test policy's (saved) episodes first, then the compared ones in order.
    assert acting[-3:] == ["cem", "random", "sac"]
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    (test,) = [r for r in records if r.get("phase") == "test"]
    assert {"test/return/cem", "test/return/random", "test/return/sac"} <= test.keys()
    assert test["test/return"] == test["test/return/cem"]
    assert int(trainer.agent.policy.phase_policy.numpy()[1]) == POLICIES.index("cem")  # restored afterwards
    # Only the test policy's episode is saved (1 seed episode + 1 test episode).
    assert len(os.listdir(tmp_path / "run" / "test_episodes")) == 2


@pytest.mark.parametrize("value, message", [("sac", "must be a list"), ("[sac, bogus]", "not allowed"),
                                            ("[sac, sac]", "twice")])
def test_compare_list_is_validated(smoke_config, value, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(smoke_config, [f"policy.compare={value}"])
