"""Planning quality against planning cost on a trained run: bfloat16 rollouts and warm starts.

For the latent states along one recorded test episode of LOGDIR (posteriors filtered with
the run's world model), this plans with CEM in float32 and in bfloat16 from the same
random stream (and in float32 from another stream: CEM's own noise, the yardstick), and
with and without a warm start for several iteration counts. Each
plan's quality is its *planned return*: the float32 model's predicted discounted return
of the plan's action sequence, averaged over 100 sampled rollouts. Times are per plan.

    .venv/bin/python research/bench_planning.py --logdir bench/results/cartpole_pixels/run --states 20 \
        --json research/results/planning.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.agent import load_agent
from planet_sac.control import cem
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode


def posterior_states(world_model, episode: dict, count: int, skip: int = 5) -> list[dict]:
    """Posterior states after `skip` filtered steps of a recorded episode, `count` of them in a row."""
    obs = tf.constant(episode[world_model.obs_key][None, : skip + count])
    action = tf.constant(episode["action"][None, : skip + count])
    noise = world_model.observation_noise(tf.random.Generator.from_seed(0), obs)
    posts, _ = world_model.rssm.observe(world_model.embed(obs, noise), action,
                                        tf.zeros([1, skip + count, world_model.rssm.stoch_size]))
    return [{key: value[:, t] for key, value in posts.items()} for t in range(skip, skip + count)]


def planned_return(world_model, state: dict, plan: tf.Tensor, discount: float, samples: int = 100) -> float:
    """The float32 model's discounted return of `plan` [1, H, A] from `state`, averaged over sampled rollouts."""
    score = cem.rollout_return(world_model, None, discount)
    tiled = {key: tf.repeat(value, samples, 0) for key, value in state.items()}
    actions = tf.repeat(plan, samples, 0)
    noise = tf.random.stateless_normal([samples, plan.shape[1], world_model.rssm.stoch_size], seed=[1, 2])
    return float(tf.reduce_mean(score(tiled, actions, noise)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--states", type=int, default=20)
    parser.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 3, 5, 10])
    parser.add_argument("--json")
    args = parser.parse_args()

    config, agent, env, step = load_agent(args.logdir)
    env.close()
    world_model = agent.world_model
    episode = load_episode(list_episodes(f"{args.logdir}/test_episodes")[-1])
    states = posterior_states(world_model, episode, args.states)
    base = config.cem
    results: dict = {"logdir": args.logdir, "checkpoint_step": step, "cem": dataclasses.asdict(base), "states": len(states)}

    rng = tf.random.Generator.from_seed(0)  # one generator, reseeded per state: the same stream for each variant

    def make(cem_config):
        function = tf.function(lambda state, mean: cem.search(world_model, state, cem_config, rng, initial_mean=mean),
                               autograph=False)

        def search(state, seed, mean):
            rng.reset_from_seed(seed)
            return function(state, mean)

        return search

    # float32 against bfloat16, same random stream per state.
    # A second float32 search from another random stream is the yardstick: how much CEM's own
    # sampling noise moves the chosen action and the planned return.
    precision = {}
    for name, dtype, stream in (("float32", "float32", 0), ("bfloat16", "bfloat16", 0),
                                ("float32_other_stream", "float32", 10_000)):
        search = make(dataclasses.replace(base, precision=dtype))
        zero = tf.zeros([1, base.horizon, world_model.action_size])
        search(states[0], 0, zero)  # trace
        actions, returns, times = [], [], []
        for index, state in enumerate(states):
            start = time.perf_counter()
            action, mean = search(state, index + stream, zero)
            action.numpy()
            times.append(time.perf_counter() - start)
            actions.append(action.numpy()[0])
            returns.append(planned_return(world_model, state, mean, base.discount))
        precision[name] = {"actions": np.array(actions), "returns": returns, "seconds": statistics.median(times)}
    results["precision"] = {
        name: {"planned_return": float(np.mean(value["returns"])), "seconds_per_plan": value["seconds"]}
        for name, value in precision.items()}
    for other in ("bfloat16", "float32_other_stream"):
        difference = np.abs(precision["float32"]["actions"] - precision[other]["actions"])
        results["precision"][f"action_abs_difference_float32_vs_{other}"] = {"mean": float(difference.mean()),
                                                                             "max": float(difference.max())}

    # Cold (zero mean) against warm (previous plan shifted) starts, along the episode.
    warm_start = {}
    for iterations in args.iterations:
        search = make(dataclasses.replace(base, iterations=iterations))
        for warm in (False, True):
            plan = tf.zeros([1, base.horizon, world_model.action_size])
            returns = []
            for index, state in enumerate(states):
                initial = cem.shift_plan(plan) if warm else tf.zeros_like(plan)
                _, plan = search(state, index, initial)
                returns.append(planned_return(world_model, state, plan, base.discount))
            warm_start[f"{iterations}_{'warm' if warm else 'cold'}"] = float(np.mean(returns))
    results["warm_start_planned_return"] = warm_start

    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    main()
