r"""Where does reacher's head take the arm: towards the target, and far enough to touch it?

Reacher-easy scores while the fingertip is within the target. This script reads a run's episodes (frames alone, so
any policy's episode folder will do) and finds, by colour, the target (red > 150 and green < 140 in uint8) in the
first frame and the arm (its yellow links and pale cyan fingertip) in every 5th frame, both as seen from the
image's centre (the arm's shoulder). Per episode: the target's direction (degrees) and distance (pixels), and over
the episode's last 50 frames the direction of the arm's farthest pixel and its distance, the arm's reach (about 24
pixels stretched out, 12 folded back on itself), and its reach in the first frame. By distance of the target, it prints the episodes, their mean
return, how many ended pointing at the target (within 10 degrees) and how many scored over 100.

Usage:
    python research/reacher_reach.py ~/runs/levers/fw10_v2/runs/dmc_reacher_easy/seed0/test_episodes [more] \
        [--bins 10 14] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

CENTRE = 32.0  # the shoulder of reacher's arm, in the 64 x 64 frame


def target_mask(images: np.ndarray) -> np.ndarray:
    """[..., H, W] bool: reacher's red target."""
    return (images[..., 0] > 150) & (images[..., 1] < 140)


def arm_mask(images: np.ndarray) -> np.ndarray:
    """[..., H, W] bool: reacher's yellow arm (green above blue by more than 40: not the target's pink highlight)
    and its pale cyan fingertip."""
    red, green, blue = (images[..., channel].astype(np.int32) for channel in range(3))
    return ((red > 180) & (green > 160) & (green - blue > 40)) | ((green > 200) & (blue > 200))


def polar(rows: np.ndarray, columns: np.ndarray) -> tuple[float, float]:
    """(direction in degrees, counter-clockwise from the right, distance in pixels) of pixel (row, column) from the centre."""
    dy, dx = CENTRE - rows, columns - CENTRE
    return float(np.degrees(np.arctan2(dy, dx))), float(np.hypot(dy, dx))


def episode_reach(images: np.ndarray, rewards: np.ndarray, tail: int = 50, every: int = 5) -> dict | None:
    """The target's place and where the arm ends, for one episode's [T, H, W, 3] uint8 frames; None without a
    target in the first frame."""
    rows, columns = np.nonzero(target_mask(images[0]))
    if len(rows) < 4:
        return None
    target_direction, target_distance = polar(rows.mean(), columns.mean())
    tips = []
    for frame in [images[0], *images[max(0, len(images) - tail)::every]]:
        rows, columns = np.nonzero(arm_mask(frame))
        if len(rows):
            far = np.argmax((rows - CENTRE) ** 2 + (columns - CENTRE) ** 2)
            tips.append(polar(rows[far], columns[far]))
    if len(tips) < 2:
        return None
    start, tips = tips[0], tips[1:]
    directions = np.radians([direction for direction, _ in tips])
    tip_direction = float(np.degrees(np.arctan2(np.sin(directions).mean(), np.cos(directions).mean())))
    off = (tip_direction - target_direction + 180.0) % 360.0 - 180.0
    return {"target_direction": round(target_direction, 1), "target_distance": round(target_distance, 2),
            "tip_direction": round(tip_direction, 1), "reach": round(float(np.mean([d for _, d in tips])), 2), "start_reach": round(start[1], 2),
            "pointing_off": round(off, 1), "return": float(np.sum(rewards))}


def summarise(episodes: list[dict], bins: list[float]) -> list[dict]:
    """Per bin of the target's distance (edges `bins`, open at both ends): the episodes, their mean return, how many
    ended pointing at the target (within 10 degrees), how many scored over 100, and the arm's mean reach at the end
    and in the first frame (the random start pose)."""
    edges = [0.0, *bins, np.inf]
    rows = []
    for low, high in zip(edges[:-1], edges[1:]):
        chosen = [e for e in episodes if low <= e["target_distance"] < high]
        if not chosen:
            continue
        rows.append({"target_distance": f"{low:g}-{high:g} px", "episodes": len(chosen),
                     "mean_return": round(float(np.mean([e["return"] for e in chosen])), 1),
                     "pointing": sum(abs(e["pointing_off"]) <= 10.0 for e in chosen),
                     "scored_over_100": sum(e["return"] > 100 for e in chosen),
                     "reach": round(float(np.mean([e["reach"] for e in chosen])), 1),
                     "start_reach": round(float(np.mean([e["start_reach"] for e in chosen])), 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", help="episode folders (*.npz with `image` and `reward`)")
    parser.add_argument("--bins", type=float, nargs="+", default=[10.0, 14.0], help="target distance bin edges, px")
    parser.add_argument("--json", help="also write every episode's figures here")
    args = parser.parse_args()
    report = {}
    for folder in args.folders:
        paths = sorted(glob.glob(os.path.join(folder, "*.npz")))
        episodes = []
        for path in paths:
            with np.load(path) as data:
                found = episode_reach(data["image"], data["reward"])
            if found is not None:
                episodes.append(found)
        print(f"{folder}: {len(episodes)} of {len(paths)} episodes show the target")
        for row in summarise(episodes, args.bins):
            print("  " + ", ".join(f"{key} {value}" for key, value in row.items()))
        report[folder] = episodes
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
