r"""Markdown tables of finished suite runs: final evaluation and wall-clock split of every `result.json`.

Usage (any number of suite output folders, e.g. one per configuration variant):
    .venv/bin/python bench/suite_table.py ~/runs/dmc_vision ~/runs/dmc_vision_rr50 [--json OUT.json]

One row per run (task x seed x folder): the headline policy's final return (mean ± std over its episodes),
every other evaluated policy's, and where the time went, in minutes: `updates`, `acting` (training
episodes), `rendering` (estimated inside acting and test phases: seconds per frame x frames), `tests` (test
phases), `eval` (the final evaluation of all policies) and
`total` (training + evaluation: the call's wall-clock, or for a run that was stopped and resumed, marked `*`,
the sum of its parts, since the last call saw only part of the run). Then, per folder and task, the mean ± std
of the headline return over seeds (population std, numpy's default), and per folder the mean over its tasks:
each seed that finished every task gives one task mean, and the row is their mean ± std over those seeds (the
README's "mean of six").
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics

POLICIES = ("sac", "sac_guided_cem", "cem", "random")


def load_results(folders: list[str]) -> list[dict]:
    """Every readable `results/<task>/seed<k>/result.json` under the folders, with the folder it came from."""
    rows = []
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "results", "*", "seed*", "result.json"))):
            try:
                with open(path) as file:
                    result = json.load(file)
            except (OSError, ValueError) as error:
                print(f"skipped {path}: {error}")
                continue
            result["folder"] = os.path.basename(os.path.normpath(folder))
            rows.append(result)
    return rows


def _cell(evaluation: dict, policy: str) -> str:
    if policy not in evaluation:
        return ""
    value = evaluation[policy]
    return f"{value['mean']:.1f} ± {value['std']:.1f} ({value['episodes']})"


def run_table(rows: list[dict]) -> str:
    lines = ["| folder | task | seed | headline | " + " | ".join(POLICIES) +
             " | updates | acting | rendering | tests | eval | total (min) |",
             "|---|---|---|---|" + "---|" * len(POLICIES) + "---|---|---|---|---|---|"]
    for row in rows:
        seconds = row["seconds"]
        minutes = {key: seconds.get(key, 0.0) / 60 for key in ("updates", "acting", "rendering_estimate",
                                                               "test_phases", "evaluation", "this_call_training")}
        inside = minutes["updates"] + minutes["acting"] + minutes["test_phases"]
        if minutes["this_call_training"] >= inside:  # one uninterrupted call: its wall-clock is the whole run's
            total = f"{minutes['this_call_training'] + minutes['evaluation']:.1f}"
        else:  # resumed: the last call saw only part of it; the parts are summed (start-ups not included)
            total = f"{inside + minutes['evaluation']:.1f}*"
        lines.append(f"| {row['folder']} | {row['score_task']} | {row['seed']} | {row['headline_policy']} | "
                     + " | ".join(_cell(row["evaluation"], name) for name in POLICIES)
                     + f" | {minutes['updates']:.1f} | {minutes['acting']:.1f} | {minutes['rendering_estimate']:.1f} | "
                       f"{minutes['test_phases']:.1f} | {minutes['evaluation']:.1f} | {total} |")
    if any(line.endswith("* |") for line in lines):
        lines.append("\n`*` stopped and resumed: updates + acting + tests + eval (start-up and checkpoints not included)")
    return "\n".join(lines)


def summary_table(rows: list[dict]) -> str:
    groups: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        if row.get("headline"):
            groups.setdefault((row["folder"], row["score_task"]), []).append(row["headline"]["mean"])
    lines = ["| folder | task | seeds | headline return at the end (mean ± std over seeds) |", "|---|---|---|---|"]
    for (folder, task), values in sorted(groups.items()):
        spread = statistics.pstdev(values) if len(values) > 1 else 0.0
        lines.append(f"| {folder} | {task} | {len(values)} | {statistics.mean(values):.1f} ± {spread:.1f} |")
    for folder, seed_means in sorted(task_means_by_seed(rows).items()):
        if len({task for f, task in groups if f == folder}) < 2:
            continue
        values = list(seed_means.values())
        spread = statistics.pstdev(values) if len(values) > 1 else 0.0
        shown = ", ".join(f"seed {seed} {mean:.1f}" for seed, mean in sorted(seed_means.items()))
        lines.append(f"| {folder} | mean of tasks ({shown or 'no seed has finished every task'}) | {len(values)} | "
                     + (f"{statistics.mean(values):.1f} ± {spread:.1f} |" if values else "|"))
    return "\n".join(lines)


def task_means_by_seed(rows: list[dict]) -> dict[str, dict[int, float]]:
    """{folder: {seed: the headline return averaged over the folder's tasks}}, for seeds that finished every task."""
    tasks: dict[str, set[str]] = {}
    returns: dict[tuple[str, int], dict[str, float]] = {}
    for row in rows:
        if row.get("headline"):
            tasks.setdefault(row["folder"], set()).add(row["score_task"])
            returns.setdefault((row["folder"], row["seed"]), {})[row["score_task"]] = row["headline"]["mean"]
    means: dict[str, dict[int, float]] = {folder: {} for folder in tasks}
    for (folder, seed), by_task in returns.items():
        if set(by_task) == tasks[folder]:
            means[folder][seed] = statistics.mean(by_task.values())
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", help="suite output folders (--out of planet-sac suite)")
    parser.add_argument("--json", help="also write the rows (result.json contents) to this file")
    args = parser.parse_args()
    rows = load_results(args.folders)
    if not rows:
        raise SystemExit(f"no result.json under {', '.join(args.folders)}: no run has finished there yet")
    print(run_table(rows))
    print()
    print(summary_table(rows))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
