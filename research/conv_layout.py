"""What do the encoder's convolutions cost on this CPU, layer by layer, and is channels-first (NCHW) faster?

Usage:
    .venv/bin/python research/conv_layout.py [--batch 800] [--rounds 5]

Times, at a batch of 16 x 50 images (an update's), float32, one TensorFlow thread as the benchmark's runs:
- each of PlaNet's four encoder convolutions (4x4, stride 2, channels 32/64/128/256 at `model.cnn_depth: 32`)
  forward, forward with the kernel's gradient, and with the input's gradient too (the first layer's input is the
  image, which needs none);
- the whole encoder (depth 32) and the half-width decoder's transposed convolutions (`model.decoder_depth: 16`),
  forward and backward, in TensorFlow's default layout (NHWC) and in NCHW, which oneDNN also runs on a CPU.
Medians of `--rounds`. Set TF_NUM_INTRAOP_THREADS to time with more threads. docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import planet_sac  # noqa: E402,F401  (before TensorFlow: oneDNN on, see planet_sac/startup.py)

# isort: split
import tensorflow as tf  # noqa: E402

from planet_sac.benchmark import median_time  # noqa: E402

ENCODER = ((64, 3, 32), (31, 32, 64), (14, 64, 128), (6, 128, 256))
"""(input size, in channels, out channels) of the depth-32 encoder's 4x4 stride-2 convolutions."""
DECODER = ((5, 64, 32, 5), (13, 32, 16, 6), (30, 16, 3, 6))
"""(input size, in channels, out channels, kernel) of the depth-16 decoder's layers after its 1x1 one (a matmul)."""


def conv(x: tf.Tensor, kernel: tf.Tensor, layout: str) -> tf.Tensor:
    """A VALID stride-2 convolution of `x` in `layout` (NHWC: [B, H, W, C]; NCHW: [B, C, H, W]), kernel [k, k, in, out]."""
    return tf.nn.conv2d(x, kernel, 2, "VALID", data_format=layout)


def deconv(x: tf.Tensor, kernel: tf.Tensor, layout: str) -> tf.Tensor:
    """A VALID stride-2 transposed convolution of `x` in `layout`, kernel [k, k, out, in]."""
    size = (x.shape[2 if layout == "NCHW" else 1] - 1) * 2 + kernel.shape[0]
    channels = kernel.shape[2]
    shape = [tf.shape(x)[0], channels, size, size] if layout == "NCHW" else [tf.shape(x)[0], size, size, channels]
    return tf.nn.conv2d_transpose(x, kernel, shape, 2, "VALID", data_format=layout)


def to_layout(x: tf.Tensor, layout: str) -> tf.Tensor:
    """An NHWC tensor in `layout`."""
    return tf.transpose(x, [0, 3, 1, 2]) if layout == "NCHW" else x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = tf.random.Generator.from_seed(0)

    print(f"encoder layers (depth 32), {args.batch} images, seconds:")
    for size, inp, out in ENCODER:
        x = rng.uniform([args.batch, size, size, inp])
        kernel = tf.Variable(rng.normal([4, 4, inp, out], stddev=0.05))

        @tf.function
        def forward(x, kernel=kernel):
            return tf.nn.relu(conv(x, kernel, "NHWC"))

        @tf.function
        def backward(x, with_input, kernel=kernel):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.nn.relu(conv(x, kernel, "NHWC")))
            return tape.gradient(loss, [kernel, x] if with_input else [kernel])

        parts = {"forward": lambda: forward(x).numpy(),
                 "+ kernel gradient": lambda: [g.numpy() for g in backward(x, False)],
                 "+ input gradient": lambda: [g.numpy() for g in backward(x, True)]}
        times = {name: median_time(run, args.rounds) for name, run in parts.items()}
        print(f"  {inp:3d} -> {out:3d} at {size}x{size}: " + ", ".join(f"{k} {v:.3f}" for k, v in times.items()))

    encoder = [tf.Variable(rng.normal([4, 4, inp, out], stddev=0.05)) for _, inp, out in ENCODER]
    decoder = [tf.Variable(rng.normal([k, k, out, inp], stddev=0.05)) for _, inp, out, k in DECODER]
    images = rng.uniform([args.batch, 64, 64, 3])
    first = rng.uniform([args.batch, 5, 5, 64])  # what the decoder's 1x1 layer hands on

    def stack_step(inputs: tf.Tensor, kernels: list[tf.Variable], layer):
        """Forward and backward (the kernels' gradients) through `layer` with each kernel, in a layout given per call."""
        @tf.function
        def step(layout):
            with tf.GradientTape() as tape:
                x = to_layout(inputs, layout)
                for kernel in kernels:
                    x = tf.nn.relu(layer(x, kernel, layout))
                loss = tf.reduce_sum(x)
            return tape.gradient(loss, kernels)
        return step

    print("forward and backward, seconds:")
    for name, step in (("encoder (depth 32)", stack_step(images, encoder, conv)),
                       ("decoder (depth 16)", stack_step(first, decoder, deconv))):
        times = {layout: median_time(lambda layout=layout: [g.numpy() for g in step(layout)], args.rounds)
                 for layout in ("NHWC", "NCHW")}
        print(f"  {name}: NHWC {times['NHWC']:.3f}, NCHW {times['NCHW']:.3f} ({times['NCHW'] / times['NHWC']:.2f}x)")


if __name__ == "__main__":
    main()
