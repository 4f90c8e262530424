"""Speed of one world-model update, one CEM action and one SAC action, beside mbrl-lib's PlaNet.

Usage (the peer is optional; without it only our figures are printed):
    PEER=$(bash ../shared/bench/peer_setup.sh)
    .venv/bin/python bench/bench_speed.py --peer-python "$PEER" [--reps 3] [--quick]

Everything is PlaNet's full size (64x64x3 images, RSSM 200/30/200, conv depth 32,
CEM 12/1000/10/100, action size 6 as in cheetah). Each figure is the median of
`--reps` calls after a warm-up call that compiles. Ours and the peer's are measured in
the same run so their ratio is meaningful on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time

import planet_sac  # noqa: F401  (first: sets TensorFlow's CPU options before tensorflow is imported)

import numpy as np
import tensorflow as tf

from planet_sac.config import Config, apply_overrides
from planet_sac.control import cem
from planet_sac.control.sac import SAC
from planet_sac.models.world_model import WorldModel
from planet_sac.training.learner import Learner


def median_time(fn, reps: int) -> float:
    fn()  # compile
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def image_batch(batch: int, length: int, action_size: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 256, (batch, length, 64, 64, 3), dtype=np.uint8),
        "action": rng.uniform(-1, 1, (batch, length, action_size)).astype(np.float32),
        "reward": rng.normal(size=(batch, length)).astype(np.float32),
        "discount": np.ones((batch, length), np.float32),
    }


def time_update(batch: int, length: int, reps: int, jit: bool, sac_updates: int = 0) -> float:
    config = apply_overrides(Config(), [f"optim.jit_compile={str(jit).lower()}", f"sac.updates_per_step={sac_updates}"])
    model = WorldModel(config.model, "image", (64, 64, 3), 6)
    learner = Learner(config, model, SAC(config.sac, model.rssm.feature_size, 6))
    data = {key: tf.constant(value) for key, value in image_batch(batch, length, 6).items()}
    return median_time(lambda: learner.update(data)["loss/total"].numpy(), reps)


def profile_parts(batch: int, length: int, reps: int) -> dict[str, float]:
    """Forward + backward time of each part of the model, and of the optimizer step alone.

    Inputs are variables, so graph optimisations cannot fold any part away.
    """
    config = Config()
    model = WorldModel(config.model, "image", (64, 64, 3), 6)
    learner = Learner(config, model, SAC(config.sac, model.rssm.feature_size, 6))
    images = tf.Variable(tf.random.uniform([batch * length, 64, 64, 3], -0.5, 0.5))
    actions = tf.Variable(tf.random.uniform([batch, length, 6], -1, 1))
    embed = tf.Variable(tf.random.normal([batch, length, model.encoder.embed_size]))
    features = tf.Variable(tf.random.normal([batch * length, model.rssm.feature_size]))
    noise = tf.random.normal([batch, length, model.rssm.stoch_size])

    def grad_of(module, fn):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                total = tf.reduce_sum(fn())
            grads = tape.gradient(total, module.trainable_variables)
            return tf.linalg.global_norm([g for g in grads if g is not None])
        return lambda: step().numpy()

    grads = [tf.ones_like(v) * 1e-6 for v in model.trainable_variables]
    optimizer_step = tf.function(lambda: learner.optimizer.apply(grads))
    return {
        "encoder": median_time(grad_of(model.encoder, lambda: model.encoder(images)), reps),
        "rssm_loop": median_time(grad_of(model.rssm, lambda: model.rssm.features(model.rssm.observe(embed, actions, noise)[0])), reps),
        "decoder": median_time(grad_of(model.decoder, lambda: model.decoder(features)), reps),
        "optimizer": median_time(lambda: optimizer_step().numpy(), reps),
    }


def time_actions(reps: int) -> dict[str, float]:
    config = Config()
    model = WorldModel(config.model, "image", (64, 64, 3), 6)
    sac = SAC(config.sac, model.rssm.feature_size, 6)
    rng = tf.random.Generator.from_seed(0)
    state = model.rssm.initial(1)
    obs = tf.zeros([1, 64, 64, 3], tf.uint8)

    @tf.function(autograph=False)
    def cem_action():
        latent, _ = model.rssm.obs_step(state, tf.zeros([1, 6]), model.embed(obs, tf.fill(tf.shape(obs), 0.5)), tf.zeros([1, 30]))
        return cem.plan(model, latent, config.cem, rng)

    @tf.function(autograph=False)
    def sac_action():
        latent, _ = model.rssm.obs_step(state, tf.zeros([1, 6]), model.embed(obs, tf.fill(tf.shape(obs), 0.5)), tf.zeros([1, 30]))
        return sac.act(model.rssm.features(latent), tf.zeros([1, 6]), True)

    return {"cem_action": median_time(lambda: cem_action().numpy(), reps),
            "sac_action": median_time(lambda: sac_action().numpy(), max(reps, 20))}


def run_peer(python: str, batch: int, length: int, reps: int) -> dict[str, float]:
    script = "../shared/bench/peer_mbrl_planet.py"
    out = subprocess.run([python, script, "--action-dim", "6", "--batch", str(batch), "--seq", str(length),
                          "--train-reps", str(reps), "--plan-reps", str(reps)], capture_output=True, text=True, check=True).stdout
    train = re.search(r"TRAIN .*?median ([\d.]+)\s?s", out)
    if train is None:
        raise RuntimeError(f"unexpected output of the peer benchmark:\n{out[-2000:]}")
    result = {"update": float(train.group(1))}
    plans = [float(value) for value in re.findall(r"PLAN .*?median ([\d.]+)\s?s", out)]  # agent.act and optimize w/o tiling
    if plans:
        result["cem_action"] = min(plans)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--peer-python", help="python of the mbrl-lib venv from ../shared/bench/peer_setup.sh")
    parser.add_argument("--quick", action="store_true", help="only batch 16 x 50, no profile")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    sizes = [(16, 50)] if args.quick else [(50, 50), (16, 50)]
    results: dict[str, float] = {}
    for batch, length in sizes:
        for jit in (False, True):
            results[f"ours/update_{batch}x{length}{'_xla' if jit else ''}"] = time_update(batch, length, args.reps, jit)
        if args.peer_python:
            peer = run_peer(args.peer_python, batch, length, args.reps)
            results[f"peer/update_{batch}x{length}"] = peer["update"]
            if "cem_action" in peer:
                results["peer/cem_action"] = peer["cem_action"]
    if not args.quick:
        results.update({f"ours/profile_16x50/{key}": value for key, value in profile_parts(16, 50, args.reps).items()})
    results.update({f"ours/{key}": value for key, value in time_actions(args.reps).items()})

    print(f"{'measure':<40}{'seconds':>10}")
    for key, value in results.items():
        print(f"{key:<40}{value:>10.4f}")
    for batch, length in sizes:
        peer = results.get(f"peer/update_{batch}x{length}")
        if peer:
            best = min(results[f"ours/update_{batch}x{length}"], results[f"ours/update_{batch}x{length}_xla"])
            print(f"update {batch}x{length}: mbrl-lib / ours = {peer / best:.2f}x")
    if "peer/cem_action" in results:
        print(f"CEM action: mbrl-lib / ours = {results['peer/cem_action'] / results['ours/cem_action']:.2f}x")
    print(f"CEM action / SAC action = {results['ours/cem_action'] / results['ours/sac_action']:.0f}x")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    sys.exit(main())
