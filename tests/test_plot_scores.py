"""`planet-sac plot SCORES.json.gz --baselines ...`: one panel per task, seeds binned as Dreamer's plots, then
mean and std over seeds; expected values by hand."""

from __future__ import annotations

import gzip
import json
import re

import matplotlib
import numpy as np
import pytest
from PIL import Image

from planet_sac.cli import main
from planet_sac.config import ConfigError
from planet_sac.plotting import binning, plot_scores, read_scores, score_curves

matplotlib.use("Agg")

OURS = [
    {"task": "dmc_cheetah_run", "method": "planet_sac", "seed": 0, "xs": [5000, 10000, 20000], "ys": [1.0, 3.0, 5.0]},
    {"task": "dmc_cheetah_run", "method": "planet_sac", "seed": 1, "xs": [10000, 20000], "ys": [2.0, 7.0]},
    {"task": "dmc_cartpole_swingup", "method": "planet_sac", "seed": 0, "xs": [10000, 20000], "ys": [100.0, 200.0]},
]
BASELINE = [  # one task of ours, one we did not run, and points beyond our budget
    {"task": "dmc_cheetah_run", "method": "dreamerv3", "seed": 0, "xs": [8000, 12000, 16000, 30000], "ys": [10.0, 20.0, 40.0, 99.0]},
    {"task": "dmc_cheetah_run", "method": "dreamerv3", "seed": 1, "xs": [9000, 19000], "ys": [30.0, 50.0]},
    {"task": "dmc_walker_walk", "method": "dreamerv3", "seed": 0, "xs": [10000], "ys": [500.0]},
]


def _write(path, records):
    path.write_bytes(gzip.compress(json.dumps(records).encode()))
    return str(path)


def test_binning_matches_dreamers_half_open_bins():
    borders = np.array([0.0, 10.0, 20.0, 30.0])
    x, values = binning([20.0, 5.0, 10.0, 11.0], [4.0, 1.0, 3.0, 8.0], borders)
    np.testing.assert_array_equal(x, [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(values, [2.0, 6.0, np.nan])  # (0, 10]: 1 and 3; (10, 20]: 8 and 4; (20, 30]: none


def test_score_curves_average_binned_seeds():
    curves = score_curves(OURS + BASELINE, bin_size=10_000, budget=20_000)
    x, mean, std, seeds = curves[("dmc_cheetah_run", "planet_sac")]
    np.testing.assert_array_equal(x, [10_000, 20_000])
    # seed 0: (0, 10k] -> mean(1, 3) = 2, (10k, 20k] -> 5; seed 1: 2 and 7.
    np.testing.assert_allclose(mean, [2.0, 6.0])
    np.testing.assert_allclose(std, [0.0, 1.0])
    assert seeds == 2
    x, mean, std, seeds = curves[("dmc_cheetah_run", "dreamerv3")]
    # seed 0: 10 and mean(20, 40) = 30 (30000 is beyond the budget); seed 1: 30 and 50.
    np.testing.assert_allclose(mean, [20.0, 40.0])
    np.testing.assert_allclose(std, [10.0, 10.0])


def test_a_bin_without_values_of_some_seeds_averages_the_others():
    records = [{"task": "t", "method": "m", "seed": 0, "xs": [5, 15], "ys": [1.0, 3.0]},
               {"task": "t", "method": "m", "seed": 1, "xs": [15], "ys": [5.0]}]
    _, mean, std, _ = score_curves(records, bin_size=10, budget=30)[("t", "m")]
    np.testing.assert_allclose(mean, [1.0, 4.0, np.nan])
    np.testing.assert_allclose(std, [0.0, 1.0, np.nan])


def test_plot_of_a_score_file_with_a_baseline_draws_one_panel_per_task(tmp_path):
    ours, baseline = _write(tmp_path / "ours.json.gz", OURS), _write(tmp_path / "base.json.gz", BASELINE)
    out = str(tmp_path / "scores.png")
    figure = plot_scores([ours], out, [baseline], bin_size=10_000)
    try:
        axes = figure.axes
        assert [axis.get_title() for axis in axes] == ["dmc_cartpole_swingup", "dmc_cheetah_run"]  # no walker panel
        cartpole, cheetah = ({line.get_label(): line for line in axis.get_lines()} for axis in axes)
        assert sorted(cartpole) == ["planet_sac (1 seed)"]  # the baseline has no cartpole record
        assert sorted(cheetah) == ["dreamerv3 (2 seeds)", "planet_sac (2 seeds)"]
        np.testing.assert_allclose(cheetah["planet_sac (2 seeds)"].get_xydata(), [[10_000, 2.0], [20_000, 6.0]])
        np.testing.assert_allclose(cheetah["dreamerv3 (2 seeds)"].get_xydata(), [[10_000, 20.0], [20_000, 40.0]])
        np.testing.assert_allclose(cartpole["planet_sac (1 seed)"].get_xydata(), [[10_000, 100.0], [20_000, 200.0]])
        assert axes[1].get_xlim() == (0, 20_000)  # the budget: our last x, baselines cut there
        bands = axes[1].collections  # ± 1 std of each method
        assert len(bands) == 2
        edges = [sorted(set(np.round(band.get_paths()[0].vertices[:, 1], 6))) for band in bands]
        assert edges == [[2.0, 5.0, 7.0], [10.0, 30.0, 50.0]]  # planet_sac 2 ± 0, 6 ± 1; dreamerv3 20 ± 10, 40 ± 10
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
    with Image.open(out) as image:
        assert image.size[0] > 800 and image.size[1] > 300


def test_cli_plots_score_files_and_refuses_mixtures(tmp_path, capsys):
    ours, baseline = _write(tmp_path / "ours.json.gz", OURS), _write(tmp_path / "base.json.gz", BASELINE)
    out = tmp_path / "fig.png"
    assert main(["plot", ours, "--baselines", baseline, "--out", str(out), "--bin", "5000", "--quiet"]) == 0
    assert out.exists()
    (tmp_path / "run").mkdir()
    assert main(["plot", ours, str(tmp_path / "run"), "--out", str(out)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "run"), "--baselines", baseline, "--out", str(out)]) == 2
    assert "--baselines go with score files" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "missing.json.gz"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["plot", ours, "--out", str(tmp_path / "nofolder" / "fig.png")]) == 2
    assert f"the folder {tmp_path / 'nofolder'} does not exist" in capsys.readouterr().err
    (tmp_path / "folder.png").mkdir()
    assert main(["plot", ours, "--out", str(tmp_path / "folder.png")]) == 2
    assert "is a folder; give a file name" in capsys.readouterr().err
    for flag, value in (("--bin", "inf"), ("--bin", "nan"), ("--budget", "inf"), ("--bin", "1e-300")):
        assert main(["plot", ours, "--out", str(out), flag, value]) == 2, (flag, value)  # a traceback, or all memory
        assert f"{flag} " in capsys.readouterr().err


def test_bad_score_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'[{"task": "t", "method": "m", "seed": 0, "xs": [1, 2], "ys": [1]}]'))
    with pytest.raises(ConfigError, match="has 2 xs but 1 ys"):
        read_scores(str(bad))
    for xs, ys, words in (([0, "5", 100], [0, 1, 2], "has 1 xs that are not numbers (first '5')"),
                          ([0, [1], 100], [0, 1, 2], "has 1 xs that are not numbers (first '[1]')"),
                          ([0, 1], [True, 2], "has 1 ys that are not numbers (first 'True')"),
                          (7, [1], "has xs '7', not a list of numbers")):
        bad.write_bytes(gzip.compress(json.dumps([{"task": "t", "method": "m", "seed": 0, "xs": xs, "ys": ys}]).encode()))
        with pytest.raises(ConfigError, match=re.escape(f"{bad}: the record of t seed 0 {words}")):
            read_scores(str(bad))
    bad.write_text("plain text")
    with pytest.raises(ConfigError, match="not a gzipped JSON score file"):
        read_scores(str(bad))
    empty = _write(tmp_path / "empty.json.gz", [])
    with pytest.raises(ConfigError, match="no records"):
        plot_scores([empty], str(tmp_path / "x.png"))


@pytest.mark.parametrize("key, text, first", [("ys", "[1.0, NaN, 3.0]", "nan"), ("xs", "[0, Infinity, 2]", "inf"),
                                             ("ys", "[-Infinity, 2, 3]", "-inf")])
def test_a_score_file_with_values_that_are_not_finite_is_one_line(key, text, first, tmp_path):
    """Python's json reads NaN and Infinity: such a curve was drawn blank without a word."""
    other = "[0, 1, 2]"
    record = f'{{"task": "t", "method": "m", "seed": 3, "xs": {text if key == "xs" else other}, ' \
             f'"ys": {text if key == "ys" else other}}}'
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(f"[{record}]".encode()))
    with pytest.raises(ConfigError, match=re.escape(f"{bad}: the record of t seed 3 has 1 {key} that are not finite "
                                                    f"(first {first})")):
        read_scores(str(bad))


@pytest.mark.parametrize("record, words", [
    ({"task": ["t"], "method": "m", "seed": 0}, "record 0 has task ['t'], method 'm' and seed 0: expected two names"),
    ({"task": 7, "method": "m", "seed": 0}, "record 0 has task 7, method 'm' and seed 0"),
    ({"task": "t", "method": None, "seed": 0}, "record 0 has task 't', method None and seed 0"),
    ({"task": "t", "method": "m", "seed": "one"}, "record 0 has task 't', method 'm' and seed 'one'"),
    ({"task": "t", "method": "m", "seed": 0, "xs": [-5, -1]}, "the record of t seed 0 has xs below 0 (first -5)"),
])
def test_score_records_plot_could_not_draw_are_refused_when_read(record, words, tmp_path):
    """A task that is a list or a number, or negative xs, passed the reader and crashed the plot (TypeError,
    IndexError)."""
    bad = _write(tmp_path / "bad.json.gz", [{"xs": [0, 1], "ys": [0.0, 1.0], **record}])
    with pytest.raises(ConfigError, match=re.escape(f"{bad}: {words}")):
        read_scores(bad)


def test_a_baseline_without_a_record_of_the_plotted_tasks_is_a_logged_skip(tmp_path, caplog):
    ours = _write(tmp_path / "ours.json.gz", OURS)
    unrelated = _write(tmp_path / "atari.json.gz", [{"task": "atari_pong", "method": "x", "seed": 0, "xs": [1],
                                                     "ys": [2.0]}])
    empty = _write(tmp_path / "empty.json.gz", [])
    baseline = _write(tmp_path / "base.json.gz", BASELINE)
    with caplog.at_level("WARNING", logger="planet_sac"):
        figure = plot_scores([ours], str(tmp_path / "fig.png"), [unrelated, baseline, empty])
    import matplotlib.pyplot as plt

    plt.close(figure)
    warned = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert warned == [f"--baselines {unrelated}: no record of the tasks plotted (dmc_cartpole_swingup, dmc_cheetah_run), "
                      "skipped; it holds atari_pong",
                      f"--baselines {empty}: no record of the tasks plotted (dmc_cartpole_swingup, dmc_cheetah_run), "
                      "skipped; it holds no records"]


def test_the_published_baselines_load_when_present():
    import os
    import pathlib

    from tests.conftest import ROOT

    # The published score files live in shared/ beside the checkout (CI's layout, and this project's machines);
    # CI must find them, a user's clone without shared/ has nothing to read.
    found = [path for path in (ROOT.parent / "shared", ROOT.parent.parent / "shared", pathlib.Path("/work/shared"))
             if (path / "baselines" / "dmc_vision-drqv2.json.gz").exists()]
    if not found:
        assert os.environ.get("CI") != "true", "CI runs with shared/ beside the clone: its baselines must be there"
        pytest.skip("no shared/baselines beside this checkout")
    path = str(found[0] / "baselines" / "dmc_vision-drqv2.json.gz")
    records = read_scores(path)
    curves = score_curves([r for r in records if r["task"] == "dmc_cheetah_run"], 10_000, 100_000)
    x, mean, _, seeds = curves[("dmc_cheetah_run", "drqv2")]
    assert seeds >= 5 and x[-1] == 100_000 and np.isfinite(mean[-1])
