r"""Does the world model predict the rewards of each policy's actions equally well? Open-loop reward error by policy.

Usage:
    .venv/bin/python research/model_error_by_policy.py --logdir RUN --episodes 2 --policies sac cem random \
        --json OUT.json

Plays `--episodes` test-phase episodes of each policy from RUN's latest checkpoint (the evaluation's episode
seeds), then, for every `--every`-th step t of each episode, filters the frames up to t (posterior means, as
when acting) and predicts the next `--horizon` rewards open-loop from the actions the policy really took (the
prior's mean, as CEM scores a plan). Reported per policy: the mean predicted and real reward sum over the
horizon, their mean absolute gap, and the mean |action| the policy took. A planner that exploits the model shows a predicted sum far above the real
one on its own actions while the head's actions, which the model was trained on, show a small gap.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.acting.actor import TEST, Actor
from planet_sac.agent import load_agent
from planet_sac.diagnostics import episode_posteriors
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode


def reward_gaps(world_model, episode: dict, horizon: int, every: int) -> tuple[list[float], list[float]]:
    """(predicted, real) reward sums over `horizon` steps after every `every`-th filtered step t of `episode`."""
    posts = episode_posteriors(world_model, episode)  # [T + 1, ...]
    action = np.asarray(episode["action"], np.float32)
    reward = np.asarray(episode["reward"], np.float64)
    stoch = world_model.rssm.stoch_size
    predicted, real = [], []
    for t in range(0, len(action) - horizon, every):
        state = {key: value[t][None] for key, value in posts.items()}
        imagined = world_model.rssm.imagine(state, tf.constant(action[None, t + 1:t + 1 + horizon]),
                                            tf.zeros([1, horizon, stoch]))
        rewards = tf.squeeze(world_model.reward(world_model.rssm.features(imagined)), -1)[0]
        predicted.append(float(tf.reduce_sum(tf.cast(rewards, tf.float32))))
        real.append(float(reward[t + 1:t + 1 + horizon].sum()))
    return predicted, real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--policies", nargs="+", default=["sac", "cem", "random"])
    parser.add_argument("--horizon", type=int, default=12, help="agent steps (PlaNet's planning horizon)")
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=50_000, help="the suite's evaluation episodes start here")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override, e.g. cem.iterations=10")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    config, agent, env, step = load_agent(args.logdir, args.set, seed=args.seed)
    result: dict = {"logdir": args.logdir, "overrides": args.set, "step": step, "horizon": args.horizon, "policies": {}}
    try:
        for policy in args.policies:
            agent.policy.set_policies(test=policy)
            with tempfile.TemporaryDirectory() as folder:
                summaries = Actor(env, agent.policy, TEST, folder).run(args.episodes)
                predicted, real, magnitude = [], [], []
                for path in list_episodes(folder):
                    episode = load_episode(path)
                    p, r = reward_gaps(agent.world_model, episode, args.horizon, args.every)
                    predicted += p
                    real += r
                    magnitude.append(float(np.abs(episode["action"][1:]).mean()))
            gap = np.asarray(predicted) - np.asarray(real)
            result["policies"][policy] = {
                "returns": [summary["return"] for summary in summaries], "windows": len(gap),
                "predicted_sum": float(np.mean(predicted)), "real_sum": float(np.mean(real)),
                "gap_mean": float(gap.mean()), "gap_abs": float(np.abs(gap).mean()),
                "mean_abs_action": float(np.mean(magnitude))}
            print(policy, json.dumps(result["policies"][policy]), flush=True)
    finally:
        env.close()
    if args.json:
        with open(args.json, "w") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
