r"""Publishes the finished runs of a `planet-sac suite` output folder into the repository's result folder.

Usage (as the runs of issue #28 finish; run directories stay outside the checkout):
    .venv/bin/python bench/publish_suite.py ~/runs/dmc_vision bench/results/dmc_vision \
        --baselines ../shared/baselines/dmc_vision-*.json.gz

For every finished run (`SRC/results/<task>/seed<k>/result.json`) it copies that folder's three small files
(result.json, metrics.jsonl, config.yaml: never checkpoints, episodes or event files, which live in
`SRC/runs/`), merges every record of `SRC/scores/*.json.gz` into `DEST/scores/` (a record replaces the one of
the same task, method and seed; records only DEST holds, e.g. runs finished on another machine, stay), drops
the run's `DEST/unfinished/<task>/seed<k>` copy, and redraws `DEST/curves.png` against the baselines.

A run still going (or stopped) has its records so far copied instead: `SRC/runs/<task>/seed<k>/metrics.jsonl`
(its whole lines; the run may be appending one) and `config.yaml` into `DEST/unfinished/<task>/seed<k>/`, with its
`curves.png` drawn from that copy (as `planet-sac plot`). Records published before that reach more env steps (the
run went further on a machine that is gone, and restarted here) are kept, with a line saying so.
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import json
import os
import shutil
import sys

from planet_sac.config import ConfigError
from planet_sac.plotting import plot_runs, plot_scores, read_scores
from planet_sac.suite import add_score

RUN_FILES = ("result.json", "metrics.jsonl", "config.yaml")


def finished_runs(src: str) -> list[str]:
    """`results/<task>/seed<k>` folders of `src` whose result.json reads as JSON (the suite writes it last)."""
    runs = []
    for path in sorted(glob.glob(os.path.join(src, "results", "*", "seed*", "result.json"))):
        try:
            with open(path) as file:
                json.load(file)
        except (OSError, ValueError) as error:
            print(f"skipped {os.path.dirname(path)}: its result.json cannot be read ({error})")
            continue
        runs.append(os.path.relpath(os.path.dirname(path), src))
    return runs


def _copy_if_changed(data: bytes, path: str) -> bool:
    """Writes `data` to `path` unless the file already holds it; True when written."""
    if os.path.exists(path):
        with open(path, "rb") as file:
            if file.read() == data:
                return False
    with open(path, "wb") as file:
        file.write(data)
    return True


def _env_steps(records: bytes) -> int:
    """The most env steps any record of a metrics.jsonl's text names (0 if none; unreadable lines are skipped)."""
    steps = 0
    for line in records.splitlines():
        try:
            value = json.loads(line).get("env_steps", 0)
        except (ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            steps = max(steps, int(value))
    return steps


def publish_unfinished(src: str, dest: str, finished: list[str]) -> list[str]:
    """Copies the records so far of every run in `src/runs/` not in `finished` into `dest/unfinished/` and draws
    its curves; returns the runs copied or changed (relative paths `unfinished/<task>/seed<k>`)."""
    done = {tuple(run.split(os.sep)[1:]) for run in finished}
    changed = []
    for metrics in sorted(glob.glob(os.path.join(src, "runs", "*", "seed*", "metrics.jsonl"))):
        run_dir = os.path.dirname(metrics)
        task, seed = run_dir.split(os.sep)[-2:]
        if (task, seed) in done:
            continue
        with open(metrics, "rb") as file:
            records = file.read()
        records = records[:records.rfind(b"\n") + 1]  # whole lines: the run may be writing its next one
        if not records:
            continue
        target = os.path.join(dest, "unfinished", task, seed)
        published = os.path.join(target, "metrics.jsonl")
        if os.path.exists(published):
            with open(published, "rb") as file:
                have, now = _env_steps(file.read()), _env_steps(records)
            if have > now:  # a run restarted on another machine: its records so far must not replace longer ones
                print(f"kept {os.path.relpath(target, dest)}: it reaches {have} env steps, {run_dir} only {now}")
                continue
        os.makedirs(target, exist_ok=True)
        wrote = _copy_if_changed(records, published)
        config = os.path.join(run_dir, "config.yaml")
        if os.path.exists(config):
            with open(config, "rb") as file:
                wrote = _copy_if_changed(file.read(), os.path.join(target, "config.yaml")) or wrote
        if wrote:
            changed.append(os.path.join("unfinished", task, seed))
        if wrote or not os.path.exists(os.path.join(target, "curves.png")):
            import matplotlib.pyplot as plt

            try:
                plot_runs([target], os.path.join(target, "curves.png"))
            except ConfigError as error:  # no return or loss logged yet
                print(f"no curves for {target}: {error}")
            plt.close("all")
    return changed


def publish(src: str, dest: str, baselines: list[str]) -> list[str]:
    """Copies `src`'s finished runs and score records into `dest` and redraws its figure, and the unfinished runs'
    records so far (`publish_unfinished`); returns the runs copied or changed (relative paths `results/<task>/seed<k>`
    and `unfinished/<task>/seed<k>`)."""
    if not os.path.isdir(os.path.join(src, "results")):
        raise ConfigError(f"{src} has no results/ folder: give the --out folder of `planet-sac suite`")
    changed = []
    finished = finished_runs(src)
    for run in finished:
        target = os.path.join(dest, run)
        os.makedirs(target, exist_ok=True)
        for name in RUN_FILES:
            source = os.path.join(src, run, name)
            if not os.path.exists(source):
                continue
            copy = os.path.join(target, name)
            if not (os.path.exists(copy) and filecmp.cmp(source, copy, shallow=False)):
                shutil.copyfile(source, copy)
                if run not in changed:
                    changed.append(run)
        unfinished = os.path.join(dest, "unfinished", *run.split(os.sep)[1:])
        if os.path.isdir(unfinished):
            shutil.rmtree(unfinished)
            parent = os.path.dirname(unfinished)
            if not os.listdir(parent):
                os.rmdir(parent)
    for path in sorted(glob.glob(os.path.join(src, "scores", "*.json.gz"))):
        for record in read_scores(path):
            add_score(os.path.join(dest, "scores", os.path.basename(path)), record)
    score_files = sorted(glob.glob(os.path.join(dest, "scores", "*.json.gz")))
    if score_files:
        import matplotlib.pyplot as plt

        plt.close(plot_scores(score_files, os.path.join(dest, "curves.png"), baselines=baselines,
                              budget=env_steps_budget(dest)))
    return changed + publish_unfinished(src, dest, finished)


def env_steps_budget(dest: str) -> float | None:
    """The largest `--env-steps` the published runs were asked for: the figure ends there, so a run that went a
    collection past it (a repeated collection at a resume) adds no bin of its own past the budget."""
    targets = []
    for path in glob.glob(os.path.join(dest, "results", "*", "seed*", "result.json")):
        with open(path) as file:
            targets.append(json.load(file).get("env_steps_target"))
    return max((target for target in targets if target), default=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", help="the --out folder of `planet-sac suite` (e.g. ~/runs/dmc_vision)")
    parser.add_argument("dest", help="the published result folder (e.g. bench/results/dmc_vision)")
    parser.add_argument("--baselines", nargs="*", default=[], help="score files drawn beside ours in curves.png")
    args = parser.parse_args(argv)
    try:
        changed = publish(os.path.expanduser(args.src), args.dest, args.baselines)
    except ConfigError as error:  # no suite folder, a score file that is not one, a missing baseline file
        print(f"error: {error}", file=sys.stderr)
        return 2
    for run in changed:
        print(f"published {run}")
    print(f"{len(changed)} run(s) new or changed; scores merged and {os.path.join(args.dest, 'curves.png')} redrawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
