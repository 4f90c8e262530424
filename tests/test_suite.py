"""`planet-sac suite`: Dreamer-format score records, skip-finished, resume-stopped, restart-when-gone.

Expected values are computed here from the runs' own metrics.jsonl with plain json, or by hand.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planet_sac import suite
from planet_sac.config import ConfigError
from planet_sac.config_loading import load_config
from tests.conftest import old_run_copy, records_without_wall_clock

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
TASK = "gym:Pendulum-v1"
REPEAT = [f"{TASK}=2"]  # not in PlaNet's table: the suite needs it explicitly


def _records(path) -> list[dict]:
    with gzip.open(path, "rt") as file:
        return json.load(file)


def _test_points(metrics: Path, policy: str) -> tuple[list[int], list[float]]:
    """The test phases of a metrics.jsonl, read independently of planet_sac.suite (whole lines: a kill can cut one)."""
    xs, ys = [], []
    for line in metrics.read_text().splitlines():
        if not line.endswith("}"):
            continue
        record = json.loads(line)
        if record["phase"] == "test":
            xs.append(record["env_steps"])
            ys.append(record[f"test/return/{policy}"])
    return xs, ys


# ----------------------------------------------------------------------------- pieces, by hand


def test_task_and_file_names_follow_dreamer():
    assert suite.score_task("dmc:ball_in_cup-catch") == "dmc_ball_in_cup_catch"
    assert suite.score_task("dmc:cartpole-swingup") == "dmc_cartpole_swingup"
    assert suite.score_task("gym:Pendulum-v1") == "gym_Pendulum-v1"
    assert suite.scores_path("OUT", "dmc:cheetah-run", "image") == os.path.join("OUT", "scores", "dmc_vision-planet_sac.json.gz")
    assert suite.scores_path("OUT", "dmc:cheetah-run", "state", "x") == os.path.join("OUT", "scores", "dmc_proprio-x.json.gz")


def test_two_action_repeats_for_one_task_are_refused():
    """The last one was kept without a word (a run at action repeat 5 where 2 was given first)."""
    with pytest.raises(ConfigError, match=r"--action-repeat gives gym:Pendulum-v1 two values \(2 and 5\); give one"):
        suite.action_repeats([TASK], [f"{TASK}=2", f"{TASK}=5"])
    assert suite.action_repeats([TASK], [f"{TASK}=2", f"{TASK}=2"]) == {TASK: 2}  # the same value twice: one value


def test_action_repeat_table_and_explicit_values():
    assert suite.action_repeats(list(suite.PLANET_TASKS)) == {
        "dmc:cartpole-swingup": 8, "dmc:reacher-easy": 4, "dmc:cheetah-run": 4, "dmc:finger-spin": 2,
        "dmc:ball_in_cup-catch": 4, "dmc:walker-walk": 2}
    assert suite.action_repeats(["dmc:cheetah-run", TASK], [f"{TASK}=3", "dmc:cheetah-run=2"]) == {
        "dmc:cheetah-run": 2, TASK: 3}
    with pytest.raises(ConfigError, match=r"gym:Pendulum-v1 has no action repeat.*--action-repeat gym:Pendulum-v1=N"):
        suite.action_repeats([TASK])
    # another DMC task: Dreamer's and DrQ-v2's 2 (their score files' setting), unless given
    assert suite.action_repeats(["dmc:hopper-stand", "dmc:cheetah-run"]) == {"dmc:hopper-stand": 2, "dmc:cheetah-run": 4}
    assert suite.action_repeats(["dmc:hopper-stand"], ["dmc:hopper-stand=4"]) == {"dmc:hopper-stand": 4}
    for bad in ([f"{TASK}=0"], [f"{TASK}=x"], ["2"]):
        with pytest.raises(ConfigError, match="expected TASK=N"):
            suite.action_repeats([TASK], bad)
    with pytest.raises(ConfigError, match="not in --tasks"):
        suite.action_repeats([TASK], [f"{TASK}=2", "dmc:hopper-hop=4"])


def test_train_steps_count_environment_steps_with_action_repeat():
    # cheetah-run at action repeat 4: 250 agent steps = 1000 env steps an episode; 5 seed episodes = 5000 env steps;
    # 100k env steps need 95 more episodes, one every 50 updates: 4750 updates (PlaNet's 100k runs of this project).
    config = load_config(ROOT / "configs" / "cheetah_run_cpu.yaml")
    assert suite.train_steps_for(config, 100_000, seed_episodes=5, seed_agent_steps=5 * 250) == 95 * 50
    # A partial episode's worth rounds up: 100,001 env steps need a 96th episode.
    assert suite.train_steps_for(config, 100_001, 5, 1250) == 96 * 50
    # Two environments: episodes come in pairs, every 2 x 50 updates; 95 episodes -> 48 pairs.
    two = load_config(ROOT / "configs" / "cheetah_run_cpu.yaml", ["env.num_envs=2"])
    assert suite.train_steps_for(two, 100_000, 5, 1250) == 48 * 100
    # Action repeat 8 (cartpole): 125 agent steps an episode, still 1000 env steps.
    eight = load_config(ROOT / "configs" / "cheetah_run_cpu.yaml", ["env.action_repeat=8"])
    assert suite.train_steps_for(eight, 100_000, 5, 5 * 125) == 95 * 50
    assert suite.train_steps_for(config, 3000, 5, 1250) == 0  # the seed episodes already reach it


def test_a_resumed_run_aims_at_the_updates_of_an_uninterrupted_one(tmp_path, monkeypatch):
    """Episodes of varied length (terminations): the update count comes from the seed episodes (the oldest files),
    not from every episode on disk, so a restart after longer collections does not end the run early."""
    import planet_sac.training.trainer as trainer_module
    from planet_sac.episodes.storage import episode_filename

    aimed = []

    class Stop(Exception):
        pass

    class FakeTrainer:
        def __init__(self, config, run_dir, progress):
            self.train_dir = os.path.join(run_dir, "train_episodes")
            self.start_message = "fake"

        def collect_seed_episodes(self):
            pass

        def run(self, train_steps):
            aimed.append(train_steps)
            raise Stop

        def close(self):
            pass

    monkeypatch.setattr(trainer_module, "Trainer", FakeTrainer)
    spec = suite.RunSpec("gym:Pendulum-v1", 0, 2, str(tmp_path))
    folder = os.path.join(spec.run_dir, "train_episodes")
    os.makedirs(folder)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for index, length in enumerate([20, 20, 50, 50, 50, 50, 50]):  # smoke: 2 seed episodes, then 5 collections
        open(os.path.join(folder, episode_filename(length, now=start + dt.timedelta(seconds=index))), "w").close()
    with pytest.raises(ConfigError, match=r"--env-steps 80: the 2 seed episodes of gym:Pendulum-v1 alone hold 80 env "
                                          r"steps, so nothing would be trained"):
        suite.run_one(spec, SMOKE, env_steps=80, progress=False)  # used to crash after evaluating, reading no metrics
    assert aimed == []
    with pytest.raises(Stop):
        suite.run_one(spec, SMOKE, env_steps=1000, progress=False)
    config = load_config(SMOKE)
    # By hand: 2 x 20 agent steps x repeat 2 = 80 env steps; 920 more at 40 env steps an episode = 23 episodes.
    assert config.env.action_repeat == 2 and config.data.seed_episodes == 2
    assert aimed == [23 * config.schedule.collect_every]


def test_read_curve_takes_test_phases_of_the_headline_policy(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    lines = [
        {"step": 5, "phase": "train", "env_steps": 200, "train/return": -1.0},
        {"step": 10, "phase": "test", "env_steps": 300, "test/return": 1.0, "test/return/sac": 2.0, "test/return/cem": 1.0},
        {"step": 20, "phase": "test", "env_steps": 400, "test/return": 3.0},  # no per-policy key: test/return
        {"step": 20, "phase": "test", "env_steps": 400, "test/return": 4.0, "test/return/sac": 5.0},  # repeated: last wins
    ]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"step": 30, "phase": "te')
    assert suite.read_curve(str(metrics), "sac") == ([300, 400], [2.0, 5.0])
    assert suite.read_curve(str(metrics), "cem") == ([300, 400], [1.0, 4.0])


def test_wall_clock_sums_the_trainers_time_metrics(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    lines = [
        {"step": 5, "phase": "train", "time/update_seconds": 0.5, "time/collect_seconds": 0.0, "time": 100.0},
        {"step": 10, "phase": "train", "time/update_seconds": 0.25, "time/collect_seconds": 3.0, "time": 110.0},
        {"step": 10, "phase": "train", "model/open_loop_mse": 1.0, "time": 111.0},  # no timing: not a window
        {"step": 10, "phase": "test", "time/test_seconds": 7.0, "time": 120.0},
        {"step": 12, "phase": "train", "time/update_seconds": 1.0, "time/collect_seconds": 0.0, "time": 130.5},
    ]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    clock = suite.wall_clock(str(metrics))
    assert clock == {"updates": 5 * 0.5 + 5 * 0.25 + 2 * 1.0, "acting": 3.0, "test_phases": 7.0, "span": 30.5}


def test_add_score_replaces_the_same_task_and_seed(tmp_path):
    path = str(tmp_path / "scores" / "dmc_vision-planet_sac.json.gz")
    first = {"task": "dmc_cheetah_run", "method": "planet_sac", "seed": 1, "xs": [1000], "ys": [1.5]}
    other = {"task": "dmc_cartpole_swingup", "method": "planet_sac", "seed": 0, "xs": [1000], "ys": [2.5]}
    again = {"task": "dmc_cheetah_run", "method": "planet_sac", "seed": 1, "xs": [1000, 2000], "ys": [1.5, 9.0]}
    suite.add_score(path, first)
    suite.add_score(path, other)
    suite.add_score(path, again)
    assert _records(path) == [other, again]
    assert os.listdir(os.path.dirname(path)) == ["dmc_vision-planet_sac.json.gz"]  # no temporary file left


def test_a_broken_score_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "x.json.gz"
    path.write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match="is not a gzipped JSON score file"):
        suite.add_score(str(path), {"task": "t", "method": "m", "seed": 0, "xs": [], "ys": []})
    broken = gzip.compress(b'{"task": 1}')
    path.write_bytes(broken)
    with pytest.raises(ConfigError, match="Dreamer's score format"):
        suite.add_score(str(path), {"task": "t", "method": "m", "seed": 0, "xs": [], "ys": []})
    assert path.read_bytes() == broken  # never overwritten


def test_bad_suite_arguments_fail_before_any_run(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ConfigError, match="has no action repeat"):
        suite.run_suite(SMOKE, [TASK], [0], 300, out)
    with pytest.raises(ConfigError, match="the suite sets"):
        suite.run_suite(SMOKE, [TASK], [0], 300, out, overrides=["seed=3"], explicit_repeats=REPEAT)
    with pytest.raises(ConfigError, match="unknown config key"):
        suite.run_suite(SMOKE, [TASK], [0], 300, out, overrides=["data.batchsize=3"], explicit_repeats=REPEAT)
    with pytest.raises(ConfigError, match="must be >= 1"):
        suite.run_suite(SMOKE, [TASK], [0], 0, out, explicit_repeats=REPEAT)
    with pytest.raises(ConfigError, match="data.seed_episodes=0"):
        suite.run_suite(SMOKE, [TASK], [0], 300, out, overrides=["data.seed_episodes=0"], explicit_repeats=REPEAT)
    with pytest.raises(ConfigError, match="schedule.collect=false"):
        suite.run_suite(SMOKE, [TASK], [0], 300, out, overrides=["schedule.collect=false"], explicit_repeats=REPEAT)
    with pytest.raises(ConfigError, match=r"schedule.test_episodes=0: a score record is the run's test phases"):
        suite.run_suite(SMOKE, [TASK], [0], 300, out, overrides=["schedule.test_episodes=0"], explicit_repeats=REPEAT)
    with pytest.raises(ConfigError, match=r"--seeds 0 2147483648: seeds must be in \[0, 2147483647\]"):
        suite.run_suite(SMOKE, [TASK], [0, 2**31], 300, out, explicit_repeats=REPEAT)
    assert not os.path.exists(out)


# ----------------------------------------------------------------------------- a tiny suite


@pytest.mark.slow
@pytest.mark.e2e
def test_tiny_suite_resumes_a_killed_run_records_skips_finished_and_restarts_a_vanished_run(tmp_path, monkeypatch):
    """One tiny suite of two seeds through every state a run can be in when the suite starts:

    `planet-sac suite` (a process of its own) finishes seed 0 and is killed (SIGKILL) during seed 1, after its first
    checkpoint; the same suite then skips seed 0 and resumes seed 1 from that checkpoint (no update repeated); both
    give Dreamer-format score records, results folders and result.json; run again, it skips both and rewrites
    nothing; a run whose directory is gone and that never finished starts again from scratch, and this never-stopped
    run of seed 1 gives the score record and metrics of the killed and resumed one (exact resume, issue #44)."""
    out = tmp_path / "out"
    killed = out / "runs" / "gym_Pendulum-v1" / "seed1"
    # 2 seed episodes of 50 agent steps x 2 = 200 env steps, then an episode every 10 updates: 400 env steps
    # after 20 updates, with test phases (schedule.train_phase_steps 10) at 300 and 400 env steps.
    command = [sys.executable, "-m", "planet_sac", "suite", "--config", SMOKE, "--tasks", TASK, "--seeds", "0", "1",
               "--env-steps", "400", "--out", str(out), "--action-repeat", REPEAT[0], "--eval-episodes", "2",
               "--compare-episodes", "1", "--quiet"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 400
        while not (killed / "checkpoints" / "ckpt-10.index").exists():
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "no checkpoint of seed 1 at step 10 within 400 s"
            time.sleep(0.05)
        # No chance to checkpoint or clean up; from here seed 1 still has its test phase at step 10, 10 updates,
        # a collection and its evaluation to run.
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    killed_at = time.time()
    checkpoints = sorted(int(path.name[5:-6]) for path in (killed / "checkpoints").glob("ckpt-*.index"))
    assert checkpoints[-1] < 20, "seed 1 finished its updates before it was killed"
    assert not (out / "results" / "gym_Pendulum-v1" / "seed1" / "result.json").exists()
    assert (out / "results" / "gym_Pendulum-v1" / "seed0" / "result.json").exists()

    score_locks: list = []  # the lock each score-file write holds: the one every process sharing OUT takes
    add_score = suite.add_score
    monkeypatch.setattr(suite, "add_score", lambda path, record, lock_path=None: (
        score_locks.append(lock_path), add_score(path, record, lock_path=lock_path))[1])
    summaries = suite.run_suite(SMOKE, [TASK], [0, 1], 400, str(out), explicit_repeats=REPEAT,
                                eval_episodes=2, compare_episodes=1, progress=False)
    assert [(s["seed"], s["status"]) for s in summaries] == [(0, "skipped"), (1, "resumed")]
    assert score_locks == [os.path.join(str(out), "runs", "scores.lock")]
    records = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines() if line.endswith("}")]
    after = [record for record in records if record["time"] > killed_at]
    # The second session continued from the checkpoint: no update up to it was repeated (only the test phase
    # at the checkpoint's step, which the kill interrupted, ran then).
    assert after and min(record["step"] for record in after if record["phase"] == "train") > checkpoints[-1]
    assert all(record["step"] >= checkpoints[-1] for record in after)
    assert any(record["time"] < killed_at for record in records)

    scores = out / "scores" / "gym_proprio-planet_sac.json.gz"
    expected = []
    for seed in (0, 1):
        metrics = out / "runs" / "gym_Pendulum-v1" / f"seed{seed}" / "metrics.jsonl"
        xs, ys = _test_points(metrics, "cem")  # smoke.yaml's policy.test
        assert xs == [300, 400]  # a test phase every 10 updates = every episode
        expected.append({"task": "gym_Pendulum-v1", "method": "planet_sac", "seed": seed, "xs": xs, "ys": ys})
        results = out / "results" / "gym_Pendulum-v1" / f"seed{seed}"
        assert (results / "metrics.jsonl").read_text() == metrics.read_text()
        assert load_config(results / "config.yaml").seed == seed
        assert load_config(results / "config.yaml").env.seed == seed
        result = json.loads((results / "result.json").read_text())
        assert (result["env_steps"], result["train_steps"], result["headline_policy"]) == (400, 20, "cem")
        assert {name: value["episodes"] for name, value in result["evaluation"].items()} == {
            "cem": 2, "random": 1, "sac": 1, "sac_guided_cem": 1}
        cem = result["evaluation"]["cem"]
        assert len(cem["returns"]) == 2 and result["headline"]["mean"] == pytest.approx(sum(cem["returns"]) / 2)
        assert all(value["seconds"] > 0 for value in result["evaluation"].values())
        assert set(result["seconds"]) >= {"updates", "acting", "test_phases", "evaluation", "span"}
        assert result["seconds"]["updates"] > 0 and result["seconds"]["test_phases"] > 0
        # the machine the seconds were measured on; a state task always runs in float32 (nothing to gain in bfloat16)
        assert result["machine"]["cores"] == os.cpu_count() and result["machine"]["precision"] == "float32"
        assert isinstance(result["machine"]["avx2"], bool) and result["machine"]["tensorflow"]
    assert _records(scores) == expected
    # The two seeds are different runs.
    assert expected[0]["ys"] != expected[1]["ys"]

    # Finished runs are skipped: nothing is trained, evaluated or rewritten.
    before = {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()}
    summaries = suite.run_suite(SMOKE, [TASK], [0, 1], 400, str(out), explicit_repeats=REPEAT,
                                eval_episodes=2, compare_episodes=1, progress=False)
    assert [s["status"] for s in summaries] == ["skipped", "skipped"]
    assert {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()} == before

    # A run whose directory is gone and that never finished (a new machine) starts again from scratch.
    resumed = records_without_wall_clock(killed)
    resumed_returns = json.loads((out / "results" / "gym_Pendulum-v1" / "seed1" / "result.json").read_text())
    shutil.rmtree(out / "runs" / "gym_Pendulum-v1" / "seed1")
    (out / "results" / "gym_Pendulum-v1" / "seed1" / "result.json").unlink()
    summaries = suite.run_suite(SMOKE, [TASK], [0, 1], 400, str(out), explicit_repeats=REPEAT,
                                eval_episodes=1, compare_episodes=0, progress=False)
    assert [s["status"] for s in summaries] == ["skipped", "started"]
    metrics = out / "runs" / "gym_Pendulum-v1" / "seed1" / "metrics.jsonl"
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert steps[0] <= 10 and steps == sorted(steps)  # one run from step 0, not a continuation
    records = _records(scores)
    assert [(r["task"], r["seed"]) for r in records] == [("gym_Pendulum-v1", 0), ("gym_Pendulum-v1", 1)]  # replaced
    assert records[0] == expected[0]
    assert records[1] == expected[1]  # the never-stopped run scores as the killed and resumed one
    assert records_without_wall_clock(killed) == resumed
    result = json.loads((out / "results" / "gym_Pendulum-v1" / "seed1" / "result.json").read_text())
    assert set(result["evaluation"]) == {"cem"}
    assert result["evaluation"]["cem"]["returns"] == resumed_returns["evaluation"]["cem"]["returns"][:1]


@pytest.mark.slow
def test_a_suite_in_this_process_publishes_its_run_and_then_skips_it(tmp_path, monkeypatch):
    """The suite's path of one run, in this process (the killed-run scenario above is `e2e`): one seed trains to its
    env steps, is evaluated, and publishes its Dreamer-format score record (the write holding OUT/runs/scores.lock),
    its results folder and result.json; run again, it is skipped and nothing is rewritten."""
    out = tmp_path / "out"
    score_locks: list = []
    add_score = suite.add_score
    monkeypatch.setattr(suite, "add_score", lambda path, record, lock_path=None: (
        score_locks.append(lock_path), add_score(path, record, lock_path=lock_path))[1])
    # 2 seed episodes of 50 agent steps x 2 = 200 env steps, 10 updates, one more episode: 300 env steps
    no_head = ["sac.updates_per_step=0"]  # CEM collects and is evaluated: the head is never read
    summaries = suite.run_suite(SMOKE, [TASK], [0], 300, str(out), no_head, explicit_repeats=REPEAT,
                                eval_episodes=2, compare_episodes=0, progress=False)
    assert [(s["seed"], s["status"]) for s in summaries] == [(0, "started")]
    assert score_locks == [os.path.join(str(out), "runs", "scores.lock")]
    metrics = out / "runs" / "gym_Pendulum-v1" / "seed0" / "metrics.jsonl"
    xs, ys = _test_points(metrics, "cem")
    assert xs == [300]
    assert _records(out / "scores" / "gym_proprio-planet_sac.json.gz") == [
        {"task": "gym_Pendulum-v1", "method": "planet_sac", "seed": 0, "xs": xs, "ys": ys}]
    results = out / "results" / "gym_Pendulum-v1" / "seed0"
    assert (results / "metrics.jsonl").read_text() == metrics.read_text()
    result = json.loads((results / "result.json").read_text())
    assert (result["env_steps"], result["train_steps"], result["headline_policy"]) == (300, 10, "cem")
    returns = result["evaluation"]["cem"]["returns"]
    assert list(result["evaluation"]) == ["cem"] and len(returns) == 2
    assert result["headline"]["mean"] == pytest.approx(sum(returns) / 2)
    progress = json.loads((out / "runs" / "gym_Pendulum-v1" / "seed0" / suite.EVALUATION_PROGRESS).read_text())
    assert progress["policies"]["cem"]["returns"] == returns  # kept in the run directory, policy by policy

    before = {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()}
    summaries = suite.run_suite(SMOKE, [TASK], [0], 300, str(out), no_head, explicit_repeats=REPEAT,
                                eval_episodes=2, compare_episodes=0, progress=False)
    assert [s["status"] for s in summaries] == ["skipped"]
    assert {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()} == before

    # A score file deleted (or replaced) loses no finished run: its record comes back from results/.
    scores = out / "scores" / "gym_proprio-planet_sac.json.gz"
    scores.unlink()
    summaries = suite.run_suite(SMOKE, [TASK], [0], 300, str(out), no_head, explicit_repeats=REPEAT,
                                eval_episodes=2, compare_episodes=0, progress=False)
    assert [s["status"] for s in summaries] == ["skipped"]
    assert _records(scores) == [{"task": "gym_Pendulum-v1", "method": "planet_sac", "seed": 0, "xs": xs, "ys": ys}]
    # A damaged score file is refused before the next seed trains, not after its evaluation.
    scores.write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match="gym_proprio-planet_sac.json.gz is not a gzipped JSON score file"):
        suite.run_suite(SMOKE, [TASK], [1, 0], 300, str(out), no_head, explicit_repeats=REPEAT, progress=False)
    assert not (out / "runs" / "gym_Pendulum-v1" / "seed1").exists()


@pytest.mark.parametrize("folder", ["scores", "results/gym_Pendulum-v1", "runs/gym_Pendulum-v1"])
def test_a_file_where_the_suite_keeps_a_folder_is_refused_before_any_run(folder, tmp_path):
    """`scores` as a file failed with FileExistsError after a run had trained and been evaluated."""
    out = tmp_path / "out"
    (out / folder).parent.mkdir(parents=True, exist_ok=True)
    (out / folder).write_text("in the way")
    before = sorted(str(path) for path in out.rglob("*"))
    with pytest.raises(ConfigError, match=re.escape(f"{out / folder} is a file where the suite keeps a folder")):
        suite.run_suite(SMOKE, [TASK], [0], 300, str(out), explicit_repeats=REPEAT, progress=False)
    assert sorted(str(path) for path in out.rglob("*")) == before


@pytest.mark.slow
def test_rendering_cost_of_an_image_task_is_measured():
    config = load_config(ROOT / "configs" / "cheetah_run_cpu.yaml", ["env.task=dmc:cartpole-swingup"])
    per_frame = suite.render_seconds_per_frame(config, frames=3)
    assert 0 < per_frame < 10


def test_cli_suite_errors_are_one_line(tmp_path, capsys):
    from planet_sac.cli import main

    out = str(tmp_path / "out")
    assert main(["suite", "--config", SMOKE, "--tasks", TASK, "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("planet-sac suite: error: gym:Pendulum-v1 has no action repeat") and "\n" not in err
    assert main(["suite", "--config", SMOKE, "--tasks", TASK, "--out", out, "--action-repeat", f"{TASK}=2",
                 "--set", "env.seed=1"]) == 2
    assert "the suite sets" in capsys.readouterr().err
    assert not os.path.exists(out)


def _finished_run(out: Path, seed: int, overrides: list[str], env_steps: int = 400) -> Path:
    """A finished run's results folder as the suite leaves it (config.yaml and result.json), without training."""
    from planet_sac.config_loading import save_config

    results = out / "results" / "gym_Pendulum-v1" / f"seed{seed}"
    results.mkdir(parents=True)
    save_config(load_config(SMOKE, [*overrides, f"env.task={TASK}", "env.action_repeat=2", f"seed={seed}",
                                    f"env.seed={seed}"]), str(results / "config.yaml"))
    (results / "result.json").write_text(json.dumps({"env_steps_target": env_steps}))
    return results


def test_a_finished_run_of_another_config_is_refused_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    _finished_run(out, 0, ["data.batch_size=8"])
    before = sorted(path.name for path in out.rglob("*"))
    with pytest.raises(ConfigError, match=r"seed0 holds a finished run of another config \(changed: data.batch_size"):
        suite.run_suite(SMOKE, [TASK], [1, 0], 400, str(out), explicit_repeats=REPEAT, progress=False)
    assert sorted(path.name for path in out.rglob("*")) == before  # seed 1 (listed first) did not start
    # The same config is skipped as finished (nothing trained: seed 0 only).
    summaries = suite.run_suite(SMOKE, [TASK], [0], 400, str(out), explicit_repeats=REPEAT, progress=False,
                                overrides=["data.batch_size=8"])
    assert [s["status"] for s in summaries] == ["skipped"]


@pytest.mark.parametrize("method", ["x/../../escaped", "../escaped", "a/b", "", ".hidden", "two words", "planet-sac"])
def test_a_method_that_is_not_a_plain_name_is_refused_before_anything_is_written(method, tmp_path, monkeypatch):
    """The method names the score file (`scores/<benchmark>-<method>.json.gz`): `x/../../escaped` wrote it
    outside OUT."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="a method name is letters, digits"):
        suite.run_suite(SMOKE, [TASK], [0], 400, str(tmp_path / "out"), explicit_repeats=REPEAT, method=method)
    assert os.listdir(tmp_path) == []


def test_plain_method_names_pass():
    for method in ("planet_sac", "dreamerv3", "v4.1", "planet_sac+guided", "SAC"):
        suite.check_method(method)


def test_a_finished_run_of_another_method_is_refused_before_anything_runs(tmp_path):
    """Runs are not kept apart by method: `--method b` on an OUT whose runs `a` finished skipped them, and b's
    score file never got their records."""
    out = tmp_path / "out"
    results = _finished_run(out, 0, [])
    (results / "result.json").write_text(json.dumps({"env_steps_target": 400, "method": "planet_sac"}))
    before = sorted(path.name for path in out.rglob("*"))
    with pytest.raises(ConfigError, match="holds a finished run of method 'planet_sac', not --method 'other'"):
        suite.run_suite(SMOKE, [TASK], [1, 0], 400, str(out), explicit_repeats=REPEAT, method="other", progress=False)
    assert sorted(path.name for path in out.rglob("*")) == before
    summaries = suite.run_suite(SMOKE, [TASK], [0], 400, str(out), explicit_repeats=REPEAT, progress=False)
    assert [s["status"] for s in summaries] == ["skipped"]


@pytest.mark.parametrize("task, message", [
    ("gym:NoSuchTask-v0", "unknown gymnasium id 'NoSuchTask-v0'"),
    ("gym:no_such_module:Task-v0", "no module named 'no_such_module'"),
    pytest.param("dmc:cartpole-fly", "unknown dm_control task 'dmc:cartpole-fly'; use 'dmc:<domain>-<task>' with "
                 "one of: cartpole-balance", marks=pytest.mark.skipif(
                     __import__("importlib").util.find_spec("dm_control") is None, reason="needs planet-sac[dmc]")),
    ("atari:Pong", "bad task prefix 'atari'"),
])
def test_an_unknown_task_anywhere_in_the_list_is_refused_before_the_first_run(task, message, tmp_path):
    """It was found only at its turn, after the runs before it, leaving a claim file behind."""
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=re.escape(message)):
        suite.run_suite(SMOKE, [TASK, task], [0], 400, str(out), explicit_repeats=[*REPEAT, f"{task}=2"],
                        progress=False)
    assert not out.exists()


def test_a_stopped_run_of_another_config_is_refused_before_the_first_run_starts(tmp_path):
    from planet_sac.config_loading import save_config

    out = tmp_path / "out"
    run = out / "runs" / "gym_Pendulum-v1" / "seed1"
    run.mkdir(parents=True)
    save_config(load_config(SMOKE, [f"env.task={TASK}", "env.action_repeat=2", "seed=1", "env.seed=1",
                                    "model.deter_size=8"]), str(run / "config.yaml"))
    with pytest.raises(ConfigError, match=r"seed1 was started with another config \(changed: model.deter_size"):
        suite.run_suite(SMOKE, [TASK], [0, 1], 400, str(out), explicit_repeats=REPEAT, progress=False)
    assert not (out / "runs" / "gym_Pendulum-v1" / "seed0").exists()  # seed 0 comes first and did not start


def test_several_action_repeats_follow_one_flag(tmp_path, monkeypatch):
    """`--action-repeat A=2 B=4`, as `--tasks A B`; it used to be refused as unrecognized arguments."""
    from planet_sac.cli import main

    seen = {}
    monkeypatch.setattr(suite, "run_suite", lambda *args, **kwargs: seen.update(kwargs) or [])
    assert main(["suite", "--config", SMOKE, "--tasks", "gym:Pendulum-v1", "dmc:hopper-hop", "--seeds", "0",
                 "--env-steps", "1000", "--out", str(tmp_path / "out"), "--action-repeat", "gym:Pendulum-v1=2",
                 "dmc:hopper-hop=4", "--action-repeat", "gym:Other-v0=3"]) == 0
    assert seen["explicit_repeats"] == ["gym:Pendulum-v1=2", "dmc:hopper-hop=4", "gym:Other-v0=3"]


@pytest.mark.slow
@pytest.mark.e2e
def test_the_final_evaluation_meets_the_episodes_evaluate_does(tmp_path):
    """Episode k of every policy is seeded with seed + k, as `planet-sac evaluate --seed`: the suite's published
    comparisons start where an evaluation of the same seed does (it used to seed only the first reset)."""
    from planet_sac.acting.evaluation import evaluate

    run = tmp_path / "run"
    old_run_copy(run)
    results = suite.final_evaluation(str(run), "random", seed=5, episodes=3, compare_episodes=0)
    assert list(results) == ["random"]
    assert results["random"]["returns"] == evaluate(str(run), 3, "random", seed=5)["returns"]


@pytest.mark.slow
@pytest.mark.e2e
def test_a_stopped_final_evaluation_goes_on_with_the_policies_it_had_not_finished(tmp_path, monkeypatch):
    """The final evaluation keeps each finished policy in its progress file; stopped during its third policy and
    called again, it evaluates only the last two, and every policy's returns equal those of an evaluation never
    stopped, and those `planet-sac evaluate` gives for that policy alone."""
    import planet_sac.acting.actor as actor_module
    from planet_sac.acting.evaluation import evaluate

    run = tmp_path / "run"
    old_run_copy(run)
    never_stopped = suite.final_evaluation(str(run), "sac", seed=5, episodes=2, compare_episodes=1)
    assert list(never_stopped) == ["sac", "random", "cem", "sac_guided_cem"]
    assert never_stopped["cem"]["returns"] == evaluate(str(run), 1, "cem", seed=5)["returns"]

    played = []
    original = actor_module.Actor.run

    def run_or_stop(self, count, *args, **kwargs):
        played.append(count)
        if len(played) == 4:  # two episodes of sac, one of random, then cem's
            raise KeyboardInterrupt
        return original(self, count, *args, **kwargs)

    monkeypatch.setattr(actor_module.Actor, "run", run_or_stop)
    progress = str(tmp_path / "progress.json")
    with pytest.raises(KeyboardInterrupt):
        suite.final_evaluation(str(run), "sac", seed=5, episodes=2, compare_episodes=1, progress=progress)
    saved = json.loads(open(progress).read())
    assert list(saved["policies"]) == ["sac", "random"]
    assert (saved["logdir"], saved["checkpoint_step"], saved["seed"], saved["overrides"]) == (str(run), 10, 5, [])
    resumed = suite.final_evaluation(str(run), "sac", seed=5, episodes=2, compare_episodes=1, progress=progress)
    assert len(played) == 4 + 2  # cem (again: it had not finished) and sac_guided_cem
    assert {policy: result["returns"] for policy, result in resumed.items()} == \
        {policy: result["returns"] for policy, result in never_stopped.items()}


def test_a_progress_file_gives_only_the_results_of_the_same_evaluation(tmp_path, caplog):
    """`kept_results`: the same logdir, checkpoint, seed and overrides, and per policy the same episodes; a file
    cut short or not of this form is evaluated anew with a warning."""
    from planet_sac.acting.evaluation import kept_results

    identity = {"logdir": "run", "checkpoint_step": 10, "seed": 5, "overrides": ["env.time_limit=10"]}
    results = {"sac": {"episodes": 2, "returns": [1.0, 2.0]}, "cem": {"episodes": 1, "returns": [3.0]}}
    progress = tmp_path / "progress.json"
    progress.write_text(json.dumps({**identity, "episodes": {"sac": 2, "cem": 1}, "policies": results}))
    assert kept_results(str(progress), identity, {"sac": 2, "cem": 1, "random": 1}) == results
    assert kept_results(str(progress), identity, {"sac": 2, "cem": 5}) == {"sac": results["sac"]}  # cem: 1 of 5
    assert kept_results(str(progress), identity, {"cem": 1}) == {"cem": results["cem"]}
    for key, other in (("logdir", "run2"), ("checkpoint_step", 9), ("seed", 6), ("overrides", [])):
        assert kept_results(str(progress), {**identity, key: other}, {"sac": 2, "cem": 1}) == {}, key
    assert kept_results(str(tmp_path / "none.json"), identity, {"sac": 2}) == {}
    assert kept_results(None, identity, {"sac": 2}) == {}
    for damaged in ('{"logdir": ', '["a list"]', json.dumps({**identity, "policies": 5})):
        progress.write_text(damaged)
        caplog.clear()
        assert kept_results(str(progress), identity, {"sac": 2}) == {}
        assert "not read" in caplog.text and "evaluating again" in caplog.text
