"""Where the soak's resident memory goes: the soak run in-process, under tracemalloc.

Usage:
    nice -n 10 .venv/bin/python research/soak_memory.py --minutes 25 --logdir /tmp/soak_memory

Trains the soak configuration (`bench/soak.py`'s overrides of the smoke config) in this
process and samples every `--interval` seconds: resident memory (RSS) and the memory Python
objects hold (tracemalloc). After the warm-up (`--warmup-minutes`) it takes a tracemalloc snapshot; at the end it prints the source lines
whose Python allocations grew most since then, and the RSS before and after glibc's
`malloc_trim(0)` (returning freed heap pages to the system). Growth that tracemalloc does
not see is native (TensorFlow, numpy buffers, the allocator); growth that `malloc_trim`
gives back was freed memory the allocator had kept, not a leak.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.soak import OVERRIDES, ROOT  # noqa: E402


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def malloc_trim() -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=25)
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--interval", type=float, default=60)
    parser.add_argument("--frames", type=int, default=1, help="traceback depth tracemalloc keeps")
    parser.add_argument("--logdir", required=True)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    from planet_sac.config_loading import load_config
    from planet_sac.training.trainer import Trainer

    config = load_config(ROOT / "configs" / "smoke.yaml", list(OVERRIDES))
    trainer = Trainer(config, args.logdir, progress=False)
    tracemalloc.start(args.frames)
    start = time.monotonic()
    rows: list[dict] = []
    snapshots: dict = {}

    def sampler() -> None:
        while not trainer._stop.wait(args.interval):
            minute = (time.monotonic() - start) / 60
            traced, _ = tracemalloc.get_traced_memory()
            row = {"minute": minute, "rss_mb": rss_mb(), "traced_mb": traced / 2**20,
                   "step": int(trainer.counters.step.numpy())}
            rows.append(row)
            print(f"{minute:6.1f} min  step {row['step']:7d}  rss {row['rss_mb']:8.1f} MB  "
                  f"python {row['traced_mb']:7.2f} MB", flush=True)
            if minute >= args.warmup_minutes and "warm" not in snapshots:
                snapshots["warm"] = (tracemalloc.take_snapshot(), row)
            if minute >= args.minutes:
                snapshots["end"] = (tracemalloc.take_snapshot(), row)
                trainer._stop.set()

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        trainer.run(train_steps=10**9)
    finally:
        trainer.close()
    if "warm" not in snapshots or "end" not in snapshots:
        raise SystemExit("the run ended before the warm-up and the end were sampled; run longer")
    (warm, first), (end, last) = snapshots["warm"], snapshots["end"]
    minutes = last["minute"] - first["minute"]
    steps = last["step"] - first["step"]
    print(f"\nfrom {first['minute']:.1f} to {last['minute']:.1f} min ({steps} updates): "
          f"rss {first['rss_mb']:.1f} -> {last['rss_mb']:.1f} MB ({(last['rss_mb'] - first['rss_mb']) / minutes:+.2f} MB/min, "
          f"{(last['rss_mb'] - first['rss_mb']) * 2**10 / max(steps, 1):+.2f} KB/update), "
          f"python objects' memory {first['traced_mb']:.2f} -> {last['traced_mb']:.2f} MB "
          f"({(last['traced_mb'] - first['traced_mb']) / minutes:+.3f} MB/min)")
    before = rss_mb()
    trimmed = malloc_trim()
    print(f"rss before malloc_trim(0) {before:.1f} MB, after {rss_mb():.1f} MB (trim returned {trimmed})")
    print("\nlargest growth of Python allocations since the warm-up:")
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]  # the snapshots themselves
    end, warm = end.filter_traces(ignore), warm.filter_traces(ignore)
    for stat in end.compare_to(warm, "traceback" if args.frames > 1 else "lineno")[:15]:
        print(f"  {stat.size_diff / 2**10:+9.1f} KB {stat.count_diff:+7d} blocks")
        for line in stat.traceback.format(limit=4, most_recent_first=True):
            print(f"      {line.strip()}")


if __name__ == "__main__":
    main()
