r"""Markdown tables of finished suite runs: final evaluation and wall-clock split of every `result.json`,
and one estimator for every method's score file.

Usage (any number of suite output folders, e.g. one per configuration variant):
    .venv/bin/python bench/suite_table.py ~/runs/dmc_vision ~/runs/dmc_vision_rr50 [--json OUT.json]
    .venv/bin/python bench/suite_table.py --scores ~/runs/dmc_vision/scores/dmc_vision-planet_sac.json.gz \
        ../shared/baselines/dmc_vision-*.json.gz [--window 90000 110000]
    .venv/bin/python bench/suite_table.py --scores v2=bench/results/dmc_vision_v2/scores/dmc_vision-planet_sac.json.gz \
        v1=bench/results/dmc_vision/scores/dmc_vision-planet_sac.json.gz ../shared/baselines/dmc_vision-*.json.gz
    .venv/bin/python bench/suite_table.py --curves bench/results/dmc_vision_v4/scores/dmc_vision-planet_sac.json.gz

`--scores`: per score file (ours and the baselines alike) and task, the mean over runs of each run's mean
return inside the env-step window; the mean over tasks; and the IQM over all runs with its 95% stratified
bootstrap interval (`planet_sac/aggregate.py`, as rliable). A row is named by the file's `method` field, or by
LABEL where the file is given as LABEL=FILE; files whose names would repeat get the folder they sit in (the
suite folder, for a `scores/` file) added. With suite folders as well, the same for the
final evaluations in their `result.json` files (one score per run: the headline policy's mean).

`--curves FILE`: one row per run of that score file (task, seed): its points (the test phases' returns, with the
env steps of the first and last) and its score, the mean of its points inside the window.

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

from planet_sac import aggregate
from planet_sac.config import ConfigError
from planet_sac.plotting import read_scores

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


def estimator_table(named_scores: list[tuple[str, dict[str, list[float]]]], tasks: list[str],
                    published: dict[str, dict[str, float]] = aggregate.PUBLISHED_100K, floor: str = "PlaNet") -> str:
    """One row per method: per-task mean over runs, the mean over tasks, IQM [95% stratified bootstrap] over runs,
    and how many runs score at or below `published[floor]` (by task); then a row per published table that names any
    of `tasks` (means only: no runs, so no interval)."""
    short = [task.removeprefix("dmc_") for task in tasks]
    reference = published.get(floor, {})
    lines = ["| method | " + " | ".join(short) + f" | mean | IQM [95% CI] | runs | runs at or below {floor} |",
             "|---|" + "---|" * len(tasks) + "---|---|---|---|"]
    for name, scores in named_scores:
        present = {task: scores[task] for task in tasks if scores.get(task)}
        cells = [f"{statistics.mean(present[task]):.0f}" if task in present else "" for task in tasks]
        mean = f"{statistics.mean(statistics.mean(v) for v in present.values()):.0f}" if len(present) == len(tasks) else ""
        if present:
            value, low, high = aggregate.stratified_bootstrap(present)
            interval = f"{value:.0f} [{low:.0f}, {high:.0f}]"
        else:
            interval = ""
        runs = sum(len(v) for v in present.values())
        below = aggregate.runs_not_above(present, reference)
        not_above = (f"{sum(below.values())} of {sum(len(present[task]) for task in below)}"
                     + "".join(f", {task.removeprefix('dmc_')} {n}" for task, n in below.items() if n)) if below else ""
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {mean} | {interval} | {runs} | {not_above} |")
    for name, means in published.items():
        if any(task in means for task in tasks):
            cells = [f"{means[task]:.0f}" if task in means else "" for task in tasks]
            mean = f"{statistics.mean(means[task] for task in tasks):.0f}" if all(task in means for task in tasks) else ""
            lines.append(f"| {name} (CURL's Table 1, 100k) | " + " | ".join(cells) + f" | {mean} |  | table |  |")
    return "\n".join(lines)


def curves_table(records: list[dict], window: tuple[int, int]) -> str:
    """One row per score record, sorted by task and seed: its returns at each point (rounded), and its score over
    `window` (the mean of the points inside it; empty for a run that has not reached the window)."""
    lines = [f"| task | seed | returns at each point | score ({window[0] // 1000}k-{window[1] // 1000}k) |",
             "|---|---|---|---|"]
    for record in sorted(records, key=lambda record: (record["task"], record["seed"])):
        points = list(zip(record["xs"], record["ys"]))
        span = f"{points[0][0] / 1000:g}k-{points[-1][0] / 1000:g}k: " if points else ""
        returns = " / ".join(f"{y:.0f}" for _, y in points)
        scores = aggregate.window_scores([record], window).get(record["task"])  # the estimator's own window mean
        score = f"{scores[0]:.0f}" if scores else ""
        lines.append(f"| {record['task']} | {record['seed']} | {span}{returns} | {score} |")
    return "\n".join(lines)


def final_evaluation_scores(rows: list[dict]) -> list[tuple[str, dict[str, list[float]]]]:
    """(folder, {task: the headline policy's final-evaluation mean of every run}) per suite folder."""
    by_folder: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row.get("headline"):
            by_folder.setdefault(row["folder"], {}).setdefault(row["score_task"], []).append(row["headline"]["mean"])
    return [(f"{folder} (final evaluation)", scores) for folder, scores in sorted(by_folder.items())]


def score_file_labels(specs: list[str], methods: list[str]) -> list[str]:
    """The row name of each `--scores` argument (FILE or LABEL=FILE), given the `method` its file records.

    LABEL where given; otherwise the method, with the file's folder added in brackets (the suite folder above
    a `scores/` folder) when another argument would get the same name.
    """
    labels = [label_and_path(spec)[0] or method for spec, method in zip(specs, methods)]
    out = []
    for spec, label in zip(specs, labels):
        if labels.count(label) > 1 and not label_and_path(spec)[0]:
            folder = os.path.dirname(os.path.abspath(label_and_path(spec)[1]))
            if os.path.basename(folder) == "scores":
                folder = os.path.dirname(folder)
            label = f"{label} [{os.path.basename(folder)}]"
        out.append(label)
    return out


def label_and_path(spec: str) -> tuple[str | None, str]:
    """LABEL=FILE -> (LABEL, FILE); FILE (an existing file, or no '=' before the first '/') -> (None, FILE)."""
    label, sep, path = spec.partition("=")
    if not sep or os.path.exists(spec) or "/" in label or not label:
        return None, spec
    return label, path


def read_score_files(paths: list[str]) -> list[list[dict]]:
    """Each score file's records; a missing file (a glob the shell left unexpanded: the baselines sit in
    ../shared/baselines beside the checkout) or one that is not a score file is a one-line SystemExit."""
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        raise SystemExit(f"bench/suite_table.py: --scores {', '.join(missing)}: no such file")
    try:
        return [read_scores(path) for path in paths]
    except ConfigError as error:
        raise SystemExit(f"bench/suite_table.py: {error}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="*", help="suite output folders (--out of planet-sac suite)")
    parser.add_argument("--json", help="also write the rows (result.json contents) to this file")
    parser.add_argument("--scores", nargs="+", default=[], metavar="[LABEL=]FILE",
                        help="score files (ours, baselines) to compare with one estimator; LABEL names the row")
    parser.add_argument("--window", nargs=2, type=int, default=list(aggregate.WINDOW), metavar=("FROM", "TO"),
                        help="env steps whose score-file returns make a run's score (default: 90000 110000)")
    parser.add_argument("--tasks", nargs="+", default=list(aggregate.PLANET_TASKS), help="score-file task names")
    parser.add_argument("--curves", metavar="FILE", help="a score file whose runs are listed one row each")
    args = parser.parse_args()
    if not args.folders and not args.scores and not args.curves:
        parser.error("give suite folders, --scores files, --curves FILE, or any of them together")
    if args.curves:
        (records,) = read_score_files([args.curves])
        print(curves_table(records, tuple(args.window)))
        if not args.folders and not args.scores:
            return
        print()
    rows = load_results(args.folders)
    if args.folders and not rows:
        raise SystemExit(f"no result.json under {', '.join(args.folders)}: no run has finished there yet")
    if args.scores:
        paths = [label_and_path(spec)[1] for spec in args.scores]
        files = read_score_files(paths)
        methods = [(records[0].get("method") if records else None) or os.path.basename(path)
                   for path, records in zip(paths, files)]
        window = f"{args.window[0] // 1000}k-{args.window[1] // 1000}k"
        named = [(f"{label} (score file, {window})", aggregate.window_scores(records, tuple(args.window), args.tasks))
                 for label, records in zip(score_file_labels(args.scores, methods), files)]
        print(estimator_table(named + final_evaluation_scores(rows), args.tasks))
        if not rows:
            return
        print()
    print(run_table(rows))
    print()
    print(summary_table(rows))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
