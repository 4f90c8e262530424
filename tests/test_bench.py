"""`planet-sac bench` at a tiny size: every documented figure is there and plausible (no timing assertion)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from planet_sac.benchmark import SIZES, machine, planning_flops
from tests.conftest import BFLOAT16_HIDDEN


def test_machine_tells_two_cpus_of_one_model_name_apart_by_family_and_model():
    """Two 2-core "AMD EPYC" machines of this project's differ 2x in an update (families 23 and 25): both numbers
    are written, from the first processor's lines; a cpuinfo without them gives None, not a guess."""
    first = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
             "flags\t\t: fpu avx2\n\n")
    second = first.replace("processor\t: 0", "processor\t: 1").replace(": 23", ": 25").replace("model\t\t: 1", "model\t\t: 17")
    info = machine(first + second)
    assert (info["cpu"], info["vendor"], info["family"], info["model"]) == ("AMD EPYC", "AuthenticAMD", 23, 1)
    assert info["avx2"] and not info["avx512_bf16"]
    bare = machine("processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: avx2\n")
    assert (bare["cpu"], bare["family"], bare["model"]) == ("AMD EPYC 7B12", None, None)


@pytest.mark.slow
@pytest.mark.e2e
def test_bench_writes_every_documented_key(tmp_path, capsys):
    """`planet-sac bench` in this process (the command line's entry point runs in other tests' subprocesses)."""
    from planet_sac.cli import main

    out = tmp_path / "bench.json"
    assert main(["bench", "--size", "tiny", "--reps", "1", "--json", str(out)]) == 0
    stdout = capsys.readouterr().out
    results = json.loads(out.read_text())
    for key in ("train_update_s", "cem_action_s", "sac_action_ms", "loader_chunks_per_s", "cache_bytes_ratio",
                "cem_gflops_per_s", "matmul_gflops_per_s", "machine"):
        assert key in results, key
    assert set(results["train_update_s"]) == {"4x10"}
    cpu = results["machine"]  # bfloat16 measured faster with AMX, and with AVX512-BF16 on AMD only
    hidden = BFLOAT16_HIDDEN and (cpu["amx_bf16"] or cpu["avx512_bf16"])  # ONEDNN_MAX_CPU_ISA: not measured
    assert set(results["cem_action_s"]) == {"1", "2"}
    assert set(results.get("cem_action_bfloat16_s", {})) == (set() if hidden else {"1", "2"})
    assert set(results.get("train_update_mixed_bfloat16_s", {})) == (set() if hidden else {"4x10"})
    assert ("bfloat16_not_measured" in results) == bool(hidden)
    assert set(results["train_update_profile_s"]["4x10"]) == {"total", "encoder", "decoder", "rssm", "rest"}
    profile = results["cem_profile_s"]
    assert set(profile) == {"total", "prior_rollout", "reward_head", "rest"} and profile["prior_rollout"] > 0
    assert set(results["cem_action_xla_vs_graph"]) == set(results["sac_action_xla_vs_graph_ms"]) == {"False", "True"}
    assert results["policy_jit_compile"] is False and results["sac_action_ms"] > 0  # the tiny size acts without XLA
    assert set(results["matmul_gflops_per_s"]) == ({"float32"} if hidden else {"float32", "bfloat16"})
    assert {"cpu", "vendor", "cores", "avx512_bf16", "amx_bf16"} <= results["machine"].keys()
    native = not hidden and (cpu["amx_bf16"] or (cpu["avx512_bf16"] and cpu["vendor"] == "AuthenticAMD"))
    assert results["precision_auto"] == ("mixed_bfloat16" if native else "float32")
    assert all(value > 0 for value in results["cem_action_s"].values())
    assert 0.9 < results["cache_bytes_ratio"] < 1.1  # images stay uint8 in the cache
    assert results["export_sac_action_ms"] > 0 and results["export_in_process_sac_action_ms"] > 0
    assert results["export_saved_model_mb"] > 0.1  # the tiny model's variables and its graph
    assert "CEM action" in stdout and "GFLOP/s" in stdout and "exported SavedModel" in stdout


def test_planning_flops_counted_from_the_layer_sizes():
    """PlaNet's sizes by hand: per imagined step 2 x (36x200 + 400x400 + 400x200 + 200x200 + 200x60
    + 230x100 + 100x100 + 100x1) multiply-adds, times 1000 candidates x 12 steps x 10 iterations."""
    from planet_sac.config import Config
    from planet_sac.models.world_model import WorldModel

    assert SIZES["full"].overrides == ()
    config = Config()
    model = WorldModel(config.model, "image", (64, 64, 3), 6)
    per_step = 2 * (36 * 200 + 400 * 400 + 400 * 200 + 200 * 200 + 200 * 60 + 230 * 100 + 100 * 100 + 100 * 1)
    assert planning_flops(model, config, envs=2) == per_step * 1000 * 12 * 10 * 2


def _load_bench_module(name: str):
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learning_curve_of_a_stopped_run_is_not_evaluated(tmp_path, monkeypatch, capsys):
    """bench/learning.py: when training stops before its budget, the curve is written and nothing is evaluated."""
    from tests.conftest import CONFIGS

    learning = _load_bench_module("learning")
    monkeypatch.setattr(learning, "train", lambda config, logdir, train_steps, force: {"step": train_steps - 1})
    monkeypatch.setattr(learning, "curve_rows", lambda logdir: [])
    monkeypatch.setattr(learning, "plot_runs", lambda runs, path: None)

    def evaluate_policies(*args, **kwargs):
        raise AssertionError("a stopped run was evaluated")

    monkeypatch.setattr(learning, "evaluate_policies", evaluate_policies)
    monkeypatch.setattr(sys, "argv", ["learning.py", "--config", str(CONFIGS / "smoke.yaml"), "--env-steps", "300",
                                      "--out", str(tmp_path / "out")])
    learning.main()
    assert "stopped at update" in capsys.readouterr().out
    assert not (tmp_path / "out" / "evaluation.json").exists()
    assert (tmp_path / "out" / "curve.csv").exists()


def test_learning_with_a_bad_setting_ends_in_one_line(tmp_path, monkeypatch):
    """bench/learning.py: a config that does not exist, or a key that is not one, is a one-line SystemExit."""
    learning = _load_bench_module("learning")
    for argv, expected in ((["--config", str(tmp_path / "none.yaml")], "does not exist"),
                           (["--config", "smoke", "--set", "sac.no_such_key=1"], "sac.no_such_key")):
        monkeypatch.setattr(sys, "argv", ["learning.py", *argv, "--env-steps", "300", "--out", str(tmp_path / "out")])
        with pytest.raises(SystemExit) as exit:
            learning.main()
        message = str(exit.value.code)
        assert message.startswith("bench/learning.py: error:") and expected in message and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_a_stopped_final_evaluation_keeps_the_policies_it_finished(tmp_path, monkeypatch, capsys):
    """bench/learning.py on a finished run: evaluation.json (with the run's header) is rewritten after each policy,
    and the evaluation keeps its progress in the run directory, where `evaluate_policies` finds the policies a
    stopped evaluation finished."""
    from tests.conftest import CONFIGS

    learning = _load_bench_module("learning")
    monkeypatch.setattr(learning, "train", lambda config, logdir, train_steps, force: {"step": train_steps})
    monkeypatch.setattr(learning, "curve_rows", lambda logdir: [])
    monkeypatch.setattr(learning, "plot_runs", lambda runs, path: None)
    calls = []

    class Stopped(Exception):
        pass

    def evaluate_policies(logdir, episodes, policies, progress=None):
        calls.append((logdir, episodes, list(policies), progress))
        for policy in policies:
            if policy == "sac":
                raise Stopped  # the evaluation is stopped during its second policy
            returns = [float(len(policy))] * episodes
            yield policy, {"mean": returns[0], "std": 0.0, "min": returns[0], "max": returns[0], "returns": returns,
                           "step": 4, "episodes": episodes, "seconds": 1.0}

    monkeypatch.setattr(learning, "evaluate_policies", evaluate_policies)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["learning.py", "--config", str(CONFIGS / "smoke.yaml"), "--env-steps", "300",
                                      "--out", str(out), "--eval-policies", "cem", "sac", "random",
                                      "--eval-episodes", "2", "--set", "sac.updates_per_step=3"])
    with pytest.raises(Stopped):
        learning.main()
    run = str(out / "run")
    assert calls == [(run, 2, ["cem", "sac", "random"], os.path.join(run, "final_evaluation.json"))]
    saved = json.loads((out / "evaluation.json").read_text())
    assert saved["evaluation"] == {"cem": {"mean": 3.0, "std": 0.0, "min": 3.0, "max": 3.0, "returns": [3.0, 3.0]}}
    assert saved["eval_episodes"] == 2 and saved["step"] > 0 and saved["set"] == ["sac.updates_per_step=3"]
    assert saved["policy"] == "cem" and saved["env_steps"] == 300
    assert "cem" in capsys.readouterr().out


def _first_import_line(tree, package: str) -> int | None:
    """The line of the first `import package...` / `from package... import` anywhere in the module (functions included)."""
    import ast

    lines = [node.lineno for node in ast.walk(tree)
             if (isinstance(node, ast.Import) and any(alias.name.split(".")[0] == package for alias in node.names))
             or (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == package)]
    return min(lines) if lines else None


def test_bench_and_research_scripts_import_planet_sac_before_tensorflow():
    # planet_sac's import sets TF_ENABLE_ONEDNN_OPTS=1, which TensorFlow reads once when it loads: a script that
    # loads TensorFlow first times convolutions without oneDNN where the build leaves it off (2x slower on AVX2).
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = sorted([*root.glob("bench/*.py"), *root.glob("research/**/*.py")])
    assert len(scripts) > 5
    late = []
    for path in scripts:
        tree = ast.parse(path.read_text(), str(path))
        tensorflow, planet_sac = _first_import_line(tree, "tensorflow"), _first_import_line(tree, "planet_sac")
        if tensorflow is not None and (planet_sac is None or planet_sac > tensorflow):
            late.append(f"{path.relative_to(root)}:{tensorflow}")
    assert not late, f"import planet_sac before tensorflow in {late}"


def test_publish_suite_copies_finished_runs_and_merges_their_scores(tmp_path, capsys):
    """bench/publish_suite.py: a finished run's three files are copied (nothing else of the suite's folder), its
    score record joins the records the published file already holds, its unfinished copy goes, the figure is
    drawn; an unreadable result.json is a counted skip."""
    import gzip

    publish_suite = _load_bench_module("publish_suite")
    src, dest = tmp_path / "out", tmp_path / "published"

    def write_scores(path, records):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(json.dumps(records).encode()))

    def record(seed, ys):
        return {"task": "dmc_a_b", "method": "planet_sac", "seed": seed, "xs": [5000, 10000], "ys": ys}

    run = src / "results" / "dmc_a_b" / "seed1"
    run.mkdir(parents=True)
    (run / "result.json").write_text('{"task": "dmc:a-b", "seed": 1}')
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    (run / "config.yaml").write_text("seed: 1\n")
    (run / "stray.bin").write_bytes(b"x")
    broken = src / "results" / "dmc_a_b" / "seed2"
    broken.mkdir()
    (broken / "result.json").write_text("{")
    (src / "runs" / "dmc_a_b" / "seed1" / "checkpoints").mkdir(parents=True)
    (src / "runs" / "dmc_a_b" / "seed1" / "checkpoints" / "ckpt-1.index").write_bytes(b"c")
    write_scores(src / "scores" / "dmc_vision-planet_sac.json.gz", [record(1, [3.0, 4.0])])
    write_scores(dest / "scores" / "dmc_vision-planet_sac.json.gz", [record(0, [1.0, 2.0]), record(1, [9.0, 9.0])])
    (dest / "unfinished" / "dmc_a_b" / "seed1").mkdir(parents=True)
    (dest / "unfinished" / "dmc_a_b" / "seed1" / "metrics.jsonl").write_text("{}\n")

    assert publish_suite.main([str(src), str(dest)]) == 0
    out = capsys.readouterr().out
    assert "published results/dmc_a_b/seed1" in out and "skipped" in out and "seed2" in out
    copied = sorted(p.relative_to(dest).as_posix() for p in (dest / "results").rglob("*") if p.is_file())
    assert copied == ["results/dmc_a_b/seed1/config.yaml", "results/dmc_a_b/seed1/metrics.jsonl",
                      "results/dmc_a_b/seed1/result.json"]
    assert (dest / "results" / "dmc_a_b" / "seed1" / "metrics.jsonl").read_text() == '{"step": 1}\n'
    with gzip.open(dest / "scores" / "dmc_vision-planet_sac.json.gz", "rt") as file:
        merged = json.load(file)
    assert sorted((r["seed"], r["ys"]) for r in merged) == [(0, [1.0, 2.0]), (1, [3.0, 4.0])]
    assert not (dest / "unfinished" / "dmc_a_b").exists()
    assert (dest / "curves.png").stat().st_size > 0
    assert not list(dest.rglob("ckpt-*"))
    assert publish_suite.main([str(src), str(dest)]) == 0
    assert "0 run(s) new or changed" in capsys.readouterr().out


def test_publish_suite_copies_an_unfinished_runs_whole_records_so_far(tmp_path, capsys):
    """bench/publish_suite.py: a run without result.json gets its metrics.jsonl up to its last whole line and its
    config.yaml in DEST/unfinished/<task>/seed<k>/ with curves.png (never its checkpoints or episodes); a finished
    run's records in runs/ are not copied there; unchanged records are not copied again."""
    publish_suite = _load_bench_module("publish_suite")
    src, dest = tmp_path / "out", tmp_path / "published"
    finished = src / "results" / "dmc_a_b" / "seed1"
    finished.mkdir(parents=True)
    (finished / "result.json").write_text('{"task": "dmc:a-b", "seed": 1}')
    lines = [json.dumps({"step": 25 * k, "phase": "train", "env_steps": 1000 * k, "train/return": float(k)})
             for k in (1, 2, 3)]
    for seed in (1, 2):
        run = src / "runs" / "dmc_a_b" / f"seed{seed}"
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "ckpt-1.index").write_bytes(b"c")
        (run / "train_episodes").mkdir()
        (run / "train_episodes" / "episode.npz").write_bytes(b"e")
        (run / "config.yaml").write_text(f"seed: {seed}\n")
        (run / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 100, "pha')  # a line being written

    assert publish_suite.main([str(src), str(dest)]) == 0
    assert "published unfinished/dmc_a_b/seed2" in capsys.readouterr().out
    copy = dest / "unfinished" / "dmc_a_b" / "seed2"
    assert sorted(p.name for p in copy.iterdir()) == ["config.yaml", "curves.png", "metrics.jsonl"]
    assert (copy / "metrics.jsonl").read_text() == "\n".join(lines) + "\n"
    assert (copy / "config.yaml").read_text() == "seed: 2\n"
    assert (copy / "curves.png").stat().st_size > 0
    assert not (dest / "unfinished" / "dmc_a_b" / "seed1").exists()
    assert not list(dest.rglob("*.npz")) and not list(dest.rglob("ckpt-*"))
    assert publish_suite.main([str(src), str(dest)]) == 0
    assert "0 run(s) new or changed" in capsys.readouterr().out
    with open(src / "runs" / "dmc_a_b" / "seed2" / "metrics.jsonl", "a") as file:
        file.write('se": "test", "env_steps": 4000, "test/return": 7.0}\n')
    assert publish_suite.main([str(src), str(dest)]) == 0
    assert "published unfinished/dmc_a_b/seed2" in capsys.readouterr().out
    assert (copy / "metrics.jsonl").read_text().endswith('"test/return": 7.0}\n')


def test_publish_suite_keeps_longer_unfinished_records_than_a_restarted_run_has(tmp_path, capsys):
    """An unfinished run published at 80k env steps (from a machine that is gone), restarted and at 2k here: its
    published records stay, with a line; once the restarted run passes them (81k) they are replaced."""
    publish_suite = _load_bench_module("publish_suite")
    src, dest = tmp_path / "out", tmp_path / "published"
    run = src / "runs" / "dmc_a_b" / "seed3"
    run.mkdir(parents=True)
    (src / "results").mkdir()  # a suite's --out, no run finished yet
    old = dest / "unfinished" / "dmc_a_b" / "seed3"
    old.mkdir(parents=True)
    longer = json.dumps({"step": 1875, "phase": "train", "env_steps": 80000, "train/return": 5.0}) + "\n"
    # the most env steps of any record count, not the last record's
    (old / "metrics.jsonl").write_text(longer + 'not json\n{"step": 25, "phase": "test", "env_steps": 1000}\n')
    published = (old / "metrics.jsonl").read_text()
    records = [{"step": 25 * k, "phase": "train", "env_steps": 1000 * k, "train/return": float(k)} for k in (1, 2)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert publish_suite.main([str(src), str(dest)]) == 0
    assert "kept unfinished/dmc_a_b/seed3: it reaches 80000 env steps" in capsys.readouterr().out
    assert (old / "metrics.jsonl").read_text() == published
    records.append({"step": 1900, "phase": "train", "env_steps": 81000, "train/return": 6.0})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert publish_suite.main([str(src), str(dest)]) == 0
    assert "published unfinished/dmc_a_b/seed3" in capsys.readouterr().out
    assert (old / "metrics.jsonl").read_text().endswith('"env_steps": 81000, "train/return": 6.0}\n')


def test_the_published_figure_ends_at_the_budget_the_runs_were_asked_for(tmp_path):
    """A run that went a collection past --env-steps (101k of 100k) must not add a bin past the budget."""
    publish_suite = _load_bench_module("publish_suite")
    for seed, target in ((0, 100_000), (1, 50_000)):
        run = tmp_path / "results" / "dmc_a_b" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "result.json").write_text(json.dumps({"env_steps_target": target, "env_steps": target + 1000}))
    assert publish_suite.env_steps_budget(str(tmp_path)) == 100_000
    assert publish_suite.env_steps_budget(str(tmp_path / "none")) is None


def test_suite_table_totals_and_the_mean_over_seeds(tmp_path, capsys):
    """bench/suite_table.py: an uninterrupted run's total is its call's wall-clock + evaluation, a resumed run's
    (whose last call saw only part of it) the sum of its parts, marked *; the summary is mean ± std over seeds."""
    suite_table = _load_bench_module("suite_table")

    def result(seed, mean, seconds):
        return {"score_task": "dmc_a_b", "seed": seed, "headline_policy": "sac",
                "headline": {"mean": mean, "std": 1.0, "episodes": 10},
                "evaluation": {"sac": {"mean": mean, "std": 1.0, "episodes": 10}}, "seconds": seconds}

    whole = {"updates": 600, "acting": 300, "test_phases": 60, "evaluation": 120, "this_call_training": 1200}
    resumed = {"updates": 1200, "acting": 600, "test_phases": 120, "evaluation": 60, "this_call_training": 300}
    for seed, (mean, seconds) in enumerate([(100.0, whole), (300.0, resumed)]):
        folder = tmp_path / "out" / "results" / "dmc_a_b" / f"seed{seed}"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(result(seed, mean, seconds)))
    rows = suite_table.load_results([str(tmp_path / "out")])
    lines = suite_table.run_table(rows).split("\n")
    assert lines[2].endswith("| 22.0 |")  # (1200 + 120) / 60
    assert lines[3].endswith("| 33.0* |")  # (1200 + 600 + 120 + 60) / 60
    assert suite_table.summary_table(rows).split("\n")[-1] == "| out | dmc_a_b | 2 | 200.0 ± 100.0 |"


def test_suite_table_mean_of_tasks_counts_only_seeds_that_finished_every_task(tmp_path):
    """Seeds 0 and 1 finished both tasks (task means 150 and 250), seed 2 only one: the row is 200 ± 50 over 2."""
    suite_table = _load_bench_module("suite_table")
    finished = {(0, "dmc_a_b"): 100.0, (0, "dmc_c_d"): 200.0, (1, "dmc_a_b"): 300.0, (1, "dmc_c_d"): 200.0,
                (2, "dmc_a_b"): 1000.0}
    for (seed, task), mean in finished.items():
        folder = tmp_path / "out" / "results" / task / f"seed{seed}"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({
            "score_task": task, "seed": seed, "headline_policy": "sac", "headline": {"mean": mean, "std": 0.0, "episodes": 10},
            "evaluation": {"sac": {"mean": mean, "std": 0.0, "episodes": 10}}, "seconds": {}}))
    rows = suite_table.load_results([str(tmp_path / "out")])
    assert suite_table.task_means_by_seed(rows) == {"out": {0: 150.0, 1: 250.0}}
    assert suite_table.summary_table(rows).split("\n")[-1] == \
        "| out | mean of tasks (seed 0 150.0, seed 1 250.0) | 2 | 200.0 ± 50.0 |"


@pytest.mark.parametrize("argv, message", [
    (["--size", "tiny", "--peer", sys.executable], "use it with --size full"),
    (["--peer", "/no/such/python"], "--peer /no/such/python: cannot run it"),
    (["--peer", sys.executable], "cannot import mbrl-lib and torch"),
])
def test_a_peer_that_cannot_run_is_refused_before_any_timing(argv, message, capsys, monkeypatch):
    """The peer used to fail with a traceback after all our timings; with --size tiny it timed unlike models."""
    import importlib.util

    import planet_sac.benchmark
    from planet_sac.cli import main

    if "mbrl-lib" in message and importlib.util.find_spec("mbrl"):
        pytest.skip("this Python has mbrl-lib")
    monkeypatch.setattr(planet_sac.benchmark, "run", lambda *args: pytest.fail("timed before checking --peer"))
    monkeypatch.setattr(planet_sac.benchmark, "PEER_SCRIPT", __file__)  # present: the other checks are reached
    assert main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err



def test_suite_table_scores_one_estimator_for_every_score_file(tmp_path):
    """--scores: per task the mean over runs of each run's window mean; the mean over tasks; IQM [interval] over runs.
    Task a: runs 100 and 300, task b: one run of 50; 3 runs, int(3 / 4) = 0 cut, so the IQM is their mean, 150, and
    the bootstrap redraws a's runs only: {100, 100}, {100, 300}, {300, 300} with b's 50 give 83.3, 150, 216.7."""
    suite_table = _load_bench_module("suite_table")
    scores = {"dmc_a": [100.0, 300.0], "dmc_b": [50.0]}
    line = suite_table.estimator_table([("m", scores)], ["dmc_a", "dmc_b"]).split("\n")[2]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:4] == ["m", "200", "50", "125"]  # (200 + 50) / 2
    assert cells[4].startswith("150 [") and cells[5] == "3"
    low, high = (float(x) for x in cells[4][5:-1].split(","))
    assert (low, high) == (83.0, 217.0)


def test_suite_table_counts_runs_at_or_below_planet_and_shows_the_published_rows():
    """A run counts when its score is at or below PlaNet's published 100k mean (CURL's Table 1: cartpole 297, reacher
    20); a task without a published value counts nothing. Cartpole 297 (equal) and reacher 10 count, cartpole 300 and
    the unknown task do not: 2 of the 3 runs with a reference. The published rows follow, means only."""
    suite_table = _load_bench_module("suite_table")
    tasks = ["dmc_cartpole_swingup", "dmc_reacher_easy", "dmc_unknown"]
    scores = {"dmc_cartpole_swingup": [297.0, 300.0], "dmc_reacher_easy": [10.0], "dmc_unknown": [5.0]}
    lines = suite_table.estimator_table([("m", scores)], tasks).split("\n")
    cells = [cell.strip() for cell in lines[2].strip("|").split("|")]
    assert cells[-1] == "2 of 3, cartpole_swingup 1, reacher_easy 1"
    planet = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert planet[:5] == ["PlaNet (CURL's Table 1, 100k)", "297", "20", "", ""]  # no mean: a task has no value
    assert lines[4].startswith("| Dreamer (CURL's Table 1, 100k) | 326 | 314 |") and len(lines) == 5


def test_suite_table_lists_each_run_of_a_score_file_with_its_points_and_score():
    """`--curves`: one row per record sorted by task and seed, the rounded returns with the first and last env
    steps, and the mean of the points inside the window (none for a run that has not reached it)."""
    suite_table = _load_bench_module("suite_table")
    records = [{"task": "dmc_b", "seed": 1, "xs": [10_000, 90_000, 100_000], "ys": [1.4, 100.0, 201.0]},
               {"task": "dmc_b", "seed": 0, "xs": [10_000, 20_000], "ys": [0.0, 7.6]},
               {"task": "dmc_a", "seed": 3, "xs": [95_000, 110_000, 120_000], "ys": [10.0, 20.0, 1000.0]}]
    lines = suite_table.curves_table(records, (90_000, 110_000)).split("\n")
    assert lines[2:] == ["| dmc_a | 3 | 95k-120k: 10 / 20 / 1000 | 15 |",  # 120k is past the window
                         "| dmc_b | 0 | 10k-20k: 0 / 8 |  |",
                         "| dmc_b | 1 | 10k-100k: 1 / 100 / 201 | 150 |"]  # (100 + 201) / 2 = 150.5


def test_lever_table_averages_the_span_before_the_comparison_point(tmp_path):
    """bench/lever_table.py: training returns and test returns in (at - span, at], diagnostics of the training
    records there, the held-out over training reward loss, and a run short of `at` marked with where it is."""
    lever_table = _load_bench_module("lever_table")
    rows = [{"phase": "train", "env_steps": 30_000, "train/return": 1000.0, "sac/alpha": 9.0, "loss/reward": 1.0},
            {"phase": "train", "env_steps": 41_000, "train/return": 10.0, "sac/alpha": 0.1, "loss/reward": 0.5},
            {"phase": "train", "env_steps": 50_000, "train/return": 30.0, "sac/alpha": 0.3, "loss/reward": 1.5},
            {"phase": "test", "env_steps": 40_000, "test/return": 1.0, "test/model/foreground_error": 0.9},
            {"phase": "test", "env_steps": 45_000, "test/return": 7.0, "test/loss/reward": 3.0,
             "test/model/foreground_error": 0.2},
            {"phase": "test", "env_steps": 50_000, "test/return": 9.0, "test/loss/reward": 5.0,
             "test/model/foreground_error": 0.1}]
    for folder, records in (("base", rows), ("lever", rows[:2])):
        run = tmp_path / folder / "runs" / "dmc_a" / "seed0"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"cut')
    row = lever_table.summarise(str(tmp_path / "base" / "runs" / "dmc_a" / "seed0"), 50_000, 10_000)
    assert (row["train"], row["test"], row["sac/alpha"]) == (20.0, 8.0, pytest.approx(0.2))
    assert row["reward_gap"] == pytest.approx(4.0 / 1.0) and row["reached"] == 50_000
    assert row["moving"] == pytest.approx(0.15)  # the test phases at 45k and 50k; 40k is outside the span
    lines = lever_table.table([str(tmp_path / "base"), str(tmp_path / "lever")], 50_000, 10_000).split("\n")
    assert "| a_b" not in lines[2] and "| base |" in lines[2] and "lever (at 41k)" in lines[3]
    assert lines[2].endswith("| 4.00 | 0.150 |") and lines[3].endswith("|  |  |")  # the lever never logged it


def test_lever_table_refuses_a_folder_without_runs_in_one_line(tmp_path, monkeypatch):
    """A mistyped folder used to print an empty table, as if the runs had logged nothing."""
    lever_table = _load_bench_module("lever_table")
    run = tmp_path / "base" / "dmc_a" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"phase": "train", "env_steps": 50000, "train/return": 1.0}\n')
    (tmp_path / "empty").mkdir()
    for folder, expected in (("nope", "nope: no such folder"), ("empty", "holds no run")):
        monkeypatch.setattr(sys, "argv", ["lever_table.py", str(tmp_path / "base"), str(tmp_path / folder)])
        with pytest.raises(SystemExit) as exit:
            lever_table.main()
        assert str(exit.value.code).startswith("bench/lever_table.py: ") and expected in str(exit.value.code)


def test_lever_table_finds_the_final_evaluation_of_a_suite_run_and_of_a_published_one(tmp_path):
    """`eval` from the suite's OUT/results/<task>/seed<k>/result.json for a run under OUT/runs/ (also when OUT itself
    lies under a folder named runs, as ~/runs/levers/<lever>), and from result.json beside a published run's
    metrics.jsonl; only a result of the same env-step target counts."""
    lever_table = _load_bench_module("lever_table")
    record = {"phase": "train", "env_steps": 50_000, "train/return": 1.0}
    runs = {"suite": tmp_path / "runs" / "levers" / "kl08" / "runs" / "dmc_a" / "seed0",
            "published": tmp_path / "published" / "dmc_a" / "seed0"}
    results = {"suite": tmp_path / "runs" / "levers" / "kl08" / "results" / "dmc_a" / "seed0",
               "published": runs["published"]}
    for name, mean in (("suite", 12.5), ("published", 7.0)):
        runs[name].mkdir(parents=True, exist_ok=True)
        results[name].mkdir(parents=True, exist_ok=True)
        (runs[name] / "metrics.jsonl").write_text(json.dumps(record) + "\n")
        (results[name] / "result.json").write_text(json.dumps({"env_steps_target": 50_000, "headline": {"mean": mean}}))
    assert lever_table.summarise(str(runs["suite"]), 50_000, 10_000)["eval"] == 12.5
    assert lever_table.summarise(str(runs["published"]), 50_000, 10_000)["eval"] == 7.0
    assert lever_table.summarise(str(runs["published"]), 100_000, 10_000)["eval"] is None


def test_suite_table_names_score_files_apart(tmp_path, monkeypatch):
    """Two score files of the same method (v1 and v2 runs) get their suite folder; LABEL=FILE names a row; an
    existing file whose name holds '=' stays a file."""
    suite_table = _load_bench_module("suite_table")
    v1 = tmp_path / "dmc_vision" / "scores" / "dmc_vision-planet_sac.json.gz"
    v2 = tmp_path / "dmc_vision_v2" / "scores" / "dmc_vision-planet_sac.json.gz"
    (tmp_path / "a=b.json.gz").write_text("")
    monkeypatch.chdir(tmp_path)
    assert suite_table.label_and_path(f"v2={v2}") == ("v2", str(v2))
    assert suite_table.label_and_path(str(v1)) == (None, str(v1))
    assert suite_table.label_and_path("a=b.json.gz") == (None, "a=b.json.gz")
    assert suite_table.label_and_path("a=c.json.gz") == ("a", "c.json.gz")
    methods = ["planet_sac", "planet_sac", "dreamerv3"]
    assert suite_table.score_file_labels([str(v1), str(v2), "x/dmc_vision-dreamerv3.json.gz"], methods) == [
        "planet_sac [dmc_vision]", "planet_sac [dmc_vision_v2]", "dreamerv3"]
    assert suite_table.score_file_labels([f"v2={v2}", str(v1), "x/d.json.gz"], methods) == [
        "v2", "planet_sac", "dreamerv3"]


def test_suite_table_refuses_a_score_file_that_is_missing_or_not_one(tmp_path, monkeypatch, capsys):
    """An unexpanded glob (no baselines beside the checkout) or a wrong path must not print an empty row: one line
    naming the file, as for a file that is not gzipped JSON."""
    import sys

    suite_table = _load_bench_module("suite_table")
    absent = str(tmp_path / "dmc_vision-*.json.gz")
    monkeypatch.setattr(sys, "argv", ["suite_table.py", "--scores", absent])
    with pytest.raises(SystemExit) as raised:
        suite_table.main()
    assert str(raised.value) == f"bench/suite_table.py: --scores {absent}: no such file"
    broken = tmp_path / "broken.json.gz"
    broken.write_text("not gzip")
    monkeypatch.setattr(sys, "argv", ["suite_table.py", "--scores", f"v1={broken}"])
    with pytest.raises(SystemExit) as raised:
        suite_table.main()
    assert str(raised.value).startswith(f"bench/suite_table.py: {broken} is not a gzipped JSON score file")
    assert capsys.readouterr().out == ""


@pytest.mark.slow
def test_update_speed_times_each_variant_on_a_batch_of_its_own_shape(tmp_path, monkeypatch):
    """A variant that changes data.batch_size or chunk_length is timed on a batch of that shape, not the base's."""
    from tests.conftest import CONFIGS

    update_speed = _load_bench_module("update_speed")
    out = tmp_path / "speed.json"
    monkeypatch.setattr(sys, "argv", [
        "update_speed.py", "--config", str(CONFIGS / "smoke.yaml"), "--reps", "1", "--set", "model.cnn_depth=4",
        "sac.updates_per_step=0",  # the world model alone: the batch shapes are its
        "--variants", "small:data.batch_size=2,data.chunk_length=6", "--json", str(out)])
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # read by oneDNN at TensorFlow's start only: here just recorded
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    update_speed.main()
    written = json.loads(out.read_text())
    # where it was measured, beside the figures
    assert written["machine"]["cores"] == os.cpu_count() and "avx2" in written["machine"]
    assert written["environment"]["ONEDNN_MAX_CPU_ISA"] == "AVX2" and written["environment"]["OMP_NUM_THREADS"] is None
    results = written["results"]
    assert results["float32"]["batch_shape"] == [4, 10]  # configs/smoke.yaml's 4 x 10
    assert results["small/float32"]["batch_shape"] == [2, 6]
    assert all(len(result["times"]) == 1 for result in results.values())


@pytest.mark.slow
@pytest.mark.parametrize("script", ["update_speed", "bench_distribute", "bench_loader", "suite_table", "lever_table"])
def test_a_bench_scripts_help_answers_without_loading_tensorflow(script):
    """`python bench/SCRIPT.py --help` prints its usage and exits 0 before TensorFlow loads (seconds on 2 cores)."""
    import subprocess
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / f"{script}.py"
    probe = ("import runpy, sys\n"
             f"sys.argv = [{str(path)!r}, '--help']\n"
             "try:\n"
             f"    runpy.run_path({str(path)!r}, run_name='__main__')\n"
             "except SystemExit as exit:\n"
             "    print('exit', exit.code, 'tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout and result.stdout.strip().endswith("exit 0 False")
