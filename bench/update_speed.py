r"""One learner update of a pixel config with its SAC updates and imagination: trace time, graph size, seconds.

Usage (one process; the learners of the given precisions and config variants are timed in interleaved rounds):
    .venv/bin/python bench/update_speed.py --config configs/cheetah_run_cpu.yaml --reps 10 \\
        --precisions float32 mixed_bfloat16 auto --set sac.imagination_horizon=15 sac.real_ratio=0.5 --json OUT.json
    .venv/bin/python bench/update_speed.py --config configs/dmc_vision_cpu_v1.yaml --precisions float32 auto \\
        --variants d16:model.decoder_depth=16 d8:model.decoder_depth=8 --json OUT.json

A/B against an older source tree in the same process: `--baseline PACKAGE` also times that
tree's learner at each of `--precisions`, where PACKAGE is a copy of the old `planet_sac/` renamed (imports
included) and importable, e.g.

    git archive BASE planet_sac | tar -x -C /tmp/base && mv /tmp/base/planet_sac /tmp/base/planet_sac_base
    grep -rl planet_sac /tmp/base --include=*.py | xargs sed -i 's/\bplanet_sac\./planet_sac_base./g'
    PYTHONPATH=/tmp/base .venv/bin/python bench/update_speed.py ... --baseline planet_sac_base

Reports, per learner: the seconds of tracing, of the first call (graph optimisation + one
update), the number of graph ops (the update's graph plus every function in its library, i.e.
loop bodies and branches), and the median seconds of the timed calls, which run in
interleaved rounds so that every learner sees the same load of a shared machine.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import time

MEASUREMENT_ENVIRONMENT = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS", "ONEDNN_MAX_CPU_ISA",
                           "TF_ENABLE_ONEDNN_OPTS")
"""Environment variables that change an update's speed, written beside the results (None: not set)."""


def graph_ops(concrete) -> dict:
    """Ops of the update's graph and of all functions in its library (loop bodies, cond branches)."""
    graph_def = concrete.graph.as_graph_def()
    library = sum(len(function.node_def) for function in graph_def.library.function)
    return {"graph_ops": len(graph_def.node), "library_ops": library, "total_ops": len(graph_def.node) + library}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/cheetah_run_cpu.yaml")
    parser.add_argument("--precisions", nargs="+", default=["float32"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--action-size", type=int, default=6)
    parser.add_argument("--set", nargs="*", default=[], dest="overrides")
    parser.add_argument("--variants", nargs="*", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                        help="also time these config variants (e.g. d16:model.decoder_depth=16), each at every precision")
    parser.add_argument("--baseline", help="importable package name of an older planet_sac tree, timed at each precision")
    parser.add_argument("--catch-up", action="store_true",
                        help="also time Learner.catch_up: the SAC updates and imagination alone, the model frozen")
    parser.add_argument("--json")
    args = parser.parse_args()  # before TensorFlow loads: --help and a wrong flag answer at once
    import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on, see planet_sac/startup.py)

    # isort: split
    from planet_sac.benchmark import image_batch, machine
    from planet_sac.config_loading import apply_overrides, load_config
    from planet_sac.control.sac import SAC
    from planet_sac.models.world_model import WorldModel
    from planet_sac.training.learner import Learner

    config = load_config(args.config, args.overrides)
    variants = {"": []}
    for item in args.variants:
        name, sep, settings = item.partition(":")
        if not sep or not name or not settings:
            parser.error(f"--variants {item!r}: expected NAME:KEY=VALUE[,KEY=VALUE], e.g. d16:model.decoder_depth=16")
        variants[name] = settings.split(",")
    builders = [(f"{variant}/{precision}" if variant else precision, precision, WorldModel, SAC, Learner, settings)
                for variant, settings in variants.items() for precision in args.precisions]
    if args.baseline:
        old = {name: importlib.import_module(f"{args.baseline}.{module}") for name, module in (
            ("world_model", "models.world_model"), ("sac", "control.sac"), ("learner", "training.learner"))}
        builders[:0] = [(f"baseline/{precision}", precision, old["world_model"].WorldModel, old["sac"].SAC,
                         old["learner"].Learner, []) for precision in args.precisions]
    if args.catch_up:
        for name, *_, settings in builders:
            if apply_overrides(config, settings).sac.updates_per_step == 0:
                parser.error(f"--catch-up: {name} sets sac.updates_per_step=0, so a catch-up round has nothing to do")
    learners, batches, results = {}, {}, {}
    for name, precision, world_model_class, sac_class, learner_class, settings in builders:
        cfg = apply_overrides(config, [*settings, f"optim.precision={precision}"])
        # each learner its own config's batch shape, so a variant may change data.batch_size or chunk_length
        batch = batches[name] = image_batch(cfg.data.batch_size, cfg.data.chunk_length, action_size=args.action_size)
        model = world_model_class(cfg.model, "image", (64, 64, 3), args.action_size, precision=cfg.optim.precision)
        learner = learner_class(cfg, model, sac_class(cfg.sac, model.rssm.feature_size, args.action_size))
        start = time.perf_counter()
        concrete = learner.update.get_concrete_function(batch)
        trace = time.perf_counter() - start
        start = time.perf_counter()
        learner.update(batch)["loss/total"].numpy()
        first = time.perf_counter() - start
        learners[name] = learner
        results[name] = {"precision": getattr(model, "precision", precision), "batch_shape": list(batch["image"].shape[:2]),
                         "trace_s": trace, "first_call_s": first,
                         **graph_ops(concrete), "times": []}
        if args.catch_up:
            learner.catch_up(batch)["sac/q"].numpy()
            results[name]["catch_up_times"] = []
        print(f"{name}: built, trace {trace:.1f} s, first call {first:.1f} s", flush=True)
    for _ in range(args.reps):  # interleaved rounds: every precision sees the same machine load
        for name, learner in learners.items():
            batch = batches[name]
            start = time.perf_counter()
            learner.update(batch)["loss/total"].numpy()
            results[name]["times"].append(time.perf_counter() - start)
            if args.catch_up:
                start = time.perf_counter()
                learner.catch_up(batch)["sac/q"].numpy()
                results[name]["catch_up_times"].append(time.perf_counter() - start)
    reference = next(iter(results.values()))
    for name, result in results.items():
        result["median_s"] = statistics.median(result["times"])
        result["median_ratio_to_first"] = statistics.median(
            [mine / first for mine, first in zip(result["times"], reference["times"])])
        if args.catch_up:
            result["catch_up_median_s"] = statistics.median(result["catch_up_times"])
            result["catch_up_median_ratio_to_first"] = statistics.median(
                [mine / first for mine, first in zip(result["catch_up_times"], reference["catch_up_times"])])
            print(f"{name:>16}: catch-up round median {result['catch_up_median_s']:.3f} s, median per-round ratio "
                  f"{result['catch_up_median_ratio_to_first']:.3f}")
        print(f"{name:>16} ({result['precision']}): trace {result['trace_s']:.1f} s, first call {result['first_call_s']:.1f} s, "
              f"ops {result['graph_ops']} + {result['library_ops']} in functions, median update {result['median_s']:.3f} s, "
              f"median per-round ratio to {next(iter(results))} {result['median_ratio_to_first']:.3f}")
    if args.json:
        with open(args.json, "w") as file:
            # where it was measured: figures from other machines, thread counts or a oneDNN cap do not compare
            environment = {key: os.environ.get(key) for key in MEASUREMENT_ENVIRONMENT}
            json.dump({"config": args.config, "overrides": args.overrides, "machine": machine(), "environment": environment,
                       "results": results}, file, indent=1)


if __name__ == "__main__":
    main()
