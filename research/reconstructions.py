"""Does a run's world model see the small moving things of its task? Reconstructions of held-out episodes.

    MUJOCO_GL=egl .venv/bin/python research/reconstructions.py RUN [RUN ...] [--episodes 4] [--held-out DIR]
        [--figure OUT.png] [--probe]

For each run (a run directory's latest checkpoint, or a checkpoint prefix), the last `--episodes` episodes of its
`test_episodes/` (or of `--held-out`) are filtered
through the posterior (`diagnostics.episode_posteriors`: posterior means, no sampling) and decoded; they are cut into
chunks of the run's `data.chunk_length`, and `diagnostics.foreground_errors` gives the mean absolute error on the
pixels that move within a chunk and on the rest (what a test phase logs as `test/model/foreground_error` and
`test/model/background_error`, there with sampled posteriors). `--figure` draws, per run, ten frames of its last
episode over their reconstructions.

`--probe` asks whether the latent holds what the decoder does not draw: a ridge regression (numpy, penalty 1 on
standardised features) from the posterior features of the run's last 45 training episodes to the centroid of the
frame's bodies (pixels with red > 0.55 and blue < 0.45: the orange and yellow bodies of dm_control's default skin
on its blue background; frames with fewer than 4 such pixels are left out), scored by R^2 on the held-out episodes.
`--probe-body target` locates reacher's red target instead (red > 150 and green < 140 in uint8).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.agent import load_agent
from planet_sac.diagnostics import episode_posteriors, foreground_errors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from research.reacher_reach import target_mask  # noqa: E402


def reconstruct(world_model, episode: dict) -> tuple[np.ndarray, np.ndarray]:
    """(truth as 5-bit bin centres in [0, 1], the posterior reconstruction), each [T + 1, H, W, 3]."""
    posts = episode_posteriors(world_model, episode)
    prediction = world_model.decode({key: value[None] for key, value in posts.items()})[0].numpy()
    return world_model.target_image(tf.constant(episode["image"])).numpy(), prediction


def body_centroids(images: np.ndarray, body: str = "bodies") -> tuple[np.ndarray, np.ndarray]:
    """(centroid [T, 2] in pixels (row, column) of the frames' orange/yellow pixels (`body` "bodies") or of
    reacher's red target ("target": red > 150 and green < 140 in uint8), which frames have at least 4)."""
    frames = images.astype(np.float32) / 255.0
    if body == "target":
        bodies = target_mask(images)
    else:
        bodies = (frames[..., 0] > 0.55) & (frames[..., 2] < 0.45)
    rows, columns = np.mgrid[0:frames.shape[1], 0:frames.shape[2]]
    count = bodies.sum((1, 2))
    weight = np.maximum(count, 1)
    centroid = np.stack([(bodies * rows).sum((1, 2)) / weight, (bodies * columns).sum((1, 2)) / weight], 1)
    return centroid, count >= 4


def probe(world_model, train_files: list[str], held_out_files: list[str],
          body: str = "bodies") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ridge regression from posterior features to the bodies' centroid, on held-out frames: (R^2, mean absolute
    error in pixels, the centroid's standard deviation in pixels), each [row, column]."""
    def data(files):
        features, targets = [], []
        for path in files:
            episode = dict(np.load(path))
            feature = world_model.rssm.features(episode_posteriors(world_model, episode)).numpy()
            centroid, seen = body_centroids(episode["image"], body)
            features.append(feature[seen])
            targets.append(centroid[seen])
        return np.concatenate(features), np.concatenate(targets)

    x, y = data(train_files)
    x_test, y_test = data(held_out_files)
    mean, scale = x.mean(0), x.std(0) + 1e-6
    design = np.c_[(x - mean) / scale, np.ones(len(x))]
    weights = np.linalg.solve(design.T @ design + np.eye(design.shape[1]), design.T @ y)
    predicted = np.c_[(x_test - mean) / scale, np.ones(len(x_test))] @ weights
    r2 = 1 - ((predicted - y_test) ** 2).sum(0) / ((y_test - y_test.mean(0)) ** 2).sum(0)
    return r2, np.abs(predicted - y_test).mean(0), y_test.std(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--held-out", help="episode directory to reconstruct (default: each run's test_episodes/)")
    parser.add_argument("--figure")
    parser.add_argument("--probe", action="store_true", help="also the linear probe of the bodies' centroid")
    parser.add_argument("--probe-body", choices=("bodies", "target"), default="bodies",
                        help="what the probe locates: the orange/yellow bodies, or reacher's red target")
    args = parser.parse_args()
    strips = []
    for run in args.runs:
        config, agent, env, step = load_agent(run)
        env.close()
        logdir = run if os.path.isdir(run) else os.path.dirname(os.path.dirname(run))  # a prefix: LOGDIR/checkpoints/ckpt-N
        folder = args.held_out or os.path.join(logdir, "test_episodes")
        files = sorted(glob.glob(os.path.join(folder, "*.npz")))[-args.episodes:]
        length = config.data.chunk_length
        truths, predictions = [], []
        for path in files:
            truth, prediction = reconstruct(agent.world_model, dict(np.load(path)))
            chunks = len(truth) // length
            truths.append(truth[:chunks * length].reshape(chunks, length, *truth.shape[1:]))
            predictions.append(prediction[:chunks * length].reshape(chunks, length, *truth.shape[1:]))
        errors = foreground_errors(tf.constant(np.concatenate(truths)), tf.constant(np.concatenate(predictions)))
        print(f"{run}: step {step}, foreground error {float(errors['model/foreground_error']):.3f}, "
              f"background error {float(errors['model/background_error']):.4f} ({len(files)} held-out episodes)")
        if args.probe:
            train = sorted(glob.glob(os.path.join(logdir, "train_episodes", "*.npz")))[-45:]
            r2, error, spread = probe(agent.world_model, train, files, args.probe_body)
            print(f"{run}: {args.probe_body} centroid from the posterior features, held-out R^2 row / column {r2[0]:.3f} / "
                  f"{r2[1]:.3f}, error {error[0]:.2f} / {error[1]:.2f} px (spread {spread[0]:.2f} / {spread[1]:.2f} px)")
        frames = np.linspace(0, len(truth) - 1, 10).astype(int)
        strips.append(np.concatenate([np.concatenate(list(truth[frames]), 1),
                                      np.concatenate(list(np.clip(prediction[frames], 0, 1)), 1)], 0))
    if args.figure:
        from PIL import Image

        image = (np.concatenate(strips, 0) * 255).round().astype(np.uint8)
        Image.fromarray(image).save(args.figure)
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
