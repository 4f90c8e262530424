"""When each part of the training loop runs, and with which policy: pure functions of the checkpointed counters.

A run's schedule is a function of its global step (the updates so far) and of the test phases it has run,
both checkpointed, so a resumed run keeps the schedule of the never-stopped one. `Every` answers for the
training loop's parts, `phase` whether a test phase is due, `collecting_policy` which policy collects a batch
of training episodes, `evenly_spread` which collections a share of them takes. `CheckpointClock` adds checkpoints
by the wall clock (they change nothing a run computes); `LogWindow` times the updates between two training records.
"""

from __future__ import annotations

import dataclasses
import math
import time
from time import monotonic

from planet_sac.acting.actor import TEST, TRAIN
from planet_sac.config import Config, PolicyConfig

SAC_ACTING = ("sac", "sac_guided_cem")
"""Training policies that act with the SAC head: the head catches up before each episode they collect."""


@dataclasses.dataclass(frozen=True)
class Every:
    """When each part of the training loop runs, as predicates of the global step (Dreamer's `Every`/`when`).

    Pure functions of the step, so a resumed run keeps the same schedule. `collect_every` is 0
    when the trainer does not collect (offline data, or `schedule.collect: false`).
    """

    total: int
    collect_every: int
    log_every: int
    video_every: int
    checkpoint_every: int

    @classmethod
    def of(cls, config: Config, collects: bool, train_steps: int | None = None) -> Every:
        schedule = config.schedule
        # With N environments, N episodes every N * collect_every updates: the same updates per environment step.
        collect_every = schedule.collect_every * config.env.num_envs if collects else 0
        # Collectors in other processes reload the newest checkpoint: give them one as often as we would collect.
        checkpoint_every = schedule.checkpoint_every if collects else min(schedule.checkpoint_every, schedule.collect_every)
        return cls(total=schedule.train_steps if train_steps is None else train_steps, collect_every=collect_every,
                   log_every=schedule.log_every, video_every=schedule.video_every, checkpoint_every=checkpoint_every)

    def done(self, step: int) -> bool:
        return step >= self.total

    def collect(self, step: int) -> bool:
        return self.collect_every > 0 and step % self.collect_every == 0

    def collection(self, step: int) -> int:
        """Which collection a collecting `step` is: 0 for the first after the seed episodes."""
        return step // self.collect_every - 1

    def log(self, step: int, collected: bool = False) -> bool:
        """Every `log_every` updates, and after every collection (its returns are logged at once)."""
        return step % self.log_every == 0 or collected

    def video(self, step: int) -> bool:
        return step % self.video_every == 0

    def checkpoint(self, step: int) -> bool:
        return step % self.checkpoint_every == 0


def phase(config: Config, tests: bool, step: int, test_phases: int) -> str:
    """`test` when a train phase has just been completed and not yet evaluated, else `train`.

    Due means `schedule.test_phases_due(step)` exceeds the `test_phases` run so far. A run without test
    phases (`tests` false, as for offline data, or `schedule.test_episodes: 0`) is always in `train`.
    """
    if not tests or config.schedule.test_episodes == 0:
        return TRAIN
    return TEST if config.schedule.test_phases_due(step) > test_phases else TRAIN


def collecting_policy(policy: PolicyConfig, collection: int) -> str:
    """The policy that collects the `collection`-th batch of training episodes (0 = the first after the seed episodes).

    `policy.train`, except for a `policy.sac_share` of the collections, spread evenly (0.5: the 2nd, 4th, ...),
    which the SAC head collects: an off-policy head that only learns from another policy's episodes never sees
    where its own actions lead, and fails in the states they lead to (research/pendulum_head/README.md).
    """
    return "sac" if evenly_spread(policy.sac_share, collection) else policy.train


def evenly_spread(share: float, index: int) -> bool:
    """Whether item `index` (from 0) is one of a `share` of items spread evenly: floor((index + 1) share) >
    floor(index share), so 0.5 picks the 2nd, 4th, ..., 1/3 the 3rd, 6th, ..., 1 every one and 0 none."""
    return share > 0 and math.floor((index + 1) * share + 1e-9) > math.floor(index * share + 1e-9)


class CheckpointClock:
    """Checkpoints by the wall clock between the scheduled ones (`schedule.checkpoint_minutes`, as Dreamer saves every
    `run.save_every` seconds), so that a kill loses minutes, not up to `schedule.checkpoint_every` updates.

    `due()` once `minutes` have passed since `saved()` was last called (or since construction); never with `minutes`
    None. The steps it picks depend on the machine's speed, what the run computes does not: a checkpoint writes no
    record and draws from no random stream, and a run resumed from any step goes on as the never-stopped one.
    """

    def __init__(self, minutes: float | None) -> None:
        self.minutes = minutes
        self.saved()

    def saved(self) -> None:
        """A checkpoint was just written (by the clock, the schedule, a test phase or anything else)."""
        self.last = monotonic()

    def due(self) -> bool:
        return self.minutes is not None and monotonic() - self.last >= 60.0 * self.minutes

    def elapsed_minutes(self) -> float:
        return (monotonic() - self.last) / 60.0


class LogWindow:
    """The wall-clock of the updates since the last training record: speed, and where the time went."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.start, self.updates, self.update_seconds, self.collect_seconds = time.perf_counter(), 0, 0.0, 0.0

    def updated(self, since: float) -> None:
        """One learner update (its batch wait included) that began at perf_counter() `since`."""
        self.updates += 1
        self.update_seconds += time.perf_counter() - since

    def collected(self, since: float) -> None:
        """Training episodes collected (the SAC head's catch-up included) since perf_counter() `since`."""
        self.collect_seconds += time.perf_counter() - since

    def close(self) -> dict[str, float]:
        """The window's scalars; a new window starts."""
        values = {"train/steps_per_second": self.updates / max(time.perf_counter() - self.start, 1e-9),
                  "time/update_seconds": self.update_seconds / max(self.updates, 1),
                  "time/collect_seconds": self.collect_seconds}
        self._reset()
        return values
