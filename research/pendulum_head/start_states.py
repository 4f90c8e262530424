"""Where the SAC head fails on Pendulum: per start state, the head's and CEM's returns, the critic's Q, the
head's actions, and whether the run's training data covers the states the head visits.

Plays `--episodes` test-phase episodes (no exploration) with each policy from the same start states (one
environment per policy, seeded alike, so episode k of every policy starts from the same angle and velocity),
on the latest checkpoint of LOGDIR. For every head episode it reports:

- the start angle theta0 (0 = upright, +-pi = hanging) and angular velocity;
- the return of the head and of CEM from that start;
- the critic's Q(z_0, a_1) at the start beside the real discounted return G_0 the head then earned;
- the head's mean |action| and mean action over the episode (saturated torque in one direction = pushing
  against gravity without swinging);
- the share of the episode's last 50 steps spent upright (|theta| < 0.5) and the final angle;
- coverage: for each state the head visited, the distance to the nearest state of the run's training
  episodes in (theta / pi, thetadot / 8) (the state box scaled to [-1, 1]), split into the random seed
  episodes and the CEM-collected ones; the mean and the share of states farther than 0.1.

    .venv/bin/python research/pendulum_head/start_states.py --logdir RUN --episodes 20 \
        --json research/pendulum_head/results/NAME.json [--plot NAME.png]
"""

from __future__ import annotations

import argparse
import json
import os

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.acting.actor import TEST, Actor
from planet_sac.agent import load_agent
from planet_sac.diagnostics import discounted_returns, episode_posteriors
from planet_sac.envs import make_env
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode


def angles(state: np.ndarray) -> np.ndarray:
    """[T, 3] (cos, sin, thetadot) -> [T, 2] (theta in (-pi, pi], thetadot)."""
    return np.stack([np.arctan2(state[:, 1], state[:, 0]), state[:, 2]], -1)


def scaled(points: np.ndarray) -> np.ndarray:
    return points / np.array([np.pi, 8.0])


def nearest(points: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Distance of each of points [N, 2] to its nearest neighbour in data [M, 2] (scaled, theta wrapped)."""
    diff = scaled(points)[:, None] - scaled(data)[None]
    diff[..., 0] = np.minimum(np.abs(diff[..., 0]), 2.0 - np.abs(diff[..., 0]))
    return np.sqrt((diff ** 2).sum(-1)).min(1)


def play(logdir: str, policy: str, episodes: int, seed: int, agent, config) -> list[dict]:
    env = make_env(config.env, seed=seed)
    agent.policy.set_policies(test=policy)
    actor = Actor(env, agent.policy, TEST)
    try:
        return [summary["episode"] for summary in actor.run(episodes)]
    finally:
        actor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--no-cem", action="store_true", help="skip CEM (slow)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--plot", help="phase portrait: training data and the head's episodes (PNG)")
    args = parser.parse_args()

    config, agent, env, step = load_agent(args.logdir)
    env.close()
    gamma = config.sac.discount
    paths = list_episodes(os.path.join(args.logdir, "train_episodes"))
    data = [angles(load_episode(path)["state"]) for path in paths]
    seed_data = np.concatenate(data[:config.data.seed_episodes])
    cem_data = np.concatenate(data[config.data.seed_episodes:]) if len(data) > config.data.seed_episodes else seed_data[:0]
    all_data = np.concatenate(data)

    head = play(args.logdir, "sac", args.episodes, args.seed, agent, config)
    cem = [] if args.no_cem else play(args.logdir, "cem", args.episodes, args.seed, agent, config)
    rows = []
    for index, episode in enumerate(head):
        states = angles(episode["state"])
        features = agent.world_model.rssm.features(episode_posteriors(agent.world_model, episode))
        q = agent.sac.q_value(features[:-1], tf.constant(episode["action"][1:], tf.float32)).numpy()
        real = discounted_returns(episode["reward"], episode["discount"], gamma)
        actions = episode["action"][1:, 0]
        tail = states[-50:]
        distance_seed = nearest(states, seed_data)
        distance_cem = nearest(states, cem_data) if len(cem_data) else np.full(len(states), np.inf)
        distance = nearest(states, all_data)
        rows.append({
            "theta0": float(states[0, 0]), "thetadot0": float(states[0, 1]),
            "sac_return": float(episode["reward"].sum()),
            "cem_return": float(cem[index]["reward"].sum()) if cem else None,
            "cem_start_check": float(np.abs(angles(cem[index]["state"])[0] - states[0]).max()) if cem else None,
            "q0": float(q[0]), "g0": float(real[0]), "q_mean": float(q.mean()), "g_mean": float(real[:len(q)].mean()),
            "mean_abs_action": float(np.abs(actions).mean()), "mean_action": float(actions.mean()),
            "saturated_share": float((np.abs(actions) > 0.95).mean()),
            "upright_share_last50": float((np.abs(tail[:, 0]) < 0.5).mean()), "final_theta": float(states[-1, 0]),
            "max_abs_thetadot": float(np.abs(states[:, 1]).max()),
            "data_distance_mean": float(distance.mean()), "data_far_share": float((distance > 0.1).mean()),
            "seed_data_distance_mean": float(distance_seed.mean()), "cem_data_distance_mean": float(distance_cem.mean()),
        })
        print(f"{index:2d} theta0 {rows[-1]['theta0']:+.2f} thdot0 {rows[-1]['thetadot0']:+.2f} | SAC {rows[-1]['sac_return']:8.1f}"
              f" CEM {rows[-1]['cem_return'] if cem else float('nan'):8.1f} | Q0 {rows[-1]['q0']:7.1f} G0 {rows[-1]['g0']:7.1f}"
              f" | |a| {rows[-1]['mean_abs_action']:.2f} a {rows[-1]['mean_action']:+.2f} sat {rows[-1]['saturated_share']:.2f}"
              f" | up {rows[-1]['upright_share_last50']:.2f} | far {rows[-1]['data_far_share']:.2f}"
              f" d {rows[-1]['data_distance_mean']:.3f} (seed {rows[-1]['seed_data_distance_mean']:.3f}"
              f" cem {rows[-1]['cem_data_distance_mean']:.3f})", flush=True)
    sac_returns = [row["sac_return"] for row in rows]
    summary = {"logdir": args.logdir, "step": step, "episodes": args.episodes, "seed": args.seed,
               "train_episodes": len(paths), "seed_episodes": config.data.seed_episodes,
               "sac": {"mean": float(np.mean(sac_returns)), "std": float(np.std(sac_returns))},
               "rows": rows}
    if cem:
        cem_returns = [row["cem_return"] for row in rows]
        summary["cem"] = {"mean": float(np.mean(cem_returns)), "std": float(np.std(cem_returns))}
    print(json.dumps({key: value for key, value in summary.items() if key != "rows"}))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as file:
        json.dump(summary, file, indent=1)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 5))
        ax.scatter(seed_data[:, 0], seed_data[:, 1], s=2, c="0.75", label="random seed episodes")
        if len(cem_data):
            ax.scatter(cem_data[:, 0], cem_data[:, 1], s=2, c="tab:blue", alpha=0.4, label="CEM episodes")
        for row, episode in zip(rows, head):
            states = angles(episode["state"])
            good = row["sac_return"] > -400
            ax.plot(states[:, 0], states[:, 1], ".", ms=2, c="tab:green" if good else "tab:red")
            ax.plot(states[0, 0], states[0, 1], "o", ms=5, mfc="none", c="tab:green" if good else "tab:red")
        ax.set_xlabel("theta (0 = upright)")
        ax.set_ylabel("theta dot")
        ax.set_title(f"SAC head episodes (green > -400, red below) over the training data, step {step}")
        ax.legend(loc="upper right", fontsize=7)
        fig.savefig(args.plot, dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()
