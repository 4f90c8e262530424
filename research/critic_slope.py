r"""Where the head fails, what does it do and what do its critics tell it? Its action and the critics' slope, by episode.

Usage:
    .venv/bin/python research/critic_slope.py --logdir RUN [--last 10] [--json OUT.json]

Reads RUN's last `--last` test episodes (`RUN/test_episodes`, as the test phases saved them), filters each one's
posteriors from its recorded observations with the latest checkpoint's world model, and reports per episode: its
return; the actor's pre-tanh mean |mu| averaged over the episode per action dimension and the share of states where
it saturates (|mu| > 2, tanh' < 0.07); min Q of the twin critics at the actor's mode; and that Q's slope in the
action there, |dQ/da| per dimension (the actor's gradient before the entropy term and the squash). A head that fails
by hardly acting where its critics are flat shows small |mu| and small slopes on the failing episodes; one that
acts against what the critics ask shows large slopes. docs/results.md ("Lever valuedet") quotes its output.
"""

from __future__ import annotations

import argparse
import json

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.agent import load_agent
from planet_sac.diagnostics import episode_posteriors
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode

SATURATED = 2.0  # |mu| above which tanh'(mu) < 0.07


def head_along(world_model, sac, episode: dict) -> dict:
    """The head along one recorded episode: `mu` [T + 1, A] (the actor's pre-tanh mean at each filtered state),
    `q` [T + 1] (min Q at the mode tanh(mu)) and `slope` [T + 1, A] (dQ/da there)."""
    posts = episode_posteriors(world_model, episode)
    features = world_model.rssm.features({key: posts[key] for key in ("deter", "stoch")})
    mean, _ = sac._distribution(features)
    action = tf.tanh(mean)
    with tf.GradientTape() as tape:
        tape.watch(action)
        q = sac.q_value(features, action)
    return {"mu": mean.numpy(), "q": q.numpy(), "slope": tape.gradient(q, action).numpy()}


def summary(head: dict, episode_return: float) -> dict:
    """One episode's row: its return, mean |mu| and saturated share per dimension, mean Q and mean |dQ/da|."""
    mu, slope = np.abs(head["mu"]), np.abs(head["slope"])
    rounded = lambda values: [round(float(value), 3) for value in values]  # noqa: E731
    return {"return": episode_return, "abs_mu": rounded(mu.mean(0)), "saturated": rounded((mu > SATURATED).mean(0)),
            "q": round(float(head["q"].mean()), 2), "abs_slope": rounded(slope.mean(0))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--last", type=int, default=10, help="the run's last N test episodes")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if args.last < 1:
        raise SystemExit("research/critic_slope.py: --last must be >= 1")
    config, agent, env, step = load_agent(args.logdir, [], seed=0)
    env.close()
    paths = list_episodes(f"{args.logdir}/test_episodes")[-args.last:]
    if not paths:
        raise SystemExit(f"research/critic_slope.py: no test episodes in {args.logdir}/test_episodes")
    rows = []
    for path in paths:
        episode = load_episode(path)
        rows.append(summary(head_along(agent.world_model, agent.sac, episode), float(np.sum(episode["reward"]))))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"logdir": args.logdir, "step": step, "episodes": rows}, file, indent=1)


if __name__ == "__main__":
    main()
