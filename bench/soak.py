"""Soak test: train the smoke config for a long time and watch memory, file descriptors and threads.

Usage:
    .venv/bin/python bench/soak.py --minutes 30 --logdir /tmp/soak [--csv bench/results/soak.csv]

Starts `planet-sac train` on the smoke config (with `data.max_episodes` capping the replay
cache) in a subprocess and samples its resident memory, open file descriptors and thread
count every `--interval` seconds. Reports the growth of each after the warm-up
(`--warmup-minutes`, default 5): the goal is at most 5% more memory and no growth in file
descriptors or threads.
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
# The smoke config made into a long run: a capped replay cache, frequent episodes, logs and checkpoints.
OVERRIDES = ("data.max_episodes=50", "schedule.train_phase_steps=500", "schedule.collect_every=25",
             "schedule.log_every=50", "schedule.checkpoint_every=200", "schedule.video_every=1000")


def sample(process: psutil.Process) -> dict:
    with process.oneshot():
        return {"rss_mb": process.memory_info().rss / 2**20, "fds": process.num_fds(), "threads": process.num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--interval", type=float, default=60)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--csv", help="write the samples here")
    args = parser.parse_args()

    command = [sys.executable, "-m", "planet_sac", "train", "--config", str(ROOT / "configs" / "smoke.yaml"),
               "--logdir", args.logdir, "--train-steps", "100000000", "--quiet"]
    for override in OVERRIDES:
        command += ["--set", override]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    process = psutil.Process(child.pid)
    start = time.monotonic()
    rows = []
    try:
        while time.monotonic() - start < args.minutes * 60:
            time.sleep(args.interval)
            if child.poll() is not None:
                raise SystemExit(f"training exited early with status {child.returncode}")
            row = {"minute": round((time.monotonic() - start) / 60, 2), **sample(process)}
            rows.append(row)
            print(f"{row['minute']:6.1f} min  rss {row['rss_mb']:8.1f} MB  fds {row['fds']:4d}  threads {row['threads']:4d}", flush=True)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=120)
    if args.csv:
        with open(args.csv, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    after = [row for row in rows if row["minute"] >= args.warmup_minutes]
    if len(after) < 2:
        raise SystemExit("not enough samples after the warm-up; run longer")
    first, peak = after[0], max(after, key=lambda row: row["rss_mb"])
    growth = (peak["rss_mb"] - first["rss_mb"]) / first["rss_mb"] * 100
    print(f"after {args.warmup_minutes:g} min: rss {first['rss_mb']:.1f} -> peak {peak['rss_mb']:.1f} MB ({growth:+.1f}%), "
          f"fds {first['fds']} -> {after[-1]['fds']}, threads {first['threads']} -> {after[-1]['threads']}; "
          f"exit status after SIGTERM {child.returncode}")


if __name__ == "__main__":
    main()
