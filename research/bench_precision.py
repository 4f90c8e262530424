"""Does mixed_bfloat16 learn like float32? World-model loss curves of the same offline data, compared with seed noise.

Usage:
    .venv/bin/python research/bench_precision.py --config configs/cartpole_swingup_cpu.yaml \\
        --data EPISODE_DIR --updates 1000 --out research/results/precision_cartpole

Trains three runs from the same episodes with `--offline-data` (same batches in the same order
for equal seeds): float32 seed 0, float32 seed 1 (the run-to-run noise) and mixed_bfloat16
seed 0. A run already finished in OUT is not repeated. Reports, for each loss term, the mean
absolute gap over the last half of the run between mixed and float32 (same seed) beside the gap
between the two float32 seeds, the mean seconds per update of each run (sequential runs on a
shared machine: a rough figure), and writes OUT/precision.json and OUT/precision.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

RUNS = (("float32_seed0", "float32", 0), ("float32_seed1", "float32", 1), ("mixed_bfloat16_seed0", "mixed_bfloat16", 0))
TERMS = ("loss/total", "loss/kl", "loss/reward")


def train(config: str, data: str, logdir: str, precision: str, seed: int, updates: int, extra: list[str]) -> float:
    """Runs (or resumes) one offline run to `updates` updates; returns its wall-clock seconds for this call."""
    command = [sys.executable, "-m", "planet_sac", "train", "--config", config, "--logdir", logdir, "--offline-data", data,
               "--train-steps", str(updates), "--quiet", "--set", f"optim.precision={precision}", "--set", f"seed={seed}",
               "--set", "schedule.log_every=10", "--set", "schedule.video_every=100000"]
    for override in extra:
        command += ["--set", override]
    start = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - start


def curves(logdir: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rows = [json.loads(line) for line in open(os.path.join(logdir, "metrics.jsonl"))]
    rows = [row for row in rows if row.get("phase") == "train" and "loss/total" in row]
    out = {}
    for term in TERMS + ("train/steps_per_second",):
        steps = np.array([row["step"] for row in rows if term in row])
        values = np.array([row[term] for row in rows if term in row])
        out[term] = (steps, values)
    for term in ("loss/image", "loss/state"):
        if any(term in row for row in rows):
            out[term] = (np.array([r["step"] for r in rows if term in r]), np.array([r[term] for r in rows if term in r]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--data", required=True, help="episode directory (not written to)")
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--out", required=True)
    parser.add_argument("--set", action="append", default=[], help="extra config overrides for all runs")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, precision, seed in RUNS:
        logdir = os.path.join(args.out, name)
        seconds = train(args.config, args.data, logdir, precision, seed, args.updates, args.set)
        print(f"{name}: {seconds:.0f} s", flush=True)
    loaded = {name: curves(os.path.join(args.out, name)) for name, _, _ in RUNS}
    terms = [term for term in loaded[RUNS[0][0]] if term.startswith("loss/")]
    report: dict = {"updates": args.updates, "config": args.config, "data": args.data, "terms": {}}
    print(f"{'term':<14}{'f32 s0':>10}{'f32 s1':>10}{'mixed s0':>10}{'|mixed-f32|':>13}{'|seed gap|':>12}   (mean over the last half)")
    for term in terms:
        series = {name: loaded[name][term] for name, _, _ in RUNS}
        length = min(len(values) for _, values in series.values())
        half = slice(length // 2, length)
        f0, f1, mixed = (series[name][1][:length] for name, _, _ in RUNS)
        row = {"float32_seed0": float(f0[half].mean()), "float32_seed1": float(f1[half].mean()),
               "mixed_bfloat16_seed0": float(mixed[half].mean()),
               "mixed_vs_float32_gap": float(np.abs(mixed[half] - f0[half]).mean()),
               "seed_gap": float(np.abs(f1[half] - f0[half]).mean())}
        report["terms"][term] = row
        print(f"{term:<14}{row['float32_seed0']:>10.3f}{row['float32_seed1']:>10.3f}{row['mixed_bfloat16_seed0']:>10.3f}"
              f"{row['mixed_vs_float32_gap']:>13.3f}{row['seed_gap']:>12.3f}")
    report["steps_per_second"] = {name: float(np.median(loaded[name]["train/steps_per_second"][1]))
                                  for name, _, _ in RUNS}
    print("median updates per second:", {k: round(v, 3) for k, v in report["steps_per_second"].items()})
    with open(os.path.join(args.out, "precision.json"), "w") as file:
        json.dump(report, file, indent=2)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(terms), figsize=(4 * len(terms), 3.2))
    for axis, term in zip(np.atleast_1d(axes), terms):
        for name, _, _ in RUNS:
            steps, values = loaded[name][term]
            axis.plot(steps, values, label=name, linewidth=1)
        axis.set_title(term)
        axis.set_xlabel("updates")
        axis.set_yscale("log")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "precision.png"), dpi=100)


if __name__ == "__main__":
    main()
