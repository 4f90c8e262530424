"""How many cores one pixel environment uses: steps per second and the CPU time of its process.

Usage:
    MUJOCO_GL=egl .venv/bin/python research/bench_env_cpu.py [--task dmc:cartpole-swingup] [--steps 120]
    MUJOCO_GL=egl LP_NUM_THREADS=1 .venv/bin/python research/bench_env_cpu.py   # one render thread

The environment runs in its own process (as `make_env` builds it); its user+system time comes
from /proc/PID/stat. If one environment already uses U cores, N processes on C cores can make
at most C / U times its steps per second: the bound behind the parallel-environment figures
in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid`, all its threads (Linux)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="dmc:cartpole-swingup")
    parser.add_argument("--action-repeat", type=int, default=8)
    parser.add_argument("--steps", type=int, default=120)
    args = parser.parse_args()
    from planet_sac.envs import make_env

    env = make_env(args.task, "image", args.action_repeat, 1000, 0, 64)
    inner = env
    while not hasattr(inner, "pid"):
        inner = inner.env
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def step() -> None:
        if env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))[2:4] != (False, False):
            env.reset()

    for _ in range(20):  # warm-up
        step()
    wall, parent, child = time.perf_counter(), time.process_time(), process_cpu_seconds(inner.pid)
    for _ in range(args.steps):
        step()
    wall = time.perf_counter() - wall
    parent, child = time.process_time() - parent, process_cpu_seconds(inner.pid) - child
    env.close()
    cores = (parent + child) / wall
    print(f"{args.task} LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS') or 'default'}: {args.steps / wall:.1f} steps/s, "
          f"{cores:.2f} cores (environment process {child / wall:.2f}), {1000 * (parent + child) / args.steps:.1f} ms CPU "
          f"per step; {os.cpu_count()} cores allow at most {os.cpu_count() / cores:.2f}x this rate")


if __name__ == "__main__":
    main()
