r"""Evaluate the heads of several runs from the same start states, and compare each with the first, paired by start.

A lever's 10-episode final evaluation cannot tell two reacher heads apart: its episodes score about 0 or about 900
(the target reached or not), so a 10-episode mean has a standard error near 100. Episode k of every run here starts
from env seed `--seed + k`, so the runs meet the same targets and the difference of two runs can be read per start:
its mean with a 95% bootstrap interval over the starts (resampled with replacement, 20,000 times).

Usage:
    python research/paired_eval.py --episodes 30 --seed 70000 --json OUT.json \
        REFERENCE_RUN[:CHECKPOINT] RUN[:CHECKPOINT] ...

RUN is a run directory; `:ckpt-1125` picks one of its checkpoints (default: the latest). The headline policy
(`sac`, its mode) as the suite's final evaluation acts; `--set KEY=VALUE` overrides a config key for every run.
TensorFlow computes deterministically here, as in every planet-sac command, so the returns repeat on one machine
with one thread count; another count computes other last bits and other episodes: v4 reacher seed 0's head scored
100.1 on these 30 starts with one TensorFlow thread (TF_NUM_INTRAOP_THREADS=TF_NUM_INTEROP_THREADS=1, 2026-11-29 15:00)
and 97.3 with the default two (18:00), 13 starts moved; the first 8 repeat either reading exactly when evaluated
again with its thread count. Compare runs evaluated in one call (as this script does), or with the same count.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from planet_sac.acting.evaluation import evaluate
from planet_sac.startup import make_tensorflow_deterministic


def paired_difference(reference: np.ndarray, other: np.ndarray, samples: int = 20_000,
                      seed: int = 0) -> tuple[float, float, float]:
    """Mean of `other - reference` over paired episodes, and its 95% percentile bootstrap interval over the pairs."""
    difference = np.asarray(other, float) - np.asarray(reference, float)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(difference), size=(samples, len(difference)))
    means = difference[index].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(difference.mean()), float(low), float(high)


def logdir_of(spec: str) -> str:
    """`RUN` or `RUN:ckpt-N` -> the logdir `evaluate` takes (a run directory or one checkpoint's prefix)."""
    run, _, checkpoint = spec.partition(":")
    return os.path.join(run, "checkpoints", checkpoint) if checkpoint else run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN[:CHECKPOINT]", help="the reference first")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=70_000, help="episode k starts from env seed SEED + k")
    parser.add_argument("--policy", default="sac")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", help="write every run's returns here")
    args = parser.parse_args()

    make_tensorflow_deterministic()  # as `planet-sac evaluate` computes (the thread count still matters: above)
    results = {}
    for spec in args.runs:
        result = evaluate(logdir_of(os.path.expanduser(spec)), args.episodes, args.policy, args.seed,
                          overrides=args.set)
        results[spec] = result["returns"]
        print(f"{spec}: {result['mean']:.1f} ± {result['std']:.1f} (step {result['step']})", flush=True)
    reference = np.array(results[args.runs[0]])
    print(f"\nagainst {args.runs[0]} ({reference.mean():.1f}), paired over {args.episodes} starts:")
    for spec in args.runs[1:]:
        mean, low, high = paired_difference(reference, np.array(results[spec]))
        print(f"  {spec}: {np.mean(results[spec]):.1f}, difference {mean:+.1f} [{low:+.1f}, {high:+.1f}]")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"episodes": args.episodes, "seed": args.seed, "policy": args.policy, "overrides": args.set,
                       "returns": results}, file, indent=1)


if __name__ == "__main__":
    main()
