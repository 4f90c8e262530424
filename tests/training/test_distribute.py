"""optim.strategy: data-parallel updates under MirroredStrategy and MultiWorkerMirroredStrategy.

Logical CPU devices and a worker's cluster must be configured before TensorFlow starts, so the
scenarios run in subprocesses (tests/distributed_worker.py) and this process only compares.
The reference is always the default strategy on one device: the same code path without
replication, whose own correctness tests/training/test_learner.py checks against a numpy reference.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from planet_sac.cli import main
from planet_sac.config import ConfigError
from planet_sac.config_loading import apply_overrides, load_config
from planet_sac.training import distribute
from tests.conftest import CONFIGS, ROOT, made_once_per_session
from tests.distributed_worker import RESET_AFTER, UPDATES

SMOKE = str(CONFIGS / "smoke.yaml")


def run_scenario(*args: str, env: dict | None = None) -> subprocess.Popen:
    """Starts `python -m tests.distributed_worker *args` (TF_CONFIG only if `env` sets it)."""
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    environment.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "tests.distributed_worker", *args], cwd=ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen, timeout: float = 300) -> None:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-3000:]


def assert_close(expected: dict, actual: dict, rtol: float = 1e-4) -> None:
    """allclose per variable, rtol 1e-4, with an absolute floor of 1e-5 of the variable's largest entry.

    The floor only covers entries near zero (Adam's first moments of tiny gradients), where
    summing the batch in two halves changes the last bits; it scales with each variable.
    """
    assert expected.keys() == actual.keys()
    for name in expected:
        scale = float(np.max(np.abs(expected[name]))) if expected[name].size else 0.0
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=1e-5 * scale, err_msg=name)


def prefixed(results, prefix: str) -> dict:
    return {key[len(prefix):]: results[key] for key in results.files if key.startswith(prefix)}


def changed(before: dict, after: dict) -> set[str]:
    return {name for name in before if not np.array_equal(before[name], after[name])}


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """The `mirrored` scenario's results, run once per test session (conftest.made_once_per_session): the tests of
    MirroredStrategy read them, and the multi-worker test takes its one-device reference from them."""
    made = made_once_per_session(tmp_path_factory, "distribute-mirrored",
                                 lambda directory: finish(run_scenario("mirrored", str(directory / "results.npz"))))
    return np.load(made / "results.npz")


@pytest.mark.slow
@pytest.mark.e2e
def test_two_replicas_make_the_update_of_one_device(mirrored):
    """World model, its Adam slots, the SAC head (actor, critics, targets, alpha, their slots), counters and rng."""
    assert int(mirrored["replicas"]) == 2
    init, one, two = (prefixed(mirrored, f"{label}/") for label in ("init", "one", "two"))
    metrics_one, metrics_two = ({key: value for key, value in run.items() if key.startswith("metric")} for run in (one, two))
    one, two = ({key: value for key, value in run.items() if not key.startswith("metric")} for run in (one, two))
    assert_close(one, two)
    assert_close(metrics_one, metrics_two)  # losses are means over the global batch, not sums over replicas
    moved = changed(init, one)
    for prefix in ("world_model/", "optimizer/world_model/m/", "optimizer/world_model/v/", "sac/actor/", "sac/critic1/",
                   "sac/target_critic1/", "sac/log_alpha", "optimizer/sac_critic/m/", "learner/rng_state"):
        assert any(name.startswith(prefix) for name in moved), f"nothing under {prefix} changed: the test would prove nothing"
    assert float(metrics_one["metric1/train/update_finite"]) == 1.0 and float(metrics_one["metric1/sac/update_finite"]) == 1.0
    assert bool(mirrored["replicas_agree"])  # every replica holds the same values, bit for bit
    # the head was reset after update RESET_AFTER (under the strategy too): its optimizer counts the steps since
    assert int(mirrored["sac_steps_since_reset"]) == UPDATES - RESET_AFTER == 1


@pytest.mark.slow
@pytest.mark.e2e
def test_a_batch_that_does_not_split_over_the_replicas_is_a_clear_error(mirrored):
    message = str(mirrored["odd_batch_error"])
    assert "data.batch_size=5" in message and "2 replicas" in message and "multiple of 2" in message


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
@pytest.mark.e2e
def test_two_workers_hold_identical_weights_equal_to_one_device(tmp_path, mirrored):
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(2)]}
    outs = [str(tmp_path / f"worker{index}.npz") for index in range(2)]
    workers = [run_scenario("worker", outs[index], env={"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})})
               for index in range(2)]
    # The reference: one device (the default strategy), the whole global batch, the same OVERRIDES and UPDATES
    # updates: the `mirrored` scenario's one-device learner.
    expected = {name: value for name, value in prefixed(mirrored, "one/").items() if not name.startswith("metric")}
    assert expected and all(int(mirrored[f"one/metric{step}/train/update_finite"]) == 1 for step in range(UPDATES))
    for process in workers:
        finish(process)
    first, second = (np.load(out) for out in outs)
    for name in prefixed(first, "final/"):
        np.testing.assert_array_equal(first[f"final/{name}"], second[f"final/{name}"], err_msg=name)
    assert changed(prefixed(first, "init/"), prefixed(first, "final/")) >= {name for name in expected if name.startswith("world_model/")}
    assert_close(expected, prefixed(first, "final/"))
    # Each worker loads half of data.batch_size=4 and collects episodes with its own environment seeds.
    assert [(int(r["worker_index"]), int(r["num_workers"]), int(r["worker_batch_size"])) for r in (first, second)] == [(0, 2, 2), (1, 2, 2)]
    assert [int(r["worker_seed"]) for r in (first, second)] == [7, 7 + distribute.WORKER_SEED_STRIDE]


@pytest.mark.slow
@pytest.mark.e2e
def test_two_train_commands_with_tf_config_train_as_one(tmp_path):
    """The recipe of the README: the same `planet-sac train` on each worker, each with its own logdir."""
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(2)]}
    logdirs = [tmp_path / f"worker{index}" for index in range(2)]
    processes = []
    for index, logdir in enumerate(logdirs):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        environment = dict(os.environ, PYTHONPATH=str(ROOT), TF_CONFIG=tf_config)
        processes.append(subprocess.Popen([sys.executable, "-m", "planet_sac", "train", "--config", SMOKE, "--logdir", str(logdir),
                                           "--set", "optim.strategy=multi_worker", "--set", "schedule.test_episodes=0",
                                           "--train-steps", "2", "--quiet"], cwd=ROOT, env=environment,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for process in processes:
        finish(process)
    first, second = (checkpoint_tensors(logdir) for logdir in logdirs)
    assert int(first["counters/step"]) == 2 and first.keys() == second.keys()
    for name in first:
        if not name.startswith("run_state/"):  # each worker's replay holds its own episodes (their names differ)
            np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    episodes = [sorted((logdir / "train_episodes").glob("*.npz")) for logdir in logdirs]
    assert len(episodes[0]) == len(episodes[1]) == 2  # seed episodes, collected with each worker's own seeds
    assert not np.array_equal(np.load(episodes[0][0])["state"], np.load(episodes[1][0])["state"])


def checkpoint_tensors(logdir) -> dict[str, np.ndarray]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    keys = [key for key in reader.get_variable_to_shape_map() if key.startswith("variables/")]
    return {key[len("variables/"):-len("/.ATTRIBUTES/VARIABLE_VALUE")]: reader.get_tensor(key) for key in keys}


@pytest.mark.slow
@pytest.mark.e2e
def test_checkpoints_move_between_strategies(tmp_path):
    """Without a strategy -> resumed under MirroredStrategy (every replica restored) -> resumed without one again."""
    from planet_sac.training.trainer import Trainer

    logdir = str(tmp_path / "run")
    config = apply_overrides(load_config(SMOKE), ["schedule.test_episodes=0"])
    first = Trainer(config, logdir, progress=False)
    first.run(2)
    first.close()
    written_plain = checkpoint_tensors(logdir)

    out = str(tmp_path / "trainer.npz")
    finish(run_scenario("trainer", out, logdir))
    results = np.load(out)
    assert int(results["replicas"]) == 2 and str(results["start_message"]).startswith("resumed")
    assert prefixed(results, "restored/0/").keys() == written_plain.keys()  # the same names, so the same checkpoint keys
    mirrored = prefixed(results, "restored/1/")  # every variable built under the scope has a copy on the second device
    assert {name for name in written_plain if not name.startswith(("counters/", "run_state/"))} == mirrored.keys()
    for replica in range(2):
        for name, value in prefixed(results, f"restored/{replica}/").items():
            np.testing.assert_array_equal(value, written_plain[name], err_msg=f"replica {replica}: {name}")
    assert int(results["episode_length"]) > 0 and np.isfinite(float(results["held_out_loss"]))

    written_mirrored = checkpoint_tensors(logdir)
    assert written_mirrored.keys() == written_plain.keys() and int(written_mirrored["counters/step"]) == 4
    assert changed(written_plain, written_mirrored) >= {name for name in written_plain if name.startswith("world_model/")}
    again = Trainer(apply_overrides(config, ["optim.strategy=default"]), logdir, progress=False, force=True)
    try:
        assert again.start_message.startswith("resumed") and "step 4" in again.start_message
        for name, variable in again.variables.items():
            np.testing.assert_array_equal(variable.numpy(), written_mirrored[name], err_msg=name)
            np.testing.assert_array_equal(variable.numpy(), results[f"final/{name}"], err_msg=name)
    finally:
        again.close()


# ----------------------------------------------------------------------------- bad input


def assert_one_line_error(capsys, *needles: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("planet-sac train: error: "), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("tf_config, needles", [
    (None, ["TF_CONFIG", "not set"]),
    ('{"cluster": {"worker": ["localhost:1"]', ["TF_CONFIG is not valid JSON"]),
    ('["localhost:1"]', ["TF_CONFIG must be a JSON object"]),
    ('{"task": {"type": "worker", "index": 0}}', ["TF_CONFIG has no \"cluster\""]),
    ('{"cluster": {"worker": ["localhost:1", "localhost:2"]}}', ["TF_CONFIG has no \"task\""]),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 1}}', ["TF_CONFIG task index 1", "0..0"]),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "chief", "index": 0}}', ["TF_CONFIG task type 'chief'"]),
    ('{"cluster": {"worker": ["localhost"]}, "task": {"type": "worker", "index": 0}}', ["host:port"]),
    ('{"cluster": {"ps": ["localhost:1"], "worker": ["localhost:2"]}, "task": {"type": "worker", "index": 0}}', ["'ps' job"]),
])
def test_bad_tf_config_is_one_line_and_writes_nothing(tf_config, needles, monkeypatch, tmp_path, capsys):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    logdir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, "--logdir", str(logdir), "--set", "optim.strategy=multi_worker", "--quiet"]) == 2
    assert_one_line_error(capsys, *needles)
    assert os.listdir(tmp_path) == []


def test_a_good_tf_config_is_read():
    spec = {"cluster": {"chief": ["a:1"], "worker": ["b:2", "c:3"]}, "task": {"type": "worker", "index": 1}}
    assert distribute.read_tf_config({"TF_CONFIG": json.dumps(spec)}) == spec


def test_mirrored_on_one_device_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    """Through the command line, in this process: it has one CPU device and no GPU (checked first)."""
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        pytest.skip("needs a process without a GPU")
    assert [device.name for device in tf.config.list_logical_devices()] == ["/device:CPU:0"]
    logdir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, "--logdir", str(logdir), "--set", "optim.strategy=mirrored", "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "planet-sac train: error: optim.strategy=mirrored needs at least 2 devices, found 1 (CPU:0); "
        "use optim.strategy=default, or run on a machine with 2 or more GPUs"], captured.err
    assert os.listdir(tmp_path) == []


def test_xla_with_a_strategy_is_refused_when_the_config_is_read():
    with pytest.raises(ConfigError, match="optim.jit_compile=true works with optim.strategy=default only, not mirrored"):
        load_config(SMOKE, ["optim.strategy=mirrored", "optim.jit_compile=true"])
    with pytest.raises(ConfigError, match="choose one of default, mirrored, multi_worker"):
        load_config(SMOKE, ["optim.strategy=horovod"])
