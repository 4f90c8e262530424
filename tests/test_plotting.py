"""`planet-sac plot`: the curves drawn are exactly the values in metrics.jsonl; the PNG is a real figure."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from planet_sac.cli import main
from planet_sac.config import ConfigError
from planet_sac.plotting import mean_and_std, read_curves, run_labels, smooth

# Two hand-written runs: returns at env steps, losses at updates, one partial line (a killed run), one test-phase loss.
RUN_A = [
    {"step": 10, "phase": "train", "env_steps": 200, "loss/kl": 3.0, "loss/reward": 9.0, "loss/total": 20.0},
    {"step": 20, "phase": "train", "env_steps": 400, "train/return": -900.0, "loss/kl": 2.0, "loss/reward": 5.0, "loss/total": 14.0},
    {"step": 20, "phase": "test", "env_steps": 400, "test/return": -800.0, "test/loss/kl": 2.5},
    {"step": 30, "phase": "train", "env_steps": 600, "train/return": -500.0, "loss/kl": 1.0, "loss/reward": 2.0, "loss/total": 7.0},
    {"step": 40, "phase": "test", "env_steps": 800, "test/return": -200.0, "model/open_loop_mse": 0.1},
]
RUN_B = [
    {"step": 20, "phase": "train", "env_steps": 400, "train/return": -700.0, "loss/kl": 4.0, "loss/total": 10.0},
    {"step": 30, "phase": "train", "env_steps": 600, "train/return": -300.0, "loss/kl": 2.0, "loss/total": 8.0},
    {"step": 40, "phase": "test", "env_steps": 800, "test/return": -100.0},
]


def write_run(path, records, partial=True):
    path.mkdir(parents=True)
    text = "".join(json.dumps(record) + "\n" for record in records)
    (path / "metrics.jsonl").write_text(text + ('{"step": 50, "train/ret' if partial else ""))
    (path / "config.yaml").write_text("env:\n  task: gym:Pendulum-v1\n  obs: state\n")
    return str(path)


def test_read_curves_returns_exactly_what_was_logged(tmp_path):
    curves = read_curves(write_run(tmp_path / "a", RUN_A))
    assert sorted(curves) == ["loss/kl", "loss/reward", "loss/total", "test/loss/kl", "test/return", "train/return"]
    expected = {
        "train/return": ([400, 600], [-900, -500]),
        "test/return": ([400, 800], [-800, -200]),
        "loss/kl": ([10, 20, 30], [3, 2, 1]),
        "loss/reward": ([10, 20, 30], [9, 5, 2]),
        "loss/total": ([10, 20, 30], [20, 14, 7]),
        "test/loss/kl": ([20], [2.5]),
    }
    for key, (x, y) in expected.items():
        np.testing.assert_array_equal(curves[key][0], x, err_msg=key)
        np.testing.assert_array_equal(curves[key][1], y, err_msg=key)


def test_smoothing_and_mean_across_runs_match_numpy():
    np.testing.assert_allclose(smooth(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(smooth(np.array([1.0, 3.0, 5.0, 7.0]), 3), [1.0, 2.0, 3.0, 5.0])
    np.testing.assert_array_equal(smooth(np.array([1.0, 3.0]), 1), [1.0, 3.0])
    # A NaN is left out of its windows (by hand: [1], [1, nan], [nan, 5], [5, 7]), not spread to every later point.
    np.testing.assert_allclose(smooth(np.array([1.0, np.nan, 5.0, 7.0]), 2), [1.0, 1.0, 5.0, 6.0])
    assert np.isnan(smooth(np.array([np.nan, np.nan, 2.0]), 2)[1])
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.0, 10.0, 20.0]))
    b = (np.array([5.0, 25.0]), np.array([0.0, 20.0]))  # covers 5..25: the common range is 5..20
    x, mean, std = mean_and_std([a, b])
    np.testing.assert_array_equal(x, [5.0, 10.0, 20.0])
    b_at = np.array([0.0, 5.0, 15.0])  # b interpolated at 5, 10, 20 by hand
    a_at = np.array([5.0, 10.0, 20.0])
    np.testing.assert_allclose(mean, (a_at + b_at) / 2)
    np.testing.assert_allclose(std, np.abs(a_at - b_at) / 2)
    assert mean_and_std([a]) is None


def test_run_labels_are_short_and_unique():
    assert run_labels(["/x/runs/seed0", "/x/runs/seed1"]) == ["seed0", "seed1"]
    assert run_labels(["/x/cem/run", "/x/sac/run"]) == ["cem/run", "sac/run"]


def test_plot_command_writes_a_readable_png(tmp_path, capsys):
    a, b = write_run(tmp_path / "cem", RUN_A), write_run(tmp_path / "sac", RUN_B)
    out = tmp_path / "curves.png"
    assert main(["plot", a, b, "--out", str(out), "--smooth", "2"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    image = np.asarray(Image.open(out).convert("RGB"))
    assert image.shape[0] > 400 and image.shape[1] > 800
    colors = {tuple(pixel) for pixel in image.reshape(-1, 3)[::7]}
    assert len(colors) > 50  # lines, text, bands: not a blank canvas


def test_plot_errors_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["plot", str(empty), "--out", str(tmp_path / "x.png")]) == 2
    assert "has no metrics.jsonl" in capsys.readouterr().err
    run = write_run(tmp_path / "run", RUN_B)
    assert main(["plot", run, "--out", str(tmp_path / "nofolder" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["plot", run, "--out", str(tmp_path / "x.pdf")]) == 2
    (tmp_path / "folder.png").mkdir()
    assert main(["plot", run, "--out", str(tmp_path / "folder.png")]) == 2
    assert "folder.png is a folder; give a file name" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(ConfigError):
        read_curves(str(empty))


def test_plot_does_not_load_tensorflow(tmp_path):
    import subprocess
    import sys

    run = write_run(tmp_path / "run", RUN_A)
    code = ("import sys; from planet_sac.cli import main; "
            f"assert main(['plot', {run!r}, '--out', {str(tmp_path / 'x.png')!r}]) == 0; "
            "assert 'tensorflow' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_each_evaluated_policy_is_its_own_test_curve(tmp_path):
    # A run that compared policies at its test phases (policy.compare): one curve per policy, as logged.
    records = [
        {"step": 10, "phase": "test", "env_steps": 1000, "test/return": 30.0, "test/return/cem": 30.0,
         "test/return/sac": 12.0, "test/return/sac_guided_cem": 25.0},
        {"step": 20, "phase": "test", "env_steps": 2000, "test/return": 80.0, "test/return/cem": 80.0,
         "test/return/sac": 90.0},
    ]
    logdir = write_run(tmp_path / "compare", records)
    curves = read_curves(logdir)
    for key, (x, y) in {"test/return/cem": ([1000, 2000], [30, 80]), "test/return/sac": ([1000, 2000], [12, 90]),
                        "test/return/sac_guided_cem": ([1000], [25])}.items():
        np.testing.assert_array_equal(curves[key][0], x, err_msg=key)
        np.testing.assert_array_equal(curves[key][1], y, err_msg=key)
    out = tmp_path / "compare.png"
    other = write_run(tmp_path / "other", records)
    assert main(["plot", logdir, other, "--out", str(out)]) == 0
    assert Image.open(out).size[0] > 800


def test_read_metrics_keeps_whole_records_and_skips_a_partial_last_line(tmp_path):
    from planet_sac.metrics import read_metrics

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss/total": 2.5}\n[1, 2]\n{"step": 2, "loss/total": 2.0}\n{"step": 3, "loss/to')
    assert read_metrics(str(path)) == [{"step": 1, "loss/total": 2.5}, {"step": 2, "loss/total": 2.0}]


def test_read_metrics_skips_damaged_lines_counts_them_once_and_keeps_the_rest(tmp_path, caplog):
    from planet_sac.metrics import read_metrics

    path = tmp_path / "metrics.jsonl"  # a byte that is not UTF-8 and a line of garbage amid whole records
    path.write_bytes(b'{"step": 1}\n{"step": \xff2}\n\x00\x01garbage\n{"step": 3}\n\n{"step": 4, "lo')
    with caplog.at_level("WARNING", logger="planet_sac"):
        assert read_metrics(str(path)) == [{"step": 1}, {"step": 3}]
        assert read_metrics(str(path)) == [{"step": 1}, {"step": 3}]
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert warnings == [f"{path}: skipped 2 damaged lines (not a JSON record)"]


def test_plot_and_resume_read_past_a_metrics_file_with_a_damaged_byte(smoke_run_copy, tmp_path, capsys):
    path = os.path.join(smoke_run_copy, "metrics.jsonl")
    with open(path, "rb") as file:
        lines = file.read().splitlines(keepends=True)
    lines[1] = b"\xff" + lines[1][1:]
    with open(path, "wb") as file:
        file.write(b"".join(lines))
    assert main(["plot", smoke_run_copy, "--out", str(tmp_path / "curves.png"), "--quiet"]) == 0
    # the resume reads the file as it restores (the records past its checkpoint) and as it answers with the last
    # record; at the run's own end it traces nothing (seconds of tracing that read no metrics)
    assert main(["train", "--logdir", smoke_run_copy, "--train-steps", "20", "--quiet"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("done: step 20, {'test/loss/state'")  # its last test


def test_an_old_run_with_only_test_return_is_drawn_as_its_test_policy(tmp_path):
    """Runs from before test/return/<policy> logged test/return only: read as their policy.test's curve, so a plot
    with a newer run (which logs test/return/sac) no longer leaves the old run's test curve out."""
    old = write_run(tmp_path / "old", [{"step": 10, "phase": "test", "env_steps": 1000, "test/return": 5.0}])
    (tmp_path / "old" / "config.yaml").write_text("policy:\n  test: sac\n")
    curves = read_curves(old)
    np.testing.assert_array_equal(curves["test/return/sac"][1], [5.0])
    np.testing.assert_array_equal(curves["test/return"][1], [5.0])



def test_runs_of_different_tasks_get_no_mean_across_them(tmp_path, monkeypatch):
    """A mean of one task's return with another's means nothing: two Pendulum runs get theirs, a Pendulum and a
    cartpole run do not (the labels given to matplotlib)."""
    import matplotlib.axes

    labels = []
    plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda self, *a, **k: (labels.append(k.get("label")), plot(self, *a, **k))[1])
    from planet_sac.plotting import plot_runs

    first, second = write_run(tmp_path / "a", RUN_A), write_run(tmp_path / "b", RUN_B)
    plot_runs([first, second], str(tmp_path / "same.png"))
    assert "mean of 2 runs" in labels
    labels.clear()
    (tmp_path / "b" / "config.yaml").write_text("env:\n  task: dmc:cartpole-swingup\n  obs: image\n")
    plot_runs([first, second], str(tmp_path / "different.png"))
    assert not [label for label in labels if label and label.startswith("mean of")]
    assert any(label and label.startswith("a") for label in labels)  # each run is still drawn


def test_with_several_runs_the_loss_panels_name_the_line_styles_not_every_run_again(tmp_path, monkeypatch):
    """Ten runs would give each loss panel twenty legend entries over its curves: the returns' legends name the runs
    (their colors), the loss panels only the two line styles."""
    import matplotlib.axes

    legends = []
    legend = matplotlib.axes.Axes.legend

    def recording(self, *args, **kwargs):
        made = legend(self, *args, **kwargs)
        legends.append((self.get_title(), [text.get_text() for text in made.get_texts()]))
        return made

    monkeypatch.setattr(matplotlib.axes.Axes, "legend", recording)
    from planet_sac.plotting import plot_runs

    first, second = write_run(tmp_path / "a", RUN_A), write_run(tmp_path / "b", RUN_B)
    plot_runs([first, second], str(tmp_path / "two.png"))
    losses = [texts for title, texts in legends if title.startswith("loss/")]
    assert losses and all(texts == ["train batches", "test episodes"] for texts in losses)
    returns = [texts for title, texts in legends if not title.startswith("loss/")]
    assert returns and all(any(text.startswith("a") for text in texts) for texts in returns)
    legends.clear()
    plot_runs([first], str(tmp_path / "one.png"))  # one run: its own curves, named as before
    assert any(title.startswith("loss/") and "train batches" in texts for title, texts in legends)


def test_records_whose_step_is_not_a_number_are_a_counted_skip(tmp_path, caplog, capsys):
    """`"step": "a"`, `null` or a list ended `plot` with a TypeError traceback."""
    odd = [
        {"step": "a", "phase": "train", "env_steps": 100, "loss/kl": 9.0},  # a return is fine, the loss is not
        {"step": None, "phase": "train", "env_steps": 150, "loss/kl": 8.0},
        {"step": 25, "phase": "train", "env_steps": [1], "train/return": -1.0, "loss/kl": 7.0},
        {"step": 26, "phase": "train", "env_steps": float("nan"), "train/return": -2.0},
    ]
    logdir = write_run(tmp_path / "odd", RUN_A + odd, partial=False)
    with caplog.at_level("WARNING", logger="planet_sac"):
        curves = read_curves(logdir)
    np.testing.assert_array_equal(curves["loss/kl"][0], [10, 20, 25, 30])  # 25's loss kept: its step is a number
    np.testing.assert_array_equal(curves["train/return"][0], [400, 600])
    assert [r.getMessage() for r in caplog.records] == [
        f"{logdir}/metrics.jsonl: skipped 4 records whose step or env_steps is not a number"]
    assert main(["plot", logdir, "--out", str(tmp_path / "odd.png"), "--smooth", "99999999999999999999"]) == 0


def test_a_window_longer_than_the_curve_averages_all_of_it():
    np.testing.assert_allclose(smooth(np.array([1.0, 3.0, 5.0]), 10**20), [1.0, 2.0, 3.0])
