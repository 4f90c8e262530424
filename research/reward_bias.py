r"""Where does a run's reward model pay what the environment does not? Filtered against open-loop, by distance.

Usage:
    .venv/bin/python research/reward_bias.py --logdir RUN --episodes 'RUN/test_episodes/*.npz' --last 20 \
        --horizon 15 --samples 4 --json OUT.json

For each of the `--last` saved episodes of the glob (by name: the newest test phases), with RUN's latest
checkpoint: the reward head on the filtered (posterior-mean) states, as the reward loss trains it, and on the
prior's open-loop rollouts from every `--every`-th filtered state over the next `--horizon` recorded actions, as
the SAC head's imagined half of a batch sees it (there with sampled prior states: `--samples` noise draws per
start; `--samples 0` rolls out the prior's mean, as CEM scores a plan). Reported per distance k = 0 (filtered),
1..horizon: the mean predicted and real reward, each split by whether the real reward is 0 (< `--zero`) or not,
so that a model that pays where the environment does not shows a positive mean on the real zeros.
"""

from __future__ import annotations

import argparse
import glob
import json

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.agent import load_agent
from planet_sac.diagnostics import episode_posteriors
from planet_sac.episodes.storage import load_episode


def predicted_rewards(world_model, episode: dict, horizon: int, every: int, samples: int,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, real), each [starts, horizon + 1]: column 0 the filtered state's reward at t, column k the
    open-loop prediction of reward[t + k] from the filtered state at t (mean over `samples` prior draws)."""
    posts = episode_posteriors(world_model, episode)  # [T + 1, ...]
    features = world_model.rssm.features(posts)
    filtered = tf.squeeze(tf.cast(world_model.reward(features), tf.float32), -1).numpy()
    action = np.asarray(episode["action"], np.float32)
    reward = np.asarray(episode["reward"], np.float64)
    starts = np.arange(0, len(action) - horizon, every)
    state = {key: tf.gather(value, starts) for key, value in posts.items()}
    plan = tf.constant(np.stack([action[t + 1:t + 1 + horizon] for t in starts]))
    stoch = world_model.rssm.stoch_size
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(max(samples, 1)):
        noise = rng.normal(size=(len(starts), horizon, stoch)) if samples else np.zeros((len(starts), horizon, stoch))
        imagined = world_model.rssm.imagine(state, plan, tf.constant(noise, tf.float32))
        draws.append(tf.squeeze(tf.cast(world_model.reward(world_model.rssm.features(imagined)), tf.float32), -1).numpy())
    predicted = np.concatenate([filtered[starts, None], np.mean(draws, 0)], 1)
    real = np.stack([reward[t:t + 1 + horizon] for t in starts])
    return predicted, real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--episodes", required=True, help="glob of saved episodes (.npz), e.g. 'RUN/test_episodes/*.npz'")
    parser.add_argument("--last", type=int, default=20, help="the last N episodes of the glob, by name")
    parser.add_argument("--horizon", type=int, default=15, help="agent steps (the SAC head's imagination horizon)")
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4, help="prior noise draws per start (0: the prior's mean)")
    parser.add_argument("--zero", type=float, default=1e-3, help="a real reward below this counts as none")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    paths = sorted(glob.glob(args.episodes))[-args.last:]
    if not paths:
        raise SystemExit(f"research/reward_bias.py: no episode matches {args.episodes!r}")
    config, agent, env, step = load_agent(args.logdir)
    env.close()
    pairs = [predicted_rewards(agent.world_model, load_episode(path), args.horizon, args.every, args.samples)
             for path in paths]
    predicted, real = np.concatenate([p for p, _ in pairs]), np.concatenate([r for _, r in pairs])
    zero = real < args.zero
    rows = []
    for k in range(args.horizon + 1):
        rows.append({"k": k, "predicted": float(predicted[:, k].mean()), "real": float(real[:, k].mean()),
                     "predicted_on_zero": float(predicted[zero[:, k], k].mean()) if zero[:, k].any() else None,
                     "predicted_on_paid": float(predicted[~zero[:, k], k].mean()) if (~zero[:, k]).any() else None,
                     "real_on_paid": float(real[~zero[:, k], k].mean()) if (~zero[:, k]).any() else None,
                     "share_paid": float((~zero[:, k]).mean())})
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"logdir": args.logdir, "step": step, "episodes": paths, "samples": args.samples,
                       "starts": len(predicted), "rows": rows}, file, indent=1)


if __name__ == "__main__":
    main()
