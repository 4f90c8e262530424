"""Where the soak's native heap grows: the soak run in-process under jemalloc's heap profiler.

Usage:
    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:14 \
        nice -n 10 .venv/bin/python research/soak_heap.py --minutes 30 --logdir /tmp/soak_heap --out /tmp/soak_heap_prof
    jeprof --text --base=/tmp/soak_heap_prof/warm.heap .venv/bin/python /tmp/soak_heap_prof/end.heap | head -40

Trains the soak configuration (`bench/soak.py`'s overrides of the smoke config) in this
process and, every `--interval` seconds, samples resident memory, jemalloc's live bytes
(`stats.allocated`) and the loop's counters (updates, train episodes, test phases), so
growth can be divided by loop iterations rather than by minutes (the machine is shared, so
iterations per minute vary). It dumps a heap profile after the warm-up (`warm.heap`) and at
the end (`end.heap`); `jeprof --base=warm.heap` then lists the call stacks whose live
allocations grew between the two. Without jemalloc preloaded it still samples RSS.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.soak import OVERRIDES, ROOT  # noqa: E402


def jemalloc() -> ctypes.CDLL | None:
    """The preloaded jemalloc (its mallctl), or None when the process runs on another allocator."""
    try:
        library = ctypes.CDLL("libjemalloc.so.2", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return None
    return library if hasattr(library, "mallctl") else None


def allocated_mb(library: ctypes.CDLL | None) -> float:
    """jemalloc's live bytes (after refreshing its statistics epoch), or NaN without jemalloc."""
    if library is None:
        return float("nan")
    epoch = ctypes.c_uint64(1)
    library.mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch))
    value, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
    library.mallctl(b"stats.allocated", ctypes.byref(value), ctypes.byref(size), None, 0)
    return value.value / 2**20


def dump(library: ctypes.CDLL | None, path: str) -> None:
    if library is None:
        return
    name = ctypes.c_char_p(path.encode())
    status = library.mallctl(b"prof.dump", None, None, ctypes.byref(name), ctypes.sizeof(name))
    print(f"heap profile {path}: {'written' if status == 0 else f'failed ({status}); is MALLOC_CONF=prof:true set?'}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=10)
    parser.add_argument("--interval", type=float, default=60)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--out", required=True, help="folder for warm.heap and end.heap")
    parser.add_argument("--csv", help="write the samples here")
    parser.add_argument("--set", action="append", default=[], help="extra config overrides, after the soak's")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.makedirs(args.out, exist_ok=True)
    library = jemalloc()

    from planet_sac.config_loading import load_config
    from planet_sac.training.trainer import Trainer

    config = load_config(ROOT / "configs" / "smoke.yaml", [*OVERRIDES, *args.set])
    trainer = Trainer(config, args.logdir, progress=False)
    start = time.monotonic()
    rows: list[dict] = []
    warm: dict = {}

    def counters() -> dict:
        c = trainer.counters
        return {"step": int(c.step.numpy()), "episodes": int(c.train_episodes.numpy()),
                "test_phases": int(c.test_phases.numpy())}

    def sampler() -> None:
        while not trainer._stop.wait(args.interval):
            minute = (time.monotonic() - start) / 60
            row = {"minute": round(minute, 2), "rss_mb": psutil.Process().memory_info().rss / 2**20,
                   "allocated_mb": allocated_mb(library), **counters()}
            rows.append(row)
            print(f"{minute:6.1f} min  step {row['step']:7d}  episodes {row['episodes']:5d}  tests {row['test_phases']:4d}  "
                  f"rss {row['rss_mb']:8.1f} MB  allocated {row['allocated_mb']:8.2f} MB", flush=True)
            if minute >= args.warmup_minutes and not warm:
                warm.update(row)
                dump(library, f"{args.out}/warm.heap")
            if minute >= args.minutes:
                dump(library, f"{args.out}/end.heap")
                trainer._stop.set()

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        trainer.run(train_steps=10**9)
    finally:
        trainer.close()
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if not warm:
        raise SystemExit("the run ended before the warm-up was sampled; run longer")
    last = rows[-1]
    updates, episodes, tests = (last[key] - warm[key] for key in ("step", "episodes", "test_phases"))
    for key in ("rss_mb", "allocated_mb"):
        grown = last[key] - warm[key]
        print(f"{key}: {warm[key]:.1f} -> {last[key]:.1f} MB from {warm['minute']:.1f} to {last['minute']:.1f} min "
              f"({grown / warm[key] * 100 if warm[key] else float('nan'):+.2f}%): "
              f"{grown * 2**10 / max(updates, 1):+.3f} KB/update over {updates} updates, "
              f"{grown * 2**10 / max(episodes, 1):+.1f} KB/episode over {episodes} episodes, "
              f"{grown * 2**10 / max(tests, 1):+.1f} KB/test phase over {tests} test phases")


if __name__ == "__main__":
    main()
