"""Open-loop error of a Pendulum world model on the run's own test episodes, near the top and elsewhere.

For every start t of each recorded test episode: filter the posterior up to t (zero noise), predict the
next H rewards and states open-loop from the recorded actions, and compare with what happened. Prints
the RMS reward error per horizon and the angle error (from the decoded cos/sin) split by whether the
pendulum was near the top (cos > 0.9) at t.

    python research/pendulum_model/open_loop_error.py LOGDIR [--horizon 12]
"""
from __future__ import annotations

import argparse
import glob
import os

import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on, see planet_sac/startup.py)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.agent import load_agent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--folder", default="test_episodes")
    args = parser.parse_args()
    config, agent, env, step = load_agent(args.logdir)
    env.close()
    wm = agent.world_model
    stoch = wm.rssm.stoch_size
    H = args.horizon
    rows = []
    for path in sorted(glob.glob(os.path.join(args.logdir, args.folder, "*.npz"))):
        ep = dict(np.load(path))
        obs = tf.constant(ep["state"][None], tf.float32)
        act = tf.constant(ep["action"][None], tf.float32)
        T = act.shape[1]
        posts, _ = wm.rssm.observe(wm.embed(obs), act, tf.zeros([1, T, stoch]))
        starts = list(range(0, T - H - 1))
        start_state = tf.nest.map_structure(lambda x: tf.gather(x[0], starts), posts)
        actions = tf.stack([act[0, t + 1:t + 1 + H] for t in starts])
        imagined = wm.rssm.imagine(start_state, actions, tf.zeros([len(starts), H, stoch]))
        reward = wm.predict_reward(imagined).numpy()
        decoded = wm.decode(imagined).numpy()
        for i, t in enumerate(starts):
            true_r = ep["reward"][t + 1:t + 1 + H]
            true_s = ep["state"][t + 1:t + 1 + H]
            ang = np.arctan2(true_s[:, 1], true_s[:, 0])
            pang = np.arctan2(decoded[i, :, 1], decoded[i, :, 0])
            dang = np.abs((pang - ang + np.pi) % (2 * np.pi) - np.pi)
            rows.append((ep["state"][t, 0] > 0.9, reward[i] - true_r, dang, decoded[i, :, 2] - true_s[:, 2]))
    print(f"{args.logdir} step {step}, {len(rows)} starts, horizon {H}")
    for top in (True, False):
        sel = [r for r in rows if r[0] == top]
        if not sel:
            continue
        r_err = np.sqrt(np.mean(np.stack([r[1] for r in sel]) ** 2, 0))
        a_err = np.mean(np.stack([r[2] for r in sel]), 0)
        v_err = np.sqrt(np.mean(np.stack([r[3] for r in sel]) ** 2, 0))
        print(f"near top={top} ({len(sel)}): reward RMS by horizon {np.round(r_err[[0, 2, 5, 8, 11]], 2)}, "
              f"angle err (rad) {np.round(a_err[[0, 2, 5, 8, 11]], 3)}, velocity RMS {np.round(v_err[[0, 2, 5, 8, 11]], 2)}")


if __name__ == "__main__":
    main()
