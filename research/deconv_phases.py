"""Is the decoder's stride-2 transposed convolution faster as four stride-1 phases (a sub-pixel convolution)?

Usage:
    .venv/bin/python research/deconv_phases.py [--batch 800] [--rounds 5]

A VALID transposed convolution of stride 2 with an even kernel k = 2r writes output row 2m + p from the input rows
m - q with kernel row 2q + p (q < r): each of the four output phases (p_row, p_col) is a stride-1 convolution with
an r x r kernel, and `tf.nn.depth_to_space` interleaves them. `phase_deconv` computes it so (one `conv2d` with 4x
the output channels, over the input padded by r - 1, kernel flipped), from the same [k, k, out, in] kernel as
`tf.nn.conv2d_transpose`. The script times forward + backward (the input's and the kernel's gradients) of both on
the benchmark decoder's (`model.decoder_depth: 16`) stride-2 layers at a batch of 16 x 50 images, one TensorFlow
thread as the benchmark's runs, float32, median of `--rounds`, and prints the largest difference of outputs and
gradients. Set TF_NUM_INTRAOP_THREADS to time with more.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import planet_sac  # noqa: E402,F401  (before TensorFlow: oneDNN on, see planet_sac/startup.py)

# isort: split
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from planet_sac.benchmark import median_time  # noqa: E402

# (input size, in channels, out channels, kernel) of the depth-16 decoder's layers after its 1x1 one (a matmul)
LAYERS = ((5, 64, 32, 5), (13, 32, 16, 6), (30, 16, 3, 6))


def transposed_deconv(x: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """TensorFlow's stride-2 VALID transposed convolution, as `networks.Conv2DTranspose` calls it."""
    size = (x.shape[1] - 1) * 2 + kernel.shape[0]
    return tf.nn.conv2d_transpose(x, kernel, [tf.shape(x)[0], size, size, kernel.shape[2]], 2, "VALID")


def phase_deconv(x: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """The same transposed convolution as four stride-1 phases: [B, n, n, in] x [k, k, out, in] -> [B, m, m, out],
    m = 2 (n - 1) + k. An odd kernel is padded with a zero row and column and the output cropped."""
    k, _, out, inp = kernel.shape
    size = 2 * (x.shape[1] - 1) + k
    if k % 2:
        kernel = tf.pad(kernel, [[0, 1], [0, 1], [0, 0], [0, 0]])
        k += 1
    r = k // 2
    phases = tf.transpose(tf.reshape(kernel, [r, 2, r, 2, out, inp]), [0, 2, 1, 3, 4, 5])  # [q_row, q_col, p_row, p_col, out, in]
    phases = tf.reshape(phases, [r, r, 4 * out, inp])  # output channel (p_row * 2 + p_col) * out + c: depth_to_space's order
    conv_kernel = tf.transpose(tf.reverse(phases, [0, 1]), [0, 1, 3, 2])  # a correlation: flipped, [h, w, in, out]
    padded = tf.pad(x, [[0, 0], [r - 1, r - 1], [r - 1, r - 1], [0, 0]])
    y = tf.nn.depth_to_space(tf.nn.conv2d(padded, conv_kernel, 1, "VALID"), 2)
    return y[:, :size, :size]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for size, inp, out, k in LAYERS:
        x = tf.constant(rng.normal(size=(args.batch, size, size, inp)).astype(np.float32))
        kernel = tf.constant(rng.normal(size=(k, k, out, inp)).astype(np.float32) * 0.1)
        seconds, grads = {}, {}
        for name, deconv in (("transposed", transposed_deconv), ("phases", phase_deconv)):
            @tf.function(autograph=False)
            def forward_backward(deconv=deconv):
                with tf.GradientTape() as tape:
                    tape.watch([x, kernel])
                    y = deconv(x, kernel)
                    loss = tf.reduce_sum(y * y)
                return [y, *tape.gradient(loss, [x, kernel])]

            grads[name] = [t.numpy() for t in forward_backward()]
            seconds[name] = median_time(forward_backward, args.rounds)
        diff = max(float(np.max(np.abs(a - b)) / np.max(np.abs(a))) for a, b in zip(grads["transposed"], grads["phases"]))
        print(f"{size}x{size}x{inp} -> {out}, kernel {k}: transposed {seconds['transposed']:.3f} s, "
              f"phases {seconds['phases']:.3f} s ({seconds['phases'] / seconds['transposed']:.2f}x); "
              f"largest relative difference {diff:.1e}")


if __name__ == "__main__":
    main()
