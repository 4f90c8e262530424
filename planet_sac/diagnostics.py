"""Diagnostics against what really happened: open-loop predictions, and the critic's Q beside real returns.

`open_loop` filters a few steps of a recorded sequence and predicts the rest from its actions
alone, for the open-loop video and `model/open_loop_mse` (as PlaNet's summaries).

For a recorded episode, the world model filters the posterior states z_t (as when acting),
the critic scores the action actually taken next, Q(z_t, a_t+1), and the episode gives the
real discounted return from t, G_t = sum_k gamma^k r_t+1+k (truncated at the episode's
end, so the last steps' G_t miss their tail; only the first half of the episode is used).
A critic that overestimates shows Q >> G; one that learned little shows Q ~ 0.

`foreground_errors` asks whether the model sees the small moving things a task is about (the ball and
cup, the reacher's arm): its reconstruction error on the pixels that move, apart from the background's.
A model can reconstruct the background well (the image loss falls) while the objects stay a blur.

(`research/sac_head.py` holds the lab's own measures on frozen models, e.g. the chunk-start gap.)
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from planet_sac.control.sac import SAC
from planet_sac.models.world_model import MOVING_THRESHOLD, WorldModel, moving_pixels


def discounted_returns(reward: np.ndarray, discount: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = r_t+1 + gamma d_t+1 G_t+1 for t = 0..T-1 of an aligned episode (reward[0] is the reset's 0)."""
    returns = np.zeros(len(reward) - 1, np.float64)
    running = 0.0
    for t in range(len(reward) - 2, -1, -1):
        running = reward[t + 1] + gamma * discount[t + 1] * running
        returns[t] = running
    return returns


def episode_posteriors(world_model: WorldModel, episode: dict) -> dict[str, tf.Tensor]:
    """The posterior states [T + 1, ...] of a recorded episode, filtered through the posterior means (no sampling noise:
    a repeatable diagnostic; the policies themselves sample the posterior in both phases)."""
    obs = tf.constant(episode[world_model.obs_key][None])
    action = tf.constant(episode["action"][None], tf.float32)
    noise = world_model.observation_noise(tf.random.Generator.from_seed(0), obs)
    posts, _ = world_model.rssm.observe(world_model.embed(obs, noise), action,
                                        tf.zeros([1, action.shape[1], world_model.rssm.stoch_size]))
    return {key: value[0] for key, value in posts.items()}


def critic_vs_returns(world_model: WorldModel, sac: SAC, episode: dict, gamma: float) -> dict[str, float]:
    """Mean Q(z_t, a_t+1) and mean real G_t over the first half of `episode`, and their mean absolute gap."""
    features = world_model.rssm.features(episode_posteriors(world_model, episode))  # [T + 1, F]
    action = tf.constant(episode["action"], tf.float32)
    q = sac.q_value(features[:-1], action[1:]).numpy()  # Q(z_t, a_t+1), t = 0..T-1
    real = discounted_returns(np.asarray(episode["reward"]), np.asarray(episode["discount"]), gamma)
    half = max(1, len(real) // 2)
    return {"sac/q_episode": float(q[:half].mean()), "sac/return_episode": float(real[:half].mean()),
            "sac/q_abs_error": float(np.abs(q[:half] - real[:half]).mean())}


def open_loop(world_model: WorldModel, batch: dict, context: int) -> tuple[np.ndarray, np.ndarray]:
    """Filters `context` steps of the first sequence, then predicts the rest open-loop from its actions."""
    obs = tf.convert_to_tensor(batch[world_model.obs_key][:1])
    action = tf.convert_to_tensor(batch["action"][:1])
    stoch = world_model.rssm.stoch_size
    context_obs = obs[:, :context]
    noise = world_model.observation_noise(tf.random.Generator.from_seed(0), context_obs)  # as in training
    posts, _ = world_model.rssm.observe(world_model.embed(context_obs, noise), action[:, :context], tf.zeros([1, context, stoch]))
    last = tf.nest.map_structure(lambda t: t[:, -1], posts)
    length = action.shape[1]
    imagined = world_model.rssm.imagine(last, action[:, context:], tf.zeros([1, length - context, stoch]))
    predicted = tf.concat([world_model.decode(posts), world_model.decode(imagined)], 1)[0].numpy()
    # images: what the decoder is trained towards, the 5-bit bin's centre, not x / 255
    truth = world_model.target_image(obs)[0].numpy() if world_model.obs_key == "image" else obs[0].numpy()
    return truth, predicted


def foreground_errors(truth: tf.Tensor, prediction: tf.Tensor, threshold: float = MOVING_THRESHOLD) -> dict[str, tf.Tensor]:
    """Mean absolute reconstruction error on the moving pixels of image chunks, and on the rest.

    `truth` and `prediction` are [B, T, H, W, C] images in [0, 1]. A pixel of chunk b at time t is
    foreground when any channel differs from the chunk's background, its per-pixel median over the T
    frames, by more than `threshold`. Returns `model/foreground_error` and `model/background_error`,
    each the mean over those pixels and channels of |prediction - truth| (0 where a chunk has no such
    pixel).
    """
    truth = tf.cast(truth, tf.float32)
    prediction = tf.cast(prediction, tf.float32)
    moving = moving_pixels(truth, threshold)  # [B, T, H, W]
    error = tf.reduce_mean(tf.abs(prediction - truth), axis=-1)
    foreground = tf.cast(moving, tf.float32)
    return {"model/foreground_error": tf.math.divide_no_nan(tf.reduce_sum(error * foreground), tf.reduce_sum(foreground)),
            "model/background_error": tf.math.divide_no_nan(tf.reduce_sum(error * (1.0 - foreground)),
                                                            tf.reduce_sum(1.0 - foreground))}
