"""Throughput and memory of the streaming episode replay.

Writes synthetic episodes (64x64x3 uint8 images, smooth moving patterns plus
noise so they compress like rendered frames) into a temporary directory once,
then measures:

* load: time for the first scan (decompress + validate every file),
* chunks/s of the bare ``EpisodeReplay`` iterator (numpy only),
* chunks/s and batches/s through ``make_dataset`` (tf.data) after a warm-up,
* memory: ``stats["cache_bytes"]`` and the process RSS increase against the
  raw bytes of the episodes' arrays.

    python bench/bench_loader.py                       # 100 episodes x 1000 steps, 50 batches of 50 x 50
    python bench/bench_loader.py --episodes 10 --length 200 --batches 10   # quick
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def synthetic_episode(rng: np.random.Generator, length: int, size: int = 64, action_dim: int = 6) -> dict:
    """An aligned episode whose frames are a drifting colour pattern plus noise."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    phase = rng.uniform(0, 2 * np.pi, 3).astype(np.float32)
    t = np.arange(length + 1, dtype=np.float32)[:, None, None, None] * 0.05
    pattern = 0.5 + 0.5 * np.sin(6 * x[None, :, :, None] + 4 * y[None, :, :, None] + t + phase)
    noise = rng.integers(0, 8, size=(length + 1, size, size, 3), dtype=np.uint8)
    image = (pattern * 247).astype(np.uint8) + noise
    action = rng.uniform(-1, 1, size=(length + 1, action_dim)).astype(np.float32)
    reward = rng.uniform(0, 1, size=length + 1).astype(np.float32)
    action[0], reward[0] = 0, 0
    return {"image": image, "action": action, "reward": reward, "discount": np.ones(length + 1, np.float32)}


def write_episodes(directory: str, episodes: int, length: int, seed: int = 0) -> tuple[int, int]:
    """Write the episodes; return (raw array bytes, bytes on disk)."""
    from planet_sac.episodes import save_episode

    rng = np.random.default_rng(seed)
    raw = disk = 0
    for _ in range(episodes):
        episode = synthetic_episode(rng, length)
        raw += sum(value.nbytes for value in episode.values())
        disk += os.path.getsize(save_episode(directory, episode))
    return raw, disk


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--length", type=int, default=1000, help="actions per episode (arrays have length + 1)")
    parser.add_argument("--batches", type=int, default=50, help="batches timed after the warm-up")
    parser.add_argument("--warmup", type=int, default=5, help="batches pulled before timing")
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--chunk-length", type=int, default=50)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--dir", help="reuse/keep episodes here instead of a temporary directory")
    args = parser.parse_args()  # before TensorFlow loads: --help and a wrong flag answer at once
    import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on, see planet_sac/startup.py)

    # isort: split
    import tensorflow as tf

    from planet_sac.episodes import EpisodeReplay, make_dataset

    directory = args.dir or tempfile.mkdtemp(prefix="bench_loader_")
    try:
        start = time.perf_counter()
        raw, disk = write_episodes(directory, args.episodes, args.length)
        write_seconds = time.perf_counter() - start
        tf.constant(0)  # initialise the TF runtime before the memory baseline

        # 1) make_dataset (tf.data): initial load, warm-up, timed batches, memory.
        base = rss()
        start = time.perf_counter()
        dataset, replay = make_dataset(directory, args.batch_size, args.chunk_length, every=args.every, seed=0)
        load_seconds = time.perf_counter() - start  # make_dataset waits for the first scan
        iterator = iter(dataset)
        for _ in range(args.warmup):
            next(iterator)
        start = time.perf_counter()
        for _ in range(args.batches):
            batch = next(iterator)
        seconds = time.perf_counter() - start
        grown = rss() - base
        stats = dict(replay.stats)
        assert batch["image"].dtype == tf.uint8
        assert tuple(batch["image"].shape) == (args.batch_size, args.chunk_length, 64, 64, 3)
        del iterator, dataset, replay, batch
        gc.collect()

        # 2) The bare iterator (numpy chunks, no tf.data), same number of chunks.
        chunks = args.batches * args.batch_size
        iterator = iter(EpisodeReplay(directory, args.chunk_length, every=args.every, seed=0))
        for _ in itertools.islice(iterator, args.warmup * args.batch_size):
            pass
        start = time.perf_counter()
        for _ in itertools.islice(iterator, chunks):
            pass
        numpy_rate = chunks / (time.perf_counter() - start)
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)

    mb = 2**20
    cache = stats["cache_bytes"]
    rows = [
        ("episodes x steps", f"{args.episodes} x {args.length + 1}"),
        ("batch x chunk", f"{args.batch_size} x {args.chunk_length} (64x64x3 uint8)"),
        ("write (save_episode)", f"{write_seconds:.1f} s"),
        ("on disk (npz compressed)", f"{disk / mb:.0f} MB"),
        ("initial load (make_dataset)", f"{load_seconds:.1f} s  ({args.episodes / load_seconds:.1f} episodes/s)"),
        ("EpisodeReplay iterator", f"{numpy_rate:,.0f} chunks/s"),
        ("make_dataset", f"{args.batches * args.batch_size / seconds:,.0f} chunks/s  "
                         f"({args.batches / seconds:.1f} batches/s)"),
        ("raw array bytes", f"{raw / mb:.0f} MB"),
        ("stats['cache_bytes']", f"{cache / mb:.0f} MB  ({cache / raw:.3f} x raw)"),
        ("RSS increase", f"{grown / mb:.0f} MB  ({grown / raw:.3f} x raw)"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"bench_loader ({os.cpu_count()} CPUs, tf {tf.__version__})")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    main()
