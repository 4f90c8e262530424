import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.checkpoints import variable_name
from planet_sac.config import ModelConfig
from planet_sac.models.world_model import WorldModel
from tests.conftest import needs_bfloat16_kernels
from tests.numpy_reference import gaussian_kl, img_step, observe


def test_image_model_shapes_and_names():
    model = WorldModel(ModelConfig(), "image", (64, 64, 3), 6)
    assert model.encoder.embed_size == 1024
    features = tf.zeros([2, 3, model.rssm.feature_size])
    assert model.decoder(features).shape == (2, 3, 64, 64, 3)
    names = [variable_name(v) for v in model.variables]
    assert len(names) == len(set(names))
    assert all(name.startswith("world_model/") for name in names)
    for part in ("world_model/encoder/conv0/kernel", "world_model/rssm/gru/gates_kernel",
                 "world_model/decoder/deconv3/kernel", "world_model/reward/out/kernel"):
        assert part in names
    kernels = {variable_name(v): v.shape for v in model.variables}
    assert [kernels[f"world_model/encoder/conv{i}/kernel"][-1] for i in range(4)] == [32, 64, 128, 256]
    # PlaNet's decoder: dense to 1024, then transposed convolutions to 128, 64, 32 and 3 channels (kernels are HWOI).
    assert kernels["world_model/decoder/dense/kernel"] == (model.rssm.feature_size, 1024)
    assert [kernels[f"world_model/decoder/deconv{i}/kernel"][2] for i in range(4)] == [128, 64, 32, 3]


def test_decoder_depth_narrows_only_the_decoder():
    model = WorldModel(ModelConfig(decoder_depth=16), "image", (64, 64, 3), 6)
    kernels = {variable_name(v): v.shape for v in model.variables}
    assert [kernels[f"world_model/encoder/conv{i}/kernel"][-1] for i in range(4)] == [32, 64, 128, 256]
    assert kernels["world_model/decoder/dense/kernel"] == (model.rssm.feature_size, 512)
    assert [kernels[f"world_model/decoder/deconv{i}/kernel"][2] for i in range(4)] == [64, 32, 16, 3]
    assert model.decoder(tf.zeros([2, model.rssm.feature_size])).shape == (2, 64, 64, 3)


def test_preprocess_is_planets_5_bit_dequantised_and_centred():
    """PlaNet's preprocess: floor(x / 8) / 32 + U[0, 1/32) - 0.5, computed here by hand for known noise."""
    model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, cnn_depth=4), "image", (64, 64, 3), 1)
    image = tf.constant([[0, 7, 8, 255]], tf.uint8)
    noise = tf.constant([[0.25, 0.5, 0.999, 0.0]])
    expected = [[0.25 / 32 - 0.5, 0.5 / 32 - 0.5, 1.999 / 32 - 0.5, 31 / 32 - 0.5]]
    np.testing.assert_allclose(model.preprocess(image, noise).numpy(), expected, rtol=0, atol=1e-7)
    with pytest.raises(ValueError, match="dequantisation noise"):
        model.preprocess(image)  # acting and training must both dequantise, so no path may forget the noise


def test_decode_and_target_image_are_in_the_pixels_0_to_1_range():
    """The decoder predicts centred images (preprocess's -0.5); `decode` shifts them back and clips to [0, 1], the
    range of `target_image`, each uint8 pixel's 5-bit bin centre: (floor(x / 8) + 0.5) / 32."""
    model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, cnn_depth=4), "image", (64, 64, 3), 1)
    np.testing.assert_allclose(model.target_image(tf.constant([[0, 7, 8, 255]], tf.uint8)).numpy(),
                               [[0.5 / 32, 0.5 / 32, 1.5 / 32, 31.5 / 32]], rtol=0, atol=1e-7)
    state = model.rssm.initial(2)
    for variable in model.decoder.variables:  # outputs spread beyond [-0.5, 0.5], so the clip shows
        variable.assign(tf.random.stateless_normal(variable.shape, [0, 1], stddev=0.2))
    centred = model.decoder(model.rssm.features(state)).numpy()
    assert centred.min() < -0.5 and centred.max() > 0.5 and np.mean(np.abs(centred) < 0.5) > 0.1
    np.testing.assert_allclose(model.decode(state).numpy(), np.clip(centred + 0.5, 0.0, 1.0), rtol=0, atol=1e-6)


def test_observation_noise_is_one_uniform_bin():
    model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, cnn_depth=4), "image", (64, 64, 3), 1)
    image = tf.zeros([2, 64, 64, 3], tf.uint8)
    noise = model.observation_noise(tf.random.Generator.from_seed(1), image).numpy()
    assert noise.shape == (2, 64, 64, 3)
    assert noise.min() >= 0.0 and noise.max() < 1.0
    assert abs(noise.mean() - 0.5) < 0.01 and abs(noise.var() - 1 / 12) < 0.005  # U[0, 1): mean 1/2, variance 1/12
    state_model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8), "state", (3,), 1)
    assert state_model.observation_noise(tf.random.Generator.from_seed(1), tf.zeros([2, 3])) is None


def test_same_seed_builds_same_weights():
    a = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8), "state", (3,), 1, seed=3)
    b = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8), "state", (3,), 1, seed=3)
    for x, y in zip(a.variables, b.variables):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


# ----------------------------------------------------------------------------- RSSM, KL and overshooting by hand
# The expected values come from tests/numpy_reference.py, a numpy re-implementation of the RSSM
# equations and of the Gaussian KL in closed form, on a model small enough to check by hand.


def _np_overshooting(rssm, posts, action, noise, free_nats):
    """PlaNet's overshooting: for d = 2..D+1 and every start t with t + d < T, KL(post_t+d || prior rolled
    d steps open-loop from post_t with actions t+1..t+d), floored at free nats; mean over t, then over
    sequences and distances."""
    distance = noise.shape[0] - 1
    batch, length = action.shape[:2]
    terms = np.zeros([batch, distance])
    for b in range(batch):
        for d in range(2, distance + 2):
            kls = []
            for t in range(length - d):
                stoch, deter = posts["stoch"][b:b + 1, t], posts["deter"][b:b + 1, t]
                for j in range(1, d + 1):
                    state = img_step(rssm, stoch, deter, action[b:b + 1, t + j], noise[j - 1, b:b + 1, t])
                    stoch, deter = state["stoch"], state["deter"]
                kl = gaussian_kl(posts["mean"][b, t + d], posts["std"][b, t + d], state["mean"][0], state["std"][0])
                kls.append(max(kl, free_nats))
            terms[b, d - 2] = np.mean(kls)
    return terms.mean()


@pytest.mark.parametrize("length, distance", [(2, 0), (3, 1), (4, 2)])
def test_observe_kl_and_overshooting_match_a_numpy_computation(length, distance):
    """2 latent dimensions, 2 sequences of 2-4 steps: posteriors, priors, KL, free nats and overshooting by hand."""
    config = ModelConfig(deter_size=3, stoch_size=2, hidden_size=4, mlp_units=4, reward_units=4, free_nats=0.0,
                         kl_scale=0.7, reward_scale=2.0, overshooting_distance=distance, overshooting_scale=0.3)
    model = WorldModel(config, "state", (2,), 1, seed=5)
    rng = np.random.default_rng(0)
    for variable in model.rssm.variables:  # non-zero biases too, so a dropped bias shows
        variable.assign(rng.normal(0, 0.7, variable.shape).astype(np.float32))
    batch = {"state": rng.normal(size=(2, length, 2)).astype(np.float32),
             "action": rng.uniform(-1, 1, (2, length, 1)).astype(np.float32),
             "reward": rng.normal(size=(2, length)).astype(np.float32)}
    noise = {"posterior": rng.normal(size=(2, length, 2)).astype(np.float32)}
    if distance:
        noise["overshooting"] = rng.normal(size=(distance + 1, 2, length, 2)).astype(np.float32)
    batch, noise = tf.nest.map_structure(tf.constant, (batch, noise))
    embed = model.embed(batch["state"])

    posts, priors = model.rssm.observe(embed, batch["action"], noise["posterior"])
    np_batch, np_noise = tf.nest.map_structure(lambda t: t.numpy(), (batch, noise))
    np_posts, np_priors = observe(model.rssm, embed.numpy(), np_batch["action"], np_noise["posterior"])
    for key in ("mean", "std", "stoch", "deter"):
        np.testing.assert_allclose(posts[key].numpy(), np_posts[key], rtol=1e-4, atol=1e-5, err_msg=f"posterior {key}")
        np.testing.assert_allclose(priors[key].numpy(), np_priors[key], rtol=1e-4, atol=1e-5, err_msg=f"prior {key}")

    kl = gaussian_kl(np_posts["mean"], np_posts["std"], np_priors["mean"], np_priors["std"])  # [B, T]
    assert np.all(kl > 0.01)
    if distance:
        overshooting = _np_overshooting(model.rssm, np_posts, np_batch["action"], np_noise["overshooting"], 0.0)
        assert overshooting > 0.01
        np.testing.assert_allclose(model._overshooting_kl(posts, batch["action"], noise["overshooting"]).numpy(),
                                   overshooting, rtol=1e-4)

    # Free nats floor every step's KL before the mean: put the floor in the middle of the values.
    free_nats = float(np.median(kl))
    assert kl.min() < free_nats < kl.max()
    model.config = dataclasses.replace(config, free_nats=free_nats)
    loss, metrics, _ = model.loss(batch, noise)
    np.testing.assert_allclose(metrics["loss/kl"].numpy(), kl.mean(), rtol=1e-4)
    expected = metrics["loss/state"].numpy() + 2.0 * metrics["loss/reward"].numpy() + 0.7 * np.maximum(kl, free_nats).mean()
    if distance:
        floored = _np_overshooting(model.rssm, np_posts, np_batch["action"], np_noise["overshooting"], free_nats)
        np.testing.assert_allclose(metrics["loss/overshooting"].numpy(), floored, rtol=1e-4)
        expected += 0.3 * floored
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-4)
    # The entropies logged beside the KL: a diagonal Gaussian's sum of 0.5 * log(2 pi e std^2), mean over steps.
    for key, states in (("model/prior_entropy", np_priors), ("model/posterior_entropy", np_posts)):
        entropy = np.sum(0.5 * np.log(2 * np.pi * np.e * states["std"] ** 2), -1)
        np.testing.assert_allclose(metrics[key].numpy(), entropy.mean(), rtol=1e-4, err_msg=key)


def test_free_nats_floor_a_small_kl():
    config = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8, free_nats=100.0,
                         overshooting_distance=3, overshooting_scale=1.0)
    model = WorldModel(config, "state", (3,), 1)
    rng = tf.random.Generator.from_seed(0)
    batch = {"state": rng.normal([2, 6, 3]), "action": rng.normal([2, 6, 1]), "reward": rng.normal([2, 6])}
    loss, metrics, _ = model.loss(batch, model.sample_noise(rng, 2, 6))
    assert metrics["loss/kl"] < 100.0  # raw KL is reported; the loss uses the floor
    # PlaNet weights the reward term by reward_scale (10 by default); both KL terms sit on the floor.
    assert config.reward_scale == 10.0
    np.testing.assert_allclose(loss, metrics["loss/state"] + 10.0 * metrics["loss/reward"] + 100.0 + 100.0, rtol=1e-5)


def test_transposed_conv_from_1x1_equals_tensorflows_op():
    from planet_sac.models.networks import Conv2DTranspose

    layer = Conv2DTranspose(16, 8, 5, 2, None, name="deconv_test")
    x = tf.random.normal([3, 1, 1, 16], seed=0)
    expected = tf.nn.conv2d_transpose(x, layer.kernel, [3, 5, 5, 8], 2, "VALID") + layer.bias
    np.testing.assert_allclose(layer(x).numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


@needs_bfloat16_kernels
def test_mixed_bfloat16_convolutions_with_float32_weights_and_loss():
    """mixed_bfloat16 computes the convolutions in bfloat16 and keeps float32 weights and loss.

    Same weights (same seed), same batch and noise: the loss agrees to bfloat16's precision, not bitwise."""
    config = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, cnn_depth=4, reward_units=8)
    full = WorldModel(config, "image", (64, 64, 3), 1, seed=2)
    mixed = WorldModel(config, "image", (64, 64, 3), 1, seed=2, precision="mixed_bfloat16")
    rng = np.random.default_rng(0)
    batch = {"image": tf.constant(rng.integers(0, 256, (2, 3, 64, 64, 3), dtype=np.uint8)),
             "action": tf.constant(rng.uniform(-1, 1, (2, 3, 1)).astype(np.float32)),
             "reward": tf.constant(rng.normal(size=(2, 3)).astype(np.float32))}
    noise = full.sample_noise(tf.random.Generator.from_seed(1), 2, 3)
    with tf.GradientTape() as tape:
        loss_mixed = mixed.loss(batch, noise)[0]
    grads = tape.gradient(loss_mixed, mixed.trainable_variables)
    loss_full = full.loss(batch, noise)[0]
    assert loss_mixed.dtype == tf.float32 and all(g.dtype == tf.float32 for g in grads)
    assert all(v.dtype == tf.float32 for v in mixed.variables)
    np.testing.assert_allclose(float(loss_mixed), float(loss_full), rtol=1e-3)
    # The convolutions really run in bfloat16: close to float32, but not equal.
    image = full.preprocess(batch["image"], noise["image"])
    embed_full, embed_mixed = full.encoder(image).numpy(), mixed.encoder(image).numpy()
    assert embed_mixed.dtype == np.float32 and not np.array_equal(embed_full, embed_mixed)
    np.testing.assert_allclose(embed_mixed, embed_full, atol=0.05)
    features = tf.random.normal([2, full.rssm.feature_size], seed=0)
    decoded_full, decoded_mixed = full.decoder(features).numpy(), mixed.decoder(features).numpy()
    assert not np.array_equal(decoded_full, decoded_mixed)
    np.testing.assert_allclose(decoded_mixed, decoded_full, atol=0.05)


@pytest.mark.parametrize("std", [1.0, 0.1])
def test_normal_nll_matches_the_gaussian_density(std):
    from planet_sac.models.world_model import normal_nll

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4, 5))
    mean = x + std * rng.normal(size=x.shape)  # errors of about one std: densities far from underflow
    density = np.exp(-0.5 * ((x - mean) / std) ** 2) / (std * np.sqrt(2 * np.pi))  # elementwise Gaussian density
    by_hand = -np.log(density).sum((-2, -1))  # -log of a 20-dim Gaussian with independent dimensions
    np.testing.assert_allclose(normal_nll(tf.constant(x), tf.constant(mean), 2, std).numpy(), by_hand, rtol=1e-10)
    np.testing.assert_allclose(normal_nll(tf.constant(x), tf.constant(mean), 0, std).numpy(), -np.log(density), rtol=1e-10)


def test_obs_std_sets_the_decoders_gaussian_in_the_loss():
    """`model.obs_std` 0.1: the observation term is -log N(state; decoded mean, 0.01), summed over the state, averaged."""
    config = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8, reward_units=8, obs_std=0.1)
    model = WorldModel(config, "state", (3,), 1, seed=1)
    rng = tf.random.Generator.from_seed(0)
    batch = {"state": rng.normal([2, 5, 3]), "action": rng.normal([2, 5, 1]), "reward": rng.normal([2, 5])}
    _, metrics, posts = model.loss(batch, model.sample_noise(rng, 2, 5))
    error = batch["state"].numpy() - model.decode(posts).numpy()
    by_hand = (0.5 * (error / 0.1) ** 2 + np.log(0.1) + 0.5 * np.log(2 * np.pi)).sum(-1).mean()
    np.testing.assert_allclose(metrics["loss/state"].numpy(), by_hand, rtol=1e-5)
    assert ModelConfig().obs_std == 1.0  # PlaNet's unit variance by default


@needs_bfloat16_kernels
def test_mixed_bfloat16_runs_the_state_encoder_decoder_and_reward_head_in_bfloat16():
    """States: the MLPs compute in bfloat16 (numpy reference with bfloat16-rounded inputs), outputs and loss stay float32."""
    config = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=16, reward_units=8)
    full = WorldModel(config, "state", (3,), 1, seed=2)
    mixed = WorldModel(config, "state", (3,), 1, seed=2, precision="mixed_bfloat16")
    assert all(v.dtype == tf.float32 for v in mixed.variables)
    features = tf.random.normal([5, full.rssm.feature_size], seed=0)

    def bf16(x):  # round to bfloat16 and back, as the casts in the graph do
        return tf.cast(tf.cast(x, tf.bfloat16), tf.float32).numpy()

    def reference(mlp, x):  # the MLP by hand in numpy: bfloat16-rounded weights and activations, relu
        for layer in mlp.hidden:
            x = bf16(np.maximum(bf16(x) @ bf16(layer.kernel.numpy()) + bf16(layer.bias.numpy()), 0.0))
        return bf16(x) @ bf16(mlp.out.kernel.numpy()) + bf16(mlp.out.bias.numpy())

    for part in ("reward", "decoder"):
        got = getattr(mixed, part)(features)
        assert got.dtype == tf.float32
        np.testing.assert_allclose(got.numpy(), reference(getattr(mixed, part), features.numpy()), rtol=2e-2, atol=2e-2)
        assert not np.array_equal(got.numpy(), getattr(full, part)(features).numpy())  # not float32 arithmetic
    batch = {"state": tf.random.normal([2, 3, 3], seed=1), "action": tf.random.uniform([2, 3, 1], -1, 1, seed=2),
             "reward": tf.random.normal([2, 3], seed=3)}
    noise = full.sample_noise(tf.random.Generator.from_seed(1), 2, 3)
    loss_mixed, loss_full = mixed.loss(batch, noise)[0], full.loss(batch, noise)[0]
    assert loss_mixed.dtype == tf.float32
    np.testing.assert_allclose(float(loss_mixed), float(loss_full), rtol=2e-2)


# ----------------------------------------------------------------------------- levers of issue #42

TINY_IMAGE = dict(deter_size=8, stoch_size=4, hidden_size=8, cnn_depth=4, decoder_depth=4, reward_units=8)


def _np_shift(images, shift, pad):
    """DrQ-v2's shift by hand: replicate-pad every side by `pad`, crop 64 x 64 at (dy, dx), per chunk."""
    padded = np.pad(images, [(0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)], mode="edge")
    height, width = images.shape[2:4]
    return np.stack([padded[b, :, dy:dy + height, dx:dx + width] for b, (dy, dx) in enumerate(shift)])


def test_random_shift_is_a_replicate_pad_and_crop_per_chunk():
    from planet_sac.models.world_model import random_shift

    images = np.random.default_rng(0).normal(size=(4, 3, 9, 7, 2)).astype(np.float32)
    shift = np.array([[0, 0], [2, 2], [4, 1], [3, 4]], np.int32)
    np.testing.assert_array_equal(random_shift(tf.constant(images), tf.constant(shift), 2).numpy(),
                                  _np_shift(images, shift, 2))
    np.testing.assert_array_equal(random_shift(tf.constant(images), tf.constant([[2, 2]] * 4), 2).numpy(), images)


def test_augment_shift_moves_the_encoders_input_and_keeps_the_decoders_target():
    """model.augment_shift=4: the image term is -log N(unshifted image; decoded posterior of the shifted images),
    computed here from the model's parts with a numpy shift; the shift is one draw per chunk in [0, 8]."""
    model = WorldModel(ModelConfig(**TINY_IMAGE, augment_shift=4), "image", (64, 64, 3), 1, seed=2)
    rng = np.random.default_rng(1)
    batch = tf.nest.map_structure(tf.constant, {
        "image": rng.integers(0, 256, (2, 3, 64, 64, 3)).astype(np.uint8),
        "action": rng.uniform(-1, 1, (2, 3, 1)).astype(np.float32), "reward": rng.normal(size=(2, 3)).astype(np.float32)})
    noise = model.sample_noise(tf.random.Generator.from_seed(4), 2, 3)
    draws = model.sample_noise(tf.random.Generator.from_seed(5), 500, 1)["shift"].numpy()
    assert draws.shape == (500, 2) and draws.min() == 0 and draws.max() == 8
    noise["shift"] = tf.constant([[0, 8], [5, 1]], tf.int32)
    _, metrics, _ = model.loss(batch, noise)

    target = model.preprocess(batch["image"], noise["image"]).numpy()
    embed = model.encoder(tf.constant(_np_shift(target, noise["shift"].numpy(), 4)))
    posts, _ = model.rssm.observe(embed, batch["action"], noise["posterior"])
    decoded = model.decoder(model.rssm.features(posts)).numpy()
    by_hand = (0.5 * (target - decoded) ** 2 + 0.5 * np.log(2 * np.pi)).sum((-3, -2, -1)).mean()
    np.testing.assert_allclose(metrics["loss/image"].numpy(), by_hand, rtol=1e-5)

    # offset (4, 4) is no shift: the loss of a model without augmentation and the same weights
    plain = WorldModel(ModelConfig(**TINY_IMAGE), "image", (64, 64, 3), 1, seed=2)
    noise["shift"] = tf.constant([[4, 4], [4, 4]], tf.int32)
    unshifted = {key: value for key, value in noise.items() if key != "shift"}
    np.testing.assert_allclose(model.loss(batch, noise)[0].numpy(), plain.loss(batch, unshifted)[0].numpy(), rtol=1e-6)


def test_augment_target_shifted_reconstructs_the_shifted_chunk():
    """model.augment_target=shifted: the image term is -log N(shifted image; decoded posterior of the same shifted
    images), the shift a numpy one; the unshifted target of the default gives another loss on the same draw."""
    model = WorldModel(ModelConfig(**TINY_IMAGE, augment_shift=4, augment_target="shifted"), "image", (64, 64, 3), 1,
                       seed=2)
    rng = np.random.default_rng(3)
    batch = tf.nest.map_structure(tf.constant, {
        "image": rng.integers(0, 256, (2, 3, 64, 64, 3)).astype(np.uint8),
        "action": rng.uniform(-1, 1, (2, 3, 1)).astype(np.float32), "reward": rng.normal(size=(2, 3)).astype(np.float32)})
    noise = model.sample_noise(tf.random.Generator.from_seed(4), 2, 3)
    noise["shift"] = tf.constant([[1, 7], [8, 0]], tf.int32)
    _, metrics, _ = model.loss(batch, noise)

    shifted = _np_shift(model.preprocess(batch["image"], noise["image"]).numpy(), noise["shift"].numpy(), 4)
    posts, _ = model.rssm.observe(model.encoder(tf.constant(shifted)), batch["action"], noise["posterior"])
    decoded = model.decoder(model.rssm.features(posts)).numpy()
    by_hand = (0.5 * (shifted - decoded) ** 2 + 0.5 * np.log(2 * np.pi)).sum((-3, -2, -1)).mean()
    np.testing.assert_allclose(metrics["loss/image"].numpy(), by_hand, rtol=1e-5)
    unshifted = WorldModel(ModelConfig(**TINY_IMAGE, augment_shift=4), "image", (64, 64, 3), 1, seed=2)
    assert abs(unshifted.loss(batch, noise)[1]["loss/image"].numpy() - by_hand) > 1.0


@pytest.mark.parametrize("free_nats", [0.0, "median"])
def test_kl_balance_splits_the_kl_gradient_between_prior_and_posterior(free_nats):
    """model.kl_balance=0.8 (DreamerV2): the same loss value as PlaNet's KL (both terms equal KL(post||prior),
    each floored alike), while the prior-only weights get 0.8 of the KL's gradient and the posterior-only weights
    their reconstruction and reward gradient plus 0.2 of the KL's (both measured against kl_scale 0 and 1).
    Chunks of one step, so no posterior sample feeds a later prior (in longer chunks the prior term's gradient
    also reaches the posterior through the recurrence, as in DreamerV2)."""
    base = dict(deter_size=6, stoch_size=3, hidden_size=8, mlp_units=8, reward_units=8, free_nats=0.0)
    rng = tf.random.Generator.from_seed(0)
    batch = {"state": rng.normal([8, 1, 2]), "action": rng.normal([8, 1, 1]), "reward": rng.normal([8, 1])}
    noise = WorldModel(ModelConfig(**base), "state", (2,), 1).sample_noise(rng, 8, 1)
    if free_nats == "median":  # half the steps floored
        _, metrics, _ = WorldModel(ModelConfig(**base), "state", (2,), 1, seed=7).loss(batch, noise)
        model = WorldModel(ModelConfig(**base), "state", (2,), 1, seed=7)
        posts, priors = model.rssm.observe(model.embed(batch["state"]), batch["action"], noise["posterior"])
        kl = gaussian_kl(posts["mean"].numpy(), posts["std"].numpy(), priors["mean"].numpy(), priors["std"].numpy())
        base["free_nats"] = float(np.median(kl))

    def loss_and_grads(**overrides):
        model = WorldModel(ModelConfig(**{**base, **overrides}), "state", (2,), 1, seed=7)
        with tf.GradientTape() as tape:
            loss, _, _ = model.loss(batch, noise)
        names = [variable_name(v) for v in model.trainable_variables]
        return loss.numpy(), dict(zip(names, (g.numpy() for g in tape.gradient(loss, model.trainable_variables))))

    balanced_loss, balanced = loss_and_grads(kl_balance=0.8)
    plain_loss, plain = loss_and_grads()
    _, without_kl = loss_and_grads(kl_scale=0.0)
    np.testing.assert_allclose(balanced_loss, plain_loss, rtol=1e-6)
    prior_only = [name for name in plain if "/prior_hidden/" in name or "/prior_out/" in name]
    posterior_only = [name for name in plain if "/posterior_" in name]
    assert len(prior_only) == 4 and len(posterior_only) == 4
    for name in prior_only:
        assert np.abs(plain[name]).max() > 1e-4
        np.testing.assert_allclose(balanced[name], 0.8 * plain[name], rtol=1e-4, atol=1e-7, err_msg=name)
    for name in posterior_only:
        expected = without_kl[name] + 0.2 * (plain[name] - without_kl[name])
        np.testing.assert_allclose(balanced[name], expected, rtol=1e-4, atol=1e-6, err_msg=name)


def _moving_chunks() -> np.ndarray:
    """[2, 3, 64, 64, 3] uint8 chunks: a grey background with a 4 x 4 white block that moves (chunk 0) or stays
    (chunk 1), and in chunk 1 one pixel whose green channel alone flips at t = 2 and one that darkens at t = 0
    (the median, not the darkest frame, is the background)."""
    images = np.full((2, 3, 64, 64, 3), 100, np.uint8)
    for t, (row, col) in enumerate([(5, 5), (20, 30), (40, 50)]):
        images[0, t, row:row + 4, col:col + 4] = 250
    images[1, :, 10:14, 10:14] = 250
    images[1, 2, 60, 60, 1] = 200
    images[1, 0, 30, 30] = 20
    return images


def test_moving_pixels_are_those_off_the_chunks_median_frame():
    from planet_sac.models.world_model import moving_pixels

    images = _moving_chunks() / 255.0
    median = np.median(images, axis=1, keepdims=True)
    by_hand = (np.abs(images - median) > 0.1).any(-1)
    assert by_hand[0].sum() == 3 * 16 and by_hand[1].sum() == 2  # the block in each frame; the green and the dark pixel
    np.testing.assert_array_equal(moving_pixels(tf.constant(images, tf.float32)).numpy(), by_hand)
    # centred images (the loss's [-0.5, 0.5]) move where the [0, 1] ones do
    np.testing.assert_array_equal(moving_pixels(tf.constant(images - 0.5, tf.float32)).numpy(), by_hand)


@pytest.mark.parametrize("gpu", [False, True])
def test_the_median_is_numpys_to_the_bit_on_either_path(gpu, monkeypatch):
    """`_median` sorts with numpy on a CPU-only host and with tf.sort where a GPU is (forced here): both equal
    numpy's median bit for bit (even and odd counts, along time, the batch and the last axis), eagerly and traced."""
    from planet_sac.models import world_model

    if gpu:
        real = tf.config.list_logical_devices
        monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: ["GPU:0"] if kind == "GPU" else real(kind))
    rng = np.random.default_rng(4)
    for shape, axis in (((3, 50, 4, 5, 3), 1), ((3, 7, 4, 5, 3), 1), ((16, 6, 6, 3), 0), ((4, 6, 8), -1)):
        values = (rng.integers(0, 32, shape) + rng.uniform(0, 1, shape)).astype(np.float32) / 32 - 0.5
        expected = np.median(values, axis=axis).astype(np.float32)
        traced = tf.function(lambda v, axis=axis: world_model._median(v, axis))  # noqa: B023
        for got in (world_model._median(tf.constant(values), axis), traced(tf.constant(values))):
            assert got.shape == expected.shape
            np.testing.assert_array_equal(got.numpy(), expected)


def _placed_chunks() -> np.ndarray:
    """[3, 4, 16, 16, 3] uint8 chunks on a grey background: a 2 x 2 red block that stands still in each chunk, at
    (2, 2) in chunks 0 and 1 and at (10, 10) in chunk 2 (reacher's target, placed anew each episode), and in chunk 0 a
    white pixel that moves along row 14."""
    images = np.full((3, 4, 16, 16, 3), 100, np.uint8)
    images[:2, :, 2:4, 2:4] = (220, 60, 60)
    images[2, :, 10:12, 10:12] = (220, 60, 60)
    for t in range(4):
        images[0, t, 14, 2 + 3 * t] = 250
    return images


def test_foreground_pixels_off_the_batchs_background_add_bodies_placed_anew_each_chunk():
    """chunk_or_batch: also the pixels off the per-pixel median over the chunks of their median frames (numpy)."""
    from planet_sac.models.world_model import foreground_pixels

    images = _placed_chunks() / 255.0
    chunk_background = np.median(images, axis=1)  # [B, H, W, C]
    moving = (np.abs(images - chunk_background[:, None]) > 0.1).any(-1)
    common = np.median(chunk_background, axis=0)
    by_hand = moving | (np.abs(images - common) > 0.1).any(-1)
    # the moving pixel alone is moving; the block placed at (10, 10) in chunk 2 is off the common background in
    # every frame; the block at (2, 2) stands in 2 of the 3 chunks, so the common background has it there and it
    # is foreground only in chunk 2, where it is missing
    assert moving.sum() == 4
    assert by_hand[0].sum() == 4 and by_hand[1].sum() == 0 and by_hand[2].sum() == 4 * 8
    np.testing.assert_array_equal(foreground_pixels(tf.constant(images, tf.float32), "chunk_or_batch").numpy(), by_hand)
    np.testing.assert_array_equal(foreground_pixels(tf.constant(images, tf.float32), "chunk").numpy(), moving)
    # two chunks: the common background is the mean of the two (as numpy's median); a faint pixel, 40 levels above
    # the grey in one chunk, is 20 levels (< 0.1) off that mean in both chunks, and would be off the lower one
    two = images[1:].copy()
    two[1, :, 6, 6] = 140 / 255.0
    two_by_hand = (np.abs(two - np.median(np.median(two, axis=1), axis=0)) > 0.1).any(-1)
    assert not two_by_hand[:, :, 6, 6].any()
    np.testing.assert_array_equal(foreground_pixels(tf.constant(two, tf.float32), "chunk_or_batch").numpy(), two_by_hand)
    with pytest.raises(ValueError, match="mask='batch': must be 'chunk' or 'chunk_or_batch'"):
        foreground_pixels(tf.constant(images, tf.float32), "batch")


def test_foreground_batch_threshold_leaves_out_what_is_faintly_off_the_batchs_background():
    """batch_threshold applies to the batch's common background alone: a faint block placed in one chunk (40
    levels, 0.157 off) is weighted at 0.1 and left out at 0.2, a strong one (120 levels) at both; a pixel moving by
    40 levels within its chunk stays foreground whatever the batch threshold (numpy)."""
    from planet_sac.models.world_model import foreground_pixels

    images = np.full((3, 4, 16, 16, 3), 100, np.uint8)
    images[0, :, 2:4, 2:4] = (140, 100, 100)  # faint, still within its chunk
    images[1, :, 8:10, 8:10] = (220, 100, 100)  # strong, still within its chunk
    images[2, 0, 13, 13] = (140, 100, 100)  # there in one frame of four: off its chunk's median by 40 levels
    images = images / 255.0
    chunk_background = np.median(images, axis=1)
    moving = (np.abs(images - chunk_background[:, None]) > 0.1).any(-1)
    off_common = np.abs(images - np.median(chunk_background, axis=0)).max(-1)
    assert moving.sum() == 1 and moving[2, 0, 13, 13]
    for batch_threshold, faint in ((0.1, True), (0.2, False)):
        by_hand = moving | (off_common > batch_threshold)
        assert by_hand[0, :, 2:4, 2:4].all() if faint else not by_hand[0, :, 2:4, 2:4].any()
        assert by_hand[1, :, 8:10, 8:10].all() and by_hand[2, 0, 13, 13]
        assert by_hand.sum() == 4 * 4 * faint + 4 * 4 + 1
        np.testing.assert_array_equal(foreground_pixels(tf.constant(images, tf.float32), "chunk_or_batch",
                                                        batch_threshold=batch_threshold).numpy(), by_hand)


@pytest.mark.parametrize("batch_threshold", [0.1, 0.2])
def test_foreground_mask_chunk_or_batch_weights_the_placed_bodies_in_the_loss(batch_threshold):
    """model.foreground_mask=chunk_or_batch: the weight w falls on the placed blocks too (numpy mask of the target),
    and on a faint one (40 levels off the grey) only while model.foreground_batch_threshold is below its 0.157."""
    model = WorldModel(ModelConfig(**TINY_IMAGE, foreground_weight=5.0, foreground_mask="chunk_or_batch",
                                   foreground_batch_threshold=batch_threshold), "image", (64, 64, 3), 1, seed=2)
    images = np.full((3, 4, 64, 64, 3), 100, np.uint8)
    images[:, :, :16, :16] = _placed_chunks()
    images[1, :, 16:, 16:] = (140, 100, 100)  # faint, still in its chunk, in one chunk of three
    rng = np.random.default_rng(1)
    batch = tf.nest.map_structure(tf.constant, {
        "image": images, "action": rng.uniform(-1, 1, (3, 4, 1)).astype(np.float32),
        "reward": rng.normal(size=(3, 4)).astype(np.float32)})
    noise = model.sample_noise(tf.random.Generator.from_seed(4), 3, 4)
    _, metrics, posts = model.loss(batch, noise)
    target = model.preprocess(batch["image"], noise["image"]).numpy()
    decoded = model.decoder(model.rssm.features(posts)).numpy()
    chunk_background = np.median(target, axis=1)
    by_hand = {}
    for threshold, placed_pixels in ((0.1, 4 + 4 * 8 + 4 * 48 * 48), (0.2, 4 + 4 * 8)):
        placed = ((np.abs(target - chunk_background[:, None]) > 0.1).any(-1, keepdims=True)
                  | (np.abs(target - np.median(chunk_background, axis=0)) > threshold).any(-1, keepdims=True))
        assert placed.sum() == placed_pixels
        by_hand[threshold] = (0.5 * np.where(placed, 5.0, 1.0) * (target - decoded) ** 2
                              + 0.5 * np.log(2 * np.pi)).sum((-3, -2, -1)).mean()
    assert abs(by_hand[0.1] - by_hand[0.2]) > 1e-3 * by_hand[0.2]  # the two masks' losses are told apart
    np.testing.assert_allclose(metrics["loss/image"].numpy(), by_hand[batch_threshold], rtol=1e-5)
    assert ModelConfig().foreground_mask == "chunk"  # the moving pixels alone by default (v3)


def test_foreground_weight_multiplies_the_moving_pixels_squared_error():
    """model.foreground_weight=5: the image term is 0.5 * sum w (target - decoded)^2 + const, w = 5 on the pixels
    that move in their chunk (numpy median over time) and 1 elsewhere; computed from the model's parts."""
    weighted = WorldModel(ModelConfig(**TINY_IMAGE, foreground_weight=5.0), "image", (64, 64, 3), 1, seed=2)
    plain = WorldModel(ModelConfig(**TINY_IMAGE), "image", (64, 64, 3), 1, seed=2)
    rng = np.random.default_rng(1)
    batch = tf.nest.map_structure(tf.constant, {
        "image": _moving_chunks(), "action": rng.uniform(-1, 1, (2, 3, 1)).astype(np.float32),
        "reward": rng.normal(size=(2, 3)).astype(np.float32)})
    noise = weighted.sample_noise(tf.random.Generator.from_seed(4), 2, 3)
    _, metrics, posts = weighted.loss(batch, noise)

    target = weighted.preprocess(batch["image"], noise["image"]).numpy()
    decoded = weighted.decoder(weighted.rssm.features(posts)).numpy()
    moving = (np.abs(target - np.median(target, axis=1, keepdims=True)) > 0.1).any(-1, keepdims=True)
    weight = np.where(moving, 5.0, 1.0)
    by_hand = (0.5 * weight * (target - decoded) ** 2 + 0.5 * np.log(2 * np.pi)).sum((-3, -2, -1)).mean()
    np.testing.assert_allclose(metrics["loss/image"].numpy(), by_hand, rtol=1e-5)
    unweighted = (0.5 * (target - decoded) ** 2 + 0.5 * np.log(2 * np.pi)).sum((-3, -2, -1)).mean()
    np.testing.assert_allclose(plain.loss(batch, noise)[1]["loss/image"].numpy(), unweighted, rtol=1e-5)
    assert by_hand > unweighted + 1.0  # the weight is felt: 50 moving pixels, each with a squared error
    assert ModelConfig().foreground_weight == 1.0  # PlaNet's loss by default


def test_weights_start_glorot_uniform():
    """Glorot's uniform initialisation (as Keras and PlaNet's TF1 layers): U(-l, l) with l = sqrt(6 / (fan_in + fan_out)),
    for a convolution's fans counted over its kernel window; biases start at 0."""
    from planet_sac.models.networks import Conv2D, Dense

    dense = Dense(300, 200, seed=3, name="glorot_dense")
    conv = Conv2D(8, 16, 4, 2, None, seed=3, name="glorot_conv")
    for kernel, fan_in, fan_out in ((dense.kernel, 300, 200), (conv.kernel, 4 * 4 * 8, 4 * 4 * 16)):
        w = kernel.numpy().ravel()
        limit = np.sqrt(6.0 / (fan_in + fan_out))  # by hand: 0.1095 and 0.1443
        assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit
        np.testing.assert_allclose(w.var(), limit ** 2 / 3, rtol=0.05)  # a uniform's variance
    assert not dense.bias.numpy().any() and not conv.bias.numpy().any()


def test_a_fresh_gru_leans_towards_keeping_its_state():
    """The update gate's bias starts at 1 (the reset gate's at 0): with zero kernels a fresh cell keeps
    sigmoid(1) = 0.731 of its state and adds 0.269 of tanh(0) = 0, whatever its input."""
    from planet_sac.models.networks import GRUCell

    cell = GRUCell(3, 4, name="fresh_gru")
    for kernel in (cell.gates_kernel, cell.candidate_kernel):
        kernel.assign(tf.zeros_like(kernel))
    h = np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)
    out = cell(tf.constant([[5.0, -1.0, 2.0]]), tf.constant(h)).numpy()
    np.testing.assert_allclose(out, h / (1.0 + np.exp(-1.0)), rtol=1e-6)
