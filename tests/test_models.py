import numpy as np
import tensorflow as tf

from planet_sac.config import ModelConfig
from planet_sac.models.networks import variable_name
from planet_sac.models.world_model import WorldModel


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


def test_preprocess_is_5_bit_centred_and_dequantised():
    model = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, cnn_depth=4), "image", (64, 64, 3), 1)
    image = tf.constant([[0, 7, 8, 255]], tf.uint8)
    np.testing.assert_allclose(model.preprocess(image).numpy(), [[-0.5, -0.5, -0.5 + 1 / 32, 0.5 - 1 / 32]])
    noisy = model.preprocess(image, tf.fill([1, 4], 0.999)).numpy()
    assert np.all(noisy < 0.5) and np.all(noisy >= -0.5)


def test_same_seed_builds_same_weights():
    a = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8), "state", (3,), 1, seed=3)
    b = WorldModel(ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8), "state", (3,), 1, seed=3)
    for x, y in zip(a.variables, b.variables):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_free_nats_floor_and_overshooting_term():
    config = ModelConfig(deter_size=8, stoch_size=4, hidden_size=8, mlp_units=8, free_nats=100.0,
                         overshooting_distance=3, overshooting_scale=1.0)
    model = WorldModel(config, "state", (3,), 1)
    rng = tf.random.Generator.from_seed(0)
    batch = {"state": rng.normal([2, 6, 3]), "action": rng.normal([2, 6, 1]), "reward": rng.normal([2, 6])}
    loss, metrics, _ = model.loss(batch, model.sample_noise(rng, 2, 6))
    assert metrics["loss/kl"] < 100.0  # raw KL is reported; the loss uses the floor
    np.testing.assert_allclose(loss, metrics["loss/state"] + metrics["loss/reward"] + 100.0 + 100.0, rtol=1e-5)


def test_transposed_conv_from_1x1_equals_tensorflows_op():
    from planet_sac.models.networks import Conv2DTranspose

    layer = Conv2DTranspose(16, 8, 5, 2, None, name="deconv_test")
    x = tf.random.normal([3, 1, 1, 16], seed=0)
    expected = tf.nn.conv2d_transpose(x, layer.kernel, [3, 5, 5, 8], 2, "VALID") + layer.bias
    np.testing.assert_allclose(layer(x).numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
