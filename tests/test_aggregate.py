"""The benchmark estimator (planet_sac/aggregate.py) against values worked out by hand."""

import numpy as np
import pytest

from planet_sac import aggregate


def test_iqm_cuts_a_quarter_of_the_runs_at_each_end():
    assert aggregate.iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx((3 + 4 + 5 + 6) / 4)  # 2 cut at each end
    assert aggregate.iqm([1000, 0, 5, 6, 7]) == pytest.approx((5 + 6 + 7) / 3)  # int(5 / 4) = 1 cut at each end
    assert aggregate.iqm([2, 9, 4]) == pytest.approx(5.0)  # int(3 / 4) = 0: the mean
    with pytest.raises(ValueError, match="no runs"):
        aggregate.iqm([])


def test_iqm_is_scipys_trim_mean_of_a_quarter_for_every_number_of_runs():
    """rliable's IQM is `scipy.stats.trim_mean(x, 0.25)`: for 1 to 40 runs the same value. 10 runs cut 2 at each end,
    not 3: [0, 0, 0, 1, 2, 3, 4, 100, 200, 300] gives (0 + 1 + 2 + 3 + 4 + 100) / 6."""
    from scipy import stats

    g = np.random.default_rng(0)
    for n in range(1, 41):
        values = g.exponential(100.0, n)
        assert aggregate.iqm(values) == pytest.approx(stats.trim_mean(values, 0.25), rel=1e-12), n
    assert aggregate.iqm([0, 0, 0, 1, 2, 3, 4, 100, 200, 300]) == pytest.approx(110 / 6)


def test_window_scores_average_each_runs_points_inside_the_window():
    records = [
        {"task": "dmc_a", "seed": 0, "xs": [80_000, 90_000, 100_000, 110_000, 120_000], "ys": [1, 10, 20, 30, 99]},
        {"task": "dmc_a", "seed": 1, "xs": [95_000], "ys": [4]},
        {"task": "dmc_a", "seed": 2, "xs": [50_000], "ys": [7]},  # nothing in the window yet: left out
        {"task": "dmc_b", "seed": 0, "xs": [100_000], "ys": [3]},
    ]
    assert aggregate.window_scores(records) == {"dmc_a": [20.0, 4.0], "dmc_b": [3.0]}
    assert aggregate.window_scores(records, (0, 85_000), tasks=["dmc_a"]) == {"dmc_a": [1.0, 7.0]}
    assert aggregate.window_scores(records, tasks=["dmc_b"]) == {"dmc_b": [3.0]}  # dmc_a has points in the window


def test_a_runs_score_is_the_mean_of_its_points_in_the_window_not_their_median():
    records = [{"task": "dmc_a", "seed": 0, "xs": [90_000, 95_000, 100_000, 105_000], "ys": [0, 0, 0, 40]}]
    assert aggregate.window_scores(records) == {"dmc_a": [10.0]}


def test_bootstrap_of_one_task_with_two_runs():
    """Runs [0, 10], statistic mean: resampled means 0, 5, 10 with probability 1/4, 1/2, 1/4, so the 95% percentile
    interval is [0, 10] and the share of 5s about a half."""
    value, low, high = aggregate.stratified_bootstrap({"t": [0.0, 10.0]}, aggregate.pooled_mean, reps=4000)
    assert (value, low, high) == (5.0, 0.0, 10.0)


def test_bootstrap_redraws_runs_within_each_task():
    """Task a [0, 10], task b [100, 100]: every sample keeps two runs of each task, so the pooled mean is
    (a1 + a2 + 200) / 4 in {50, 52.5, 55}; drawing from the pooled runs would reach 100 (four b runs)."""
    value, low, high = aggregate.stratified_bootstrap({"a": [0.0, 10.0], "b": [100.0, 100.0]}, aggregate.pooled_mean,
                                                      reps=4000)
    assert value == 52.5 and low == 50.0 and high == 55.0
    # the IQM's interval with the same data: IQM of 4 values is the mean of the middle 2
    value, low, high = aggregate.stratified_bootstrap({"a": [0.0, 10.0], "b": [100.0, 100.0]}, reps=4000)
    assert value == pytest.approx((10 + 100) / 2) and low == pytest.approx(50.0) and high == pytest.approx(55.0)


def test_bootstrap_interval_narrows_with_more_runs_and_is_reproducible():
    g = np.random.default_rng(0)
    few = {"a": list(g.normal(100, 20, 3)), "b": list(g.normal(300, 20, 3))}
    many = {"a": list(g.normal(100, 20, 30)), "b": list(g.normal(300, 20, 30))}
    _, low_few, high_few = aggregate.stratified_bootstrap(few, reps=2000)
    _, low_many, high_many = aggregate.stratified_bootstrap(many, reps=2000)
    assert high_many - low_many < high_few - low_few
    assert aggregate.stratified_bootstrap(few, reps=2000) == aggregate.stratified_bootstrap(few, reps=2000)
    with pytest.raises(ValueError, match="at least one run"):
        aggregate.stratified_bootstrap({"a": []})


def test_the_interval_is_a_function_of_the_seed():
    """50 resamples of 20 spread-out runs: the interval's ends fall between resampled IQMs, so two unseeded draws would
    not agree; one seed always gives the same interval, another seed another one."""
    runs = {"a": list(np.random.default_rng(1).normal(100, 30, 20))}
    first = aggregate.stratified_bootstrap(runs, reps=50, seed=3)
    assert aggregate.stratified_bootstrap(runs, reps=50, seed=3) == first
    assert aggregate.stratified_bootstrap(runs, reps=50, seed=4)[1:] != first[1:]


def test_interval_is_the_central_percentile_interval():
    """Runs [0, 0, 30], mean of 3 redrawn: 30 with probability 1/27 (3.7%), >= 20 with 7/27 (26%), 0 with 8/27 (30%).
    So the 95% interval is [0, 30] and the 80% interval [0, 20]."""
    assert aggregate.stratified_bootstrap({"t": [0.0, 0.0, 30.0]}, aggregate.pooled_mean, reps=20_000)[1:] == (0.0, 30.0)
    assert aggregate.stratified_bootstrap({"t": [0.0, 0.0, 30.0]}, aggregate.pooled_mean, reps=20_000,
                                          confidence=0.8)[1:] == (0.0, 20.0)


def test_the_point_estimate_is_the_statistic_of_the_runs_themselves_not_of_the_resamples():
    """IQM of [1, 2, 4, ..., 64, 1000]: cut 2 of the 8 at each end, (4 + 8 + 16 + 32) / 4 = 15 (the resampled
    IQMs' median is 16 here)."""
    value, low, high = aggregate.stratified_bootstrap({"t": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 1000.0]}, reps=2000)
    assert value == 15.0 and low < value < high
