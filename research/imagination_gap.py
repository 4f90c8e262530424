r"""Does the head's imagination pay more than the world does under the same policy? Imagined against real reward, by depth.

Usage:
    .venv/bin/python research/imagination_gap.py --logdir RUN --episodes 6 --horizon 15 --every 5 --samples 4 \
        --json OUT.json

Plays `--episodes` episodes of RUN's SAC head from its latest checkpoint (the evaluation's episode seeds from
`--seed`) with its actions sampled (`sac.test_action=sample`, as the head acts in its imagination; no exploration
noise), then, from every `--every`-th filtered state t of each episode (posterior means), rolls the model's prior
`--horizon` steps under the same actor, sampled, as the SAC head's imagined half is made (`--samples` rollouts per
start). Reported per depth k = 1..horizon: the mean predicted reward at the imagined state k and the mean reward
the environment paid k steps after t under the same policy, overall and over the episodes that scored nothing.
The two are the same policy's, so a gap that grows with k is imagination paying where the world does not (the
actor steering the model's latent where its reward head is wrong); `research/reward_bias.py` measures the model on
the recorded actions instead, which an actor in imagination does not take.
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
from planet_sac.control.transitions import imagine
from planet_sac.diagnostics import episode_posteriors
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode


def imagined_and_real(world_model, sac, episode: dict, horizon: int, every: int, samples: int,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, real), each [starts, horizon]: column k - 1 the reward head at the k-th imagined state from the
    filtered state at t under the actor (mean over `samples` rollouts), and the recorded `reward[t + k]`."""
    posts = episode_posteriors(world_model, episode)  # [T + 1, ...]; reward[t + 1] follows the state at t
    reward = np.asarray(episode["reward"], np.float64)
    starts = np.arange(0, len(reward) - horizon, every)
    index = np.repeat(starts, samples)  # each start `samples` times, its rollouts side by side
    state = {key: tf.gather(posts[key], index) for key in ("deter", "stoch")}
    actor_sample = lambda features, noise: sac.act(features, noise, False)  # noqa: E731
    _, _, rewards, _ = imagine(world_model, actor_sample, state, horizon, tf.random.Generator.from_seed(seed))
    predicted = rewards.numpy()[:, 1:].reshape(len(starts), samples, horizon).mean(1)
    real = np.stack([reward[t + 1:t + 1 + horizon] for t in starts])
    return predicted, real


def by_depth(predicted: np.ndarray, real: np.ndarray) -> list[dict]:
    """Per depth k = 1..H: the mean predicted and real reward and their difference, over every start."""
    return [{"k": k + 1, "predicted": float(predicted[:, k].mean()), "real": float(real[:, k].mean()),
             "gap": float((predicted[:, k] - real[:, k]).mean())} for k in range(predicted.shape[1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--horizon", type=int, default=15, help="imagined steps (the config's sac.imagination_horizon or more)")
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4, help="imagined rollouts per start")
    parser.add_argument("--seed", type=int, default=50_000, help="the suite's evaluation episodes start here")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if args.samples < 1 or args.every < 1 or args.horizon < 1:
        raise SystemExit("research/imagination_gap.py: --samples, --every and --horizon must be >= 1")

    config, agent, env, step = load_agent(args.logdir, ["sac.test_action=sample", *args.set], seed=args.seed)
    try:
        agent.policy.set_policies(test="sac")
        with tempfile.TemporaryDirectory() as folder:
            summaries = Actor(env, agent.policy, TEST, folder).run(args.episodes)
            episodes = [load_episode(path) for path in list_episodes(folder)]
    finally:
        env.close()
    pairs = [imagined_and_real(agent.world_model, agent.sac, episode, args.horizon, args.every, args.samples, seed)
             for seed, episode in enumerate(episodes)]
    predicted, real = np.concatenate([p for p, _ in pairs]), np.concatenate([r for _, r in pairs])
    failed = [pair for pair, episode in zip(pairs, episodes) if float(np.sum(episode["reward"])) < 1e-3]
    result = {"logdir": args.logdir, "step": step, "overrides": args.set, "horizon": args.horizon,
              "samples": args.samples, "returns": [summary["return"] for summary in summaries],
              "starts": len(predicted), "by_depth": by_depth(predicted, real),
              "by_depth_on_failed_episodes": by_depth(*(np.concatenate(side) for side in zip(*failed))) if failed else None}
    for row in result["by_depth"]:
        print(json.dumps(row), flush=True)
    print("returns", result["returns"])
    if args.json:
        with open(args.json, "w") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
