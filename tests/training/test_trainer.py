"""What the Trainer itself guarantees: its loop runs the schedule's parts in order, at the schedule's steps, and a
stop signal ends it after the current step with a checkpoint."""

from __future__ import annotations

import json
import logging
import os
import re
import signal

import numpy as np
import pytest

from planet_sac.config_loading import apply_overrides
from tests.conftest import DATA

# 6 updates; a test phase every 3, an episode every 2, a record every 3, a video every 4, a checkpoint every 4.
TINY = ["schedule.train_steps=6", "schedule.train_phase_steps=3", "schedule.collect_every=2", "schedule.log_every=3",
        "schedule.video_every=4", "schedule.checkpoint_every=4", "schedule.test_episodes=1",
        "policy.train=random", "policy.test=random", "sac.updates_per_step=0"]


def spied_trainer(config, logdir, on_update=lambda step: None):
    """A Trainer (seed episodes collected) whose loop's parts append (event, step) to the returned list, with the
    step counter at the time (an update as the step it reaches); `on_update(step)` runs before each update."""
    from planet_sac.training.trainer import Trainer

    trainer = Trainer(config, logdir, progress=False)
    trainer.collect_seed_episodes()  # before the spies: seed episodes are no collection
    events: list[tuple[str, int]] = []

    def spy(owner, name: str, event, step=lambda *args, **kwargs: int(trainer.counters.step.numpy())) -> None:
        real = getattr(owner, name)

        def recorded(*args, **kwargs):
            events.append((event(*args, **kwargs) if callable(event) else event, step(*args, **kwargs)))
            return real(*args, **kwargs)

        setattr(owner, name, recorded)

    def reaching(*args) -> int:
        on_update(int(trainer.counters.step.numpy()) + 1)
        return int(trainer.counters.step.numpy()) + 1

    spy(trainer.learner, "update", "update", step=reaching)
    spy(trainer, "collect_train_episodes", "collect")
    spy(trainer.test_phases, "run", "test phase")
    spy(trainer, "log_open_loop", "video")
    spy(trainer.logger, "scalars", lambda step, values, phase, **fields: f"{phase} record", step=lambda step, *rest, **kw: step)
    spy(trainer.checkpointer, "save", "checkpoint", step=lambda step: step)
    return trainer, events


@pytest.mark.slow
def test_the_loop_follows_the_schedule_and_a_stop_signal_ends_it_after_the_current_step(smoke_config, tmp_path, caplog):
    """One Trainer, three calls of `run`:

    1. to 6, uninterrupted: the loop runs a due test phase first, then update, collect, log, video and checkpoint at
       the schedule's steps; each collection says its step, episode, collecting policy, return and env steps;
    2. to 8, with SIGTERM during the update to step 7: the step finishes, its state is logged (step 7 logs nothing by
       the schedule) and checkpointed, and the loop ends; the signal handler before the run is back afterwards;
    3. to 8 again: it trains step 8 (a signal ends the call it came in, not the Trainer)."""
    def stop_at_7(step: int) -> None:
        if step == 7:
            os.kill(os.getpid(), signal.SIGTERM)

    caplog.set_level(logging.INFO, logger="planet_sac")
    trainer, events = spied_trainer(apply_overrides(smoke_config, TINY), str(tmp_path / "run"), on_update=stop_at_7)
    try:
        trainer.run()
        assert events == [
            ("update", 1),
            ("update", 2), ("collect", 2), ("train record", 2),  # collected: its returns are logged at once
            ("update", 3), ("train record", 3),
            ("test phase", 3), ("test record", 3), ("checkpoint", 3),  # due at 3: before the next update
            ("update", 4), ("collect", 4), ("train record", 4), ("video", 4), ("train record", 4), ("checkpoint", 4),
            ("update", 5),
            ("update", 6), ("collect", 6), ("train record", 6),
            ("test phase", 6), ("test record", 6), ("checkpoint", 6),
            ("checkpoint", 6),  # the final state, always checkpointed
        ]
        collected = [message for message in caplog.messages if ": episode " in message]
        # 2 seed episodes of 50 agent steps at action repeat 2, then one episode per collection
        assert [re.sub(r"return -?\d+\.\d", "return R", message) for message in collected] == [
            f"step {step}: episode {episode} (random) return R (env steps {episode * 100})"
            for step, episode in ((2, 3), (4, 4), (6, 5))]

        events.clear()
        before = signal.getsignal(signal.SIGTERM)
        last = trainer.run(8)
        assert events == [("update", 7), ("train record", 7), ("checkpoint", 7)]
        assert last["step"] == 7 and last["phase"] == "train" and int(trainer.counters.step.numpy()) == 7
        assert signal.getsignal(signal.SIGTERM) is before
        assert trainer.stopped == (signal.SIGTERM, 7, 8)  # what `train` raises as TrainingStopped

        # 3. the same Trainer asked again goes on: the signal stopped the call it came in, not the Trainer
        events.clear()
        last = trainer.run(8)
    finally:
        trainer.close()
    assert ("update", 8) in events and last["step"] == 8 and int(trainer.counters.step.numpy()) == 8
    assert trainer.stopped is None


def test_a_stop_signal_during_the_last_update_leaves_a_finished_run(smoke_config, tmp_path):
    """A run that reaches its target in the step the signal came in is finished, not stopped: `stopped` stays None,
    so `train` returns and the suite goes on to the final evaluation instead of reporting a stop. Its target is its
    first update: one update is all the case needs."""
    config = apply_overrides(smoke_config, TINY)

    def stop_at_the_end(step: int) -> None:
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    trainer, events = spied_trainer(config, str(tmp_path / "run"), on_update=stop_at_the_end)
    try:
        trainer.run(1)
    finally:
        trainer.close()
    assert events[0] == ("update", 1)  # the signal came during the run's last update
    assert int(trainer.counters.step.numpy()) == 1 and trainer.stopped is None


def test_close_closes_the_environments_and_releases_the_lock_once(smoke_config, tmp_path):
    """After seed episodes (which make the training batch and the test environment), `close()` closes each of them
    once, empties the lock record, and a second `close()` closes nothing again."""
    from planet_sac.training.run_lock import LOCK_FILE
    from planet_sac.training.trainer import Trainer

    trainer = Trainer(smoke_config, str(tmp_path / "run"), progress=False)
    trainer.collect_seed_episodes()
    made = trainer.envs.made()
    assert len(made) == 2  # the training batch and the test environment
    closed: list[object] = []
    for env in made:
        real = env.close
        env.close = lambda real=real, env=env: (closed.append(env), real())[1]
    trainer.close()
    assert closed == made
    assert (tmp_path / "run" / LOCK_FILE).read_text() == ""
    trainer.close()
    assert closed == made


@pytest.mark.slow
def test_training_a_finished_run_again_returns_what_its_last_call_returned(smoke_run_copy, smoke_config, tmp_path):
    """A script run twice (README): the second `train` trains nothing and returns what the first returned (the final
    test phase's record here, as metrics.jsonl holds it), not the open-loop video's record, the run's last of the
    train phase. The first call is the session's smoke run (conftest.smoke_run, 20 updates, a video every 10)."""
    import json

    from planet_sac.training.run_dir import resolve_run_config
    from planet_sac.training.trainer import train

    records = [json.loads(line) for line in open(os.path.join(smoke_run_copy, "metrics.jsonl"))]
    last_train = [record for record in records if record["phase"] == "train"][-1]
    assert "model/open_loop_mse" in last_train and last_train["step"] == 20  # logged after the update's record
    final_test = [record for record in records if record["phase"] == "test"][-1]
    again = train(resolve_run_config(smoke_run_copy), smoke_run_copy, progress=False)
    assert again == final_test and again["step"] == 20 and "test/return" in again
    # offline (no test phases), as README's snippet trains: its last update's record, with the losses
    offline = apply_overrides(smoke_config, ["env.action_repeat=1", "sac.updates_per_step=0"])  # the head unread
    first = train(offline, str(tmp_path / "offline"), offline_data=str(DATA / "pendulum_state"), train_steps=10,
                  progress=False)
    again = train(offline, str(tmp_path / "offline"), offline_data=str(DATA / "pendulum_state"), train_steps=10,
                  progress=False)
    assert again == first and "loss/total" in again and again["step"] == 10


@pytest.mark.parametrize("logdir", ["", "  "])
def test_an_empty_logdir_is_refused_before_anything_is_written(logdir, smoke_config, tmp_path, monkeypatch):
    """The Python API's twin of `--logdir ''`: "" would put the run's files at the file system's root."""
    from planet_sac.acting.collector import collect_random
    from planet_sac.config import ConfigError
    from planet_sac.training.trainer import train

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"logdir {logdir!r} is empty"):
        train(smoke_config, logdir)
    with pytest.raises(ConfigError, match=f"episode folder {logdir!r} is empty; give a folder"):
        collect_random(logdir, 1, "gym:Pendulum-v1", "state")
    assert os.listdir(tmp_path) == [] and not os.path.exists("/config.yaml")


def test_the_python_api_takes_paths_and_refuses_wrong_types_before_writing(tmp_path):
    """train(Path(...)) raised AttributeError though the docstring names paths; train_steps="3" failed after the run
    directory, its seed episodes and ckpt-0 were written; train_steps=-5 left a run directory behind."""
    from pathlib import Path

    from planet_sac.acting.evaluation import evaluate
    from planet_sac.config import ConfigError
    from planet_sac.training.trainer import train
    from tests.conftest import CONFIGS

    smoke = Path(CONFIGS / "smoke.yaml")
    for config, steps, words in ((smoke, "3", "train_steps='3': a number of updates >= 0"),
                                 (smoke, -5, "train_steps=-5: a number of updates >= 0"),
                                 ({"env": {"task": "gym:Pendulum-v1"}}, 0, "config is a dict: pass a Config"),
                                 (None, 0, "config is a NoneType")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            train(config, tmp_path / "run", train_steps=steps)
    assert os.listdir(tmp_path) == []
    last = train(smoke, tmp_path / "run", train_steps=0, progress=False)
    assert last["step"] == 0 and (tmp_path / "run" / "config.yaml").exists()
    with pytest.raises(ConfigError, match="episodes=0: evaluate at least 1 episode"):
        evaluate(tmp_path / "run", 0, "random")
    assert evaluate(tmp_path / "run", 1, "random")["step"] == 0


def test_the_sac_head_starts_over_after_every_reset_every_updates_then_trains_its_rounds(smoke_config, tmp_path, caplog):
    """sac.reset_every=3, sac.reset_rounds=2: after update 3 (not 1 or 2) the head is the one a head built with the
    reset's seed starts as, when its first round begins; the two rounds (one SAC update each) are then all its
    optimizers have taken, while the world model keeps its three updates; the record at 3 holds the last round's
    metrics, and the log says so."""
    from planet_sac.control.sac import SAC, reset_seed
    from planet_sac.training.trainer import Trainer

    config = apply_overrides(smoke_config, [*TINY[:-1], "sac.updates_per_step=1", "sac.reset_every=3",
                                            "sac.reset_rounds=2"])
    caplog.set_level(logging.INFO, logger="planet_sac")
    trainer = Trainer(config, str(tmp_path / "run"), progress=False)
    try:
        sac = trainer.agent.sac
        fresh = SAC(config.sac, trainer.agent.world_model.rssm.feature_size, sac.action_size,
                    seed=reset_seed(config.seed, 3))
        rounds: list[tuple[int, list]] = []
        catch_up = trainer.learner.catch_up

        def first_weights_of_each_round(batch):
            rounds.append((int(trainer.counters.step.numpy()), [v.numpy().copy() for v in sac.trainable_variables]))
            return catch_up(batch)

        trainer.learner.catch_up = first_weights_of_each_round
        trainer.run(2)
        assert int(sac.critic_optimizer.iterations.numpy()) == 2 and not rounds
        last = trainer.run(3)
    finally:
        trainer.close()
    assert [step for step, _ in rounds] == [3, 3]
    for mine, theirs in zip(rounds[0][1], fresh.trainable_variables):
        np.testing.assert_array_equal(mine, theirs.numpy())
    assert not np.array_equal(rounds[1][1][0], rounds[0][1][0])  # the first round trained it
    for optimizer in (sac.actor_optimizer, sac.critic_optimizer, sac.alpha_optimizer):
        assert int(optimizer.iterations.numpy()) == 2  # the two rounds since the reset
    assert int(trainer.learner.optimizer.iterations.numpy()) == 3  # the world model was not reset
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records if "reset/sac/q" in record] == [3]
    assert last["step"] == 3 and last["phase"] == "test"  # the test phase at 3 came after the reset and its rounds
    assert "step 3: the SAC head starts over (sac.reset_every=3), then 2 rounds on the frozen model" in caplog.messages
