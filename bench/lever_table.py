r"""Compare runs of a configuration change ("lever") with earlier runs at the same tasks, seeds and env steps.

Usage (folders holding `<task>/seed<k>/metrics.jsonl` at any depth: a suite's --out, or a published results folder):
    .venv/bin/python bench/lever_table.py bench/results/dmc_vision ~/runs/levers/std01 ~/runs/levers/shift4 \
        [--at 50000] [--span 10000]

For every task x seed that the later folders hold, one row per folder: from its metrics.jsonl, over the env
steps (at - span, at]:
- `train`: the mean return of the training episodes (the collecting policy, exploring);
- `test`: the mean of the test phases' `test/return` (their episodes, not exploring);
- the SAC head's temperature (`sac/alpha`), policy entropy (`sac/entropy`), its std where logged (`sac/std`),
  the critic's Q on real and imagined transitions (`sac/real/q`, `sac/imagined/q`) where logged, the share of
  time steps under the free-nats floor (`model/free_nats_clipped`), and the held-out reward error over the
  training one (`test/loss/reward` / `loss/reward`): means over the training records in the span;
- `moving px`: the held-out reconstruction's error on moving pixels (`test/model/foreground_error`, the test
  phases' mean in the span), where the run logs it (image runs since 26f8a7c);
- `eval`: the suite's final evaluation of the headline policy (`result.json`), when the run ended at `at`.
The first folder is the reference; a run that has not reached `at` yet is marked with the env steps it reached.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
from typing import Iterable

DIAGNOSTICS = ("sac/alpha", "sac/entropy", "sac/std", "sac/real/q", "sac/imagined/q", "model/free_nats_clipped")


def find_runs(folder: str) -> dict[tuple[str, int], str]:
    """{(task, seed): run folder} of every `<task>/seed<k>/metrics.jsonl` under `folder`."""
    runs = {}
    for path in glob.glob(os.path.join(folder, "**", "seed*", "metrics.jsonl"), recursive=True):
        run = os.path.dirname(path)
        seed = os.path.basename(run).removeprefix("seed")
        if seed.isdigit():
            runs[os.path.basename(os.path.dirname(run)), int(seed)] = run
    return runs


def result_path(run: str) -> str:
    """The suite's result.json of a run folder: `OUT/results/<task>/seed<k>/` for a run under `OUT/runs/`,
    else beside its metrics.jsonl (a published results folder)."""
    task_dir = os.path.dirname(os.path.normpath(run))
    parent = os.path.dirname(task_dir)
    if os.path.basename(parent) == "runs":
        return os.path.join(os.path.dirname(parent), "results", os.path.basename(task_dir), os.path.basename(run),
                            "result.json")
    return os.path.join(run, "result.json")


def read_metrics(path: str) -> list[dict]:
    records = []
    with open(path) as file:
        for line in file:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a kill
    return records


def _mean(values: Iterable[float]) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return statistics.mean(values) if values else None


def summarise(run: str, at: int, span: int) -> dict:
    records = read_metrics(os.path.join(run, "metrics.jsonl"))
    inside = [r for r in records if at - span < r.get("env_steps", -1) <= at]
    train = [r for r in inside if r.get("phase") == "train"]
    row = {"reached": max((r.get("env_steps", 0) for r in records), default=0),
           "train": _mean(r.get("train/return") for r in train),
           "test": _mean(r.get("test/return") for r in inside if r.get("phase") == "test")}
    for key in DIAGNOSTICS:
        row[key] = _mean(r.get(key) for r in train)
    held_out = _mean(r.get("test/loss/reward") for r in inside if r.get("phase") == "test")
    trained = _mean(r.get("loss/reward") for r in train)
    row["reward_gap"] = held_out / trained if held_out is not None and trained else None
    row["moving"] = _mean(r.get("test/model/foreground_error") for r in inside if r.get("phase") == "test")
    result = result_path(run)
    row["eval"] = None
    if os.path.exists(result):
        with open(result) as file:
            final = json.load(file)
        if final.get("env_steps_target") == at:
            row["eval"] = final["headline"]["mean"]
    return row


def _cell(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def table(folders: list[str], at: int, span: int) -> str:
    found = [find_runs(folder) for folder in folders]
    keys = sorted(set().union(*found[1:])) if len(found) > 1 else sorted(found[0])
    lines = ["| task | seed | folder | train | test | eval | alpha | entropy | std | Q real | Q imagined | "
             "under free nats | held-out / train reward loss | moving px |", "|---" * 14 + "|"]
    for task, seed in keys:
        for folder, runs in zip(folders, found):
            if (task, seed) not in runs:
                continue
            row = summarise(runs[task, seed], at, span)
            name = os.path.basename(os.path.normpath(folder))
            if row["reached"] < at:
                name += f" (at {row['reached'] // 1000}k)"
            lines.append(f"| {task.removeprefix('dmc_')} | {seed} | {name} | {_cell(row['train'])} | {_cell(row['test'])} | "
                         f"{_cell(row['eval'])} | {_cell(row['sac/alpha'], 4)} | {_cell(row['sac/entropy'], 2)} | "
                         f"{_cell(row['sac/std'], 3)} | {_cell(row['sac/real/q'])} | {_cell(row['sac/imagined/q'])} | "
                         f"{_cell(row['model/free_nats_clipped'], 2)} | {_cell(row['reward_gap'], 2)} | "
                         f"{_cell(row['moving'], 3)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", help="the reference folder first, then the variants")
    parser.add_argument("--at", type=int, default=50_000, help="env steps the comparison ends at (default 50000)")
    parser.add_argument("--span", type=int, default=10_000, help="env steps before --at that are averaged (default 10000)")
    args = parser.parse_args()
    for folder in args.folders:
        if not os.path.isdir(folder):
            raise SystemExit(f"bench/lever_table.py: {folder}: no such folder")
        if not find_runs(folder):
            raise SystemExit(f"bench/lever_table.py: {folder} holds no run (no <task>/seed<k>/metrics.jsonl below it)")
    print(table(args.folders, args.at, args.span))


if __name__ == "__main__":
    main()
