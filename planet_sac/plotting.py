"""Learning curves of one or more runs from their `metrics.jsonl`, drawn with matplotlib (Agg).

`read_curves` extracts the data (what the figure shows, and what tests check);
`plot_runs` draws it: episode return against environment steps (training episodes and
test phases, each run labelled, plus mean and standard deviation across runs when there
are several; a test phase that evaluated several policies, `policy.compare`, draws one
line per policy) and each world-model loss term against gradient updates.
"""

from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from planet_sac.config import ConfigError

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
        raise ConfigError(f"{logdir} has no metrics.jsonl; pass the --logdir of a training run")
    points: dict[str, dict[float, float]] = {}
    with open(path) as file:
        for line in file:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            for key, value in record.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                if (key in RETURNS or key.startswith(POLICY_RETURN)) and "env_steps" in record:
                    points.setdefault(key, {})[record["env_steps"]] = value
                elif key.startswith(("loss/", "test/loss/")) and "step" in record:
                    points.setdefault(key, {})[record["step"]] = value
    curves = {}
    for key, by_x in points.items():
        xs = np.array(sorted(by_x), np.float64)
        curves[key] = (xs, np.array([by_x[x] for x in sorted(by_x)], np.float64))
    return curves


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over `window` points (fewer at the start); window 1 returns the values."""
    values = np.asarray(values, np.float64)
    if window <= 1 or len(values) == 0:
        return values
    sums = np.cumsum(np.insert(values, 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


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


def _task(logdir: str) -> str | None:
    """`task (obs)` from the run's config.yaml, if it has one."""
    from planet_sac.config import ConfigError, load_yaml

    try:
        with open(os.path.join(logdir, "config.yaml"), "rb") as file:
            env = (load_yaml(file.read().decode("utf-8"), "config.yaml") or {}).get("env", {})
        if not isinstance(env["task"], str) or not isinstance(env["obs"], str):
            return None
        return f"{env['task'][:60]} ({env['obs'][:20]})"
    except (OSError, KeyError, TypeError, AttributeError, UnicodeDecodeError, ConfigError):
        return None


def plot_runs(logdirs: Sequence[str], out: str, smooth_window: int = 1) -> dict[str, dict[str, Curve]]:
    """Draws the curves of `logdirs` into the PNG `out`; returns {run label: read_curves(run)} as drawn (unsmoothed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = os.path.dirname(out)
    if folder and not os.path.isdir(folder):
        raise ConfigError(f"--out {out}: the folder {folder} does not exist")
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
            summary = mean_and_std(drawn)
            if summary is not None:
                x, mean, std = summary
                shade = "black" if len(keys) == 1 else colors[key_index % len(colors)]
                suffix = f" {policy}" if policy else ""
                axis.plot(x, mean, color=shade, linewidth=2.2, label=f"mean of {len(drawn)} runs{suffix}")
                axis.fill_between(x, mean - std, mean + std, color=shade, alpha=0.15,
                                  label=f"± 1 std across runs{suffix}")
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
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return runs
