"""Kill anywhere, resume always: SIGKILL a training run at random moments, resume it, check nothing is lost.

Usage:
    .venv/bin/python bench/kill_resume.py --kills 50 --logdir /tmp/kill_run [--seed 0]

Each cycle starts `planet-sac train` on the smoke config (checkpoints every 2 updates,
an episode every 3), and kills it with SIGKILL: one cycle in five during start-up, the
others a random 0-3 s after the run has written a new checkpoint, so kills land during
collection, gradient steps and checkpoint writes. The next
cycle resumes the same logdir. After each kill: every snapshotted episode is still there
exactly once and loads, no episode file is partial, and the checkpointed step never goes
backwards. At the end a last resume must finish cleanly and its checkpoint must load.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkpoint_step(logdir: str) -> int:
    """The step of the latest checkpoint, read from the checkpoint state file (-1 if none)."""
    try:
        text = Path(logdir, "checkpoints", "checkpoint").read_text()
    except FileNotFoundError:
        return -1
    match = re.search(r'^model_checkpoint_path: ".*ckpt-(\d+)"', text, re.M)
    return int(match.group(1)) if match else -1


def wait_for_checkpoint_after(logdir: str, step: int, process: subprocess.Popen, timeout: float = 300.0) -> None:
    """Waits until the run has written a checkpoint newer than `step`, i.e. it is training."""
    deadline = time.monotonic() + timeout
    while checkpoint_step(logdir) <= step:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the run made no progress past step {step} (exit status {process.poll()})")
        time.sleep(0.2)


def complete_episodes(logdir: str) -> set[str]:
    """Every complete episode file of the run, those a resume set aside in `interrupted/` included."""
    from planet_sac.episodes.folder import list_episodes

    return {path for sub in ("train_episodes", "test_episodes", "train_episodes/interrupted", "test_episodes/interrupted")
            for path in list_episodes(f"{logdir}/{sub}")}


def check_episodes(paths: set[str]) -> None:
    from planet_sac.episodes.storage import load_episode

    for path in paths:
        load_episode(path)  # raises BadEpisodeError on a partial or damaged file


def train_command(logdir: str, train_steps: int) -> list[str]:
    return [sys.executable, "-m", "planet_sac", "train", "--config", str(ROOT / "configs" / "smoke.yaml"),
            "--logdir", logdir, "--train-steps", str(train_steps), "--quiet",
            "--set", "schedule.checkpoint_every=2", "--set", "schedule.collect_every=3",
            "--set", "schedule.train_phase_steps=7"]


def kill_cycles(logdir: str, kills: int, seed: int = 0, min_delay: float = 5.0, max_delay: float = 3.0,
                log=print) -> dict:
    """Runs `kills` kill/resume cycles and a final clean resume; returns a summary (raises on a violation)."""
    rng = random.Random(seed)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    last_step = -1
    survived = 0
    for cycle in range(kills):
        process = subprocess.Popen(train_command(logdir, 10_000), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, env=env, cwd=ROOT)
        if cycle % 5 == 0:  # one kill in five lands during start-up (restore, seed episodes, tracing)
            moment = "start-up"
            time.sleep(rng.uniform(0.5, min_delay))
        else:  # the others while training: updates, collection and checkpoint writes every 2 updates
            moment = "training"
            wait_for_checkpoint_after(logdir, last_step, process)
            time.sleep(rng.uniform(0.0, max_delay))
        before = complete_episodes(logdir)
        if process.poll() is not None:
            raise RuntimeError(f"cycle {cycle}: the run exited by itself with {process.returncode}: "
                               f"{process.stderr.read().decode()[-2000:]}")
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
        after = complete_episodes(logdir)
        missing = before - after
        if missing:
            raise RuntimeError(f"cycle {cycle}: episodes lost after the kill: {sorted(missing)[:3]}")
        check_episodes(after)
        step = checkpoint_step(logdir)
        if step < last_step:
            raise RuntimeError(f"cycle {cycle}: checkpointed step went back from {last_step} to {step}")
        last_step = step
        survived += 1
        log(f"kill {cycle + 1}/{kills} during {moment}: checkpoint step {step}, {len(after)} episodes intact")

    final = subprocess.run(train_command(logdir, max(last_step, 0) + 4), capture_output=True, text=True, env=env, cwd=ROOT)
    if final.returncode != 0:
        raise RuntimeError(f"final resume failed ({final.returncode}): {final.stderr[-2000:]}")
    check_episodes(complete_episodes(logdir))
    final_step = checkpoint_step(logdir)
    if final_step < max(last_step, 0) + 4:
        raise RuntimeError(f"final checkpoint is at step {final_step}, expected {max(last_step, 0) + 4}")
    return {"kills_survived": survived, "final_step": final_step, "episodes": len(complete_episodes(logdir))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=3.0, help="kill up to this many seconds after a new checkpoint")
    args = parser.parse_args()
    summary = kill_cycles(args.logdir, args.kills, args.seed, max_delay=args.max_delay)
    print(f"survived {summary['kills_survived']} of {args.kills} SIGKILLs; final step {summary['final_step']}, "
          f"{summary['episodes']} episodes, all readable")


if __name__ == "__main__":
    main()
