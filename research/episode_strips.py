"""Where a policy's episodes go wrong: per-segment returns and film strips of its worst and best episode.

Runs `--episodes` test-phase episodes of `--policy` on LOGDIR's latest checkpoint (or reads saved
episodes, `--saved 'RUN/test_episodes/*.npz'`: no model is loaded) and writes
OUT.json (each episode's return and its reward summed over segments of `--segment` agent steps)
and OUT_worst.png / OUT_best.png (every `--frame-every`-th observation of that episode side by
side, for pixel tasks). A return that is high in the first segments and near zero after says
the episode failed at one moment (cheetah on its back) rather than acting poorly throughout.

    .venv/bin/python research/episode_strips.py --logdir RUN --policy sac --episodes 8 \\
        --out research/results/sac_head/anatomy/cheetah_head
    .venv/bin/python research/episode_strips.py --saved '~/runs/RUN/test_episodes/2026*.npz' --out /tmp/strips
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
from PIL import Image

from planet_sac.acting.actor import TEST, run_episode
from planet_sac.agent import load_agent
from planet_sac.config import POLICIES


def segment_returns(rewards: np.ndarray, segment: int) -> list[float]:
    """Rewards summed over consecutive segments of `segment` steps (the last one may be shorter)."""
    return [float(np.sum(rewards[start:start + segment])) for start in range(0, len(rewards), segment)]


def film_strip(frames: np.ndarray, every: int) -> np.ndarray:
    """Every `every`-th frame [H, W, C] of [T, H, W, C], side by side."""
    return np.concatenate(list(frames[::every]), axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--logdir", help="run episodes of --policy on this run's latest checkpoint")
    source.add_argument("--saved", help="glob of saved episodes (.npz with reward, and image for the strips)")
    parser.add_argument("--policy", choices=POLICIES, default="sac")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--segment", type=int, default=50, help="agent steps per segment of the per-segment returns")
    parser.add_argument("--frame-every", type=int, default=25, help="agent steps between frames of the film strips")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], dest="overrides", help="config overrides, e.g. cem.value_weight=0.5")
    parser.add_argument("--out", required=True, help="path prefix of OUT.json and the film strips")
    args = parser.parse_args()
    for name in ("episodes", "segment", "frame_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be 1 or more")

    if args.saved:
        files = sorted(glob.glob(os.path.expanduser(args.saved)))
        if not files:
            parser.error(f"--saved {args.saved!r}: no file matches")
        episodes = [dict(np.load(file)) for file in files]
        step, image_obs = None, all("image" in episode for episode in episodes)
    else:
        config, agent, env, step = load_agent(args.logdir, [*args.overrides, f"seed={args.seed}"],
                                              seed=10_000 + args.seed)
        agent.policy.set_policies(test=args.policy)
        episodes = [run_episode(env, agent.policy, TEST) for _ in range(args.episodes)]
        env.close()
        image_obs = config.env.obs == "image"
    returns = [float(np.sum(episode["reward"])) for episode in episodes]
    result = {"logdir": args.logdir, "saved": args.saved, "checkpoint_step": step,
              "policy": None if args.saved else args.policy, "overrides": args.overrides,
              "seed": args.seed, "returns": returns, "mean": float(np.mean(returns)), "std": float(np.std(returns)),
              "segment": args.segment,
              "segment_returns": [segment_returns(np.asarray(episode["reward"]), args.segment) for episode in episodes]}
    with open(f"{args.out}.json", "w") as file:
        json.dump(result, file, indent=1)
    print(json.dumps({key: result[key] for key in ("policy", "mean", "std", "returns")}), flush=True)
    if image_obs:
        for name, index in (("worst", int(np.argmin(returns))), ("best", int(np.argmax(returns)))):
            strip = film_strip(np.asarray(episodes[index]["image"]), args.frame_every)
            Image.fromarray(strip).save(f"{args.out}_{name}.png")


if __name__ == "__main__":
    main()
