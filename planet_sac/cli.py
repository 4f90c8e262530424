"""The `planet-sac` command line: train, collect, evaluate, export, bench, suite, plot, variables, configs,
config-reference.

`--config` (train, suite) takes a YAML file's path or a shipped config's name (`pendulum`);
`planet-sac configs` lists the names (planet_sac.config_loading.find_config_file has the rule).

`train`, `collect` and `evaluate` take `--set section.key=value` overrides (repeatable),
checked against the config before anything is written. Errors in the user's input or
set-up (ConfigError, SetupError and the other project errors) end the command with one
readable line and exit status 2; anything else is a bug and keeps its traceback.
TensorFlow is imported only after the log levels are set (see planet_sac/startup.py).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
from typing import Iterator, NoReturn, Sequence

from planet_sac import __version__
from planet_sac.config import MAX_SEED, POLICIES, ConfigError
from planet_sac.errors import SetupError, check_episode_folder, check_file_system, check_output_file

RANDOM_COLLECTION_KEYS = ("env.image_size", "env.num_envs", "env.shadow_size")
"""The `--set` keys random collection uses; its task, observations, action repeat and episode length are flags."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block before them): `planet-sac CMD: error: ...`, as every
    other refusal of the command line; `--help` shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help shows the usage)\n")


def _parser() -> argparse.ArgumentParser:
    output = _Parser(add_help=False)
    loudness = output.add_mutually_exclusive_group()
    loudness.add_argument("--verbose", action="store_true", help="debug logs and TensorFlow's own start-up messages")
    loudness.add_argument("--quiet", action="store_true", help="only warnings and the final result (no progress bars)")

    parser = _Parser(prog="planet-sac", description="PlaNet world models with CEM planning and a SAC head.")
    parser.add_argument("--version", action="version", version=f"planet-sac {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", parents=[output], help="train a world model and agent, or resume a run in --logdir")
    _path_argument(train, "--logdir", required=True, help="run directory; an existing one is resumed")
    _path_argument(train, "--config", metavar="FILE|NAME",
                   help="YAML config: a file, or a shipped config's name such as pendulum (planet-sac configs lists them); "
                        "a resumed run uses its saved config.yaml")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key, e.g. data.batch_size=16")
    train.add_argument("--train-steps", type=int, help="stop after this many gradient updates in total")
    _path_argument(train, "--offline-data", metavar="EPISODE_DIR",
                   help="train the world model from this episode directory only (no collection, no test phases)")
    _path_argument(train, "--restore-from", metavar="CHECKPOINT", help="start from another run's variables (logdir, checkpoints/ or prefix)")
    train.add_argument("--include", nargs="+", default=[], metavar="REGEX",
                       help="with --restore-from: names to restore (re.match), default all; a run's counters, "
                            "random-number streams and skip counts are never taken from another run")
    train.add_argument("--exclude", nargs="+", default=[], metavar="REGEX", help="with --restore-from: names not to restore")
    train.add_argument("--force", action="store_true", help="resume even if --config/--set change the saved config")

    coll = commands.add_parser("collect", parents=[output], help="collect episodes to .npz with a random or trained policy")
    coll.add_argument("--task", help="gym:<id>, gym:<module>:<id> or dmc:<domain>-<task> (default: the checkpoint's task)")
    coll.add_argument("--obs", choices=["image", "state"], help="observation mode (default: image, or the checkpoint's)")
    coll.add_argument("--episodes", type=_episodes, required=True, metavar="N|forever",
                      help="episodes to collect; forever: until interrupted (with --checkpoint)")
    _path_argument(coll, "--outdir", required=True, help="episode directory, e.g. a run's LOGDIR/train_episodes (any tf.io.gfile path)")
    coll.add_argument("--seed", type=_seed, default=0,
                      help="environment 0 gets SEED, environment i > 0 and restarted ones a hash of (SEED, i, restarts); "
                           "a trained policy's noise comes from it too (default: 0)")
    coll.add_argument("--action-repeat", type=_positive_int, help="default: 1, or the checkpoint's")
    coll.add_argument("--time-limit", type=_positive_int, help="agent steps per episode (default: the task's own)")
    coll.add_argument("--policy", choices=POLICIES, default="random")
    _path_argument(coll, "--checkpoint", help="logdir, checkpoints/ folder or prefix of a trained run (needed unless --policy random)")
    coll.add_argument("--reload-every", type=float, metavar="SECONDS",
                      help="with --checkpoint LOGDIR: load the run's newest checkpoint when one appears, checked this often "
                           "(between rounds of episodes); waits for the run's first checkpoint")
    coll.add_argument("--per-checkpoint", action="store_true",
                      help="with --reload-every and a run's logdir: one round of episodes per new checkpoint, then wait "
                           "(keeps PlaNet's updates per environment step; leaves the cores to the learner)")
    coll.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a config key of the checkpoint's run (without --checkpoint: "
                           f"{', '.join(RANDOM_COLLECTION_KEYS)})")

    evaluate = commands.add_parser("evaluate", parents=[output], help="run the latest checkpoint and report returns")
    _path_argument(evaluate, "--logdir", required=True, help="the run; its latest checkpoint is evaluated")
    evaluate.add_argument("--episodes", type=int, default=5, help="episodes of each policy (default: 5)")
    evaluate.add_argument("--policy", choices=POLICIES, nargs="+", default=["cem"], help="one or more policies to compare")
    evaluate.add_argument("--seed", type=_seed, default=12345,
                          help="episode k of every policy starts from SEED + k (default: 12345)")
    _path_argument(evaluate, "--video", metavar="FILE.mp4|FILE.gif", help="write the first policy's first episode as a video")
    evaluate.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key, e.g. cem.candidates=500")
    _path_argument(evaluate, "--json", metavar="FILE.json",
                   help="also write each policy's per-episode returns (episode k starts from --seed + k) to this file, "
                        "rewritten after each policy; run again with it, the policies it holds for the same checkpoint, "
                        "seed, episodes and --set are kept, not run again")

    bench = commands.add_parser("bench", parents=[output],
                                help="time updates, CEM and SAC actions, the loader and matmuls (optionally beside mbrl-lib)")
    bench.add_argument("--size", choices=["full", "tiny"], default="full", help="full: PlaNet's sizes; tiny: a quick check")
    bench.add_argument("--reps", type=int, default=3, help="timed calls per figure (median), after one warm-up call")
    _path_argument(bench, "--json", metavar="FILE", help="also write the results as JSON")
    _path_argument(bench, "--peer", metavar="PYTHON", help="python of mbrl-lib's venv (bash ../shared/bench/peer_setup.sh); with --size full")

    export = commands.add_parser("export", parents=[output],
                                 help="write a run's policy as a TensorFlow SavedModel (TF-Agents' PolicySaver conventions)")
    _path_argument(export, "--logdir", required=True, help="the run; its latest checkpoint is exported")
    export.add_argument("--policy", choices=["sac", "cem", "sac_guided_cem"], default="sac", help="the policy to export")
    _path_argument(export, "--out", metavar="DIR", help="new folder for the SavedModel (default: LOGDIR/export/POLICY)")


    suite = commands.add_parser("suite", parents=[output],
                                help="train and evaluate every task x seed one after another; publish Dreamer-format score files")
    _path_argument(suite, "--config", required=True, metavar="FILE|NAME",
                   help="YAML config shared by every run (the suite sets task, action repeat, seed): a file, or a shipped "
                        "config's name such as dmc_vision_cpu (planet-sac configs lists them)")
    suite.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                       help="env.task values (default: PlaNet's six dm_control tasks)")
    suite.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], metavar="SEED", help="default: 0 1 2")
    suite.add_argument("--env-steps", type=int, default=100_000,
                       help="environment steps per run, action repeat included, seed episodes included (default: 100000)")
    _path_argument(suite, "--out", required=True, metavar="DIR", help="runs/, scores/ and results/ go here")
    suite.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key for every run")
    suite.add_argument("--action-repeat", action="extend", nargs="+", default=[], metavar="TASK=N",
                       help="action repeat of tasks outside PlaNet's table (other dmc: tasks: 2, as DreamerV3 and DrQ-v2), "
                            "e.g. gym:Pendulum-v1=2 dmc:hopper-hop=4")
    suite.add_argument("--method", default="planet_sac",
                       help="method name of the score records and file: letters, digits, _ . + (default: planet_sac); "
                            "one per --out")
    suite.add_argument("--eval-episodes", type=int, default=10, help="final evaluation episodes of the headline policy (policy.test)")
    suite.add_argument("--compare-episodes", type=int, default=5,
                       help="final evaluation episodes of each other policy (random, cem, sac, sac_guided_cem); 0: none")

    plot = commands.add_parser("plot", parents=[output],
                               help="draw the curves of runs (metrics.jsonl) or of score files (one panel per task, with baselines)")
    _path_argument(plot, "logdirs", nargs="+", metavar="LOGDIR|SCORES.json.gz",
                   help="runs to plot (several are drawn as mean and spread too), or score files of `planet-sac suite`")
    _path_argument(plot, "--out", default="curves.png", metavar="FILE.png", help="image to write (default: curves.png)")
    plot.add_argument("--smooth", type=int, default=1, metavar="N", help="runs: moving average over N points (default: 1, none)")
    _path_argument(plot, "--baselines", nargs="+", default=[], metavar="SCORES.json.gz",
                   help="score files: other methods' score files drawn beside them, e.g. ../shared/baselines/dmc_vision-*.json.gz")
    plot.add_argument("--bin", type=float, default=10_000, metavar="ENV_STEPS",
                      help="score files: each seed's curve is averaged in bins of this many env steps (default: 10000; "
                           "at most 10,000 bins)")
    plot.add_argument("--budget", type=float, metavar="ENV_STEPS", help="score files: x axis end (default: the last x of ours)")

    variables = commands.add_parser("variables", parents=[output], help="list the variables (names and shapes) of a checkpoint")
    _path_argument(variables, "checkpoint", help="logdir, checkpoints/ folder or checkpoint prefix")

    commands.add_parser("configs", parents=[output], help="list the shipped configs: the names --config takes, what each is, "
                        "where they are", description="List the configs that ship with planet-sac: each name (what --config "
                        "NAME takes), the first sentence of its comment, and the folder they are in.")
    reference = commands.add_parser("config-reference", parents=[output], help="print every config key as a Markdown table",
                                    description="Print every config key (type, default, allowed values, meaning) as Markdown "
                                                "tables, as in docs/config.md. `planet-sac configs` lists the shipped config "
                                                "files, which --config takes by name (--config pendulum).")
    _path_argument(reference, "--out", metavar="FILE.md", help="write to this file instead of printing (e.g. docs/config.md)")
    return parser


class _LogHandler(logging.Handler):
    """Log lines on stderr that do not break a progress bar; INFO lines without a level prefix."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        message = record.getMessage()
        if record.levelno != logging.INFO:
            message = f"{record.levelname.lower()}: {message}"
        tqdm.write(message, file=sys.stderr)


_WITHOUT_TENSORFLOW = ("plot", "configs", "config-reference")


def _configure_output(args: argparse.Namespace) -> None:
    from planet_sac import startup

    if args.verbose:
        startup.use_verbose_environment()
    root = logging.getLogger()
    root.handlers = [handler for handler in root.handlers if not isinstance(handler, _LogHandler)] + [_LogHandler()]
    root.setLevel(logging.WARNING)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.getLogger("planet_sac").setLevel(level)
    if args.command not in _WITHOUT_TENSORFLOW:
        startup.import_tensorflow(quiet=not args.verbose)
        startup.make_tensorflow_deterministic()  # every command computes as training does


def _user_errors(command: str) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(the project's input and set-up errors, out-of-memory errors) that `command` can raise."""
    if command in _WITHOUT_TENSORFLOW:
        return (ConfigError, SetupError), (MemoryError,)
    import tensorflow as tf

    from planet_sac.checkpoints import CheckpointError
    from planet_sac.episodes.loader import NoEpisodesError
    from planet_sac.episodes.storage import BadEpisodeError
    from planet_sac.training.learner import NonFiniteError
    from planet_sac.training.run_lock import RunLockedError

    return ((ConfigError, SetupError, CheckpointError, BadEpisodeError, NonFiniteError, NoEpisodesError, RunLockedError),
            (tf.errors.ResourceExhaustedError, MemoryError))


_DISK_FULL = ("No space left on device", "Disk quota exceeded")


def _disk_full(error: BaseException | None) -> str | None:
    """The file a full disk (ENOSPC, EDQUOT) refused, '' if unnamed, None if `error` is not a full disk.

    TensorFlow reports ENOSPC as ResourceExhaustedError (as it reports out of memory) with the file's
    path before the reason; Python raises OSError. The cause chain is followed (wrapped errors).
    """
    import errno

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return str(error.filename or "")
        text = str(error)
        for reason in _DISK_FULL:
            if reason in text:
                line = next(line for line in text.splitlines() if reason in line)
                return line.split(reason)[0].rstrip("; :,").split(" ")[-1]
        error = error.__cause__ or error.__context__
    return None


def _disk_full_message(command: str, args: argparse.Namespace, path: str) -> str:
    """Where the disk is full and what happens next: nothing finished was lost, the same command resumes."""
    where = next((value for value in (getattr(args, "logdir", None), getattr(args, "outdir", None),
                                      getattr(args, "video", None)) if value), None)
    at = f"writing {path}" if path else f"writing under {where}" if where else "writing its output"
    if command == "train":
        after = ("every finished episode and checkpoint is intact; free space and run the same command again: "
                 "the run resumes from its last checkpoint")
    elif command == "collect":
        after = "every finished episode is intact (partial files are removed); free space and collect the rest"
    else:
        after = "free space and run the command again"
    return f"no space left on the device ({at}); {after}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _configure_output(args)
    user_errors, out_of_memory = _user_errors(args.command)
    commands = {"train": _train, "collect": _collect, "evaluate": _evaluate, "plot": _plot, "variables": _variables,
                "configs": _configs, "config-reference": _config_reference, "bench": _bench, "export": _export,
                "suite": _suite}
    try:
        _check_file_systems(args)
        return commands[args.command](args)
    except user_errors as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else error.__class__.__name__
        print(f"planet-sac {args.command}: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout went away (`planet-sac configs | head`): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would raise again
        return 141  # 128 + SIGPIPE, the shell's status for a process ended by a closed pipe
    except Exception as error:
        path = _disk_full(error)
        if path is None and not isinstance(error, out_of_memory):
            raise
        if path is not None:  # before out of memory: TensorFlow raises ResourceExhaustedError for both
            print(f"planet-sac {args.command}: error: {_disk_full_message(args.command, args, path)}", file=sys.stderr)
            return 2
        print(f"planet-sac {args.command}: error: out of memory; lower the batch with --set data.batch_size=16 "
              "(or keep it and split it with --set optim.accumulate=2), or shrink cem.candidates", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        from planet_sac.training.signals import TrainingStopped

        if isinstance(interrupt, TrainingStopped):  # checkpointed: not finished, and not lost either
            print(f"planet-sac {args.command}: {interrupt}", file=sys.stderr)
            return 128 + int(interrupt.signal)
        print(f"planet-sac {args.command}: interrupted", file=sys.stderr)
        return 130


def _train(args: argparse.Namespace) -> int:
    import tensorflow as tf

    from planet_sac.training.run_dir import resolve_run_config
    from planet_sac.training.trainer import train

    if (args.include or args.exclude) and not args.restore_from:
        raise ConfigError("--include/--exclude need --restore-from CHECKPOINT")
    if args.train_steps is not None and args.train_steps < 0:
        raise ConfigError(f"--train-steps={args.train_steps}: must be >= 0")
    if args.config is None and not tf.io.gfile.exists(f"{args.logdir}/config.yaml"):
        # a resume whose --logdir is mistyped would otherwise start PlaNet's full pixel run (400,000 updates)
        raise ConfigError(f"--logdir {args.logdir} holds no run to resume (no config.yaml); to start a new run there, "
                          "give --config (`--config default` for PlaNet's own run; `planet-sac configs` lists them)")
    config = resolve_run_config(args.logdir, args.config, args.set, args.force)
    last = train(config, args.logdir, offline_data=args.offline_data, restore_from=args.restore_from,
                 include=args.include, exclude=args.exclude, train_steps=args.train_steps,
                 progress=not args.quiet, force=args.force)
    shown = {key: round(value, 4) for key, value in last.items() if isinstance(value, float) and key.startswith(("loss/", "test/", "train/return"))}
    print(f"done: step {last.get('step', 0)}, {shown}")
    return 0


def _integer(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
    return value


def _path(text: str) -> str:
    """A path argument: refused when empty or blank (`--logdir ''` would otherwise write into `/`, an empty
    --outdir into the working directory, and an empty --json or --restore-from would be ignored)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is an empty path; give a file or folder")
    return text


def _path_argument(command: argparse.ArgumentParser, name: str, **kwargs: object) -> None:
    """Adds the file or folder argument `name` to `command`: a blank value is refused by argparse, and its URL
    scheme is checked once TensorFlow is loaded (`_check_file_systems`, through the `path_flags` default)."""
    action = command.add_argument(name, type=_path, **kwargs)  # type: ignore[arg-type]
    shown = name if name.startswith("-") else str(kwargs.get("metavar") or name.upper())
    command.set_defaults(path_flags={**(command.get_default("path_flags") or {}), action.dest: shown})


def _check_file_systems(args: argparse.Namespace) -> None:
    """Refuses, before any work, a path argument whose URL scheme no file system reads (`s3://` without a plugin)."""
    for dest, flag in getattr(args, "path_flags", {}).items():
        value = getattr(args, dest)
        for path in value if isinstance(value, list) else [value]:
            if path is not None:
                check_file_system(path, flag)


def _seed(text: str) -> int:
    """--seed: a whole number in [0, 2**31 - 1] (offsets are added to it; dm_control takes seeds below 2**32)."""
    value = _integer(text, 0)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{value} must be <= {MAX_SEED}")
    return value


def _positive_int(text: str) -> int:
    """--action-repeat, --time-limit: a whole number >= 1."""
    return _integer(text, 1)


def _episodes(text: str) -> int | None:
    """--episodes: a positive count, or `forever` (None)."""
    if text == "forever":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of episodes or 'forever'") from None


def _collect(args: argparse.Namespace) -> int:
    from planet_sac.config_loading import load_config

    if args.episodes is not None and args.episodes < 1:
        raise ConfigError(f"--episodes={args.episodes}: must be >= 1 (or forever)")
    if args.policy != "random" and not args.checkpoint:
        raise ConfigError(f"--policy {args.policy} needs --checkpoint LOGDIR of a trained run")
    if args.reload_every is not None and not args.checkpoint:
        raise ConfigError("--reload-every needs --checkpoint LOGDIR of a training run")
    if args.per_checkpoint and args.reload_every is None:
        raise ConfigError("--per-checkpoint needs --checkpoint LOGDIR and --reload-every SECONDS (how often to look "
                          "for the next checkpoint)")
    if args.checkpoint:
        return _collect_with_run(args)
    if not args.task:
        raise ConfigError("--task is required for random collection, e.g. --task gym:Pendulum-v1")
    if args.episodes is None:
        raise ConfigError("--episodes forever needs --checkpoint (random collection is for a fixed number of episodes)")
    # Checked before anything is written, with the task and observations the flags give.
    load_config(None, [f"env.task={args.task}", f"env.obs={args.obs or 'image'}", *args.set])
    for item in args.set:
        if item.split("=", 1)[0].strip() not in RANDOM_COLLECTION_KEYS:
            raise ConfigError(f"--set {item}: random collection takes only {', '.join(RANDOM_COLLECTION_KEYS)}; set the "
                              "task, observations, action repeat and episode length with --task, --obs, --action-repeat "
                              "and --time-limit")
    from planet_sac.acting.collector import collect_random

    with _new_outdir(args.outdir):
        summaries = collect_random(args.outdir, args.episodes, args.task, args.obs or "image",
                                   1 if args.action_repeat is None else args.action_repeat,
                                   args.time_limit, args.seed, args.set, progress=not args.quiet)
    _print_collected(args.outdir, summaries)
    return 0


@contextlib.contextmanager
def _new_outdir(outdir: str) -> Iterator[None]:
    """Makes --outdir (checked writable) for a collection; if the collection fails before it writes an episode
    (an unknown task found when the environment starts, say), a folder it made is removed again."""
    import tensorflow as tf

    from planet_sac.training.run_dir import prepare_logdir, remove_unused_logdir

    check_episode_folder(outdir, "--outdir")
    made = not tf.io.gfile.exists(outdir)
    prepare_logdir(outdir, "--outdir")
    try:
        yield
    except BaseException:
        if made:
            remove_unused_logdir(outdir)
        raise


def _collect_with_run(args: argparse.Namespace) -> int:
    from planet_sac.acting.collector import Collector
    from planet_sac.checkpoints import find_run_config
    from planet_sac.config_loading import apply_overrides, check_override_keys

    settings = list(args.set)
    wait = 0.0
    if args.reload_every is None or _is_run(args.checkpoint):
        run = apply_overrides(find_run_config(args.checkpoint), settings)  # checked before anything is written
        for key, value, current in (("--task", args.task, run.env.task), ("--obs", args.obs, run.env.obs),
                                    ("--action-repeat", args.action_repeat, run.env.action_repeat)):
            if value is not None and value != current:
                raise ConfigError(f"{key} {value} differs from the checkpoint's {current}; the agent only acts in its own task")
    else:
        given = [flag for flag, value in (("--task", args.task), ("--obs", args.obs), ("--action-repeat", args.action_repeat))
                 if value is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: {args.checkpoint} has no config yet to check them against; drop them "
                              "(a collector acts in its run's own task and settings)")
        check_override_keys(settings)  # names and types now; ranges and combinations against the run's config later
        wait = float("inf")  # a collector started before its learner waits for the run's first checkpoint
    if args.time_limit is not None:
        settings.append(f"env.time_limit={args.time_limit}")
    with _new_outdir(args.outdir):
        collector = Collector(args.checkpoint, args.outdir, args.policy, seed=args.seed, overrides=settings,
                              reload_every=args.reload_every, wait_seconds=wait, per_checkpoint=args.per_checkpoint)
    try:
        collector.run(args.episodes)
    except KeyboardInterrupt:  # the way `--episodes forever` ends; every finished episode is already on disk
        if args.episodes is not None:
            raise
    finally:
        collector.close()
    _print_collected(args.outdir, collector.collected)
    return 0


def _is_run(checkpoint: str) -> bool:
    from planet_sac.checkpoints import find_run_config

    try:
        find_run_config(checkpoint)
        return True
    except ConfigError:
        return False


def _print_collected(outdir: str, summaries: list[dict]) -> None:
    returns = [summary["return"] for summary in summaries]
    mean = f"{sum(returns) / len(returns):.2f}" if returns else "n/a"
    print(f"wrote {len(summaries)} episode{'s' if len(summaries) != 1 else ''} to {outdir}: mean return {mean}")


def _evaluate(args: argparse.Namespace) -> int:
    from planet_sac.acting.evaluation import check_run, evaluate_policies
    from planet_sac.checkpoints import find_run_config
    from planet_sac.config_loading import apply_overrides

    if args.episodes < 1:
        raise ConfigError(f"--episodes={args.episodes}: must be >= 1")
    check_run(args.logdir, args.video)
    apply_overrides(find_run_config(args.logdir), args.set)  # checked before any episode runs
    if args.json:
        check_output_file(args.json, "--json")
    episodes = f"{args.episodes} episode{'s' if args.episodes != 1 else ''}"
    # One environment and agent for all policies; each starts from the same seeds (see evaluate_policies).
    for index, (policy, result) in enumerate(evaluate_policies(args.logdir, args.episodes, args.policy, seed=args.seed,
                                                                 video=args.video, overrides=args.set,
                                                                 progress=args.json)):
        if index == 0:  # after the agent is built, so its start-up lines do not split the table
            if result["step"] == 0:
                logging.getLogger("planet_sac").warning("checkpoint step 0: %s has not trained yet", args.logdir)
            print(f"{'policy':<16}{'mean':>10}{'std':>10}{'min':>10}{'max':>10}   ({episodes}, {args.logdir})")
        print(f"{policy:<16}{result['mean']:>10.1f}{result['std']:>10.1f}{result['min']:>10.1f}{result['max']:>10.1f}", flush=True)
    print(f"checkpoint step {result['step']}" + (f"; video of {args.policy[0]} in {args.video}" if args.video else ""))
    return 0


def _bench(args: argparse.Namespace) -> int:
    import json

    from planet_sac import benchmark
    from planet_sac.atomic_file import atomic_open

    if args.reps < 1:
        raise ConfigError(f"--reps={args.reps}: must be >= 1")
    if args.json:
        check_output_file(args.json, "--json")  # before the minutes of timing, not after
    if args.peer:
        benchmark.check_peer(args.peer, args.size)
    results = benchmark.run(args.size, args.reps, args.peer)
    print(benchmark.table(results))
    if args.json:  # whole or not at all, as evaluate's
        with atomic_open(args.json) as file:
            json.dump(results, file, indent=2)
    return 0


def _export(args: argparse.Namespace) -> int:
    from planet_sac.export import export_run

    result = export_run(args.logdir, args.policy, args.out)
    print(f"wrote {result['path']}: {args.policy} policy of checkpoint step {result['step']}, "
          f"{result['bytes'] / 1e6:.2f} MB (load it with tf.saved_model.load)")
    return 0


def _suite(args: argparse.Namespace) -> int:
    from planet_sac.suite import PLANET_TASKS, run_suite

    summaries = run_suite(args.config, args.tasks or list(PLANET_TASKS), args.seeds, args.env_steps, args.out,
                          overrides=args.set, explicit_repeats=args.action_repeat, method=args.method,
                          eval_episodes=args.eval_episodes, compare_episodes=args.compare_episodes,
                          progress=not args.quiet)
    for summary in summaries:
        headline = summary.get("headline")
        shown = f"{headline['mean']:.1f} +- {headline['std']:.1f}" if headline else ""
        print(f"{summary['task']:<26} seed {summary['seed']:<3} {summary['status']:<8} {shown}")
    print(f"scores in {args.out}/scores, results in {args.out}/results")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from planet_sac.plotting import plot_runs

    if args.smooth < 1:
        raise ConfigError(f"--smooth={args.smooth}: must be >= 1")
    if not args.out.endswith(".png"):
        raise ConfigError(f"--out {args.out}: the file name must end in .png")
    scores = [path for path in args.logdirs if path.endswith(".json.gz")]
    if scores:
        return _plot_scores(args, scores)
    if args.baselines:
        raise ConfigError("--baselines go with score files (SCORES.json.gz), not with run directories")
    plot_runs(args.logdirs, args.out, smooth_window=args.smooth)
    print(f"wrote {args.out}")
    return 0


def _plot_scores(args: argparse.Namespace, scores: list[str]) -> int:
    import matplotlib.pyplot as plt

    from planet_sac.plotting import plot_scores

    if len(scores) != len(args.logdirs):
        raise ConfigError("plot either run directories or score files (.json.gz), not both at once")
    if args.budget is not None and not 0 < args.budget < math.inf:
        raise ConfigError(f"--budget {args.budget:g}: must be a number of env steps > 0")
    figure = plot_scores(scores, args.out, args.baselines, bin_size=args.bin, budget=args.budget)
    plt.close(figure)
    print(f"wrote {args.out}")
    return 0


def _configs(args: argparse.Namespace) -> int:
    """Prints the shipped configs, one a line: name and description, under a line saying where they are."""
    from planet_sac.config_loading import config_description, shipped_config_dir, shipped_configs

    found = shipped_configs()
    if not found:
        raise SetupError("this installation of planet-sac has no shipped configs (no planet_sac/configs folder, no "
                         "checkout's configs/); reinstall it, or pass --config the path of a YAML file")
    print(f"{len(found)} shipped configs in {shipped_config_dir()} (--config NAME, or the path of any YAML file):")
    width = max(map(len, found))
    for name, file in found.items():
        description = config_description(file.read_text(encoding="utf-8")) or "(no description)"
        print(f"  {name:<{width}}  {description}")
    return 0


def _config_reference(args: argparse.Namespace) -> int:
    from planet_sac.config_docs import config_reference

    text = config_reference()
    if args.out:
        check_output_file(args.out, "--out")
        with open(args.out, "w") as file:
            file.write(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


def _variables(args: argparse.Namespace) -> int:
    from planet_sac.checkpoints import list_variables, resolve

    entries = list_variables(args.checkpoint)
    print(f"# {resolve(args.checkpoint)}: {len(entries)} variables")
    for name, shape in entries:
        print(f"{name}\t{list(shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
