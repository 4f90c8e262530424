"""`planet-sac bench` at a tiny size: every documented figure is there and plausible (no timing assertion)."""

from __future__ import annotations

import json
import subprocess
import sys

from planet_sac.benchmark import SIZES, planning_flops


def test_bench_writes_every_documented_key(tmp_path):
    out = tmp_path / "bench.json"
    run = subprocess.run([sys.executable, "-m", "planet_sac", "bench", "--size", "tiny", "--reps", "1", "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(out.read_text())
    for key in ("train_update_s", "cem_action_s", "sac_action_ms", "loader_chunks_per_s", "cache_bytes_ratio",
                "cem_gflops_per_s", "matmul_gflops_per_s", "machine"):
        assert key in results, key
    assert set(results["train_update_s"]) == {"4x10"}
    assert set(results["cem_action_s"]) == set(results["cem_action_bfloat16_s"]) == {"1", "2"}
    assert set(results["train_update_mixed_bfloat16_s"]) == {"4x10"}
    assert set(results["train_update_profile_s"]["4x10"]) == {"total", "encoder", "decoder", "rssm", "rest"}
    profile = results["cem_profile_s"]
    assert set(profile) == {"total", "prior_rollout", "reward_head", "rest"} and profile["prior_rollout"] > 0
    assert set(results["cem_action_xla_vs_graph"]) == set(results["sac_action_xla_vs_graph_ms"]) == {"False", "True"}
    assert results["policy_jit_compile"] is False and results["sac_action_ms"] > 0  # the tiny size acts without XLA
    assert set(results["matmul_gflops_per_s"]) == {"float32", "bfloat16"}
    assert {"cpu", "cores", "avx512_bf16", "amx_bf16"} <= results["machine"].keys()
    assert all(value > 0 for value in results["cem_action_s"].values())
    assert 0.9 < results["cache_bytes_ratio"] < 1.1  # images stay uint8 in the cache
    assert "CEM action" in run.stdout and "GFLOP/s" in run.stdout


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


def test_sac_head_lab_trains_a_new_head_on_a_frozen_model(tmp_path):
    """bench/sac_head.py on a smoke run: the update count, the lab's own yardsticks, no drift against itself."""
    from planet_sac.cli import main
    from planet_sac.episodes.storage import list_episodes, load_episode
    from tests.conftest import CONFIGS, ROOT

    logdir = str(tmp_path / "run")
    assert main(["train", "--config", str(CONFIGS / "smoke.yaml"), "--logdir", logdir, "--train-steps", "5", "--quiet"]) == 0
    out = tmp_path / "head.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "sac_head.py"), "--logdir", logdir, "--rounds", "4",
                          "--eval-every", "2", "--episodes", "1", "--set", "sac.updates_per_step=3", "sac.n_step=2",
                          "--drift", logdir, "--guided", "cem.value_weight=0.5,cem.actor_mean=true",
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    agent_steps = sum(len(load_episode(path)["action"]) - 1 for path in list_episodes(f"{logdir}/train_episodes"))
    assert result["sac_updates"] == 12 and abs(result["sac_updates_per_agent_step"] - 12 / agent_steps) < 1e-12
    assert [point["round"] for point in result["curve"]] == [2, 4]
    assert all(point["sac/update_finite"] == 1.0 for point in result["curve"])
    assert set(result["burn_in_gap"]) == {"0", "1", "2", "3", "5"}  # offsets inside a 10-step chunk
    assert result["burn_in_gap"]["0"] > 0
    assert result["drift"]["feature_relative_l2"] == 0.0 and result["drift"]["q_relative_change"] == 0.0
    assert set(result["final"]) == {"sac", "sac_guided_cem", "sac_guided_cem[cem.value_weight=0.5,cem.actor_mean=true]"}
