"""What determinism costs: learner update time with and without TensorFlow's op determinism, and the serial cost
of drawing a replay batch without a prefetch thread.

Usage:
    .venv/bin/python bench/determinism_cost.py --config configs/cheetah_run_cpu.yaml --reps 5 --rounds 2 \\
        --json bench/results/determinism_cost.json

Each measurement runs in its own process (op determinism is process-wide), alternating the two modes
`--rounds` times so that load from other processes on a shared machine hits both alike. One measurement:
a learner of the config (world model + SAC, image observations 64x64, random data of the config's batch)
timed over `--reps` compiled updates after one warm-up, median reported. The batch draw: the replay of
20 synthetic 250-step image episodes, batches of the config's size, drawn with `prefetch=0` as the trainer does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def measure(config_path: str, deterministic: bool, reps: int) -> dict:
    import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on, see planet_sac/startup.py)
    # isort: split
    import tensorflow as tf

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    from planet_sac.benchmark import ACTION_SIZE, image_batch, median_time
    from planet_sac.config_loading import load_config
    from planet_sac.control.sac import SAC
    from planet_sac.models.world_model import WorldModel
    from planet_sac.training.learner import Learner

    config = load_config(config_path)
    model = WorldModel(config.model, "image", (64, 64, 3), ACTION_SIZE, precision=config.optim.precision)
    learner = Learner(config, model, SAC(config.sac, model.rssm.feature_size, ACTION_SIZE))
    data = image_batch(config.data.batch_size, config.data.chunk_length)
    result = {"deterministic": deterministic, "update_s": median_time(lambda: learner.update(data)["loss/total"].numpy(), reps)}
    if deterministic:
        result["batch_draw_s"] = batch_draw_seconds(config)
    return result


def batch_draw_seconds(config) -> float:
    import shutil
    import tempfile

    import numpy as np

    from planet_sac.benchmark import ACTION_SIZE, median_time
    from planet_sac.episodes.loader import make_dataset
    from planet_sac.episodes.storage import save_episode

    directory = tempfile.mkdtemp(prefix="planet_sac_determinism_")
    try:
        rng = np.random.default_rng(0)
        for _ in range(20):
            save_episode(directory, {"image": rng.integers(0, 256, (251, 64, 64, 3), dtype=np.uint8),
                                     "action": rng.uniform(-1, 1, (251, ACTION_SIZE)).astype(np.float32),
                                     "reward": rng.normal(size=251).astype(np.float32),
                                     "discount": np.ones(251, np.float32)})
        dataset, _ = make_dataset(directory, config.data.batch_size, config.data.chunk_length, seed=0, prefetch=0)
        batches = iter(dataset)
        return median_time(lambda: next(batches), 20)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/cheetah_run_cpu.yaml")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.config, args.child == "on", args.reps)))
        return
    runs = []
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            out = subprocess.run([sys.executable, __file__, "--config", args.config, "--reps", str(args.reps),
                                  "--child", mode], check=True, capture_output=True, text=True,
                                 env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    on = [run["update_s"] for run in runs if run["deterministic"]]
    off = [run["update_s"] for run in runs if not run["deterministic"]]
    summary = {"config": args.config, "reps": args.reps, "rounds": args.rounds, "runs": runs,
               "update_s_off": statistics.median(off), "update_s_on": statistics.median(on),
               "ratio_on_off": statistics.median(on) / statistics.median(off),
               "batch_draw_s": statistics.median(run["batch_draw_s"] for run in runs if "batch_draw_s" in run),
               "load_average": os.getloadavg()}
    print(json.dumps({key: value for key, value in summary.items() if key != "runs"}, indent=2))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(summary, file, indent=2)


if __name__ == "__main__":
    main()
