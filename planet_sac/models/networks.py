"""Small building blocks (dense, conv, GRU) as `tf.Module`s with eagerly built weights.

Weights are created at construction, with explicit input sizes, inside the module's
name scope, so every variable has a stable hierarchical name such as
`world_model/rssm/gru/kernel`. Filtered restore and `planet-sac variables` depend on
those names. Initial values come from stateless RNG ops keyed by the config seed and
the variable name, so the same seed always builds the same model.
"""

from __future__ import annotations

import zlib
from typing import Callable, Sequence

import tensorflow as tf

Activation = Callable[[tf.Tensor], tf.Tensor] | None


def _glorot(shape: Sequence[int], fan_in: int, fan_out: int, seed: int, name: str) -> tf.Tensor:
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    key = zlib.crc32(name.encode())
    return tf.random.stateless_uniform(shape, seed=[seed, key], minval=-limit, maxval=limit)


class Dense(tf.Module):
    """A fully connected layer y = act(x W + b)."""

    def __init__(self, in_size: int, out_size: int, activation: Activation = None, seed: int = 0, name: str = "dense"):
        super().__init__(name=name)
        with self.name_scope:
            self._kernel_key = tf.get_current_name_scope() + "/kernel"  # keys the kernel's initial values, with the seed
            self.kernel = tf.Variable(_glorot([in_size, out_size], in_size, out_size, seed, self._kernel_key), name="kernel")
            self.bias = tf.Variable(tf.zeros([out_size]), name="bias")
        self.activation = activation

    def initialize(self, seed: int) -> None:
        """Assigns the values a layer built with `seed` (and the same name) starts from: new weights, same variables."""
        in_size, out_size = self.kernel.shape
        self.kernel.assign(_glorot([in_size, out_size], in_size, out_size, seed, self._kernel_key))
        self.bias.assign(tf.zeros_like(self.bias))

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        """Computes in x's dtype: float32 weights are cast for bfloat16 inputs (planning in bfloat16)."""
        y = tf.matmul(x, _as(self.kernel, x)) + _as(self.bias, x)
        return self.activation(y) if self.activation else y


def _as(variable: tf.Variable, like: tf.Tensor) -> tf.Tensor:
    """The variable in `like`'s dtype (a no-op for float32)."""
    return variable if variable.dtype == like.dtype else tf.cast(variable, like.dtype)


class MLP(tf.Module):
    """`layers` hidden Dense layers with an activation, then a linear output layer."""

    def __init__(self, in_size: int, units: int, layers: int, out_size: int, activation: Activation = tf.nn.elu, seed: int = 0,
                 name: str = "mlp", compute_dtype: tf.DType | None = None):
        super().__init__(name=name)
        self.compute_dtype = compute_dtype  # bfloat16: mixed precision; None: compute in the input's dtype
        with self.name_scope:
            sizes = [in_size] + [units] * layers
            self.hidden = [Dense(a, b, activation, seed, name=f"h{i}") for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
            self.out = Dense(sizes[-1], out_size, None, seed, name="out")

    def initialize(self, seed: int) -> None:
        """Assigns every layer the values an MLP built with `seed` (and the same name) starts from (`Dense.initialize`)."""
        for layer in (*self.hidden, self.out):
            layer.initialize(seed)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        """[..., in_size] -> [..., out_size] in x's dtype; leading dims are folded into one batch."""
        lead = tf.shape(x)[:-1]
        dtype = x.dtype
        x = tf.reshape(x, [-1, x.shape[-1]])
        if self.compute_dtype is not None:
            x = tf.cast(x, self.compute_dtype)
        for layer in self.hidden:
            x = layer(x)
        y = tf.cast(self.out(x), dtype)
        return tf.reshape(y, tf.concat([lead, [y.shape[-1]]], 0))


class Conv2D(tf.Module):
    """A VALID convolution with a square kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, activation: Activation, seed: int = 0, name: str = "conv"):
        super().__init__(name=name)
        with self.name_scope:
            scope = tf.get_current_name_scope()
            shape = [kernel, kernel, in_channels, out_channels]
            self.kernel = tf.Variable(
                _glorot(shape, kernel * kernel * in_channels, kernel * kernel * out_channels, seed, scope + "/kernel"), name="kernel"
            )
            self.bias = tf.Variable(tf.zeros([out_channels]), name="bias")
        self.stride = stride
        self.activation = activation

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.conv2d(x, _as(self.kernel, x), self.stride, "VALID") + _as(self.bias, x)
        return self.activation(y) if self.activation else y


class Conv2DTranspose(tf.Module):
    """A VALID transposed convolution with a square kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, activation: Activation, seed: int = 0, name: str = "deconv"):
        super().__init__(name=name)
        with self.name_scope:
            scope = tf.get_current_name_scope()
            shape = [kernel, kernel, out_channels, in_channels]
            self.kernel = tf.Variable(
                _glorot(shape, kernel * kernel * in_channels, kernel * kernel * out_channels, seed, scope + "/kernel"), name="kernel"
            )
            self.bias = tf.Variable(tf.zeros([out_channels]), name="bias")
        self.kernel_size = kernel
        self.stride = stride
        self.out_channels = out_channels
        self.activation = activation

    def output_size(self, size: int) -> int:
        return (size - 1) * self.stride + self.kernel_size

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        batch = tf.shape(x)[0]
        size = self.output_size(x.shape[1])
        if x.shape[1] == 1 and x.shape[2] == 1:
            # From a 1x1 input the transposed convolution is exactly a matmul, and TensorFlow's CPU kernel
            # for this case is ~100x slower than one (16 s vs 0.1 s for PlaNet's first decoder layer at 800 images).
            k, out_channels, in_channels = self.kernel_size, self.out_channels, x.shape[3]
            weights = tf.transpose(tf.reshape(_as(self.kernel, x), [k * k * out_channels, in_channels]))
            y = tf.reshape(tf.matmul(tf.reshape(x, [-1, in_channels]), weights), [batch, k, k, out_channels])
        else:
            y = tf.nn.conv2d_transpose(x, _as(self.kernel, x), [batch, size, size, self.out_channels], self.stride, "VALID")
        y = y + _as(self.bias, x)
        return self.activation(y) if self.activation else y


class GRUCell(tf.Module):
    """A gated recurrent unit: h' = z * h + (1 - z) * tanh(W [x, r * h])."""

    def __init__(self, in_size: int, size: int, seed: int = 0, name: str = "gru"):
        super().__init__(name=name)
        with self.name_scope:
            scope = tf.get_current_name_scope()
            total = in_size + size
            self.gates_kernel = tf.Variable(_glorot([total, 2 * size], total, 2 * size, seed, scope + "/gates_kernel"), name="gates_kernel")
            # A positive bias on the update gate starts the cell close to "keep the state", which stabilises early training.
            self.gates_bias = tf.Variable(tf.concat([tf.zeros([size]), tf.ones([size])], 0), name="gates_bias")
            self.candidate_kernel = tf.Variable(_glorot([total, size], total, size, seed, scope + "/candidate_kernel"), name="candidate_kernel")
            self.candidate_bias = tf.Variable(tf.zeros([size]), name="candidate_bias")
        self.size = size

    def __call__(self, x: tf.Tensor, h: tf.Tensor) -> tf.Tensor:
        gates = tf.sigmoid(tf.matmul(tf.concat([x, h], -1), _as(self.gates_kernel, x)) + _as(self.gates_bias, x))
        reset, update = tf.split(gates, 2, -1)
        candidate = tf.tanh(tf.matmul(tf.concat([x, reset * h], -1), _as(self.candidate_kernel, x))
                            + _as(self.candidate_bias, x))
        return update * h + (1.0 - update) * candidate


class ConvEncoder(tf.Module):
    """PlaNet's image encoder: four stride-2 4x4 convolutions (32/64/128/256) -> 1024 features."""

    def __init__(self, depth: int = 32, image_size: int = 64, seed: int = 0, compute_dtype: tf.DType = tf.float32,
                 name: str = "encoder"):
        super().__init__(name=name)
        self.compute_dtype = compute_dtype  # bfloat16: mixed precision (float32 weights, bfloat16 arithmetic)
        with self.name_scope:
            channels = [3, depth, 2 * depth, 4 * depth, 8 * depth]
            self.convs = [Conv2D(a, b, 4, 2, tf.nn.relu, seed, name=f"conv{i}") for i, (a, b) in enumerate(zip(channels[:-1], channels[1:]))]
        size = image_size
        for _ in self.convs:
            size = (size - 4) // 2 + 1
        self.embed_size = size * size * 8 * depth

    def __call__(self, image: tf.Tensor) -> tf.Tensor:
        """[..., H, W, 3] float -> [..., embed_size]; leading dims are folded into one batch."""
        lead = tf.shape(image)[:-3]
        x = tf.cast(tf.reshape(image, tf.concat([[-1], tf.shape(image)[-3:]], 0)), self.compute_dtype)
        for conv in self.convs:
            x = conv(x)
        return tf.cast(tf.reshape(x, tf.concat([lead, [self.embed_size]], 0)), tf.float32)


class ConvDecoder(tf.Module):
    """PlaNet's image decoder: dense -> 1x1x(32*depth) -> four transposed convolutions -> 64x64x3 mean."""

    def __init__(self, feature_size: int, depth: int = 32, seed: int = 0, compute_dtype: tf.DType = tf.float32,
                 name: str = "decoder"):
        super().__init__(name=name)
        self.compute_dtype = compute_dtype  # bfloat16: mixed precision (float32 weights, bfloat16 arithmetic)
        with self.name_scope:
            self.dense = Dense(feature_size, 32 * depth, None, seed, name="dense")
            self.deconvs = [
                Conv2DTranspose(32 * depth, 4 * depth, 5, 2, tf.nn.relu, seed, name="deconv0"),
                Conv2DTranspose(4 * depth, 2 * depth, 5, 2, tf.nn.relu, seed, name="deconv1"),
                Conv2DTranspose(2 * depth, depth, 6, 2, tf.nn.relu, seed, name="deconv2"),
                Conv2DTranspose(depth, 3, 6, 2, None, seed, name="deconv3"),
            ]
        self.depth = depth

    def __call__(self, features: tf.Tensor) -> tf.Tensor:
        """[..., F] -> [..., 64, 64, 3] mean of a unit-variance Gaussian over preprocessed pixels."""
        lead = tf.shape(features)[:-1]
        x = self.dense(tf.cast(tf.reshape(features, [-1, features.shape[-1]]), self.compute_dtype))
        x = tf.reshape(x, [-1, 1, 1, 32 * self.depth])
        for deconv in self.deconvs:
            x = deconv(x)
        return tf.cast(tf.reshape(x, tf.concat([lead, tf.shape(x)[1:]], 0)), tf.float32)

