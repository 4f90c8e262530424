"""Soak test: train the smoke config for a long time and watch memory, file descriptors and threads.

Usage:
    .venv/bin/python bench/soak.py --minutes 30 --logdir /tmp/soak [--csv bench/results/soak.csv] [--png soak.png]
    .venv/bin/python bench/soak.py --plot bench/results/soak.csv --png bench/results/soak.png   (redraw only)

Starts `planet-sac train` on the smoke config (with `data.max_episodes` capping the replay
cache) in a subprocess and samples its resident memory, open file descriptors and thread
count every `--interval` seconds. Reports the growth of each after the warm-up
(`--warmup-minutes`, default 5): the goal is at most 5% more memory and no growth in file
descriptors or threads.
"""

from __future__ import annotations

import argparse
import csv
import json
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


def progress(logdir: str) -> dict:
    """Updates and train episodes so far, from the run's last metrics.jsonl record (growth per iteration, not per minute)."""
    try:
        with open(os.path.join(logdir, "metrics.jsonl"), "rb") as file:
            file.seek(max(0, os.path.getsize(file.name) - 65536))
            lines = file.read().splitlines()
        for line in reversed(lines):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            return {"step": int(record["step"]), "episodes": int(record.get("episodes", 0))}
    except OSError:
        pass
    return {"step": 0, "episodes": 0}


def draw(rows: list[dict], path: str) -> None:
    """Resident memory against minutes, with a straight-line fit after the first quarter (its slope in the title)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    minutes = np.array([row["minute"] for row in rows])
    rss = np.array([row["rss_mb"] for row in rows])
    late = minutes >= minutes[-1] / 4
    slope, intercept = np.polyfit(minutes[late], rss[late], 1)
    fig, axis = plt.subplots(figsize=(6, 3.2))
    axis.plot(minutes, rss, linewidth=1, label="resident memory")
    axis.plot(minutes[late], slope * minutes[late] + intercept, "--", linewidth=1, label=f"fit: {slope:+.2f} MB/min")
    axis.set_xlabel("minutes")
    axis.set_ylabel("MB")
    axis.set_title(f"soak: {rss[0]:.0f} -> {rss[-1]:.0f} MB over {minutes[-1]:.0f} min")
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--interval", type=float, default=60)
    parser.add_argument("--logdir", help="the training run's logdir (required unless --plot)")
    parser.add_argument("--csv", help="write the samples here")
    parser.add_argument("--png", help="draw resident memory against minutes here")
    parser.add_argument("--plot", metavar="CSV", help="only redraw --png from the samples of an earlier run")
    args = parser.parse_args()
    if args.plot:
        with open(args.plot) as file:
            draw([{key: float(value) for key, value in row.items()} for row in csv.DictReader(file)], args.png or "soak.png")
        return
    if not args.logdir:
        parser.error("--logdir is required")

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
            row = {"minute": round((time.monotonic() - start) / 60, 2), **sample(process), **progress(args.logdir)}
            rows.append(row)
            print(f"{row['minute']:6.1f} min  step {row['step']:7d}  episodes {row['episodes']:5d}  rss {row['rss_mb']:8.1f} MB  "
                  f"fds {row['fds']:4d}  threads {row['threads']:4d}", flush=True)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=120)
    if args.csv:
        with open(args.csv, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if args.png:
        draw(rows, args.png)
    after = [row for row in rows if row["minute"] >= args.warmup_minutes]
    if len(after) < 2:
        raise SystemExit("not enough samples after the warm-up; run longer")
    first, peak = after[0], max(after, key=lambda row: row["rss_mb"])
    growth = (peak["rss_mb"] - first["rss_mb"]) / first["rss_mb"] * 100
    last = after[-1]
    updates, episodes = last["step"] - first["step"], last["episodes"] - first["episodes"]
    grown = last["rss_mb"] - first["rss_mb"]
    print(f"after {args.warmup_minutes:g} min: {updates} updates, {episodes} episodes; rss {first['rss_mb']:.1f} -> "
          f"{last['rss_mb']:.1f} MB: {grown * 2**10 / max(updates, 1):+.3f} KB/update, {grown * 2**10 / max(episodes, 1):+.2f} KB/episode")
    print(f"after {args.warmup_minutes:g} min: rss {first['rss_mb']:.1f} -> peak {peak['rss_mb']:.1f} MB ({growth:+.1f}%), "
          f"fds {first['fds']} -> {after[-1]['fds']}, threads {first['threads']} -> {after[-1]['threads']}; "
          f"exit status after SIGTERM {child.returncode}")


if __name__ == "__main__":
    main()
