r"""Publishes the finished runs of a `planet-sac suite` output folder into the repository's result folder.

Usage (as the runs of issue #28 finish; run directories stay outside the checkout):
    .venv/bin/python bench/publish_suite.py ~/runs/dmc_vision bench/results/dmc_vision \
        --baselines ../shared/baselines/dmc_vision-*.json.gz

For every finished run (`SRC/results/<task>/seed<k>/result.json`) it copies that folder's three small files
(result.json, metrics.jsonl, config.yaml: never checkpoints, episodes or event files, which live in
`SRC/runs/`), merges every record of `SRC/scores/*.json.gz` into `DEST/scores/` (a record replaces the one of
the same task, method and seed; records only DEST holds, e.g. runs finished on another machine, stay), drops
the run's `DEST/unfinished/<task>/seed<k>` copy, and redraws `DEST/curves.png` against the baselines.
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
from planet_sac.plotting import plot_scores, read_scores
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


def publish(src: str, dest: str, baselines: list[str]) -> list[str]:
    """Copies `src`'s finished runs and score records into `dest` and redraws its figure; returns the runs copied
    or changed (relative paths `results/<task>/seed<k>`)."""
    if not os.path.isdir(os.path.join(src, "results")):
        raise ConfigError(f"{src} has no results/ folder: give the --out folder of `planet-sac suite`")
    changed = []
    for run in finished_runs(src):
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
    return changed


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
