"""The actor-critic part alone (SAC updates + imagination, PlaNet-size RSSM, cheetah action size), base vs new, interleaved.

Run from the repository root with the older tree importable as planet_sac_base (see bench/update_speed.py):
    PYTHONPATH=/tmp/base .venv/bin/python bench/results/update_speed/ac_speed.py 30 [sac.real_ratio=1.0]
"""
import importlib
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
over = ["sac.imagination_horizon=15", "sac.real_ratio=0.5"] + sys.argv[2:]
fns = {}
for name, pkg in (("base", "planet_sac_base"), ("new", "planet_sac")):
    cfgm = importlib.import_module(f"{pkg}.config")
    wm = importlib.import_module(f"{pkg}.models.world_model")
    sacm = importlib.import_module(f"{pkg}.control.sac")
    lm = importlib.import_module(f"{pkg}.training.learner")
    config = cfgm.load_config("configs/cheetah_run_cpu.yaml", over + ["optim.precision=float32"])
    model = wm.WorldModel(config.model, "image", (64, 64, 3), 6, precision="float32")
    sac = sacm.SAC(config.sac, model.rssm.feature_size, 6)
    rng = tf.random.Generator.from_seed(0)
    r = np.random.default_rng(0)
    feats = tf.constant(r.normal(size=(16, 50, model.rssm.feature_size)).astype(np.float32))
    batch = {"action": tf.constant(r.uniform(-1, 1, (16, 50, 6)).astype(np.float32)),
             "reward": tf.constant(r.normal(size=(16, 50)).astype(np.float32)), "discount": tf.ones((16, 50))}
    f = tf.function(lambda m=model, s=sac, g=rng, lm=lm: lm.actor_critic_updates(m, s, feats, batch, g), autograph=False)
    t = time.perf_counter()
    f()["sac/q"].numpy()
    print(name, "first call", round(time.perf_counter() - t, 1), flush=True)
    fns[name] = f
times = {k: [] for k in fns}
for _ in range(reps):
    for k, f in fns.items():
        t = time.perf_counter()
        f()["sac/q"].numpy()
        times[k].append(time.perf_counter() - t)
for k, v in times.items():
    print(k, "median", round(statistics.median(v), 4), "ratio", round(statistics.median([a / b for a, b in zip(v, times["base"])]), 3))
