"""Does a run's world model see the small moving things of its task? Reconstructions of held-out episodes.

    MUJOCO_GL=egl .venv/bin/python research/reconstructions.py RUN [RUN ...] [--episodes 4] [--held-out DIR]
        [--figure OUT.png]

For each run (a run directory's latest checkpoint, or a checkpoint prefix), the last `--episodes` episodes of its
`test_episodes/` (or of `--held-out`) are filtered
through the posterior (`diagnostics.episode_posteriors`: posterior means, no sampling) and decoded; they are cut into
chunks of the run's `data.chunk_length`, and `diagnostics.foreground_errors` gives the mean absolute error on the
pixels that move within a chunk and on the rest (what a test phase logs as `test/model/foreground_error` and
`test/model/background_error`, there with sampled posteriors). `--figure` draws, per run, ten frames of its last
episode over their reconstructions.
"""

from __future__ import annotations

import argparse
import glob
import os

import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.agent import load_agent
from planet_sac.diagnostics import episode_posteriors, foreground_errors


def reconstruct(world_model, episode: dict) -> tuple[np.ndarray, np.ndarray]:
    """(truth as 5-bit bin centres in [0, 1], the posterior reconstruction), each [T + 1, H, W, 3]."""
    posts = episode_posteriors(world_model, episode)
    prediction = world_model.decode({key: value[None] for key, value in posts.items()})[0].numpy()
    bits = world_model.config.image_bits
    truth = (np.floor(episode["image"].astype(np.float32) / 2.0 ** (8 - bits)) + 0.5) / 2.0 ** bits
    return truth, prediction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--held-out", help="episode directory to reconstruct (default: each run's test_episodes/)")
    parser.add_argument("--figure")
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
