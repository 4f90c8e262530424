"""Which part of a training step holds on to memory: each part of the soak's loop repeated alone.

Usage:
    nice -n 10 .venv/bin/python research/soak_parts.py --logdir /tmp/soak_parts [--repeats 3000]

Builds the soak run (`bench/soak.py`'s config) in-process, then repeats one part of the
training loop at a time: a world-model + SAC update on one fixed batch, drawing a batch
from the replay dataset, writing a metrics record, saving a checkpoint, collecting an
episode, a whole test phase and its pieces (held-out loss, critic vs returns, open-loop
prediction, a compared policy's episodes). Each part runs `--warmup` times first (tracing, caches), then `--repeats` times;
the resident memory (RSS) growth per call of the measured part is printed, together with
the growth of the memory Python objects hold (tracemalloc), which tells native memory
(TensorFlow, the allocator) from Python objects.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.soak import OVERRIDES, ROOT  # noqa: E402


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def measure(name: str, part, warmup: int, repeats: int) -> None:
    for _ in range(warmup):
        part()
    tracemalloc.start()
    start_rss, start = rss_mb(), time.perf_counter()
    for _ in range(repeats):
        part()
    grown = rss_mb() - start_rss
    python, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{name:12s} {repeats:6d} calls in {time.perf_counter() - start:6.1f} s: rss {grown:+7.2f} MB "
          f"({grown * 2**10 / repeats:+6.2f} KB/call), python objects {python / 2**20:+6.2f} MB "
          f"({python / repeats:+7.1f} B/call)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--repeats", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--parts", nargs="+", default=["update", "batch", "log", "checkpoint", "episode"])
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    from planet_sac.config_loading import load_config
    from planet_sac.episodes.loader import make_dataset
    from planet_sac.training.trainer import Trainer

    config = load_config(ROOT / "configs" / "smoke.yaml", list(OVERRIDES))
    trainer = Trainer(config, args.logdir, progress=False)
    trainer.collect_seed_episodes()
    data = config.data
    dataset, _ = make_dataset(trainer.train_dir, data.batch_size, data.chunk_length, every=data.every,
                              max_episodes=data.max_episodes, keys=(config.env.obs, "action", "reward", "discount"), seed=0)
    batches = iter(dataset)
    fixed = next(batches)
    metrics = {key: float(value) for key, value in trainer.learner.update(fixed).items()}
    step = [0]

    def checkpoint() -> None:
        step[0] += 1
        trainer.checkpointer.save(step[0])

    from planet_sac.diagnostics import critic_vs_returns
    from planet_sac.episodes.folder import list_episodes
    from planet_sac.episodes.storage import load_episode

    test_episode = load_episode(list_episodes(trainer.test_dir)[0])

    def compare() -> None:
        trainer.test_phases.compare_return("cem")

    parts = {
        "test_phase": trainer.test_phases.run,  # held-out loss, test episodes, critic vs returns, video, checkpoint
        "held_out": trainer.test_phases.held_out_loss,
        "critic": lambda: critic_vs_returns(trainer.agent.world_model, trainer.agent.sac, test_episode,
                                            config.sac.discount),
        "open_loop": lambda: trainer.log_open_loop(fixed),
        "compare": compare,
        "update": lambda: trainer.learner.update(fixed),
        "batch": lambda: next(batches),
        "log": lambda: trainer.logger.scalars(0, metrics, phase="train"),
        "checkpoint": checkpoint,
        "episode": trainer.collect_train_episodes,
    }
    few = {"checkpoint": 10, "episode": 20, "test_phase": 30, "compare": 20, "critic": 10, "open_loop": 10}  # slow parts
    for name in args.parts:
        repeats = max(args.repeats // few[name], 20) if name in few else args.repeats
        warmup = max(args.warmup // few[name], 5) if name in few else args.warmup
        measure(name, parts[name], warmup, repeats)
    trainer.close()


if __name__ == "__main__":
    main()
