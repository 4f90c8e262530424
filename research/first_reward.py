r"""Did the policy reach the reward, or did the episode start in it? First rewarded step of every episode of a run.

On tasks whose reward is a region of the state (ball_in_cup: the ball in the cup; reacher: the fingertip in the
target) some start states already lie in the region, so an episode can score without the policy doing anything
but stay. This script reads a run's episode files (`train_episodes/` and `test_episodes/`, oldest first) and
sorts every episode with a positive return by the agent step of its first positive reward: **from the start**
(first reward within `--start-steps` actions) or **reached** (later). The run's random seed episodes
(`data.seed_episodes`, `data.test_seed_episodes`) are counted apart from the policy's. The policy's training
episodes are placed at the env step their collection ended (running sum of episode lengths times the run's action
repeat, the seed episodes included); test episodes are counted per run only (a test phase's episodes share one
env step).

Usage:
    python research/first_reward.py ~/runs/levers/dmc_vision_v2/runs/dmc_ball_in_cup_catch/seed0 [--window 10000]
"""

from __future__ import annotations

import argparse
import glob
import os

import numpy as np
import yaml


def first_rewards(paths: list[str]) -> list[tuple[int, float, int | None]]:
    """(length in actions, return, index of the first action whose reward is positive, or None) per episode file.

    An episode file's `reward[t]` is the reward that followed action `t` (`reward[0]`, before any action, is 0 in
    the episode layout); the index returned counts actions from 1.
    """
    out = []
    for path in paths:
        with np.load(path) as episode:
            reward = np.asarray(episode["reward"], np.float64)
        length = len(reward) - 1
        positive = np.flatnonzero(reward[1:] > 0)
        out.append((length, float(reward[1:].sum()), int(positive[0]) + 1 if len(positive) else None))
    return out


def classify(first: int | None, start_steps: int) -> str:
    """'none' (no reward), 'start' (first reward within `start_steps` actions) or 'reached'."""
    if first is None:
        return "none"
    return "start" if first <= start_steps else "reached"


def training_table(episodes: list[tuple[int, float, int | None]], action_repeat: int, window: int,
                   start_steps: int, skip: int = 0) -> list[dict]:
    """Per window of env steps: the episodes that ended in it and the returns of those that scored from the start
    or by reaching. The first `skip` episodes (the random seed episodes) count for the env steps but are not listed."""
    rows: dict[int, dict] = {}
    env_steps = 0
    for index, (length, ret, first) in enumerate(episodes):
        env_steps += length * action_repeat
        if index < skip:
            continue
        key = (env_steps - 1) // window
        row = rows.setdefault(key, {"from": key * window, "to": (key + 1) * window, "episodes": 0,
                                    "start": [], "reached": []})
        row["episodes"] += 1
        kind = classify(first, start_steps)
        if kind != "none":
            row[kind].append(ret)
    return [rows[key] for key in sorted(rows)]


def counts(episodes: list[tuple[int, float, int | None]], start_steps: int) -> str:
    """'N episodes, from the start K (returns), by reaching M (returns)' for a list of episodes."""
    kinds = [classify(first, start_steps) for _, _, first in episodes]
    parts = [f"{len(episodes)} episodes"]
    for kind, name in (("start", "from the start"), ("reached", "by reaching")):
        returns = ", ".join(f"{ret:.0f}" for (_, ret, _), k in zip(episodes, kinds) if k == kind)
        parts.append(f"{name} {kinds.count(kind)}" + (f" ({returns})" if returns else ""))
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories (with train_episodes/, test_episodes/, config.yaml)")
    parser.add_argument("--window", type=int, default=10_000, help="env steps per row of the training table")
    parser.add_argument("--start-steps", type=int, default=8,
                        help="a first reward within this many actions counts as 'from the start'")
    args = parser.parse_args()
    for run in args.runs:
        with open(os.path.join(run, "config.yaml")) as file:
            config = yaml.safe_load(file)
        action_repeat = int(config["env"]["action_repeat"])
        print(f"## {run}")
        train = first_rewards(sorted(glob.glob(os.path.join(run, "train_episodes", "*.npz"))))
        seeds = int(config["data"]["seed_episodes"])
        print(f"random seed episodes: {counts(train[:seeds], args.start_steps)}")
        print("| env steps | the policy's episodes | scored from the start: returns | scored by reaching: returns |")
        print("|---|---|---|---|")
        for row in training_table(train, action_repeat, args.window, args.start_steps, skip=seeds):
            start, reached = (", ".join(f"{ret:.0f}" for ret in row[kind]) for kind in ("start", "reached"))
            print(f"| {row['from'] // 1000}k-{row['to'] // 1000}k | {row['episodes']} | {len(row['start'])}: {start} "
                  f"| {len(row['reached'])}: {reached} |")
        test = first_rewards(sorted(glob.glob(os.path.join(run, "test_episodes", "*.npz"))))
        test_seeds = int(config["data"]["test_seed_episodes"])
        print(f"test, random seed episodes: {counts(test[:test_seeds], args.start_steps)}")
        print(f"test, the policy's: {counts(test[test_seeds:], args.start_steps)}\n")


if __name__ == "__main__":
    main()
