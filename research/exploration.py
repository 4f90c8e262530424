r"""How wide does the SAC head explore while it collects? Temperature, policy entropy and training return over env steps.

Reads the metrics.jsonl of finished suite runs (`results/<task>/seed<k>/`) and prints, at 10k / 25k / 50k /
75k / 100k env steps, the last logged temperature `sac/alpha`, the policy's entropy `sac/entropy` (nats, of
the tanh-squashed action; the temperature steers it to `sac.target_entropy`, by default -|A|, i.e. -1 per
action dimension) and the return of the training episode the head collected.

Usage:
    python research/exploration.py bench/results/dmc_vision ~/runs/dmc_vision
"""

from __future__ import annotations

import argparse
import glob
import json
import os

MARKS = (10_000, 25_000, 50_000, 75_000, 100_000)


def at_marks(path: str) -> list[dict]:
    """The last training record with SAC metrics at or before each mark (None once the run ends earlier)."""
    with open(path) as file:
        rows = [json.loads(line) for line in file if line.strip()]
    train = [row for row in rows if "sac/alpha" in row and "env_steps" in row]
    marks = []
    for mark in MARKS:
        before = [row for row in train if row["env_steps"] <= mark]
        reached = train and train[-1]["env_steps"] >= mark
        marks.append(before[-1] if before and reached else None)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", help="suite --out folders or published result folders")
    args = parser.parse_args()
    print("| task | seed | " + " | ".join(f"{mark // 1000}k: alpha, entropy, return" for mark in MARKS) + " |")
    print("|---|---|" + "---|" * len(MARKS))
    seen = set()
    for folder in args.folders:
        for path in sorted(glob.glob(os.path.join(os.path.expanduser(folder), "results", "*", "seed*",
                                                  "metrics.jsonl"))):
            task, seed = path.split(os.sep)[-3], path.split(os.sep)[-2]
            if (task, seed) in seen:
                continue
            seen.add((task, seed))
            cells = [f"{row['sac/alpha']:.4f}, {row['sac/entropy']:.1f}, {row.get('train/return', float('nan')):.0f}"
                     if row else "" for row in at_marks(path)]
            print(f"| {task} | {seed[4:]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
