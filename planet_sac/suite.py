"""`planet-sac suite`: every task x seed of a benchmark, one run after another, published as Dreamer's score files.

Everything lives under one output folder `OUT`:

    OUT/runs/<task>/seed<k>/                     the run directories (checkpoints, episodes, events: never committed)
    OUT/scores/<benchmark>-<method>.json.gz      Dreamer's records, one per finished task x seed
    OUT/results/<task>/seed<k>/result.json       final evaluation and wall-clock split of the run
    OUT/results/<task>/seed<k>/metrics.jsonl     copies of the run's metrics and config (small, committed
    OUT/results/<task>/seed<k>/config.yaml       with the scores; the run directory is not)

A run is *finished* when its `result.json` exists (written last, after its score record):
finished runs are skipped, so the command can be repeated after any interruption. An
unfinished run whose directory survived is resumed by the trainer from its latest
checkpoint; one whose directory is gone (a new machine) starts again from scratch.

Several suite processes may share one `OUT` (two machines on a shared filesystem, or one with spare
cores), each with the same command: a process claims a run for its whole training, evaluation and
publication (`flock` on `OUT/runs/<task>/seed<k>.claim`) and skips a run claimed by another one; the
score file is rewritten under its own lock (`OUT/runs/scores.lock`), so records from processes that
finish at the same moment are all kept.

The score records follow danijar/dreamerv3's `scores/*.json.gz`: a gzipped JSON list of
`{"task": "dmc_cartpole_swingup", "method": "planet_sac", "seed": 0, "xs": [env steps], "ys": [returns]}`,
where xs are environment (simulator) steps, action repeat included, and ys the test-phase
returns of the headline policy (`policy.test` of the config) read from the run's metrics.jsonl.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import gzip
import json
import logging
import math
import os
import re
import shutil
import time
from typing import IO, TYPE_CHECKING, Iterator, Mapping, Sequence, cast

from planet_sac.atomic_file import atomic_open
from planet_sac.config import MAX_SEED, POLICIES, Config, ConfigError
from planet_sac.config_loading import diff, read_config_file
from planet_sac.metrics import read_metrics
from planet_sac.plotting import read_scores

if TYPE_CHECKING:  # gymnasium is imported where an environment is made
    from gymnasium import spaces

log = logging.getLogger("planet_sac")

ACTION_REPEAT = {
    "dmc:cartpole-swingup": 8,
    "dmc:reacher-easy": 4,
    "dmc:cheetah-run": 4,
    "dmc:finger-spin": 2,
    "dmc:ball_in_cup-catch": 4,
    "dmc:walker-walk": 2,
}
"""PlaNet's action repeat of its six DeepMind Control tasks (Hafner et al. 2019, table of hyper parameters); the
only setting a suite changes per task. Other DeepMind Control tasks get `DMC_ACTION_REPEAT`; any other task needs
`--action-repeat TASK=N`."""
DMC_ACTION_REPEAT = 2
"""The action repeat of a DeepMind Control task outside PlaNet's table: DreamerV3's and DrQ-v2's for every DMC
task."""
PLANET_TASKS = tuple(ACTION_REPEAT)
METHOD = "planet_sac"
SUITE_KEYS = ("env.task", "env.action_repeat", "env.seed", "seed")
"""Config keys the suite sets for each run (task, its action repeat, the seed); `--set` may not change them."""
EVAL_SEED_OFFSET = 50_000
"""The final evaluation's environment seed is the run's seed + this: episodes no training or test phase saw."""


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One task x seed of a suite and where its files go."""

    task: str  # env.task, e.g. dmc:cartpole-swingup
    seed: int
    action_repeat: int
    out: str

    @property
    def score_task(self) -> str:
        return score_task(self.task)

    @property
    def run_dir(self) -> str:
        return os.path.join(self.out, "runs", self.score_task, f"seed{self.seed}")

    @property
    def results_dir(self) -> str:
        return os.path.join(self.out, "results", self.score_task, f"seed{self.seed}")

    @property
    def result_path(self) -> str:
        return os.path.join(self.results_dir, "result.json")

    def overrides(self) -> list[str]:
        return [f"env.task={self.task}", f"env.action_repeat={self.action_repeat}", f"seed={self.seed}",
                f"env.seed={self.seed}"]


def score_task(task: str) -> str:
    """Dreamer's task name: `dmc:ball_in_cup-catch` -> `dmc_ball_in_cup_catch`; `gym:Pendulum-v1` -> `gym_Pendulum-v1`."""
    source, _, name = task.partition(":")
    return f"dmc_{name.replace('-', '_')}" if source == "dmc" else f"{source}_{name}"


def benchmark_name(task: str, obs: str) -> str:
    """The score file's prefix, as Dreamer's: `dmc_vision` (dm_control from pixels), `dmc_proprio` (from states), ..."""
    return f"{task.partition(':')[0]}_{'vision' if obs == 'image' else 'proprio'}"


def scores_path(out: str, task: str, obs: str, method: str = METHOD) -> str:
    return os.path.join(out, "scores", f"{benchmark_name(task, obs)}-{method}.json.gz")


def action_repeats(tasks: Sequence[str], explicit: Sequence[str] = ()) -> dict[str, int]:
    """{task: action repeat}: `TASK=N` strings first, then PlaNet's table, then `DMC_ACTION_REPEAT` for another
    `dmc:` task (logged); any other task in none of them is an error."""
    given: dict[str, int] = {}
    for item in explicit:
        task, sep, value = item.rpartition("=")
        if not sep or not task or not value.isdigit() or int(value) < 1:
            raise ConfigError(f"--action-repeat {item!r}: expected TASK=N with N >= 1, e.g. gym:Pendulum-v1=2")
        if task in given and given[task] != int(value):
            raise ConfigError(f"--action-repeat gives {task} two values ({given[task]} and {value}); give one")
        given[task] = int(value)
    unknown = sorted(set(given) - set(tasks))
    if unknown:
        raise ConfigError(f"--action-repeat names {', '.join(unknown)}, which is not in --tasks")
    repeats = {}
    for task in tasks:
        if task in given or task in ACTION_REPEAT:
            repeats[task] = given.get(task, ACTION_REPEAT.get(task, 0))
        elif task.startswith("dmc:"):
            repeats[task] = DMC_ACTION_REPEAT
            log.info("%s: action repeat %d (not in PlaNet's table; DreamerV3's and DrQ-v2's for every DMC task; "
                     "--action-repeat %s=N sets another)", task, DMC_ACTION_REPEAT, task)
        else:
            raise ConfigError(f"{task} has no action repeat in PlaNet's table ({', '.join(PLANET_TASKS)}); "
                              f"give one with --action-repeat {task}=N")
    return repeats


def train_steps_for(config: Config, env_steps: int, seed_episodes: int, seed_agent_steps: int) -> int:
    """Updates after which a run has collected at least `env_steps` environment steps.

    The trainer counts environment steps as agent steps x action repeat (PlaNet's and Dreamer's
    x axis), seed episodes included, and collects `env.num_envs` episodes every
    `schedule.collect_every * env.num_envs` updates. Episodes are assumed as long as the
    seed episodes (dm_control's are all 1000 simulator steps); `run_suite` trains on where
    shorter episodes (terminations) leave the run short.
    """
    repeat, envs = config.env.action_repeat, config.env.num_envs
    episode_env_steps = max(1, round(seed_agent_steps / max(seed_episodes, 1))) * repeat
    missing = max(0, env_steps - seed_agent_steps * repeat)
    rounds = math.ceil(math.ceil(missing / episode_env_steps) / envs)
    return rounds * config.schedule.collect_every * envs


def read_curve(metrics_path: str, policy: str) -> tuple[list[int], list[float]]:
    """(env steps, returns) of the test phases in a metrics.jsonl: `test/return/<policy>`, else `test/return`.

    Incomplete lines are skipped; a test phase logged twice at the same env steps keeps its last value.
    """
    points: dict[int, float] = {}
    for record in read_metrics(metrics_path):
        if record.get("phase") != "test" or "env_steps" not in record:
            continue
        value = record.get(f"test/return/{policy}", record.get("test/return"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            points[int(record["env_steps"])] = float(value)
    xs = sorted(points)
    return xs, [points[x] for x in xs]


def wall_clock(metrics_path: str) -> dict[str, float]:
    """Where a run's time went, summed from the trainer's `time/*` metrics in metrics.jsonl (seconds).

    updates: each training record's mean update time x the updates since the previous one (batch waits
    included); acting: training episodes, the SAC head's catch-up before them included; test_phases:
    the test phases (held-out loss, episodes, compared policies); span: first to last record.
    """
    updates = acting = tests = 0.0
    previous_step, first, last = 0, None, None
    for record in read_metrics(metrics_path):
        stamp = record.get("time")
        if isinstance(stamp, (int, float)):
            first = stamp if first is None else first
            last = stamp
        if "time/update_seconds" in record:
            updates += (record["step"] - previous_step) * (record["time/update_seconds"] or 0.0)
            previous_step = record["step"]
        acting += record.get("time/collect_seconds") or 0.0
        tests += record.get("time/test_seconds") or 0.0
    return {"updates": updates, "acting": acting, "test_phases": tests,
            "span": (last - first) if first is not None and last is not None else 0.0}


def add_score(path: str, record: Mapping, lock_path: str | None = None) -> list[dict]:
    """Adds `record` to the score file at `path`, replacing the record of the same task, method and seed.

    Written to a temporary file and renamed, so a kill never leaves half a score file; the same records
    always give the same bytes (no time stamp in the gzip header), so git sees only real changes. With
    `lock_path`, the read-modify-write holds that file's lock (blocking), so concurrent writers keep
    each other's records.
    """
    with _locked(lock_path) if lock_path else contextlib.nullcontext():
        key = (record["task"], record["method"], record["seed"])
        records = [r for r in read_scores(path) if (r["task"], r.get("method"), r.get("seed")) != key]
        records.append(dict(record))
        records.sort(key=lambda r: (r["task"], str(r.get("method")), r.get("seed", 0)))
        with atomic_open(path, "wb") as file:
            file.write(gzip.compress(json.dumps(records).encode(), mtime=0))
    return records


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Holds an exclusive `flock` on `path` (created if missing), waiting for it if another process has it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)


def restore_score_records(specs: Sequence[RunSpec], env_steps: int, obs: str, method: str = METHOD) -> None:
    """Reads the score file of `specs` (one task) before any run starts, and puts back the record of every finished
    run it lacks (a score file deleted or replaced), from the run's `results/` copy of its metrics and config.

    A finished run is skipped, so a record lost from the score file would otherwise never come back. A damaged
    score file is a one-line ConfigError here, not after the next run has trained.
    """
    if not specs:
        return
    path = scores_path(specs[0].out, specs[0].task, obs, method)
    present = {(r["task"], r.get("method"), r.get("seed")) for r in read_scores(path)}
    for spec in specs:
        if not is_finished(spec, env_steps) or (spec.score_task, method, spec.seed) in present:
            continue
        metrics = os.path.join(spec.results_dir, "metrics.jsonl")
        saved = os.path.join(spec.results_dir, "config.yaml")
        if not (os.path.isfile(metrics) and os.path.isfile(saved)):
            log.warning("%s seed %d: finished, but its score record is missing and %s lacks the metrics.jsonl and "
                        "config.yaml to rebuild it from", spec.task, spec.seed, spec.results_dir)
            continue
        xs, ys = read_curve(metrics, read_config_file(saved).policy.test)
        add_score(path, {"task": spec.score_task, "method": method, "seed": spec.seed, "xs": xs, "ys": ys},
                  lock_path=os.path.join(spec.out, "runs", "scores.lock"))
        log.info("%s seed %d: its score record was missing from %s; rebuilt from %s", spec.task, spec.seed, path,
                 spec.results_dir)


def claim_run(spec: RunSpec) -> IO[str] | None:
    """Claims `spec`'s run for this process (a non-blocking `flock` on `OUT/runs/<task>/seed<k>.claim`), or
    returns None when another suite process holds it. The claim lasts until the returned file is closed
    (or the process ends, however it ends: the kernel releases it)."""
    path = f"{spec.run_dir}.claim"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    file = open(path, "a")
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        file.close()
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise ConfigError(f"cannot lock {path} ({error.strerror}); the filesystem of --out may not support locks")
    return file


def render_seconds_per_frame(config: Config, frames: int = 30) -> float:
    """Seconds one image observation costs to render: `frames` random steps of the task from pixels minus the
    same steps from states, per step (the trainer cannot time rendering: it happens inside the environment)."""
    import numpy as np

    from planet_sac.envs import make_env

    seconds = {}
    for obs in ("image", "state"):
        shadow_size = config.env.shadow_size if obs == "image" else None
        env = make_env(dataclasses.replace(config.env, obs=obs, time_limit=None, shadow_size=shadow_size))
        try:
            env.reset()
            action_shape = cast("spaces.Box", env.action_space).shape
            actions = np.random.default_rng(0).uniform(-1, 1, (frames, *action_shape)).astype(np.float32)
            start = time.perf_counter()
            for action in actions:
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    env.reset()
            seconds[obs] = time.perf_counter() - start
        finally:
            env.close()
    return max(seconds["image"] - seconds["state"], 0.0) / frames


def is_finished(spec: RunSpec, env_steps: int) -> bool:
    """True when the run's result.json says it reached at least `env_steps` (an unreadable one does not count)."""
    try:
        with open(spec.result_path) as file:
            return int(json.load(file).get("env_steps_target", 0)) >= env_steps
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def check_method(method: str) -> None:
    """Refuses a method name that is not a plain name: it becomes part of the score file's name
    (`<benchmark>-<method>.json.gz`), where a `/` or `..` would put the file outside `OUT/scores`."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+]*", method):
        raise ConfigError(f"--method {method!r}: a method name is letters, digits, '_', '.' and '+', starting with a "
                          "letter or digit (it names the score file), e.g. planet_sac")


def finished_method(spec: RunSpec) -> str | None:
    """The method a finished run's result.json was published under (None if it names none or cannot be read)."""
    try:
        with open(spec.result_path) as file:
            method = json.load(file).get("method")
    except (OSError, ValueError, AttributeError):
        return None
    return method if isinstance(method, str) else None


def check_same_config(spec: RunSpec, config: Config, env_steps: int, method: str = METHOD) -> None:
    """Refuses an `OUT` whose run of `spec` (finished, or stopped with its directory) was made with another config,
    or finished under another method name.

    A score file mixes no configurations: a finished run would otherwise be skipped and its record kept
    although the command now asks for other settings, and a stopped one would fail only when its turn came.
    Runs are not kept apart by method (`OUT/runs/<task>/seed<k>`), so a finished run of another method would
    be skipped and never reach this method's score file.
    """
    from planet_sac.training.run_dir import check_config_change  # TensorFlow: imported when a run is checked

    if is_finished(spec, env_steps):
        published = finished_method(spec)
        if published is not None and published != method:
            raise ConfigError(f"{spec.results_dir} holds a finished run of method {published!r}, not --method "
                              f"{method!r}; runs of two methods need two --out folders")
        saved = os.path.join(spec.results_dir, "config.yaml")
        changed = diff(read_config_file(saved), config) if os.path.isfile(saved) else []
        if changed:
            raise ConfigError(f"{spec.results_dir} holds a finished run of another config (changed: "
                              f"{', '.join(changed[:5])}); use a new --out, or drop the conflicting --config/--set")
    elif os.path.isdir(spec.run_dir):
        check_config_change(spec.run_dir, config, force=False)


EVALUATION_PROGRESS = "final_evaluation.json"
"""In a run directory: the final evaluation's policies finished so far (`evaluate_policies`' `progress`)."""


def final_evaluation(logdir: str, headline: str, seed: int, episodes: int, compare_episodes: int,
                     progress: str | None = None) -> dict[str, dict]:
    """{policy: returns and seconds}: the headline policy on `episodes` episodes, every other policy on `compare_episodes`.

    `planet-sac evaluate`'s evaluation (`acting.evaluation.evaluate_policies`): one agent restored from the run's
    latest checkpoint acts with each policy in turn, each from the same start (its episode k seeded with `seed + k`,
    its random generator rewound), so `planet-sac evaluate --seed SEED --episodes N --policy P` gives any policy's
    result again. `progress`: where the policies finished so far are kept, so that a stopped evaluation goes on
    where it stopped with the same results.
    """
    from planet_sac.acting.evaluation import evaluate_policies

    counts = {headline: episodes} if episodes >= 1 else {}
    counts.update({name: compare_episodes for name in POLICIES if name != headline and compare_episodes >= 1})
    results = {}
    for policy, result in evaluate_policies(logdir, counts, list(counts), seed=seed, progress=progress):
        results[policy] = result
        log.info("%s: %s %.1f +- %.1f over %d episodes (%.0f s)", logdir, policy, result["mean"], result["std"],
                 result["episodes"], result["seconds"])
    return results


def run_one(spec: RunSpec, config_path: str, env_steps: int, overrides: Sequence[str] = (), method: str = METHOD,
            eval_episodes: int = 10, compare_episodes: int = 5, progress: bool = True) -> dict:
    """Trains (or resumes) one run to `env_steps`, evaluates it, and publishes its record and result.json."""
    from planet_sac.episodes.folder import EpisodeFolder
    from planet_sac.training.run_dir import resolve_run_config
    from planet_sac.training.signals import TrainingStopped
    from planet_sac.training.trainer import Trainer

    started = time.perf_counter()
    existed = os.path.isdir(spec.run_dir)
    config = resolve_run_config(spec.run_dir, config_path, [*overrides, *spec.overrides()])
    log.info("%s seed %d: %s %s", spec.task, spec.seed, "run directory found:" if existed else "new run directory:",
             spec.run_dir)  # then the Trainer says whether it resumed or started from scratch
    trainer = Trainer(config, spec.run_dir, progress=progress)
    try:
        trainer.collect_seed_episodes()
        # From the seed episodes alone (the oldest files): a resumed run aims at the updates of an uninterrupted one.
        seeds, seed_agent_steps = EpisodeFolder(trainer.train_dir).counts(oldest=config.data.seed_episodes)
        train_steps = train_steps_for(config, env_steps, seeds, seed_agent_steps)
        if train_steps == 0:
            raise ConfigError(f"--env-steps {env_steps}: the {seeds} seed episodes of {spec.task} alone hold "
                              f"{seed_agent_steps * config.env.action_repeat} env steps, so nothing would be trained; "
                              "ask for more with the same --out, and the run starts there")
        while True:
            trainer.run(train_steps)
            if trainer.stopped is not None:  # SIGINT/SIGTERM: checkpointed, the next call resumes
                raise TrainingStopped(*trainer.stopped)
            if int(trainer.counters.env_steps.numpy()) >= env_steps:
                break
            train_steps += config.schedule.collect_every * config.env.num_envs  # episodes ended early (terminations)
        reached, step = int(trainer.counters.env_steps.numpy()), int(trainer.counters.step.numpy())
        train_seconds = time.perf_counter() - started
    finally:
        trainer.close()

    start = time.perf_counter()
    evaluation = final_evaluation(spec.run_dir, config.policy.test, spec.seed + EVAL_SEED_OFFSET, eval_episodes,
                                  compare_episodes, progress=os.path.join(spec.run_dir, EVALUATION_PROGRESS))
    evaluation_seconds = time.perf_counter() - start
    metrics = os.path.join(spec.run_dir, "metrics.jsonl")
    xs, ys = read_curve(metrics, config.policy.test)
    record = {"task": spec.score_task, "method": method, "seed": spec.seed, "xs": xs, "ys": ys}
    add_score(scores_path(spec.out, spec.task, config.env.obs, method), record,
              lock_path=os.path.join(spec.out, "runs", "scores.lock"))
    os.makedirs(spec.results_dir, exist_ok=True)
    shutil.copyfile(metrics, os.path.join(spec.results_dir, "metrics.jsonl"))
    shutil.copyfile(os.path.join(spec.run_dir, "config.yaml"), os.path.join(spec.results_dir, "config.yaml"))
    clock = wall_clock(metrics)
    clock.update({"evaluation": evaluation_seconds, "this_call_training": train_seconds})
    if config.env.obs == "image":  # an estimate: the time of one frame now x the frames of the saved episodes
        per_frame = render_seconds_per_frame(config)
        frames = sum(EpisodeFolder(os.path.join(spec.run_dir, folder)).counts()[1] for folder in ("train_episodes", "test_episodes"))
        clock.update({"rendering_per_frame": per_frame, "rendering_estimate": per_frame * frames})
    from planet_sac.benchmark import machine
    from planet_sac.models.precision import resolve_precision

    result = {
        "task": spec.task, "score_task": spec.score_task, "method": method, "seed": spec.seed,
        "action_repeat": spec.action_repeat, "obs": config.env.obs, "config": config_path,
        "overrides": list(overrides), "env_steps_target": env_steps, "env_steps": reached, "train_steps": step,
        "headline_policy": config.policy.test,
        "headline": {key: evaluation[config.policy.test][key] for key in ("mean", "std", "episodes")}
        if config.policy.test in evaluation else None,
        "evaluation": evaluation, "seconds": clock,
        # where the seconds were measured: CPU model, cores, TensorFlow, bfloat16 flags, and the precision auto chose
        "machine": {**machine(), "precision": resolve_precision(config.optim.precision, config.env.obs)},
    }
    with atomic_open(spec.result_path) as file:  # last: marks the run finished
        json.dump(result, file, indent=2)
    return result


def run_suite(config_path: str, tasks: Sequence[str], seeds: Sequence[int], env_steps: int, out: str,
              overrides: Sequence[str] = (), explicit_repeats: Sequence[str] = (), method: str = METHOD,
              eval_episodes: int = 10, compare_episodes: int = 5, progress: bool = True) -> list[dict]:
    """Runs every seed x task (seed 0 of every task first), skipping finished runs and runs another suite process
    on the same `out` has claimed; returns one summary per run."""
    from planet_sac.config_loading import load_config
    from planet_sac.envs.tasks import check_task

    if env_steps < 1:
        raise ConfigError(f"--env-steps={env_steps}: must be >= 1")
    if not tasks or not seeds:
        raise ConfigError("--tasks and --seeds need at least one value each")
    if len(set(tasks)) != len(tasks) or len(set(seeds)) != len(seeds):
        raise ConfigError("--tasks and --seeds must not repeat a value")
    if any(not 0 <= seed <= MAX_SEED for seed in seeds):
        raise ConfigError(f"--seeds {' '.join(map(str, seeds))}: seeds must be in [0, {MAX_SEED}]")
    if eval_episodes < 1 or compare_episodes < 0:
        raise ConfigError("--eval-episodes must be >= 1 and --compare-episodes >= 0")
    for item in overrides:
        if item.split("=", 1)[0].strip() in SUITE_KEYS:
            raise ConfigError(f"--set {item}: the suite sets {', '.join(SUITE_KEYS)} per run (use --tasks, --seeds, "
                              "--action-repeat)")
    check_method(method)
    repeats = action_repeats(tasks, explicit_repeats)
    for task in tasks:  # every run's config and task is checked before the first one starts
        check_task(task)
        config = load_config(config_path, [*overrides, *RunSpec(task, seeds[0], repeats[task], out).overrides()])
        if config.data.seed_episodes < 1:
            raise ConfigError("data.seed_episodes=0: the suite reads an episode's length from the seed episodes "
                              "to convert --env-steps into updates; set it to 1 or more (PlaNet: 5)")
        if config.optim.strategy != "default":
            raise ConfigError(f"optim.strategy={config.optim.strategy}: the suite trains its runs one after another in "
                              "one process, where TensorFlow allows one distribution strategy (a second one's "
                              "collectives collide); run each such training as its own `planet-sac train`")
        if not config.schedule.collect:
            raise ConfigError("schedule.collect=false: the suite's runs collect their own episodes; set it to true")
        if config.schedule.test_episodes < 1:
            raise ConfigError(f"schedule.test_episodes={config.schedule.test_episodes}: a score record is the run's "
                              "test phases (their mean return at each); set it to 1 or more (the benchmark's: 10)")
        for seed in seeds:
            spec = RunSpec(task, seed, repeats[task], out)
            check_same_config(spec, load_config(config_path, [*overrides, *spec.overrides()]), env_steps, method)
    if os.path.exists(out) and not os.path.isdir(out):  # checked last: bad arguments write nothing
        raise ConfigError(f"--out {out} is a file, not a directory; choose another path")
    for folder in ("runs", "results", "scores", *(f"{kind}/{score_task(task)}" for task in tasks
                                                   for kind in ("runs", "results"))):
        path = os.path.join(out, folder)
        if os.path.exists(path) and not os.path.isdir(path):
            raise ConfigError(f"{path} is a file where the suite keeps a folder; move it away")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"--out {out} cannot be created ({error.strerror}); choose another path") from None
    if not os.access(out, os.W_OK):
        raise ConfigError(f"--out {out} is not writable; choose another path")
    for task in tasks:  # `config` is the last task's: the suite sets only the task, its action repeat and the seed
        restore_score_records([RunSpec(task, seed, repeats[task], out) for seed in seeds], env_steps, config.env.obs,
                              method)
    summaries = []
    for seed in seeds:
        for task in tasks:
            spec = RunSpec(task, seed, repeats[task], out)
            if is_finished(spec, env_steps):
                log.info("%s seed %d: finished (%s), skipped", task, seed, spec.result_path)
                summaries.append({"task": task, "seed": seed, "status": "skipped"})
                continue
            claim = claim_run(spec)
            if claim is None:
                log.info("%s seed %d: claimed by another suite process on %s, skipped", task, seed, out)
                summaries.append({"task": task, "seed": seed, "status": "elsewhere"})
                continue
            with claim:
                if is_finished(spec, env_steps):  # the process that held the claim finished it meanwhile
                    log.info("%s seed %d: finished (%s), skipped", task, seed, spec.result_path)
                    summaries.append({"task": task, "seed": seed, "status": "skipped"})
                    continue
                status = "resumed" if os.path.isdir(spec.run_dir) else "started"
                result = run_one(spec, config_path, env_steps, overrides, method, eval_episodes, compare_episodes,
                                 progress)
            summaries.append({"task": task, "seed": seed, "status": status, "headline": result["headline"]})
    return summaries
