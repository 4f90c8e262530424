"""Shared fixtures: tiny configs and hand-made batches, so every test takes seconds."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from planet_sac.config import Config
from planet_sac.config_loading import load_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
DATA = ROOT / "data"


# Below AVX512_CORE_BF16, ONEDNN_MAX_CPU_ISA (the stand-in for an AVX2-only CPU, docs/performance.md) hides
# the bfloat16 kernels TensorFlow still picks on a CPU that has them: bfloat16 ops crash the process there.
LOW_ISAS = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}
BFLOAT16_HIDDEN = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper() in LOW_ISAS
needs_bfloat16_kernels = pytest.mark.skipif(
    BFLOAT16_HIDDEN and any(flag in open("/proc/cpuinfo").read() for flag in ("avx512_bf16", "amx_bf16"))
    if os.path.exists("/proc/cpuinfo") else False,
    reason="ONEDNN_MAX_CPU_ISA hides this CPU's bfloat16 kernels, which TensorFlow still runs (a segfault)")

WALL_CLOCK = ("time", "train/steps_per_second")


def records_without_wall_clock(logdir: Path) -> list[dict]:
    """A run's metrics.jsonl records without wall-clock values (`time`, `time/*`, `train/steps_per_second`)."""
    import json

    records = [json.loads(line) for line in (Path(logdir) / "metrics.jsonl").read_text().splitlines()]
    return [{key: value for key, value in record.items() if key not in WALL_CLOCK and not key.startswith("time/")}
            for record in records]


@pytest.fixture(scope="session", autouse=True)
def tensorflow_configured_as_a_run() -> None:
    """Every test process runs TensorFlow as a run does (`make_tensorflow_deterministic`: op determinism on, Grappler
    off), also in tests that build a learner or a policy without a Trainer. Grappler's passes at each compiled
    function's first call were a quarter of those tests' CPU time (docs/performance.md)."""
    from planet_sac.startup import make_tensorflow_deterministic

    make_tensorflow_deterministic()


OLD_RUN = ROOT / "tests" / "fixtures" / "run_0_1"
"""A smoke run (Pendulum states, 10 updates, a checkpoint at step 10) written by an early planet_sac (tests/test_compat.py)."""


def old_run_copy(destination: Path) -> Path:
    """A copy of OLD_RUN at `destination` whose policy acts as a graph: its config.yaml predates
    `policy.jit_compile`, whose default (true) has XLA compile the policy at each agent's first action (about
    7 CPU seconds on an AVX2-only EPYC, against under 1 s traced; docs/performance.md). For tests that use the
    run as any finished run; tests/test_compat.py resumes OLD_RUN itself, the key at its default."""
    shutil.copytree(OLD_RUN, destination)
    config = destination / "config.yaml"
    text = config.read_text()
    assert "\npolicy:\n" in text and "jit_compile: true" not in text
    config.write_text(text.replace("\npolicy:\n", "\npolicy:\n  jit_compile: false\n", 1))
    return destination


@pytest.fixture
def smoke_config() -> Config:
    return load_config(CONFIGS / "smoke.yaml")


def made_once_per_session(tmp_path_factory, name: str, make) -> Path:
    """The directory `make(directory)` fills, made once per test session and then read by everyone.

    Under pytest-xdist each worker process has its own session: a session-scoped fixture would be made
    once per worker. Here the first worker to ask makes it in the directory the workers share (the
    parent of their base temporary directories), under a file lock; the others wait for it and reuse it.
    """
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this session's directory, shared by its workers
    directory = root / f"once-{name}"
    with open(f"{directory}.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not (directory / ".complete").exists():  # not made yet, or a worker failed half-way
                if directory.exists():
                    shutil.rmtree(directory)
                directory.mkdir()
                make(directory)
                (directory / ".complete").write_text("")
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return directory


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> tuple[str, list[str]]:
    """One `planet-sac train` smoke run of 10 updates, resumed to 20 (a test phase at each), shared by the tests
    that only read it: its logdir, and its training episodes before the resume. Tests must not write into it.

    The run is trained once per session (`made_once_per_session`); each worker process reads its own copy."""
    from planet_sac.cli import main
    from planet_sac.episodes.folder import list_episodes

    smoke = str(CONFIGS / "smoke.yaml")

    def make(directory: Path) -> None:
        logdir = str(directory / "smoke")
        assert main(["train", "--config", smoke, "--logdir", logdir, "--train-steps", "10", "--quiet"]) == 0
        first_train = [os.path.basename(path) for path in list_episodes(f"{logdir}/train_episodes")]
        (directory / "first_train.txt").write_text("\n".join(first_train))
        assert main(["train", "--logdir", logdir, "--train-steps", "20", "--quiet"]) == 0

    made = made_once_per_session(tmp_path_factory, "smoke_run", make)
    logdir = str(tmp_path_factory.mktemp("runs") / "smoke")
    shutil.copytree(made / "smoke", logdir)
    first_train = [f"{logdir}/train_episodes/{name}" for name in (made / "first_train.txt").read_text().split("\n")]
    return logdir, first_train


@pytest.fixture
def smoke_run_copy(smoke_run, tmp_path) -> str:
    """A copy of the session's smoke run (conftest.smoke_run) in the test's own directory, which the test may change:
    a finished run (step 20, config.yaml, checkpoints, episodes) without training one."""
    logdir = str(tmp_path / "run")
    shutil.copytree(smoke_run[0], logdir)
    return logdir


def logged_warnings(name: str):
    """Collects the warning records of logger `name` (independent of propagation settings) until closed."""
    import logging

    records: list = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


@pytest.fixture
def tensorflow_warnings(monkeypatch):
    """Warning records TensorFlow logs (on the `tensorflow` logger) while the test runs.

    TensorFlow's excessive-retracing warning is counted per function for the whole process and given at most twice,
    so earlier tests in the same worker could use it up (or leave traces in its history); the test gets fresh counts."""
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    assert hasattr(polymorphic_function, "_FrequentTracingDetectorManager"), \
        "TensorFlow moved its retracing-warning counter: update the tensorflow_warnings fixture"
    monkeypatch.setattr(polymorphic_function, "_frequent_tracing_detector_manager",
                        polymorphic_function._FrequentTracingDetectorManager())
    yield from logged_warnings("tensorflow")


def state_batch(batch: int = 4, length: int = 10, state_size: int = 3, action_size: int = 1, seed: int = 0) -> dict:
    """A random [B, T] chunk of a state-observation task, in the aligned episode layout."""
    rng = np.random.default_rng(seed)
    return {
        "state": rng.normal(size=(batch, length, state_size)).astype(np.float32),
        "action": rng.uniform(-1, 1, (batch, length, action_size)).astype(np.float32),
        "reward": rng.normal(size=(batch, length)).astype(np.float32),
        "discount": np.ones((batch, length), np.float32),
    }


def save_version(run: str, value: float, step: int) -> None:
    """A new checkpoint of `run` whose world-model and SAC variables all hold `value`, written by a Trainer (as
    the learner would): a recognisable version for tests of who reads which checkpoint."""
    from planet_sac.training.run_dir import resolve_run_config
    from planet_sac.training.trainer import Trainer

    trainer = Trainer(resolve_run_config(run), run, progress=False)
    try:
        for name, variable in trainer.variables.items():
            if name.startswith(("world_model/", "sac/")) and variable.dtype.is_floating:
                variable.assign(np.full(variable.shape, value, variable.dtype.as_numpy_dtype))
        trainer.counters.step.assign(step)
        trainer.checkpointer.save(step)
    finally:
        trainer.close()


TRAINED_RUN_FIXTURES = {"smoke_run", "mirrored", "never_stopped", "image_run"}
"""Fixtures that train or build a run (once per worker process): a test that uses one is end to end, so `slow`."""


def pytest_collection_modifyitems(config, items) -> None:
    """Marks the tests that use a trained run `slow`, then puts the `slow` tests first (each file's in their order):
    workers start on the long ones, so no long test is left to run alone at the end while the others are idle."""
    for item in items:
        if TRAINED_RUN_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


_exit_status = 0


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """Ends the test process once pytest has reported everything.

    Tearing down TensorFlow's runtime after a few hundred tests (graphs, functions, kernel caches,
    all in C++ destructors) took over a minute of CI time and checks nothing; results, the cache
    and the summary are written by then. `PLANET_SAC_TEST_FULL_EXIT=1` keeps the normal exit.
    """
    if os.environ.get("PLANET_SAC_TEST_FULL_EXIT") != "1":
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status)
