r"""How high does a policy swing the ball on ball_in_cup-catch? Ball height against the cup, read from the pixels.

A catch needs the ball swung above the cup's rim first; an episode that never lifts the ball there cannot catch it
by reaching (research/first_reward.py tells catches by reaching from start states). dm_control's state is not in
the episode files, so this script finds the ball and the cup in each 64x64 frame by colour: the ball is orange
(green below 0.62 of red), the cup tan (green above 0.68 of red), both brighter than the blue background
(red above 150). Per frame it takes the ball's centre row and the cup's top and bottom rows; the ball is **over
the rim** when its centre row is above the cup's top row (smaller row index) and its height is the cup's bottom
row minus the ball's centre row, in pixels (the string is 30-ish pixels long at 64x64). Frames where the ball is
hidden (in the cup, behind it) or the cup is not found count as not over the rim and give no height.

The first `--skip` frames of every episode (8) are left out: they show the start state, not the policy's swing.
Per run: the share of frames over the rim and the highest ball, by window of env steps for the policy's training
episodes (random seed episodes apart), and for the test episodes.

Usage:
    python research/cup_swing.py ~/runs/levers/dmc_vision_v2/runs/dmc_ball_in_cup_catch/seed0 [--window 10000]
"""

from __future__ import annotations

import argparse
import glob
import os

import numpy as np
import yaml


def ball_and_cup(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame of `frames` (T, H, W, 3) uint8: the ball's centre row, the cup's top row and its bottom row
    (float, NaN where not found; rows count from the top of the image)."""
    rgb = frames.astype(np.float32)
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    bright = (red > 150) & (blue < 150)
    ratio = green / np.maximum(red, 1.0)
    ball = bright & (ratio < 0.62)
    cup = bright & (ratio > 0.68)
    rows = np.arange(frames.shape[1], dtype=np.float32)[None, :, None]
    ball_count = ball.sum(axis=(1, 2))
    ball_row = np.where(ball_count > 0, (ball * rows).sum(axis=(1, 2)) / np.maximum(ball_count, 1), np.nan)
    cup_rows = cup.any(axis=2)  # (T, H): rows holding a cup pixel
    found = cup_rows.any(axis=1)
    top = np.where(found, np.argmax(cup_rows, axis=1), np.nan)
    bottom = np.where(found, frames.shape[1] - 1 - np.argmax(cup_rows[:, ::-1], axis=1), np.nan)
    return ball_row, top.astype(np.float64), bottom.astype(np.float64)


def swing(frames: np.ndarray, skip: int = 0) -> tuple[float, float]:
    """(share of frames with the ball over the rim, highest ball above the cup's bottom in pixels or NaN), over the
    frames after the first `skip` (the start state's, not the policy's)."""
    ball_row, top, bottom = ball_and_cup(frames[skip:])
    with np.errstate(invalid="ignore"):
        over = ball_row < top
    height = bottom - ball_row
    return float(over.mean()), float(np.nanmax(height)) if np.isfinite(height).any() else float("nan")


def episode_swings(paths: list[str], skip: int = 0) -> list[tuple[int, float, float, float]]:
    """(length in actions, return, share over the rim, highest ball) per episode file, frames after the first
    `skip`."""
    out = []
    for path in paths:
        with np.load(path) as episode:
            frames, reward = episode["image"], np.asarray(episode["reward"], np.float64)
        share, highest = swing(frames, skip)
        out.append((len(reward) - 1, float(reward[1:].sum()), share, highest))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories (with train_episodes/, test_episodes/, config.yaml)")
    parser.add_argument("--window", type=int, default=10_000, help="env steps per row of the training table")
    parser.add_argument("--skip", type=int, default=8,
                        help="frames at an episode's start left out (the start state's, not the policy's)")
    args = parser.parse_args()
    for run in args.runs:
        with open(os.path.join(run, "config.yaml")) as file:
            config = yaml.safe_load(file)
        action_repeat = int(config["env"]["action_repeat"])
        print(f"## {run}")
        train = episode_swings(sorted(glob.glob(os.path.join(run, "train_episodes", "*.npz"))), args.skip)
        seeds = int(config["data"]["seed_episodes"])
        print("| env steps | episodes | frames over the rim | episodes with the ball over the rim | highest ball (px) |")
        print("|---|---|---|---|---|")
        groups: dict[int, list] = {}
        env_steps = 0
        for index, episode in enumerate(train):
            env_steps += episode[0] * action_repeat
            key = -1 if index < seeds else (env_steps - 1) // args.window
            groups.setdefault(key, []).append(episode)
        for key in sorted(groups):
            rows = groups[key]
            label = "random seed episodes" if key < 0 else f"{key * args.window // 1000}k-{(key + 1) * args.window // 1000}k"
            shares = np.array([row[2] for row in rows])
            print(f"| {label} | {len(rows)} | {shares.mean():.2%} | {int((shares > 0).sum())} "
                  f"| {np.nanmax([row[3] for row in rows]):.0f} |")
        test = episode_swings(sorted(glob.glob(os.path.join(run, "test_episodes", "*.npz"))), args.skip)
        test_seeds = int(config["data"]["test_seed_episodes"])
        policy = test[test_seeds:]
        if policy:
            shares = np.array([row[2] for row in policy])
            print(f"test, the policy's {len(policy)} episodes: frames over the rim {shares.mean():.2%}, "
                  f"episodes with the ball over it {int((shares > 0).sum())}, "
                  f"highest ball {np.nanmax([row[3] for row in policy]):.0f} px\n")


if __name__ == "__main__":
    main()
