r"""What exact resume adds to a checkpoint: its size and the time to write it, with and without `run_state/`.

Usage (a copy of a run directory: the script writes checkpoints into it):
    cp -r ~/runs/dmc_vision/runs/dmc_cheetah_run/seed0 /tmp/ckpt_run
    .venv/bin/python bench/checkpoint_cost.py /tmp/ckpt_run [--reps 5] [--json OUT]

It resumes the run, fills its replay as `Trainer.run` does (every episode on disk loaded), then writes checkpoints in
turn: `before`, every variable but `run_state/` (what a checkpoint held before exact resume) into a folder of its own,
and `after`, `Trainer.save_checkpoint` (the replays' states and the episodes' names serialised to JSON first, then
every variable). Sizes are those of the checkpoint's files; `run_state_bytes` the JSON's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def checkpoint_bytes(prefix: str) -> int:
    directory = os.path.dirname(prefix)
    name = os.path.basename(prefix)
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f.startswith(name + "."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()

    from planet_sac.checkpoints import Checkpointer
    from planet_sac.config_loading import load_config
    from planet_sac.episodes.loader import make_dataset
    from planet_sac.training.trainer import Trainer

    config = load_config(os.path.join(args.logdir, "config.yaml"))
    trainer = Trainer(config, args.logdir, progress=False)
    try:
        dataset, replay = make_dataset(trainer.train_dir, config.data.batch_size, config.data.chunk_length,
                                       every=config.data.every, keys=(config.env.obs, "action", "reward", "discount"),
                                       seed=0, spec=trainer.episode_spec, prefetch=0)
        next(iter(dataset))
        trainer._replay = replay  # as Trainer.run holds it while it runs
        model_only = Checkpointer(os.path.join(args.logdir, "checkpoints_before"),
                                  {name: v for name, v in trainer.variables.items() if not name.startswith("run_state/")})
        times: dict[str, list[float]] = {"before": [], "after": []}
        sizes = {}
        for _ in range(args.reps):
            for kind in ("before", "after"):
                start = time.perf_counter()
                prefix = model_only.save(int(trainer.counters.step.numpy())) if kind == "before" \
                    else trainer.save_checkpoint()
                times[kind].append(time.perf_counter() - start)
                sizes[kind] = checkpoint_bytes(prefix)
        state_bytes = len(trainer.run_state.replay.numpy()) + len(trainer.run_state.train_episodes.numpy())
        result = {"episodes": replay.stats["files_loaded"], "cache_bytes": replay.stats["cache_bytes"],
                  "run_state_bytes": state_bytes, "checkpoint_bytes": sizes,
                  "save_seconds_median": {kind: statistics.median(values) for kind, values in times.items()},
                  "save_seconds": times}
    finally:
        trainer.close()
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
