"""Learning curves of runs (their `metrics.jsonl`) and of score files, drawn with matplotlib (Agg).

`read_curves` extracts the data (what the figure shows, and what tests check);
`plot_runs` draws it: episode return against environment steps (training episodes and
test phases, each run labelled, plus mean and standard deviation across runs when there
are several; a test phase that evaluated several policies, `policy.compare`, draws one
line per policy) and each world-model loss term against gradient updates.

Score files (Dreamer's `scores/*.json.gz`, written by `planet-sac suite`) are drawn by
`plot_scores`: one panel per task, each method's seeds binned as Dreamer's plotting scripts
bin them, then mean and standard deviation over seeds, with baseline files beside ours.
"""

from __future__ import annotations

import json
import logging
import math
import os
from typing import Sequence

import numpy as np

from planet_sac.config import ConfigError
from planet_sac.errors import check_output_file
from planet_sac.metrics import read_metrics

log = logging.getLogger("planet_sac")

Curve = tuple[np.ndarray, np.ndarray]
RETURNS = ("train/return", "test/return")
POLICY_RETURN = "test/return/"  # + policy name: each policy a test phase evaluated (policy.test and policy.compare)


def read_curves(logdir: str) -> dict[str, Curve]:
    """{key: (x, y)} of a run: returns (`train/return`, `test/return`, `test/return/<policy>`) against
    `env_steps`, `loss/*` and `test/loss/*` against updates (`step`).

    Lines that are not complete JSON (a run killed mid-write) are skipped; a key logged
    twice at one x keeps its last value (a resumed run repeats no step, but be safe).
    """
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise ConfigError(f"{logdir} has no metrics.jsonl; pass the logdir of a training run")
    points: dict[str, dict[float, float]] = {}
    unplaced = 0  # records with a value to draw whose step or env_steps is not a number (another tool's file)
    for record in read_metrics(path):
        skipped = False
        for key, value in record.items():
            if not _is_number(value):
                continue
            if key in RETURNS or key.startswith(POLICY_RETURN):
                x = record.get("env_steps")
            elif key.startswith(("loss/", "test/loss/")):
                x = record.get("step")
            else:
                continue
            if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
                points.setdefault(key, {})[x] = value
            else:
                skipped = True
        unplaced += skipped
    if unplaced:
        log.warning("%s: skipped %d record%s whose step or env_steps is not a number", path, unplaced,
                    "" if unplaced == 1 else "s")
    curves = {}
    for key, by_x in points.items():
        xs = np.array(sorted(by_x), np.float64)
        curves[key] = (xs, np.array([by_x[x] for x in sorted(by_x)], np.float64))
    if "test/return" in curves and not any(key.startswith(POLICY_RETURN) for key in curves):
        # Runs from before test/return/<policy> logged only test/return, their policy.test's: drawn beside newer runs.
        policy = _run_setting(logdir, "policy", "test")
        if policy:
            curves[POLICY_RETURN + policy] = curves["test/return"]
    return curves


def _short(value: object) -> str:
    return repr(value)[:40]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over `window` points (fewer at the start); window 1 returns the values."""
    values = np.asarray(values, np.float64)
    if window <= 1 or len(values) == 0:
        return values
    window = min(window, len(values))  # a longer window averages the same points
    finite = np.isfinite(values)  # a NaN (from another tool's file) leaves a gap, not NaN everywhere after it
    sums = np.cumsum(np.insert(np.where(finite, values, 0.0), 0, 0.0))
    counts = np.cumsum(np.insert(finite.astype(np.float64), 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    used = counts[ends] - counts[starts]
    return np.where(used > 0, (sums[ends] - sums[starts]) / np.maximum(used, 1), np.nan)


def mean_and_std(curves: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Mean and standard deviation across runs on the x values all runs cover (linear interpolation).

    None when fewer than two runs have the curve or their x ranges do not overlap.
    """
    curves = [curve for curve in curves if len(curve[0])]
    if len(curves) < 2:
        return None
    low, high = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    grid = np.unique(np.concatenate([x[(x >= low) & (x <= high)] for x, _ in curves]))
    if len(grid) == 0:
        return None
    stacked = np.stack([np.interp(grid, x, y) for x, y in curves])
    return grid, stacked.mean(0), stacked.std(0)


def run_labels(logdirs: Sequence[str]) -> list[str]:
    """Short unique names: the last path component, or more of the path where those collide."""
    parts = [os.path.normpath(os.path.abspath(logdir)).split(os.sep) for logdir in logdirs]
    for depth in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(index) for index in range(len(logdirs))]


def _run_setting(logdir: str, section: str, key: str) -> str | None:
    """A string setting of the run's config.yaml (`env.task`, `policy.test`), if it has one."""
    from planet_sac.config import ConfigError
    from planet_sac.config_loading import load_yaml

    try:
        with open(os.path.join(logdir, "config.yaml"), "rb") as file:
            value = (load_yaml(file.read().decode("utf-8"), "config.yaml") or {}).get(section, {})[key]
        return value[:60] if isinstance(value, str) else None
    except (OSError, KeyError, TypeError, AttributeError, UnicodeDecodeError, ConfigError):
        return None


def _task(logdir: str) -> str | None:
    """`task (obs)` from the run's config.yaml, if it has one."""
    task, obs = _run_setting(logdir, "env", "task"), _run_setting(logdir, "env", "obs")
    return f"{task} ({obs[:20]})" if task and obs else None


def plot_runs(logdirs: Sequence[str], out: str, smooth_window: int = 1) -> dict[str, dict[str, Curve]]:
    """Draws the curves of `logdirs` into the PNG `out`; returns {run label: read_curves(run)} as drawn (unsmoothed).

    Several runs of one task (their config.yaml's `env.task` and `env.obs`) also get their mean and spread; runs of
    different tasks are drawn side by side only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    check_output_file(out, "--out")
    labels = run_labels(logdirs)
    runs = {label: read_curves(logdir) for label, logdir in zip(labels, logdirs)}
    if not any(runs.values()):
        raise ConfigError(f"no returns or losses in the metrics.jsonl of {', '.join(logdirs)}; train for longer")
    loss_keys = sorted({key for curves in runs.values() for key in curves if key.startswith("loss/")},
                       key=lambda key: (key == "loss/total", key))
    columns = max(2, min(4, len(loss_keys)))
    loss_rows = -(-len(loss_keys) // columns)
    figure = plt.figure(figsize=(4 * columns, 4.2 + 3.2 * loss_rows))
    grid = figure.add_gridspec(1 + loss_rows, columns, height_ratios=[1.4] + [1] * loss_rows)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    halves = [figure.add_subplot(grid[0, : columns // 2]), figure.add_subplot(grid[0, columns // 2:])]
    several = len(runs) > 1
    tasks = sorted({task for task in map(_task, logdirs) if task})
    smoothing = f", moving average of {smooth_window}" if smooth_window > 1 else ""
    figure.suptitle(f"{', '.join(tasks) or 'planet_sac'}: {len(runs)} run{'s' if several else ''}{smoothing}")

    # The test panel draws one line per evaluated policy when the runs logged them, else test/return.
    policy_keys = sorted({key for curves in runs.values() for key in curves if key.startswith(POLICY_RETURN)})
    panels = ((halves[0], "train/return", ["train/return"], "training episodes (with exploration noise)"),
              (halves[1], "test/return", policy_keys or ["test/return"], "test phases (no exploration)"))
    styles = ("o-", "s--", "^:", "D-.")
    for axis, name, keys, title in panels:
        drawn_any = False
        for key_index, key in enumerate(keys):
            policy = key[len(POLICY_RETURN):] if key.startswith(POLICY_RETURN) else None
            drawn = []
            for index, (label, curves) in enumerate(runs.items()):
                if key not in curves:
                    continue
                x, y = curves[key][0], smooth(curves[key][1], smooth_window)
                drawn.append((x, y))
                # One run: a color per policy. Several: a color per run, a line style per policy.
                color = colors[(index if several else key_index) % len(colors)]
                style = styles[key_index % len(styles)] if several else "o-"
                if name == "train/return" and len(x) > 50:
                    style = "-"  # points stay visible on short runs only
                text = " ".join(part for part in ((label if several or policy is None else None), policy) if part)
                axis.plot(x, y, style, color=color, label=text, markersize=3,
                          linewidth=1 if several else 1.5, alpha=0.55 if several else 1.0)
            summary = mean_and_std(drawn) if len(tasks) <= 1 else None  # no mean across different tasks
            if summary is not None:
                x, mean, std = summary
                shade = "black" if len(keys) == 1 else colors[key_index % len(colors)]
                suffix = f" {policy}" if policy else ""
                axis.plot(x, mean, color=shade, linewidth=2.2, label=f"mean of {len(drawn)} runs{suffix}")
                axis.fill_between(x, mean - std, mean + std, color=shade, alpha=0.15,
                                  label=f"± 1 std across runs (population){suffix}")
            drawn_any = drawn_any or bool(drawn)
        if not drawn_any:
            axis.text(0.5, 0.5, f"no {name} logged yet", ha="center", va="center", transform=axis.transAxes)
        axis.set_title(f"{name}: {title}")
        axis.set_xlabel("environment steps (simulator steps, incl. action repeat)")
        axis.set_ylabel("episode return (sum of rewards)")
        axis.grid(alpha=0.3)
        if drawn_any:
            axis.legend(fontsize=8)

    for position, key in enumerate(loss_keys):
        axis = figure.add_subplot(grid[1 + position // columns, position % columns])
        for index, (label, curves) in enumerate(runs.items()):
            color = colors[index % len(colors)]
            if key in curves:
                axis.plot(curves[key][0], smooth(curves[key][1], smooth_window), color=color,
                          label=f"{label} train" if several else "train batches")
            test_key = f"test/{key}"
            if test_key in curves:
                axis.plot(curves[test_key][0], smooth(curves[test_key][1], smooth_window), "s--", color=color,
                          markersize=3, label=f"{label} test" if several else "test episodes")
        axis.set_title(key + (" (weighted sum)" if key == "loss/total" else ""))
        axis.set_xlabel("gradient updates")
        axis.set_ylabel("nats per time step" if key != "loss/total" else "loss")
        axis.grid(alpha=0.3)
        if several:  # a run's color is the one the returns' legends give it; here only the line styles are named
            axis.legend(handles=[Line2D([], [], color="black", label="train batches"),
                                 Line2D([], [], color="black", linestyle="--", marker="s", markersize=3,
                                        label="test episodes")], fontsize=7)
        else:
            axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return runs


# ----------------------------------------------------------------------------- score files (Dreamer's format)

SCORE_KEYS = ("task", "method", "seed", "xs", "ys")


def read_scores(path: str) -> list[dict]:
    """The records of a Dreamer-format score file: a gzipped JSON list of {task, method, seed, xs, ys}.

    [] when the file does not exist (a suite's first run creates it); anything else that is not
    such a list is a one-line ConfigError.
    """
    import gzip

    if not os.path.exists(path):
        return []
    try:
        with gzip.open(path, "rt") as file:
            records = json.load(file)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path} is not a gzipped JSON score file ({error.__class__.__name__})") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) and set(SCORE_KEYS) <= set(r) for r in records):
        raise ConfigError(f"{path}: expected a list of records with {', '.join(SCORE_KEYS)} (Dreamer's score format)")
    for index, record in enumerate(records):
        if not isinstance(record["task"], str) or not isinstance(record["method"], str) or not _is_number(
                record["seed"]):
            raise ConfigError(f"{path}: record {index} has task {_short(record['task'])}, method "
                              f"{_short(record['method'])} and seed {_short(record['seed'])}: expected two names and "
                              "a number")
        where = f"{path}: the record of {record['task']} seed {record['seed']}"
        for key in ("xs", "ys"):
            values = record[key]
            if not isinstance(values, list):
                raise ConfigError(f"{where} has {key} {str(values)[:40]!r}, not a list of numbers")
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))]
            if bad:
                raise ConfigError(f"{where} has {len(bad)} {key} that are not numbers (first {str(bad[0])[:40]!r})")
            infinite = [v for v in values if not math.isfinite(v)]  # JSON's NaN and Infinity: no point to draw
            if infinite:
                raise ConfigError(f"{where} has {len(infinite)} {key} that are not finite (first {infinite[0]})")
        if len(record["xs"]) != len(record["ys"]):
            raise ConfigError(f"{where} has {len(record['xs'])} xs but {len(record['ys'])} ys")
        if any(x < 0 for x in record["xs"]):
            raise ConfigError(f"{where} has xs below 0 (first {min(record['xs'])}): xs are environment steps")
    return records


def binning(xs: Sequence[float], ys: Sequence[float], borders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the ys whose x lies in each bin (start, stop] of `borders`, at the bin's right border; NaN if empty.

    As Dreamer's plotting scripts bin every seed's curve before averaging seeds (`fill='nan'`).
    """
    x, y = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    values = np.full(len(borders) - 1, np.nan)
    for index, (start, stop) in enumerate(zip(borders[:-1], borders[1:])):
        inside = (x > start) & (x <= stop)
        if inside.any():
            values[index] = y[inside].mean()
    return np.asarray(borders[1:], np.float64), values


def score_curves(records: Sequence[dict], bin_size: float, budget: float) -> dict[tuple[str, str], tuple]:
    """{(task, method): (x, mean, std, seeds)}: each seed's curve binned to `bin_size` env steps up to `budget`,
    then mean and standard deviation over the seeds that have a value in each bin (NaN where none has)."""
    borders = np.arange(0.0, budget + bin_size * 1e-6, bin_size)
    if borders[-1] < budget:
        borders = np.append(borders, borders[-1] + bin_size)
    grouped: dict[tuple[str, str], list[np.ndarray]] = {}
    for record in records:
        _, values = binning(record["xs"], record["ys"], borders)
        grouped.setdefault((record["task"], str(record["method"])), []).append(values)
    curves = {}
    for key, rows in grouped.items():
        stacked = np.stack(rows)
        counts = np.isfinite(stacked).sum(0)
        with np.errstate(invalid="ignore"):
            total = np.where(np.isfinite(stacked), stacked, 0.0).sum(0)
            mean = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
            spread = np.where(np.isfinite(stacked), (stacked - mean) ** 2, 0.0).sum(0)
            std = np.where(counts > 0, np.sqrt(spread / np.maximum(counts, 1)), np.nan)
        curves[key] = (borders[1:], mean, std, len(rows))
    return curves


MAX_BINS = 10_000  # points per curve of a score plot: far beyond what a panel shows


def plot_scores(score_files: Sequence[str], out: str, baselines: Sequence[str] = (), bin_size: float = 10_000,
                budget: float | None = None, columns: int = 3):
    """One panel per task of `score_files`: every method's mean over seeds with ± 1 std, baselines beside ours.

    Baseline files (the same format, e.g. danijar/dreamerv3's scores) are drawn for the tasks of
    `score_files` only, up to `budget` env steps (default: the largest x of `score_files`).
    Writes the PNG `out` and returns the matplotlib figure (the caller closes it).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_output_file(out, "--out")
    if not 0 < bin_size < math.inf:
        raise ConfigError(f"--bin {bin_size:g}: must be a number of env steps > 0")
    ours = [record for path in score_files for record in _existing_scores(path)]
    if not ours:
        raise ConfigError(f"no records in {', '.join(score_files)}; let `planet-sac suite` finish a run first")
    tasks = sorted({record["task"] for record in ours})
    others = []
    for path in baselines:
        records = _existing_scores(path)
        if not any(record["task"] in tasks for record in records):
            log.warning("--baselines %s: no record of the tasks plotted (%s), skipped; it holds %s", path,
                        ", ".join(tasks), ", ".join(sorted({str(r["task"]) for r in records})[:6]) or "no records")
        others += records
    if budget is None:
        budget = max((max(record["xs"]) for record in ours if record["xs"]), default=bin_size)
    own_methods = sorted({str(record["method"]) for record in ours})
    if budget / bin_size > MAX_BINS:
        raise ConfigError(f"--bin {bin_size:g} cuts {budget:g} env steps into more than {MAX_BINS} bins; use a wider --bin")
    curves = score_curves(ours + [r for r in others if r["task"] in tasks], bin_size, budget)
    methods = own_methods + sorted({method for _, method in curves} - set(own_methods))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    columns = max(1, min(columns, len(tasks)))
    rows = -(-len(tasks) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    for axis in axes.flat[len(tasks):]:
        axis.remove()
    for axis, task in zip(axes.flat, tasks):
        for index, method in enumerate(methods):
            if (task, method) not in curves:
                continue
            x, mean, std, seeds = curves[(task, method)]
            finite = np.isfinite(mean)
            color = colors[index % len(colors)]
            axis.plot(x[finite], mean[finite], color=color, linewidth=2.2 if method in own_methods else 1.4,
                      label=f"{method} ({seeds} seed{'s' if seeds > 1 else ''})")
            axis.fill_between(x[finite], (mean - std)[finite], (mean + std)[finite], color=color, alpha=0.15)
        axis.set_title(task)
        axis.set_xlim(0, budget)
        axis.set_xlabel("environment steps (action repeat included)")
        axis.set_ylabel("test return")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    title = f"mean ± 1 std (population) over seeds, each seed binned to {bin_size:g} env steps"
    figure.suptitle(title if columns > 1 else title.replace(", ", ",\n"), fontsize=10)  # one panel: two lines fit
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    return figure


def _existing_scores(path: str) -> list[dict]:
    if not os.path.isfile(path):
        raise ConfigError(f"{path} does not exist (a score file is a .json.gz from `planet-sac suite` or a baseline)")
    return read_scores(path)
