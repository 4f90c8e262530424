r"""Which pixels does `model.foreground_weight` weight, and does it miss the bodies that stand still in an episode?

`world_model.moving_pixels` calls a pixel of a chunk foreground when it is off the chunk's background, its
per-pixel median over the chunk's T frames, by more than 0.1 in some channel. A body that does not move within an
episode but stands elsewhere in each one (reacher's target, finger-turn's target) is part of every frame of its
chunk, so of its median: it is weighted as background. A second background, common to the batch (the per-pixel
median over the batch's chunks of their medians), is without it wherever it stands in fewer than half the chunks.

This script measures, with numpy alone, on batches of B random T-frame chunks (one per random episode file, as the
loader draws them) of each episode folder given: the share of pixels each mask calls foreground (the chunk's own
median; the batch's; either), and, where the folder's frames show reacher's target (red > 150 and green < 140 in
uint8: dm_control's target material), the share of the target's pixels each mask finds.

Usage:
    python research/static_foreground.py ~/runs/levers/fw10_v2/runs/dmc_reacher_easy/seed0/train_episodes \
        [more episode folders] [--batches 20] [--batch-size 16] [--length 50] [--batch-threshold 0.1]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from research.reacher_reach import target_mask  # noqa: E402

THRESHOLD = 0.1  # as world_model.MOVING_THRESHOLD, in units where the pixel range is 1


def masks(batch: np.ndarray, threshold: float = THRESHOLD, batch_threshold: float = THRESHOLD) -> dict[str, np.ndarray]:
    """[B, T, H, W] bool masks of a [B, T, H, W, C] uint8 batch: `chunk` (off the chunk's per-pixel median over
    time by more than `threshold`), `batch` (off the per-pixel median over the batch of those medians by more than
    `batch_threshold`, as `model.foreground_batch_threshold`) and `either`."""
    frames = batch.astype(np.float32) / 255.0
    chunk_background = np.median(frames, axis=1)  # [B, H, W, C]
    batch_background = np.median(chunk_background, axis=0)  # [H, W, C]
    chunk = np.abs(frames - chunk_background[:, None]).max(axis=-1) > threshold
    common = np.abs(frames - batch_background[None, None]).max(axis=-1) > batch_threshold
    return {"chunk": chunk, "batch": common, "either": chunk | common}


def measure(folder: str, batches: int, batch_size: int, length: int, seed: int = 0,
            batch_threshold: float = THRESHOLD) -> dict:
    """Foreground shares of each mask over `batches` random batches of the folder's episodes."""
    paths = sorted(glob.glob(os.path.join(folder, "*.npz")))
    if len(paths) < 2:
        raise SystemExit(f"static_foreground.py: fewer than 2 .npz episode files in {folder}")
    rng = np.random.default_rng(seed)
    episodes = [np.load(path)["image"] for path in paths]
    shares = {name: [] for name in ("chunk", "batch", "either")}
    found = {name: [0, 0] for name in shares}  # target pixels found, target pixels in all
    for _ in range(batches):
        chosen = rng.choice(len(episodes), batch_size, replace=len(episodes) < batch_size)
        chunks = []
        for index in chosen:
            images = episodes[index]
            start = rng.integers(0, len(images) - length + 1)
            chunks.append(images[start:start + length])
        batch = np.stack(chunks)
        target = target_mask(batch)
        for name, mask in masks(batch, batch_threshold=batch_threshold).items():
            shares[name].append(float(mask.mean()))
            found[name][0] += int((mask & target).sum())
            found[name][1] += int(target.sum())
    result = {"folder": folder, "episodes": len(paths),
              "foreground_share": {name: round(float(np.mean(values)), 4) for name, values in shares.items()}}
    if found["chunk"][1] > 0 and found["chunk"][1] / (batches * batch_size * length) >= 4:  # the target is shown
        result["target_recall"] = {name: round(hits / total, 3) for name, (hits, total) in found.items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", help="episode folders (*.npz with an `image` key)")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--batch-threshold", type=float, default=THRESHOLD,
                        help="how far off the batch's background a pixel counts (model.foreground_batch_threshold)")
    args = parser.parse_args()
    for folder in args.folders:
        print(json.dumps(measure(folder, args.batches, args.batch_size, args.length,
                                 batch_threshold=args.batch_threshold)))


if __name__ == "__main__":
    main()
