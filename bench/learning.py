"""Learning curves: train a config for a budget of environment steps, write CSV + PNG, evaluate.

Usage:
    .venv/bin/python bench/learning.py --config configs/pendulum.yaml --env-steps 4000 \
        --policy cem --out bench/results/pendulum_cem [--set key=value ...] [--eval-episodes 10]

`--policy` chooses the policy that collects (train phase) and is tested (test phase).
The run's logdir is OUT/run; the curve is OUT/curve.csv and OUT/curve.png (drawn by
`planet-sac plot`: returns of training episodes and test phases against env steps, and
the loss terms against updates), and the final
evaluation of random, CEM and SAC policies goes to OUT/evaluation.json, rewritten after
each policy. It is `planet-sac evaluate`'s (one agent, each policy from the same start
states), so `planet-sac evaluate --logdir OUT/run --policy P` gives a policy's result again.
A run stopped before its budget (SIGINT/SIGTERM) writes its curve so far and no evaluation;
the same command resumes it, and on a finished run it evaluates only the policies its
stopped evaluation did not finish (kept in OUT/run/final_evaluation.json).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os

from planet_sac.acting.evaluation import evaluate_policies
from planet_sac.atomic_file import atomic_open
from planet_sac.config import POLICIES, ConfigError
from planet_sac.config_loading import load_config
from planet_sac.envs import make_env
from planet_sac.errors import SetupError
from planet_sac.metrics import read_metrics
from planet_sac.plotting import plot_runs
from planet_sac.suite import EVALUATION_PROGRESS
from planet_sac.training.trainer import train


def curve_rows(logdir: str) -> list[dict]:
    rows = []
    for record in read_metrics(os.path.join(logdir, "metrics.jsonl")):
        for kind in ("train", "test"):
            value = record.get(f"{kind}/return")
            if value is not None:
                rows.append({"env_steps": record["env_steps"], "step": record["step"], "kind": kind, "return": value})
    return rows


def main() -> None:
    """Runs the command; a setting or machine the user can fix (ConfigError, SetupError) ends it in one line."""
    try:
        learn()
    except (ConfigError, SetupError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SystemExit(f"bench/learning.py: error: {message}") from None


def learn() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--env-steps", type=int, required=True, help="budget of environment steps (after action repeat)")
    parser.add_argument("--policy", choices=POLICIES, default="cem")
    parser.add_argument("--out", required=True)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--eval-policies", nargs="+", default=["random", "cem", "sac"])
    parser.add_argument("--force", action="store_true",
                        help="resume OUT/run with a config that differs from its saved one (say why in the README)")
    parser.add_argument("--plot-only", action="store_true", help="only redraw the curve of an existing OUT/run (e.g. a stopped run)")
    args = parser.parse_args()
    logging.basicConfig(format="%(message)s")  # the library's messages: a resumed run, policies kept from a stop
    logging.getLogger("planet_sac").setLevel(logging.INFO)

    config = load_config(args.config, args.set + [f"policy.train={args.policy}", f"policy.test={args.policy}"])
    env = make_env(config.env, seed=0)
    steps_per_episode = env.max_episode_steps * config.env.action_repeat
    env.close()
    episodes = math.ceil(args.env_steps / steps_per_episode)
    train_steps = max(1, episodes - config.data.seed_episodes) * config.schedule.collect_every
    logdir = os.path.join(args.out, "run")
    os.makedirs(args.out, exist_ok=True)
    finished = True
    if not args.plot_only:
        print(f"{episodes} episodes of {steps_per_episode} env steps: {train_steps} updates")
        reached = train(config, logdir, train_steps=train_steps, force=args.force).get("step", 0)
        finished = reached >= train_steps

    rows = curve_rows(logdir)
    with open(os.path.join(args.out, "curve.csv"), "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["env_steps", "step", "kind", "return"])
        writer.writeheader()
        writer.writerows(rows)
    plot_runs([logdir], os.path.join(args.out, "curve.png"))
    if args.plot_only:
        return
    if not finished:  # stopped (SIGINT/SIGTERM): the curve so far, but no evaluation of an unfinished model
        print(f"stopped at update {reached} of {train_steps}; the same command resumes the run")
        return

    header = {"config": args.config, "env_steps": args.env_steps, "policy": args.policy, "set": args.set,
              "step": reached, "eval_episodes": args.eval_episodes}
    evaluate_run(logdir, os.path.join(args.out, "evaluation.json"), header, args.eval_policies)


def evaluate_run(logdir: str, path: str, header: dict, policies: list[str]) -> dict:
    """Evaluates each policy on the run's final checkpoint and rewrites `path` (`header` and the results) after each.

    A stopped evaluation (a CEM policy on pixels takes minutes per episode) keeps the policies it finished in the
    run's `final_evaluation.json`: the same command evaluates only the rest (`evaluate_policies`' `progress`).
    """
    results = {}
    for policy, result in evaluate_policies(logdir, header["eval_episodes"], policies,
                                            progress=os.path.join(logdir, EVALUATION_PROGRESS)):
        results[policy] = {key: result[key] for key in ("mean", "std", "min", "max", "returns")}
        with atomic_open(path) as file:
            json.dump({**header, "evaluation": results}, file, indent=2)
        print(f"{policy:<16} mean {result['mean']:8.1f}  std {result['std']:7.1f}  "
              f"min {result['min']:8.1f}  max {result['max']:8.1f}")
    return results


if __name__ == "__main__":
    main()
