r"""Do pixel world-model updates repeat bit for bit across processes on one machine?

Usage:
    .venv/bin/python research/determinism_pixels.py --config configs/dmc_vision_cpu_v1.yaml --updates 3

Runs the same learner (world model of the config, SAC off, the fixed random batch of
`planet_sac.benchmark.image_batch`) for `--updates` updates in two fresh processes and lists the variables
whose weights differ. By default TensorFlow is set up as the trainer sets it (op determinism on, Grappler
off): 0 of 38 differ after 5 updates, float32 and mixed_bfloat16. `--grappler on` (op determinism alone, as
before 2026-11-26): 31-33 of 38 differ. oneDNN off (`TF_ENABLE_ONEDNN_OPTS=0`), one thread
(`TF_NUM_INTRAOP_THREADS=1`) or `PYTHONHASHSEED=0` did not change that (docs/determinism.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile


def child(config_path: str, updates: int, precision: str, grappler: bool, out: str) -> None:
    import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on)
    # isort: split
    import numpy as np
    import tensorflow as tf

    from planet_sac.startup import make_tensorflow_deterministic

    if grappler:  # op determinism alone: how the trainer ran before 2026-11-26
        tf.config.experimental.enable_op_determinism()
    else:  # what the trainer does
        make_tensorflow_deterministic()
    from planet_sac.benchmark import image_batch, world_model_learner
    from planet_sac.config_loading import load_config

    config = load_config(config_path)
    model, learner = world_model_learner(config, precision)
    data = image_batch(config.data.batch_size, config.data.chunk_length)
    for _ in range(updates):
        learner.update(data)
    np.savez(out, **{variable.name: variable.numpy() for variable in model.variables})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/dmc_vision_cpu_v1.yaml")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--grappler", choices=["on", "off"], default="off",
                        help="TensorFlow's graph optimizer in both processes (off: as the trainer runs)")
    parser.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.config, args.updates, args.precision, args.grappler == "on", args.child)
        return
    import numpy as np

    with tempfile.TemporaryDirectory() as directory:
        paths = [os.path.join(directory, f"{name}.npz") for name in "ab"]
        for path in paths:
            subprocess.run([sys.executable, __file__, "--config", args.config, "--updates", str(args.updates),
                            "--precision", args.precision, "--grappler", args.grappler, "--child", path], check=True)
        first, second = (np.load(path) for path in paths)
        differ = [name for name in first.files if not np.array_equal(first[name], second[name])]
    print(f"{len(differ)} of {len(first.files)} variables differ after {args.updates} updates "
          f"({args.precision}, Grappler {args.grappler}): {', '.join(differ[:6])}{' ...' if len(differ) > 6 else ''}")


if __name__ == "__main__":
    main()
