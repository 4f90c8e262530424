"""planet_sac: PlaNet world models with CEM planning and a Soft Actor-Critic head, in TensorFlow 2.

The public API, importable from the package root:

    load_config(path, overrides)   typed, validated config (a YAML file or shipped name such as "pendulum" + "section.key=value")
    make_env(task, obs, ...)       gym:<id> or dmc:<domain>-<task> with dict observations (or make_env(config.env))
    make_envs(config.env, seed=)   env.num_envs of them as one batch, stepped together in parallel processes
    train(config, logdir, ...)     train or resume a run; offline_data= trains from episodes only
    Trainer(config, logdir, ...)   the same run as an object; restores on construction, then .run()
    evaluate(logdir, episodes, policy)
    load_agent(logdir)             a run's Agent (world model, SAC head, compiled policy) from its checkpoint
    Actor(envs, policy, phase, outdir)   plays episodes in one or N environments, saves each to .npz
    Collector(logdir, outdir, policy, reload_every=...)   a run's policy collecting, following its checkpoints
    make_dataset(directory, batch_size, chunk_length, ...)   streaming replay as tf.data

Attributes are imported lazily: the environment worker processes import this package
and must not load TensorFlow (it breaks MuJoCo's headless renderer in the same process).
"""

from planet_sac.startup import set_environment_defaults as _set_environment_defaults

# Before anything imports TensorFlow: quiet C++ logs, oneDNN on, no CUDA probe without a driver (see startup.py).
_set_environment_defaults()

__version__ = "0.1.0"

_EXPORTS = {
    "Config": "planet_sac.config",
    "ConfigError": "planet_sac.config",
    "load_config": "planet_sac.config_loading",
    "make_env": "planet_sac.envs",
    "train": "planet_sac.training.trainer",
    "Trainer": "planet_sac.training.trainer",
    "make_envs": "planet_sac.envs",
    "evaluate": "planet_sac.acting.evaluation",
    "Agent": "planet_sac.agent",
    "load_agent": "planet_sac.agent",
    "Actor": "planet_sac.acting.actor",
    "RandomPolicy": "planet_sac.acting.actor",
    "Collector": "planet_sac.acting.collector",
    "collect_random": "planet_sac.acting.collector",
    "make_dataset": "planet_sac.episodes.loader",
    "EpisodeReplay": "planet_sac.episodes.loader",
    "save_episode": "planet_sac.episodes.storage",
    "load_episode": "planet_sac.episodes.storage",
}

__all__ = sorted(_EXPORTS)


_WITHOUT_TENSORFLOW = ("planet_sac.config", "planet_sac.config_loading", "planet_sac.envs")


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib
        import os

        if _EXPORTS[name] not in _WITHOUT_TENSORFLOW:  # without TensorFlow's start-up lines, unless asked for
            from planet_sac.startup import import_tensorflow

            import_tensorflow(quiet=os.environ.get("TF_CPP_MIN_LOG_LEVEL") != "0")
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'planet_sac' has no attribute {name!r}")
