r"""Do a run's episodes ever hold the rewarded pose? The share of each episode's steps paying at least a threshold.

On walker-stand an upright walker at full height pays 1 per env step, 2 per agent step at an action repeat of 2;
a walker that sits pays about 0.5 per agent step. Whether the training data ever hold a standing walker (and for
how long) decides whether a head trained on them can learn to stand. This script reads the episode files of the
folders given (`train_episodes/` of a run, oldest first) and prints, per folder, the number of episodes, the
largest and the mean share of an episode's agent steps whose reward is at least `--threshold`, how many episodes
spend more than `--share` of their steps there, and the mean return of the last 10.

Usage:
    python research/reward_share.py ~/runs/levers/nonoise_v4/runs/dmc_walker_stand/seed0/train_episodes \
        [--threshold 1.6] [--share 0.2] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np


def reward_shares(paths: list[str], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(share of agent steps with reward >= `threshold`, return) per episode file.

    An episode file's `reward[t]` is the reward that followed action `t`; `reward[0]`, before any action, is 0 in
    files this library writes and is counted as a step that did not pay (so a share is over T + 1 entries).
    """
    shares, returns = [], []
    for path in paths:
        with np.load(path) as episode:
            reward = np.asarray(episode["reward"], np.float64)
        shares.append(float(np.mean(reward >= threshold)))
        returns.append(float(reward.sum()))
    return np.array(shares), np.array(returns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="episode folders (e.g. RUN/train_episodes)")
    parser.add_argument("--threshold", type=float, default=1.6, help="reward per agent step that counts as paying")
    parser.add_argument("--share", type=float, default=0.2, help="count the episodes above this share of steps")
    parser.add_argument("--json", help="also write the figures per folder here")
    args = parser.parse_args()
    report = {}
    for folder in args.folders:
        paths = sorted(glob.glob(os.path.join(folder, "*.npz")))
        if not paths:
            raise SystemExit(f"{folder}: no episode files (*.npz)")
        shares, returns = reward_shares(paths, args.threshold)
        report[folder] = {"episodes": len(paths), "max_share": float(shares.max()), "mean_share": float(shares.mean()),
                          "episodes_above_share": int((shares > args.share).sum()),
                          "last10_mean_return": float(returns[-10:].mean())}
        print(f"{folder}: {len(paths)} episodes; share of steps paying >= {args.threshold}: max {shares.max():.3f}, "
              f"mean {shares.mean():.3f}; episodes above {args.share:.0%} of steps: "
              f"{report[folder]['episodes_above_share']}; last 10 returns {returns[-10:].mean():.1f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report, file, indent=1)


if __name__ == "__main__":
    main()
