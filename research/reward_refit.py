r"""Is a run's held-out reward error its reward head's or its features'? Fresh heads fitted on the frozen features.

Usage:
    .venv/bin/python research/reward_refit.py --logdir RUN --train 'RUN/train_episodes/*.npz' --train-slice -60: \
        --heldout 'RUN/test_episodes/*.npz' --heldout-slice -20: --heads 100x2 400x2 linear --json OUT.json
    # held out from the model as well: an earlier checkpoint, the training episodes collected after it
    .venv/bin/python research/reward_refit.py --logdir RUN/checkpoints/ckpt-2125 --train 'RUN/train_episodes/*.npz' \
        --train-slice 30:90 --heldout 'RUN/train_episodes/*.npz' --heldout-slice 91: --json OUT.json

Episodes are taken in the order of their names (the time they were saved), `--*-slice` as a Python slice.

Filters every episode with the checkpoint given (a run directory: its latest; posterior means,
`planet_sac.diagnostics.episode_posteriors`) and fits, on the training episodes' features, fresh reward heads of
the given shapes (`UNITSxLAYERS`, relu as the run's, or `linear`) by Adam on the squared error for `--epochs`
passes; reported for each, and for the run's own reward head, the mean squared error on the training and the
held-out episodes, overall and on the steps the environment paid (reward >= `--paid`), the share of the rewards'
variance explained and the correlation of prediction and reward (above 0 where a head is right in direction but
wrong in scale). If no fresh head comes near the training error on the held-out episodes, the features do not
carry what the reward needs there (the representation's generalisation, not the head's).
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


def features_and_rewards(world_model, paths: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Filtered features [N, F], real rewards [N] and the run's own reward head's predictions [N]."""
    features, rewards, own = [], [], []
    for path in paths:
        episode = load_episode(path)
        f = world_model.rssm.features(episode_posteriors(world_model, episode))
        features.append(tf.cast(f, tf.float32).numpy())
        own.append(tf.squeeze(tf.cast(world_model.reward(f), tf.float32), -1).numpy())
        rewards.append(np.asarray(episode["reward"], np.float32))
    return np.concatenate(features), np.concatenate(rewards), np.concatenate(own)


def fit_head(shape: str, x: np.ndarray, y: np.ndarray, epochs: int, seed: int) -> tf.keras.Model:
    """A fresh head (`UNITSxLAYERS` relu MLP, or `linear`) fitted to y by Adam on the squared error."""
    tf.keras.utils.set_random_seed(seed)
    layers = [] if shape == "linear" else [tf.keras.layers.Dense(int(shape.split("x")[0]), "relu")
                                           for _ in range(int(shape.split("x")[1]))]
    model = tf.keras.Sequential([tf.keras.Input((x.shape[1],)), *layers, tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.Adam(1e-3), "mse")
    model.fit(x, y, batch_size=256, epochs=epochs, verbose=0, shuffle=True)
    return model


def as_slice(text: str) -> slice:
    """'A:B' (either side may be empty or negative) -> slice(A, B)."""
    start, _, stop = text.partition(":")
    return slice(int(start) if start else None, int(stop) if stop else None)


def errors(prediction: np.ndarray, y: np.ndarray, paid: float) -> dict[str, float]:
    """Squared error, share of variance explained and correlation, overall; squared error and mean prediction on
    the paid steps (y >= paid; NaN without any)."""
    squared, on_paid = (prediction - y) ** 2, y >= paid
    return {"mse": float(squared.mean()), "explained": float(1.0 - squared.mean() / y.var()),
            "correlation": float(np.corrcoef(prediction, y)[0, 1]),
            "mse_paid": float(squared[on_paid].mean()) if on_paid.any() else float("nan"),
            "mean_on_paid": float(prediction[on_paid].mean()) if on_paid.any() else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--train", required=True, help="glob of the training episodes (.npz)")
    parser.add_argument("--train-slice", default="-60:", help="which of the glob's episodes, e.g. 30:90")
    parser.add_argument("--heldout", required=True, help="glob of held-out episodes (.npz), e.g. the test phases'")
    parser.add_argument("--heldout-slice", default="-20:")
    parser.add_argument("--heads", nargs="+", default=["100x2", "400x2", "linear"])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--paid", type=float, default=1e-3)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    train_paths = sorted(glob.glob(args.train))[as_slice(args.train_slice)]
    heldout_paths = sorted(glob.glob(args.heldout))[as_slice(args.heldout_slice)]
    if set(train_paths) & set(heldout_paths):
        raise SystemExit("research/reward_refit.py: --train and --heldout share episodes")
    if not train_paths or not heldout_paths:
        raise SystemExit("research/reward_refit.py: no episode matches --train or --heldout")
    _, agent, env, step = load_agent(args.logdir)
    env.close()
    x, y, own_train = features_and_rewards(agent.world_model, train_paths)
    hx, hy, own_heldout = features_and_rewards(agent.world_model, heldout_paths)
    result = {"logdir": args.logdir, "step": step, "train": train_paths, "heldout": heldout_paths, "train_steps": len(y), "heldout_steps": len(hy),
              "paid_share": {"train": float((y >= args.paid).mean()), "heldout": float((hy >= args.paid).mean())},
              "heads": {"run's own": {"train": errors(own_train, y, args.paid), "heldout": errors(own_heldout, hy, args.paid)}}}
    print("run's own", json.dumps(result["heads"]["run's own"]), flush=True)
    for shape in args.heads:
        model = fit_head(shape, x, y, args.epochs, seed=0)
        result["heads"][shape] = {"train": errors(model.predict(x, 4096, 0)[:, 0], y, args.paid),
                                  "heldout": errors(model.predict(hx, 4096, 0)[:, 0], hy, args.paid)}
        print(shape, json.dumps(result["heads"][shape]), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
