"""What a training episode costs with each collecting policy, measured in one process on one checkpoint.

A run (PlaNet's schedule) pays, per collected episode, `schedule.collect_every` updates of the
learner (world model and SAC head, compiled) plus one episode in the environment acted by
`policy.train` with exploration. Both are timed here on LOGDIR's latest checkpoint, in one
process, after a warm-up (tracing and compilation excluded), with the collecting policies
interleaved episode by episode so that a noisy machine affects them alike:

    t_episode(policy) = collect_every * t_update + t_collect(policy)

A run with `sac.catchup_rounds` > 0 that collects with the SAC head (`sac`, `sac_guided_cem`)
also pays that many catch-up rounds (`Learner.catch_up`, timed the same way) per episode.
Episodes are played, timed and discarded (nothing is written to LOGDIR).

With `--runs LOGDIR ...` it also redraws those runs' test-phase returns (one line per
evaluated policy) against the hours of training this machine needs for them at the measured
costs: hours(episode n) = (n - seed episodes) * t_episode(that run) / 3600.
Test phases and seed episodes are left out (the same for every run). This compares runs made
at different times, on cores shared with other jobs or paused, by ratios measured in one run.

    .venv/bin/python research/collect_cost.py --logdir bench/results/cartpole_pixels/run \
        --json research/results/collect_cost.json --runs bench/results/cartpole_pixels/run \
        bench/results/cartpole_pixels_sac/run --out research/results/wall_clock.png
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np

from planet_sac.acting.actor import TRAIN, run_episode
from planet_sac.agent import load_agent
from planet_sac.checkpoints import find_run_config
from planet_sac.episodes.loader import make_dataset
from planet_sac.plotting import POLICY_RETURN, run_labels
from planet_sac.training.learner import Learner
from planet_sac.training.schedule import SAC_ACTING

COLLECTING = ("cem", "sac")


def time_updates(config, agent, train_dir: str, updates: int) -> tuple[float, float]:
    """Median seconds of one learner update (world model + `sac.updates_per_step` SAC updates) and of one
    catch-up round (`Learner.catch_up`: the head alone on the frozen model), each after a warm-up."""
    learner = Learner(config, agent.world_model, agent.sac, seed=config.seed)
    dataset, _ = make_dataset(train_dir, config.data.batch_size, config.data.chunk_length, every=config.data.every,
                              keys=(config.env.obs, "action", "reward", "discount"), wait_seconds=0.0,
                              seed=config.seed)
    batches = iter(dataset)
    medians = []
    for step in (learner.update, learner.catch_up):
        step(next(batches))  # tracing and XLA compilation
        times = []
        for _ in range(updates):
            batch = next(batches)
            start = time.perf_counter()
            metrics = step(batch)
            float(next(iter(metrics.values())))  # wait for the result
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return medians[0], medians[1]


def time_collection(agent, env, policies: list[str], episodes: int) -> dict[str, list[float]]:
    """Seconds of whole training-phase episodes (with exploration) per policy, interleaved; one warm-up each."""
    seconds: dict[str, list[float]] = {name: [] for name in policies}
    for repeat in range(episodes + 1):
        for name in policies:
            agent.policy.set_policies(train=name)
            start = time.perf_counter()
            run_episode(env, agent.policy, TRAIN)
            if repeat:  # the first episode of each policy traces and compiles it
                seconds[name].append(time.perf_counter() - start)
    return seconds


def episode_cost(config, episode_seconds: dict[str, float], catchup_seconds: float) -> float:
    """Seconds of one training episode of a run with `config`: the measured cost of its collecting policy,
    plus its catch-up rounds when that policy acts with the SAC head."""
    name = config.policy.train
    if name not in episode_seconds:
        raise SystemExit(f"a run collects with {name}; measure it with --policies {name}")
    rounds = config.sac.catchup_rounds if name in SAC_ACTING else 0
    return episode_seconds[name] + rounds * catchup_seconds


def training_hours(logdir: str, episode_seconds: dict[str, float],
                   catchup_seconds: float = 0.0) -> tuple[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(policy.train, {test/return/<policy>: (hours, returns)}) of a run at the measured per-episode costs.

    A test phase's x is the number of episodes the run had collected by then, less the seed episodes.
    """
    config = find_run_config(logdir)
    seconds = episode_cost(config, episode_seconds, catchup_seconds)
    points: dict[str, dict[float, float]] = {}
    with open(os.path.join(logdir, "metrics.jsonl")) as file:
        for line in file:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a killed run
            if record.get("phase") != "test" or "episodes" not in record:
                continue
            hours = max(record["episodes"] - config.data.seed_episodes, 0) * seconds / 3600.0
            for key, value in record.items():
                if key.startswith(POLICY_RETURN):
                    points.setdefault(key, {})[hours] = value
    return config.policy.train, {key: (np.array(sorted(by_x)), np.array([by_x[x] for x in sorted(by_x)]))
                                 for key, by_x in points.items()}


def plot(runs: list[str], episode_seconds: dict[str, float], catchup_seconds: float, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 5))
    styles = {"cem": "o-", "sac": "s--", "sac_guided_cem": "^:", "random": "x-."}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (label, logdir) in enumerate(zip(run_labels(runs), runs)):
        collector, curves = training_hours(logdir, episode_seconds, catchup_seconds)
        for key, (hours, returns) in sorted(curves.items()):
            policy = key[len(POLICY_RETURN):]
            axis.plot(hours, returns, styles.get(policy, "o-"), color=colors[index % len(colors)], markersize=4,
                      label=f"{label} (collects with {collector}): {policy} acting")
    axis.set_xlabel("hours of training on this machine (updates + collection, at the measured costs)")
    axis.set_ylabel("test-phase return")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True, help="run whose latest checkpoint and episodes are timed")
    parser.add_argument("--policies", nargs="+", default=list(COLLECTING), choices=["random", "cem", "sac", "sac_guided_cem"])
    parser.add_argument("--episodes", type=int, default=2, help="timed episodes per policy (after one warm-up)")
    parser.add_argument("--updates", type=int, default=20, help="timed learner updates and catch-up rounds (after one warm-up each)")
    parser.add_argument("--set", nargs="*", default=[], dest="overrides", help="config overrides, e.g. env.time_limit=200")
    parser.add_argument("--json", required=True)
    parser.add_argument("--runs", nargs="*", default=[], help="runs to redraw against training hours")
    parser.add_argument("--out", help="PNG for --runs")
    args = parser.parse_args()
    if args.runs and not args.out:
        parser.error("--runs needs --out FILE.png")

    config, agent, env, step = load_agent(args.logdir, args.overrides)
    update, catchup = time_updates(config, agent, os.path.join(args.logdir, "train_episodes"), args.updates)
    collection = time_collection(agent, env, args.policies, args.episodes)
    per_episode = {name: config.schedule.collect_every * update + statistics.median(seconds)
                   for name, seconds in collection.items()}
    result = {
        "logdir": args.logdir, "checkpoint_step": step, "overrides": args.overrides,
        "update_seconds": update, "sac_updates_per_update": config.sac.updates_per_step,
        "catchup_round_seconds": catchup,
        "collect_every": config.schedule.collect_every,
        "collect_seconds": collection,
        "episode_seconds": per_episode,
    }
    if "cem" in per_episode:
        result["episode_seconds_relative_to_cem"] = {name: seconds / per_episode["cem"]
                                                     for name, seconds in per_episode.items()}
    print(f"update {update:.3f} s x {config.schedule.collect_every} per episode; catch-up round {catchup:.3f} s")
    for name, seconds in per_episode.items():
        print(f"{name:15s} collection {statistics.median(collection[name]):7.1f} s   training episode {seconds:7.1f} s"
              + (f"   ({seconds / per_episode['cem']:.2f} of cem)" if "cem" in per_episode else ""))
    with open(args.json, "w") as file:
        json.dump(result, file, indent=2)
    if args.runs:
        plot(args.runs, per_episode, catchup, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
