"""The world model: encoder, RSSM, observation decoder and reward head, and PlaNet's loss.

The loss is the negative ELBO that PlaNet optimises:
reconstruction log-likelihood + reward log-likelihood - KL(posterior || prior),
with free nats on the KL and optional latent overshooting. All noise (dequantisation
of images, reparameterised latent samples) comes from `sample_noise`, so a batch and
its noise fully determine the loss.

With `model.continuation_scale` > 0 a continuation head (Dreamer's `pcont`) also learns
the recorded discount (0 after a termination), so that imagined rollouts and plans stop
collecting reward where the task would have ended.
"""

from __future__ import annotations

import math
from typing import Dict, Mapping

import numpy as np
import tensorflow as tf

from planet_sac.config import ConfigError, ModelConfig
from planet_sac.models.networks import MLP, ConvDecoder, ConvEncoder
from planet_sac.models.precision import resolve_precision
from planet_sac.models.rssm import RSSM, State


class WorldModel(tf.Module):
    """PlaNet's latent dynamics model for `image` or `state` observations."""

    def __init__(self, config: ModelConfig, obs_key: str, obs_shape: tuple[int, ...], action_size: int,
                 seed: int = 0, precision: str = "float32", name: str = "world_model"):
        """`precision="mixed_bfloat16"` runs the encoder, decoder and reward head in bfloat16 (weights,
        the RSSM, its distributions and every loss term stay float32); `"auto"` picks it for images
        on CPUs with native bfloat16 instructions, else float32 (`models/precision.py`)."""
        super().__init__(name=name)
        if obs_key == "image" and tuple(obs_shape) != (64, 64, 3):
            raise ConfigError(f"image observations must be 64x64x3 for PlaNet's conv decoder, got {tuple(obs_shape)}; "
                              "use env.image_size=64")
        self.config = config
        self.obs_key = obs_key
        self.obs_shape = tuple(obs_shape)
        self.action_size = action_size
        precision = resolve_precision(precision, obs_key)
        self.precision = precision
        compute_dtype = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16}[precision]
        mixed = tf.bfloat16 if precision == "mixed_bfloat16" else None  # MLPs: None computes in the input's dtype
        activation = {"relu": tf.nn.relu, "elu": tf.nn.elu}[config.activation]
        with self.name_scope:
            if obs_key == "image":
                self.encoder = ConvEncoder(config.cnn_depth, obs_shape[0], seed, compute_dtype, name="encoder")
                embed_size = self.encoder.embed_size
            else:
                embed_size = config.mlp_units
                self.encoder = MLP(obs_shape[0], config.mlp_units, config.mlp_layers, embed_size, activation, seed,
                                   name="encoder", compute_dtype=mixed)
            self.rssm = RSSM(action_size, embed_size, config.deter_size, config.stoch_size, config.hidden_size,
                             config.min_stddev, seed, activation, name="rssm")
            features = self.rssm.feature_size
            if obs_key == "image":
                decoder_depth = config.decoder_depth or config.cnn_depth
                self.decoder = ConvDecoder(features, decoder_depth, seed, compute_dtype, name="decoder")
            else:
                self.decoder = MLP(features, config.mlp_units, config.mlp_layers, obs_shape[0], activation, seed,
                                   name="decoder", compute_dtype=mixed)
            self.reward = MLP(features, config.reward_units, 2, 1, activation, seed, name="reward", compute_dtype=mixed)
            self.continuation = (MLP(features, config.reward_units, 2, 1, activation, seed, name="continuation",
                                     compute_dtype=mixed) if config.continuation_scale > 0 else None)

    # ------------------------------------------------------------------ observations

    def preprocess(self, obs: tf.Tensor, noise: tf.Tensor | None = None) -> tf.Tensor:
        """PlaNet's `preprocess`: uint8 images -> 5-bit bins, dequantised, centred; states pass through.

        `noise` is uniform in [0, 1) with the image's shape (one bin of dequantisation noise), and
        it is required for images: PlaNet adds it wherever an image enters the encoder, when
        training and when acting, so the encoder never sees inputs shifted by half a bin.
        """
        if self.obs_key != "image":
            return tf.cast(obs, tf.float32)
        if noise is None:
            raise ValueError("image observations need dequantisation noise (uniform [0, 1), same shape as the image)")
        bins = 2.0 ** self.config.image_bits
        x = tf.floor(tf.cast(obs, tf.float32) / 2.0 ** (8 - self.config.image_bits))
        return (x + noise) / bins - 0.5

    def target_image(self, obs: tf.Tensor) -> tf.Tensor:
        """What the decoder is trained towards, in `decode`'s [0, 1] range: each uint8 pixel's 5-bit bin centre."""
        return self.preprocess(obs, tf.fill(tf.shape(obs), 0.5)) + 0.5

    def embed(self, obs: tf.Tensor, noise: tf.Tensor | None = None) -> tf.Tensor:
        return self.encoder(self.preprocess(obs, noise))

    def observation_noise(self, rng: tf.random.Generator, obs: tf.Tensor) -> tf.Tensor | None:
        """Dequantisation noise for `obs` (None for state observations, which need none)."""
        return rng.uniform(tf.shape(obs)) if self.obs_key == "image" else None

    def sample_noise(self, rng: tf.random.Generator, batch_size: int, length: int) -> Dict[str, tf.Tensor]:
        """All the randomness one loss evaluation uses, for a [batch_size, length] chunk."""
        stoch = self.config.stoch_size
        noise = {"posterior": rng.normal([batch_size, length, stoch])}
        if self.obs_key == "image":
            noise["image"] = rng.uniform([batch_size, length, *self.obs_shape])
        if self.obs_key == "image" and self.config.augment_shift > 0:  # one (dy, dx) per chunk, in [0, 2 * pad]
            noise["shift"] = rng.uniform([batch_size, 2], 0, 2 * self.config.augment_shift + 1, dtype=tf.int32)
        if self.config.overshooting_distance > 0:
            noise["overshooting"] = rng.normal([self.config.overshooting_distance + 1, batch_size, length, stoch])
        return noise

    # ------------------------------------------------------------------ loss

    def loss(self, batch: Mapping[str, tf.Tensor], noise: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, Dict[str, tf.Tensor], State]:
        """PlaNet's loss on a [B, T] chunk. Returns (loss, metrics, posterior states)."""
        cfg = self.config
        obs = self.preprocess(batch[self.obs_key], noise.get("image"))
        # The encoder sees the shifted image (when model.augment_shift > 0); the decoder's target stays unshifted,
        # or with model.augment_target=shifted is shifted alike (the whole chunk seen from one moved camera).
        shifted = random_shift(obs, noise["shift"], cfg.augment_shift) if "shift" in noise else obs
        embed = self.encoder(shifted)
        if cfg.augment_target == "shifted":
            obs = shifted
        posts, priors = self.rssm.observe(embed, batch["action"], noise["posterior"])
        features = self.rssm.features(posts)

        weight = None
        if cfg.foreground_weight != 1.0:  # the foreground's squared error times w (model.foreground_weight, _mask)
            foreground = tf.cast(foreground_pixels(obs, cfg.foreground_mask,
                                                   batch_threshold=cfg.foreground_batch_threshold), obs.dtype)[..., None]
            weight = 1.0 + (cfg.foreground_weight - 1.0) * foreground
        recon_loss = tf.reduce_mean(normal_nll(obs, self.decoder(features), len(self.obs_shape), cfg.obs_std, weight))
        reward_mean = tf.squeeze(self.reward(features), -1)
        reward_loss = tf.reduce_mean(normal_nll(batch["reward"], reward_mean, 0))

        kl = self.rssm.kl_divergence(posts, priors)  # [B, T]
        kl_loss = self._kl_loss(posts, priors, kl)
        loss = recon_loss + cfg.reward_scale * reward_loss + cfg.kl_scale * kl_loss
        metrics = {f"loss/{self.obs_key}": recon_loss, "loss/reward": reward_loss, "loss/kl": tf.reduce_mean(kl),
                   "model/prior_entropy": tf.reduce_mean(self.rssm.entropy(priors)),
                   "model/posterior_entropy": tf.reduce_mean(self.rssm.entropy(posts)),
                   # share of time steps whose KL is below free nats: floored, they give no KL gradient
                   "model/free_nats_clipped": tf.reduce_mean(tf.cast(kl < cfg.free_nats, tf.float32))}
        if self.continuation is not None:  # Bernoulli log-likelihood of the recorded discount (Dreamer's pcont)
            logits = tf.squeeze(self.continuation(features), -1)
            continuation_loss = tf.reduce_mean(
                tf.nn.sigmoid_cross_entropy_with_logits(labels=batch["discount"], logits=logits))
            loss += cfg.continuation_scale * continuation_loss
            metrics["loss/continuation"] = continuation_loss
        if cfg.overshooting_distance > 0:
            overshooting = self._overshooting_kl(posts, batch["action"], noise["overshooting"])
            loss += cfg.overshooting_scale * overshooting
            metrics["loss/overshooting"] = overshooting
        metrics["loss/total"] = loss
        return loss, metrics, posts

    def _kl_loss(self, posts: State, priors: State, kl: tf.Tensor) -> tf.Tensor:
        """The KL term: PlaNet's `_free_nats(kl)`, or with `model.kl_balance` = b DreamerV2's balanced KL,
        b * free(KL(sg(post) || prior)) + (1 - b) * free(KL(post || sg(prior))): the prior moves towards
        the posterior faster than the posterior towards the prior. `kl` [B, T] is KL(post || prior)."""
        balance = self.config.kl_balance
        if balance is None:
            return self._free_nats(kl)
        sg = lambda state: tf.nest.map_structure(tf.stop_gradient, state)  # noqa: E731
        prior_term = self._free_nats(self.rssm.kl_divergence(sg(posts), priors))
        posterior_term = self._free_nats(self.rssm.kl_divergence(posts, sg(priors)))
        return balance * prior_term + (1.0 - balance) * posterior_term

    def _free_nats(self, kl: tf.Tensor) -> tf.Tensor:
        """PlaNet's free nats: every time step's KL is floored at `free_nats`, then averaged.

        The floor is elementwise, before the mean, so the loss stays a plain mean over
        sequences and gradients summed over equal micro-batches equal the whole batch's.
        """
        return tf.reduce_mean(tf.maximum(kl, self.config.free_nats))

    def _overshooting_kl(self, posts: State, action: tf.Tensor, noise: tf.Tensor) -> tf.Tensor:
        """PlaNet's latent overshooting: KL(posterior_t+d || prior_t+d predicted open-loop from posterior_t).

        For d = 2..D+1: the one-step term (d = 1) is the ordinary KL of the loss and is not
        counted twice, as in PlaNet (`tensor[:, :, 1:-1]` of `tools.overshooting`). Targets
        are the posteriors with gradients stopped. Each term is floored at free nats
        elementwise, averaged over the valid start steps of its sequence and distance, then
        over sequences and distances. `noise` is [D + 1, B, T, stoch].
        """
        length = action.shape[1]
        distance = self.config.overshooting_distance
        targets = tf.nest.map_structure(tf.stop_gradient, posts)
        state = posts
        terms = []
        for d in range(1, distance + 2):  # open-loop step d predicts t + d from the posterior at t
            state = self.rssm.img_step(state, _shift(action, d), noise[d - 1])
            if d == 1:
                continue
            target = tf.nest.map_structure(lambda t: _shift(t, d), targets)
            kl = self.rssm.kl_divergence(target, state)  # [B, T]
            valid = length - d  # start steps t with t + d inside the chunk
            terms.append(tf.reduce_mean(tf.maximum(kl[:, :valid], self.config.free_nats), 1))
        return tf.reduce_mean(tf.stack(terms, 1))

    # ------------------------------------------------------------------ prediction

    def predict_reward(self, state: State) -> tf.Tensor:
        return tf.squeeze(self.reward(self.rssm.features(state)), -1)

    def predict_continuation(self, state: State) -> tf.Tensor:
        """The probability that the episode goes on into `state` (its discount), 1 without a continuation head.

        In the aligned layout the discount at step t is 0 when arriving at t ended the episode, so
        the reward at t still counts and everything after it does not.
        """
        if self.continuation is None:
            return tf.ones_like(state["deter"][..., 0])
        return tf.sigmoid(tf.squeeze(self.continuation(self.rssm.features(state)), -1))

    def decode(self, state: State) -> tf.Tensor:
        """The predicted observation, in the observation's own range (uint8-like floats for images)."""
        mean = self.decoder(self.rssm.features(state))
        if self.obs_key == "image":
            return tf.clip_by_value(mean + 0.5, 0.0, 1.0)
        return mean


def normal_nll(x: tf.Tensor, mean: tf.Tensor, event_dims: int, std: float = 1.0,
               weight: tf.Tensor | None = None) -> tf.Tensor:
    """-log N(x; mean, std^2) summed over the last `event_dims` axes (PlaNet's heads: std 1).

    The closed form, 0.5 * sum ((x - mean) / std)^2 + D * (log std + 0.5 log(2 pi)), in a few
    elementwise ops: over the 2.5 M pixels of a 16 x 50 batch it is cheaper than a distribution object.
    `weight` (broadcast against x) multiplies each squared error: with weights other than 1 the
    result is a weighted loss, no longer a log-density.
    """
    squared = tf.square(x - mean)
    if std != 1.0:
        squared = squared / std**2
    if weight is not None:
        squared = squared * weight
    axes = list(range(-event_dims, 0))
    size = 1
    for dim in x.shape[len(x.shape) - event_dims:]:
        size *= dim
    return 0.5 * (tf.reduce_sum(squared, axes) if axes else squared) + size * (math.log(std) + 0.5 * math.log(2 * math.pi))


MOVING_THRESHOLD = 0.1  # a pixel moves when a channel leaves the chunk's background by more than this (range 1)


def _median(values: tf.Tensor, axis: int) -> tf.Tensor:
    """The median along `axis` (the mean of the middle two for an even count, as numpy's), in `values`' dtype.

    Without a GPU the order is numpy's sort, through `tf.numpy_function`: TensorFlow's CPU sort (its top_k kernel)
    took 5x numpy's on a v4 batch's chunk, 16 x 50 frames of 64 x 64 x 3 (0.50 against 0.10 s, one thread), a
    sixth of an update (docs/performance.md). Both give the same bits: a sort is exact, and the mean of the middle
    two is the same two float operations.
    """
    axis = axis % values.shape.rank
    count = values.shape[axis]
    middle = ((count - 1) // 2, count // 2)
    if not tf.config.list_logical_devices("GPU"):
        def numpy_median(array: np.ndarray) -> np.ndarray:
            ordered = np.sort(array, axis=axis)
            low, high = (np.take(ordered, index, axis=axis) for index in middle)
            return (array.dtype.type(0.5) * (low + high)).astype(array.dtype)

        shape = values.shape[:axis] + values.shape[axis + 1:]
        median = tf.numpy_function(numpy_median, [values], values.dtype, stateful=False)
        median.set_shape(shape)
        return median
    ordered = tf.sort(values, axis=axis)
    return 0.5 * (tf.gather(ordered, middle[0], axis=axis) + tf.gather(ordered, middle[1], axis=axis))


def _off(images: tf.Tensor, background: tf.Tensor, threshold: float) -> tf.Tensor:
    """[..., H, W] bool: where some channel of `images` [..., H, W, C] is off `background` (broadcast) by more than
    `threshold`."""
    return tf.reduce_max(tf.abs(images - background), axis=-1) > threshold


def moving_pixels(images: tf.Tensor, threshold: float = MOVING_THRESHOLD) -> tf.Tensor:
    """[B, T, H, W] bool: the moving pixels of [B, T, H, W, C] image chunks.

    A pixel of chunk b at time t moves when any channel differs from the chunk's background, its per-pixel
    median over the T frames (the mean of the middle two for even T, as numpy's), by more than `threshold`,
    in units where the pixel range is 1 (images in [0, 1] or centred in [-0.5, 0.5] alike).
    """
    return _off(images, _median(images, axis=1)[:, None], threshold)


def foreground_pixels(images: tf.Tensor, mask: str = "chunk", threshold: float = MOVING_THRESHOLD,
                      batch_threshold: float = MOVING_THRESHOLD) -> tf.Tensor:
    """[B, T, H, W] bool: the pixels `model.foreground_weight` weights in [B, T, H, W, C] image chunks.

    mask "chunk": the moving pixels (`moving_pixels`, off the chunk's background by more than `threshold`).
    "chunk_or_batch": those, and the pixels off the batch's common background, the per-pixel median over the B
    chunks of their own backgrounds (their medians over time), by more than `batch_threshold` in some channel: a
    body that stands still in its episode but elsewhere in each one (reacher's target) is part of its chunk's
    background, and off the common one wherever it stands in fewer than half of the chunks. A tracking camera's
    floor is off the common background too, by less than a body (`model.foreground_batch_threshold`).
    """
    if mask not in ("chunk", "chunk_or_batch"):
        raise ValueError(f"mask={mask!r}: must be 'chunk' or 'chunk_or_batch'")
    chunk_background = _median(images, axis=1)  # [B, H, W, C]
    moving = _off(images, chunk_background[:, None], threshold)
    if mask == "chunk":
        return moving
    return moving | _off(images, _median(chunk_background, axis=0), batch_threshold)  # off the [H, W, C] common one


def random_shift(images: tf.Tensor, shift: tf.Tensor, pad: int) -> tf.Tensor:
    """DrQ's random shift of [B, T, H, W, C] images, one integer shift per chunk.

    The same as padding every side by `pad` pixels that repeat the border (DrQ-v2's replicate
    padding) and cropping H x W at offset `shift` [B, 2] = (dy, dx) in [0, 2 * pad]: pixel (i, j)
    of the result is pixel (clip(i + dy - pad), clip(j + dx - pad)) of the input, so offset
    (pad, pad) returns the images unchanged.
    """
    height, width = images.shape[2], images.shape[3]
    rows = tf.clip_by_value(shift[:, :1] - pad + tf.range(height)[None], 0, height - 1)  # [B, H]
    cols = tf.clip_by_value(shift[:, 1:] - pad + tf.range(width)[None], 0, width - 1)  # [B, W]
    shifted = tf.gather(images, rows, axis=2, batch_dims=1)
    return tf.gather(shifted, cols, axis=3, batch_dims=1)


def _shift(x: tf.Tensor, steps: tf.Tensor | int) -> tf.Tensor:
    """x[:, t + steps] at position t, padded by repeating the last step (masked out by callers)."""
    length = tf.shape(x)[1]
    index = tf.minimum(tf.range(length) + steps, length - 1)
    return tf.gather(x, index, axis=1)
