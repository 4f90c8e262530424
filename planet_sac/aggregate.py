"""Benchmark scores over runs: per-run window means, the interquartile mean (IQM) and its stratified bootstrap interval.

One estimator for every method, as rliable computes it (Agarwal et al., 2021, "Deep RL at the Edge of
the Statistical Precipice"): a run's score is the mean of its score-file returns inside an env-step window
(90k-110k by default); the IQM is the mean of the middle half of all runs' scores pooled over tasks
(`scipy.stats.trim_mean(x, 0.25)`: int(n / 4) runs cut at each end); its 95% interval is the percentile
interval of the IQM over bootstrap samples that redraw each task's runs with replacement within that
task (stratified). rliable itself does not import beside this stack (arch 7 / pandas 3 break its
plotting module), so this is the same estimator in numpy; tasks may have different numbers of runs.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

WINDOW = (90_000, 110_000)
PLANET_TASKS = ("dmc_cartpole_swingup", "dmc_reacher_easy", "dmc_cheetah_run", "dmc_finger_spin",
                "dmc_ball_in_cup_catch", "dmc_walker_walk")

ScoresByTask = Mapping[str, Sequence[float]]

# Published means at 100k env steps without per-run curves (the CURL paper, Laskin et al. 2020, Table 1, "100K step
# scores"; the README's results table quotes the same): rows beside the score files, with no interval. PlaNet's is
# the floor issue #42 asks every run to clear.
PUBLISHED_100K: dict[str, dict[str, float]] = {
    "PlaNet": {"dmc_cartpole_swingup": 297, "dmc_reacher_easy": 20, "dmc_cheetah_run": 138, "dmc_finger_spin": 136,
               "dmc_ball_in_cup_catch": 0, "dmc_walker_walk": 224},
    "Dreamer": {"dmc_cartpole_swingup": 326, "dmc_reacher_easy": 314, "dmc_cheetah_run": 235, "dmc_finger_spin": 341,
                "dmc_ball_in_cup_catch": 246, "dmc_walker_walk": 277},
}


def window_scores(records: Sequence[Mapping], window: tuple[float, float] = WINDOW,
                  tasks: Sequence[str] | None = None) -> dict[str, list[float]]:
    """{task: [one score per run]}: each record's mean return over its points with window[0] <= x <= window[1].

    `records` are Dreamer score records ({task, seed, xs, ys}); a record with no point in the window is left
    out (a run that has not got there yet); `tasks` keeps only those tasks (all present by default).
    """
    scores: dict[str, list[float]] = {}
    for record in records:
        if tasks is not None and record["task"] not in tasks:
            continue
        inside = [y for x, y in zip(record["xs"], record["ys"]) if window[0] <= x <= window[1]]
        if inside:
            scores.setdefault(record["task"], []).append(float(np.mean(inside)))
    return scores


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean after cutting int(n / 4) values at each end of the sorted values."""
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if x.size == 0:
        raise ValueError("the IQM of no runs is undefined")
    cut = int(0.25 * x.size)
    return float(x[cut:x.size - cut].mean())


def pooled_mean(values: Sequence[float] | np.ndarray) -> float:
    return float(np.mean(values))


def stratified_bootstrap(scores: ScoresByTask, statistic: Callable[[np.ndarray], float] = iqm, reps: int = 20_000,
                         confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(statistic of the pooled runs, low, high): the percentile interval over `reps` bootstrap samples in which every
    task's runs are redrawn with replacement from that task's own runs (rliable's StratifiedBootstrap)."""
    tasks = [np.asarray(values, dtype=np.float64) for values in scores.values()]
    if not tasks or any(values.size == 0 for values in tasks):
        raise ValueError("every task needs at least one run")
    rng = np.random.default_rng(seed)
    # [reps, runs of the task] per task, concatenated: one resampled benchmark per row.
    samples = np.concatenate([values[rng.integers(0, values.size, (reps, values.size))] for values in tasks], 1)
    estimates = np.array([statistic(row) for row in samples])
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return statistic(np.concatenate(tasks)), float(low), float(high)


def runs_not_above(scores: ScoresByTask, reference: Mapping[str, float]) -> dict[str, int]:
    """{task: how many of its runs score at or below `reference[task]`}, for the tasks both name."""
    return {task: sum(1 for value in values if value <= reference[task])
            for task, values in scores.items() if task in reference}
