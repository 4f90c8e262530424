"""The schedule (training/schedule.py): Every's predicates, the phase and the log window, against hand-made schedules."""

from __future__ import annotations

import pytest

from planet_sac.config_loading import apply_overrides
from planet_sac.training import schedule
from planet_sac.training.schedule import Every, LogWindow, phase


@pytest.fixture
def config(smoke_config):
    """Two environments, an episode each every 5 updates per environment, and the other parts at their own steps."""
    return apply_overrides(smoke_config, ["env.num_envs=2", "schedule.collect_every=5", "schedule.log_every=3",
                                          "schedule.video_every=4", "schedule.checkpoint_every=7",
                                          "schedule.train_steps=20"])


def test_every_runs_each_part_of_the_loop_at_its_steps(config):
    when = Every.of(config, collects=True)
    assert when == Every(total=20, collect_every=10, log_every=3, video_every=4, checkpoint_every=7)
    steps = range(1, 21)
    assert [step for step in steps if when.collect(step)] == [10, 20]  # 2 envs x 5: the updates per env step kept
    assert [when.collection(step) for step in (10, 20)] == [0, 1]
    assert [step for step in steps if when.log(step)] == [3, 6, 9, 12, 15, 18]
    assert [step for step in steps if when.log(step, collected=when.collect(step))] == [3, 6, 9, 10, 12, 15, 18, 20]
    assert [step for step in steps if when.video(step)] == [4, 8, 12, 16, 20]
    assert [step for step in steps if when.checkpoint(step)] == [7, 14]
    assert [step for step in (0, 19, 20, 21) if when.done(step)] == [20, 21]
    assert Every.of(config, collects=True, train_steps=3).total == 3


def test_a_run_that_does_not_collect_checkpoints_as_often_as_it_would_collect(config):
    """Collectors in other processes follow its checkpoints: every min(checkpoint_every 7, collect_every 5) = 5."""
    when = Every.of(config, collects=False)
    assert when.collect_every == 0 and when.checkpoint_every == 5
    assert [step for step in range(1, 21) if when.collect(step)] == []
    assert [step for step in range(1, 21) if when.checkpoint(step)] == [5, 10, 15, 20]


def test_a_test_phase_is_due_when_the_steps_have_had_more_than_the_run_has_run(smoke_config):
    """First at update 5, then every 10: due at 5, 15, 25; each until it has run."""
    config = apply_overrides(smoke_config, ["schedule.train_phase_steps=10", "schedule.first_test_phase=5",
                                            "schedule.test_episodes=1"])
    # (step, test phases run so far) -> the phase, by hand
    expected = {(0, 0): "train", (4, 0): "train", (5, 0): "test", (5, 1): "train", (14, 1): "train", (15, 1): "test",
                (15, 2): "train", (25, 2): "test", (25, 0): "test"}
    assert {key: phase(config, True, *key) for key in expected} == expected
    assert {phase(config, False, *key) for key in expected} == {"train"}  # offline: no test phases
    no_tests = apply_overrides(config, ["schedule.test_episodes=0"])
    assert {phase(no_tests, True, *key) for key in expected} == {"train"}


def test_the_log_window_reports_the_time_since_its_last_record(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(schedule.time, "perf_counter", lambda: now[0])
    window = LogWindow()
    now[0] = 101.0
    window.updated(since=100.0)  # a 1 s update
    now[0] = 103.0
    window.updated(since=101.0)  # a 2 s update
    now[0] = 104.0
    window.collected(since=103.0)  # 1 s of collection
    assert window.close() == {"train/steps_per_second": 2 / 4, "time/update_seconds": 3 / 2, "time/collect_seconds": 1.0}
    now[0] = 106.0  # a new window from 104: nothing happened in it
    assert window.close() == {"train/steps_per_second": 0.0, "time/update_seconds": 0.0, "time/collect_seconds": 0.0}
    now[0] = 106.5
    window.updated(since=106.0)  # a window of one 0.5 s update: its own time, not shared with an absent second
    now[0] = 108.0
    assert window.close() == {"train/steps_per_second": 1 / 2, "time/update_seconds": 0.5, "time/collect_seconds": 0.0}


def test_the_checkpoint_clock_is_due_minutes_after_the_last_checkpoint(monkeypatch):
    """Dreamer's `run.save_every`: due once `minutes` have passed since the last save of any kind, not before, and
    again only `minutes` after that save; None never."""
    now = [1000.0]
    monkeypatch.setattr(schedule, "monotonic", lambda: now[0])
    clock = schedule.CheckpointClock(2.5)  # 150 s
    now[0] = 1149.9
    assert not clock.due()
    now[0] = 1150.0
    assert clock.due() and clock.elapsed_minutes() == pytest.approx(2.5)
    now[0] = 1200.0
    clock.saved()  # the checkpoint it asked for (or a scheduled one) restarts the wait
    now[0] = 1349.0
    assert not clock.due()
    now[0] = 1350.0
    assert clock.due()
    never = schedule.CheckpointClock(None)
    now[0] = 1e9
    assert not never.due()
