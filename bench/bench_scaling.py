"""Scaling out on one machine: environment steps per second with 1, 2, 4 environment processes, and the
learner's update rate alone, with collection in its own process, and beside a separate collector process.

Usage:
    MUJOCO_GL=egl .venv/bin/python bench/bench_scaling.py --run LOGDIR [--envs 1 2 4] [--policies random sac cem]
        [--steps 200] [--updates 30] [--json bench/results/scaling.json]

LOGDIR is a trained run (its config, checkpoint and train_episodes/ are read, never written:
the learner parts run on a copy in a temporary directory). Parts:

- `env_steps_per_s[policy][n]`: `n` environments of the run's task in parallel processes
  (`env.num_envs`), acting with the run's agent (`random`, `sac`, `cem`) through the Actor,
  for `--steps` steps per environment after one warm-up episode round.
- `learner`: updates per second of the run's config with `schedule.collect=false` and nothing
  else running (`alone`); the same with a `planet-sac collect --policy sac --reload-every 60
  --episodes forever` process writing into its train_episodes/ (`with_collector_process`;
  with `--paced` the collector runs with `--per-checkpoint`, one episode per learner checkpoint);
  and the rate a single process gets when it also collects one episode per
  `schedule.collect_every` updates itself (`in_process_collection`, from the measured update
  and episode times). `alone` and `with_collector_process` alternate twice, so drift in the
  machine's load shows up as a spread instead of a bias.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def env_rates(run: str, counts: list[int], policies: list[str], steps: int) -> dict:
    from planet_sac.acting.actor import TRAIN, Actor, RandomPolicy
    from planet_sac.agent import load_agent
    from planet_sac.envs import make_envs

    config, agent, env, _ = load_agent(run)
    env.close()
    rates: dict = {}
    for policy in policies:
        rates[policy] = {}
        if policy != "random":  # random: a numpy policy, so only the environments are measured
            agent.policy.set_policies(train=policy)
        for count in counts:
            e = config.env
            envs = make_envs(dataclasses.replace(e, time_limit=steps), num_envs=count)
            acting = RandomPolicy(envs.action_space.shape[0], seed=0) if policy == "random" else agent.policy
            actor = Actor(envs, acting, TRAIN)
            try:
                actor.run(count)  # warm-up: processes started, policy traced
                start = time.perf_counter()
                episodes = actor.run(count)
                seconds = time.perf_counter() - start
            finally:
                actor.close()
            total = sum(episode["length"] for episode in episodes)
            rates[policy][str(count)] = total / seconds
            print(f"{policy:<8} {count} env(s): {total / seconds:8.1f} env steps/s ({total} steps in {seconds:.1f} s)", flush=True)
    return rates


def learner_rate(logdir: str, updates: int) -> float:
    """Updates per second of `updates` updates of the run in `logdir` (collect=false), after 3 warm-up updates."""
    from planet_sac.config_loading import apply_overrides
    from planet_sac.training.run_dir import resolve_run_config
    from planet_sac.training.trainer import Trainer

    config = apply_overrides(resolve_run_config(logdir), ["schedule.collect=false"])
    trainer = Trainer(config, logdir, progress=False, force=True)
    try:
        start_step = int(trainer.counters.step.numpy())
        trainer.run(train_steps=start_step + 3)
        start = time.perf_counter()
        trainer.run(train_steps=start_step + 3 + updates)
        return updates / (time.perf_counter() - start)
    finally:
        trainer.close()


def episode_seconds(run: str, policy: str) -> float:
    """Seconds of one training episode of the run's task with `policy`, in this process."""
    from planet_sac.acting.actor import TRAIN, Actor
    from planet_sac.agent import load_agent

    _, agent, env, _ = load_agent(run)
    agent.policy.set_policies(train=policy)
    actor = Actor(env, agent.policy, TRAIN)
    actor.run(1)
    start = time.perf_counter()
    actor.run(1)
    seconds = time.perf_counter() - start
    actor.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--policies", nargs="+", default=["random", "sac", "cem"])
    parser.add_argument("--steps", type=int, default=200, help="agent steps per environment (episode length)")
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--parts", nargs="+", default=["envs", "learner"], choices=["envs", "learner"])
    parser.add_argument("--paced", action="store_true",
                        help="the collector plays one episode per learner checkpoint (--per-checkpoint), not continuously")
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    results: dict = {"run": args.run, "cpus": os.cpu_count()}
    if "envs" in args.parts:
        results["env_steps_per_s"] = env_rates(args.run, args.envs, args.policies, args.steps)
    if "learner" in args.parts:
        from planet_sac.checkpoints import find_run_config

        work = tempfile.mkdtemp(prefix="bench_scaling_")
        logdir = os.path.join(work, "run")
        shutil.copytree(args.run, logdir, ignore=shutil.ignore_patterns("events.*", "test_episodes"))
        alone, beside = [], []
        for _ in range(2):
            alone.append(learner_rate(logdir, args.updates))
            print(f"learner alone: {alone[-1]:.3f} updates/s", flush=True)
            collector = subprocess.Popen([sys.executable, "-m", "planet_sac", "collect", "--policy", "sac", "--checkpoint", logdir,
                                          "--outdir", os.path.join(logdir, "train_episodes"), "--episodes", "forever",
                                          "--reload-every", "5", *(["--per-checkpoint"] if args.paced else []), "--quiet"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(20)  # the collector's start-up (TensorFlow, environment, tracing) is not what we measure
            try:
                beside.append(learner_rate(logdir, args.updates))
            finally:
                collector.terminate()
                collector.wait(timeout=60)
            print(f"learner beside a collector process: {beside[-1]:.3f} updates/s", flush=True)
        schedule = find_run_config(args.run).schedule
        seconds = episode_seconds(args.run, "sac")
        update = 1.0 / float(np.mean(alone))
        results["learner"] = {
            "alone": alone, "with_collector_process": beside, "paced_collector": args.paced,
            "ratio_with_collector_process": float(np.mean(beside) / np.mean(alone)),
            "sac_episode_seconds": seconds, "collect_every": schedule.collect_every,
            "in_process_collection": 1.0 / (update + seconds / schedule.collect_every),
        }
        print(f"in-process collection (an episode of {seconds:.1f} s per {schedule.collect_every} updates): "
              f"{results['learner']['in_process_collection']:.3f} updates/s", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    main()
