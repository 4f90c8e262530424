"""Regenerate the small example data sets shipped in data/ (random-policy episodes).

* data/pendulum_state/: 5 episodes of gym:Pendulum-v1, state observations, 200 steps each.
* data/cartpole_swingup_image/: 2 episodes of dmc:cartpole-swingup, 64x64 images,
  action repeat 8, 125 steps each.

Seeds are fixed, so the episode contents are reproducible (file names carry a timestamp and a
random id). Existing episodes in these two directories are replaced.

Usage: python scripts/make_example_data.py [--data-dir data]
"""

from __future__ import annotations

import argparse
import os

from planet_sac.acting.actor import Actor, RandomPolicy
from planet_sac.envs import make_env
from planet_sac.episodes.folder import list_episodes

DATASETS = (
    ("pendulum_state", dict(task="gym:Pendulum-v1", obs="state", action_repeat=1), 5),
    ("cartpole_swingup_image", dict(task="dmc:cartpole-swingup", obs="image", action_repeat=8), 2),
)
SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_dir = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "data"))
    parser.add_argument("--data-dir", default=default_dir)
    args = parser.parse_args()
    for name, env_kwargs, num_episodes in DATASETS:
        outdir = os.path.join(args.data_dir, name)
        for path in list_episodes(outdir):
            os.remove(path)
        env = make_env(**env_kwargs, seed=SEED)
        actor = Actor(env, RandomPolicy(env.action_space.shape[0], seed=SEED), "train", outdir)
        summaries = actor.run(num_episodes)
        actor.close()
        for summary in summaries:
            print(f"{summary['path']}: length {summary['length']}, return {summary['return']:.1f}")


if __name__ == "__main__":
    main()
