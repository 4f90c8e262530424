r"""Where the head fails, what does it do and what do its critics tell it? Its action and the critics' slope, by episode.

Usage:
    .venv/bin/python research/critic_slope.py --logdir RUN [--last 10] [--json OUT.json]

Reads RUN's last `--last` test episodes (`RUN/test_episodes`, as the test phases saved them), filters each one's
posteriors from its recorded observations with the latest checkpoint's world model, and reports per episode: its
return; the actor's pre-tanh mean |mu| averaged over the episode per action dimension and the share of states where
it saturates (|mu| > 2, tanh' < 0.07); min Q of the twin critics at the actor's mode; and that Q's slope in the
action there, |dQ/da| per dimension (the actor's gradient before the entropy term and the squash); and where the
actor's loss moves its mean, split into its two terms (`actor_pushes`: positive pushes towards saturation). A head
that fails by hardly acting where its critics are flat shows small |mu| and small slopes on the failing episodes; a
head held at saturation by its critics shows a critics' push outwards against the entropy's inwards, one held
there by tanh's vanishing slope shows both small. docs/results.md ("Lever valuedet") quotes its output.
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


def head_along(world_model, sac, episode: dict, samples: int = 32, seed: int = 0) -> dict:
    """The head along one recorded episode: `mu` [T + 1, A] (the actor's pre-tanh mean at each filtered state),
    `q` [T + 1] (min Q at the mode tanh(mu)), `slope` [T + 1, A] (dQ/da there) and `entropy_push`, `q_push`
    [T + 1, A] (`actor_pushes` over `samples` noise draws of a generator seeded with `seed`)."""
    posts = episode_posteriors(world_model, episode)
    features = world_model.rssm.features({key: posts[key] for key in ("deter", "stoch")})
    mean, _ = sac._distribution(features)
    action = tf.tanh(mean)
    with tf.GradientTape() as tape:
        tape.watch(action)
        q = sac.q_value(features, action)
    noise = tf.random.Generator.from_seed(seed).normal([samples, *mean.shape])
    entropy_push, q_push = actor_pushes(sac, features, noise)
    return {"mu": mean.numpy(), "q": q.numpy(), "slope": tape.gradient(q, action).numpy(),
            "entropy_push": entropy_push, "q_push": q_push}


def actor_pushes(sac, features: tf.Tensor, noise: tf.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Where the actor's loss moves its mean at each state [N, F]: the descent directions of its two terms, the
    temperature's alpha * log pi(a|z) and the critics' -min Q(z, a), with a = tanh(mu + std * noise) for the noise
    samples [S, N, A] (averaged over them), each signed along sign(mu): positive pushes the mean further from 0,
    towards saturation. Returns (entropy push [N, A], critics' push [N, A])."""
    mean, log_std = sac._distribution(features)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(mean)
        u = mean[None] + tf.exp(log_std)[None] * noise
        # log pi of the reparameterised u, as `SAC.sample` computes it, here differentiable in `mean`
        log_prob = tf.reduce_sum(-0.5 * tf.square(noise) - log_std[None] - 0.5 * np.log(2 * np.pi), -1) - tf.reduce_sum(
            2.0 * (np.log(2.0) - u - tf.nn.softplus(-2.0 * u)), -1)
        entropy_term = tf.reduce_sum(sac.alpha * log_prob)
        q_term = -tf.reduce_sum(sac.q_value(tf.broadcast_to(features[None], [noise.shape[0], *features.shape]),
                                            tf.tanh(u)))
    samples, direction = noise.shape[0], np.sign(mean.numpy())
    entropy_push = -tape.gradient(entropy_term, mean).numpy() / samples * direction
    q_push = -tape.gradient(q_term, mean).numpy() / samples * direction
    return entropy_push, q_push


def summary(head: dict, episode_return: float) -> dict:
    """One episode's row: its return, mean |mu| and saturated share per dimension, mean Q, mean |dQ/da|, and the
    mean outward pushes of the actor loss's entropy and critics' terms per dimension."""
    mu, slope = np.abs(head["mu"]), np.abs(head["slope"])
    rounded = lambda values: [round(float(value), 3) for value in values]  # noqa: E731
    return {"return": episode_return, "abs_mu": rounded(mu.mean(0)), "saturated": rounded((mu > SATURATED).mean(0)),
            "q": round(float(head["q"].mean()), 2), "abs_slope": rounded(slope.mean(0)),
            "entropy_push": rounded(head["entropy_push"].mean(0)), "q_push": rounded(head["q_push"].mean(0))}


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
