r"""Does the median of every k-th frame of a chunk find the same moving pixels as the median of all its frames?

`model.foreground_weight` weights the image loss of a chunk's moving pixels: those off the chunk's background,
its per-pixel median over the chunk's T frames, by more than 0.1 in some channel (`world_model.moving_pixels`).
Sorting T = 50 frames per pixel is most of what the weight costs an update; a median of every k-th frame sorts
T / k. This script measures, with numpy alone, how the two masks differ on real chunks: random T-frame chunks of
the episode files given, per folder, the share of pixels the full median calls moving and, per stride k, the
share of those the strided median also finds (recall), the share of its moving pixels the full median agrees with
(precision), and the share of all pixels where the two differ.

Usage:
    python research/moving_mask.py ~/runs/levers/fw10_v2/runs/dmc_ball_in_cup_catch/seed0/train_episodes \
        [more episode folders] [--chunks 200] [--length 50] [--strides 2 5 10]
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

THRESHOLD = 0.1  # as world_model.MOVING_THRESHOLD, in units where the pixel range is 1


def moving(chunk: np.ndarray, stride: int = 1, threshold: float = THRESHOLD) -> np.ndarray:
    """[T, H, W] bool: pixels of `chunk` ([T, H, W, C] uint8) off the per-pixel median of frames 0, k, 2k, ...
    by more than `threshold` (range 1) in some channel."""
    frames = chunk.astype(np.float32) / 255.0
    background = np.median(frames[::stride], axis=0)
    return np.abs(frames - background[None]).max(axis=-1) > threshold


def compare(folder: str, chunks: int, length: int, strides: list[int], seed: int = 0) -> dict:
    """Masks of `chunks` random chunks of the folder's episodes: full median against each stride."""
    paths = sorted(glob.glob(os.path.join(folder, "*.npz")))
    if not paths:
        raise SystemExit(f"moving_mask.py: no .npz episode files in {folder}")
    rng = np.random.default_rng(seed)
    counts = {"pixels": 0, "moving": 0, **{k: {"found": 0, "flagged": 0, "differ": 0} for k in strides}}
    for _ in range(chunks):
        with np.load(paths[rng.integers(len(paths))]) as episode:
            images = episode["image"]
        if len(images) < length:
            continue
        start = rng.integers(len(images) - length + 1)
        chunk = images[start:start + length]
        full = moving(chunk)
        counts["pixels"] += full.size
        counts["moving"] += int(full.sum())
        for k in strides:
            mask = moving(chunk, k)
            counts[k]["found"] += int((mask & full).sum())
            counts[k]["flagged"] += int(mask.sum())
            counts[k]["differ"] += int((mask != full).sum())
    result = {"folder": folder, "moving_share": counts["moving"] / max(counts["pixels"], 1)}
    for k in strides:
        result[f"stride{k}"] = {"recall": counts[k]["found"] / max(counts["moving"], 1),
                                "precision": counts[k]["found"] / max(counts[k]["flagged"], 1),
                                "differ_share": counts[k]["differ"] / max(counts["pixels"], 1)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", help="folders of .npz episode files")
    parser.add_argument("--chunks", type=int, default=200, help="random chunks per folder")
    parser.add_argument("--length", type=int, default=50, help="frames per chunk (data.chunk_length)")
    parser.add_argument("--strides", type=int, nargs="+", default=[2, 5, 10])
    args = parser.parse_args()
    for folder in args.folders:
        print(json.dumps(compare(folder, args.chunks, args.length, args.strides)))


if __name__ == "__main__":
    main()
