"""Seconds per learner update under optim.strategy=default and =mirrored, on this machine.

Splits the CPU into `--devices` logical devices before TensorFlow starts (as tests/training/test_distribute.py
does), so MirroredStrategy has replicas to mirror over, then times one compiled update (world
model + SAC) per size, after a warm-up call, as the median of `--reps` calls. The default
strategy runs in the same process, on the first logical device. On a CPU the replicas share
the same cores, so this measures the cost of the strategy's machinery, not a speed-up.

    python bench/bench_distribute.py                    # smoke (state) and tiny/PlaNet-size pixel updates
    python bench/bench_distribute.py --sizes smoke --reps 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SMOKE = os.path.join(ROOT, "configs", "smoke.yaml")

SIZES = {  # name -> (observation, config overrides on configs/smoke.yaml, batch, chunk length)
    "smoke": ("state", [], 4, 10),
    "tiny-pixels": ("image", ["model.cnn_depth=4"], 4, 10),
    "planet-pixels": ("image", ["model.deter_size=200", "model.stoch_size=30", "model.hidden_size=200",
                                "model.cnn_depth=32", "model.reward_units=100", "sac.units=256"], 16, 50),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=2, help="logical CPU devices (replicas of the mirrored strategy)")
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()  # before TensorFlow loads: --help and a wrong flag answer at once
    import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on, see planet_sac/startup.py)

    # isort: split
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.devices)

    from planet_sac.benchmark import ACTION_SIZE, image_batch, machine, median_time
    from planet_sac.config_loading import apply_overrides, load_config
    from planet_sac.control.sac import SAC
    from planet_sac.models.world_model import WorldModel
    from planet_sac.training import distribute
    from planet_sac.training.learner import Learner

    mirrored = distribute.make_strategy(apply_overrides(load_config(SMOKE), ["optim.strategy=mirrored"]))
    results = {"machine": machine(), "devices": args.devices, "reps": args.reps, "seconds_per_update": {}}
    print(f"{'size':<16}{'batch x length':>16}{'default s':>12}{'mirrored s':>12}{'ratio':>8}")
    for name in args.sizes:
        obs, overrides, batch, length = SIZES[name]
        config = apply_overrides(load_config(SMOKE), [*overrides, f"data.batch_size={batch}"])
        if obs == "image":
            data, shape, actions = image_batch(batch, length), (64, 64, 3), ACTION_SIZE
        else:
            rng = np.random.default_rng(0)
            data = {"state": rng.normal(size=(batch, length, 3)).astype(np.float32),
                    "action": rng.uniform(-1, 1, (batch, length, 1)).astype(np.float32),
                    "reward": rng.normal(size=(batch, length)).astype(np.float32), "discount": np.ones((batch, length), np.float32)}
            data, shape, actions = {key: tf.constant(value) for key, value in data.items()}, (3,), 1
        seconds = {}
        for label, strategy in (("default", tf.distribute.get_strategy()), ("mirrored", mirrored)):
            with strategy.scope():
                model = WorldModel(config.model, obs, shape, actions)
                learner = Learner(config, model, SAC(config.sac, model.rssm.feature_size, actions), strategy=strategy)
            seconds[label] = median_time(lambda: learner.update(data)["loss/total"].numpy(), args.reps)
        results["seconds_per_update"][name] = seconds
        print(f"{name:<16}{f'{batch} x {length}':>16}{seconds['default']:>12.4f}{seconds['mirrored']:>12.4f}"
              f"{seconds['mirrored'] / seconds['default']:>8.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    main()
