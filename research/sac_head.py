"""The SAC head's levers, measured on one frozen world model: a new head trained offline, evaluated in the task.

Loads the world model of LOGDIR's latest checkpoint under a fresh SAC head (`--keep-head`:
the run's own head), embeds every training episode of the run once with the frozen encoder,
then runs ROUNDS rounds, each what the learner does after one world-model update: sample
`data.batch_size` chunks of `data.chunk_length` steps (uniform episode, uniform start, like
the loader), filter their posteriors from a zero state (as the learner does, sampled
latents), and call `actor_critic_updates` (`sac.updates_per_step` SAC updates, with
`sac.n_step`, `sac.burn_in`, `sac.imagination_horizon`, `sac.real_ratio` as `--set`).
The online head of a run with U updates got U rounds; here the model is frozen, so
the head is measured without the drift of the features it sees.

Every `--eval-every` rounds: `--episodes` test-phase episodes with `sac`, and for each the
critic's Q(z_t, a_t+1) beside the real discounted return G_t (first half of the episode).
At the end also `sac_guided_cem`, and (`--cem`) CEM on the same model, the yardstick; each
`--guided` entry (comma-separated `cem.*` overrides, e.g. `cem.value_weight=0.5,cem.actor_mean=true`)
evaluates `sac_guided_cem` once more with those planner settings and the same trained head;
each `--planned` entry does the same for CEM.

With `--save-run DIR` it writes the frozen world model and the trained head as a run
directory (config.yaml with the `--set` overrides, one checkpoint at the run's step), so
`planet-sac evaluate --logdir DIR` and other scripts measure that head without training it again.

With `--drift OTHER_LOGDIR` (the same run's later checkpoint, say) it finally measures how far
the features move when the world model trains on: the relative L2 distance between the two
models' episode-filtered features of the same episodes, and how much the trained head's Q of
the recorded actions changes between them (relative to |Q|).

Before training it reports two things about the transitions themselves:
- burn-in gap: how far the posterior features of a chunk filtered from a zero state are from
  those of the whole episode filtered from its start, k steps into the chunk (relative L2);
- episode ends: whether any recorded discount is below 1 (dm_control never terminates).

    .venv/bin/python research/sac_head.py --logdir bench/results/cartpole_pixels/run --rounds 4000 \
        --set sac.updates_per_step=10 --json research/results/sac_head/ups10.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Sequence

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.acting.actor import TEST, run_episode
from planet_sac.agent import load_agent
from planet_sac.checkpoints import Checkpointer
from planet_sac.config_loading import apply_overrides, save_config
from planet_sac.control.policy import Policy
from planet_sac.diagnostics import critic_vs_returns
from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import load_episode
from planet_sac.models.world_model import WorldModel
from planet_sac.training.learner import head_round

GAP_OFFSETS = (0, 1, 2, 3, 5, 10, 20)


def filtered_features(world_model: WorldModel, embed: tf.Tensor, action: tf.Tensor) -> np.ndarray:
    """concat(deter, posterior mean) [T, F] of one sequence filtered from a zero state, without sampling noise.

    `embed` [T, E] are encoder outputs and `action` [T, A] the aligned actions (action t led to step t).
    """
    posts, _ = world_model.rssm.observe(embed[None], action[None], tf.zeros([1, embed.shape[0], world_model.rssm.stoch_size]))
    return tf.concat([posts["deter"], posts["mean"]], -1)[0].numpy()


def chunk_start_gap(world_model: WorldModel, embed: tf.Tensor, action: tf.Tensor, starts: Sequence[int],
                    offsets: Sequence[int]) -> dict[int, float]:
    """Mean relative gap ||f_chunk - f_episode|| / ||f_episode|| at `offsets` steps into chunks starting at `starts`.

    `embed` [T, E] and `action` [T, A] are one episode's encoder outputs and aligned actions;
    f = `filtered_features`: the episode filtered from step 0 against the chunk filtered from
    a zero state at its start.
    """
    steps = int(embed.shape[0])
    full = filtered_features(world_model, embed, action)
    length = max(offsets) + 1
    gaps: dict[int, list[float]] = {k: [] for k in offsets}
    for start in starts:
        if start + length > steps:
            raise ValueError(f"a chunk starting at {start} with offsets up to {max(offsets)} passes the episode's {steps} steps")
        chunk = filtered_features(world_model, embed[start:start + length], action[start:start + length])
        for k in offsets:
            gaps[k].append(float(np.linalg.norm(chunk[k] - full[start + k]) / np.linalg.norm(full[start + k])))
    return {k: float(np.mean(values)) for k, values in gaps.items()}


def embed_episodes(world_model, episodes: list[dict], rng: tf.random.Generator) -> list[np.ndarray]:
    """The frozen encoder's embedding of every step of every episode (with dequantisation noise, as in training)."""
    embed = lambda obs: world_model.embed(obs, world_model.observation_noise(rng, obs))  # noqa: E731
    return [np.concatenate([embed(tf.constant(ep[world_model.obs_key][i:i + 256])).numpy()
                            for i in range(0, len(ep["action"]), 256)]) for ep in episodes]


def burn_in_gap(world_model, embeds: list[np.ndarray], episodes: list[dict], length: int, seed: int = 0) -> dict:
    """`chunk_start_gap` over 8 random chunk starts in each of the first 4 episodes."""
    numpy_rng = np.random.default_rng(seed)
    offsets = [k for k in GAP_OFFSETS if k < length]
    per_episode = [chunk_start_gap(world_model, tf.constant(embed), tf.constant(episode["action"], tf.float32),
                                   numpy_rng.integers(1, len(embed) - max(offsets), 8), offsets)
                   for embed, episode in zip(embeds[:4], episodes[:4])]
    return {k: float(np.mean([gaps[k] for gaps in per_episode])) for k in offsets}


class ChunkSampler:
    """Random chunks of pre-embedded episodes, as the loader samples them (uniform episode, uniform start)."""

    def __init__(self, embeds: list[np.ndarray], episodes: list[dict], batch_size: int, length: int, seed: int):
        self.embeds, self.episodes = embeds, episodes
        self.batch_size, self.length = batch_size, length
        self.rng = np.random.default_rng(seed)

    def __call__(self) -> dict[str, np.ndarray]:
        rows = {"embed": [], "action": [], "reward": [], "discount": []}
        for index in self.rng.integers(0, len(self.episodes), self.batch_size):
            start = int(self.rng.integers(0, len(self.embeds[index]) - self.length + 1))
            window = slice(start, start + self.length)
            rows["embed"].append(self.embeds[index][window])
            for key in ("action", "reward", "discount"):
                rows[key].append(self.episodes[index][key][window])
        return {key: np.stack(value).astype(np.float32) for key, value in rows.items()}


def drift(world_model, other_model, sac, episodes: list[dict], seed: int = 0) -> dict:
    """Feature and Q change between two world models on the same episodes (the first 4), for the same head."""
    rng = tf.random.Generator.from_seed(seed)
    features, q = [], []
    for episode in episodes[:4]:
        per_model = []
        for model in (world_model, other_model):
            rng.reset_from_seed(seed)  # the same dequantisation noise for both models
            (embed,) = embed_episodes(model, [episode], rng)
            per_model.append(filtered_features(model, tf.constant(embed), tf.constant(episode["action"], tf.float32)))
        a, b = per_model
        action = tf.constant(episode["action"][1:], tf.float32)  # Q(z_t, a_t+1)
        qa, qb = sac.q_value(tf.constant(a[:-1]), action).numpy(), sac.q_value(tf.constant(b[:-1]), action).numpy()
        features.append(float(np.mean(np.linalg.norm(a - b, axis=-1) / np.linalg.norm(a, axis=-1))))
        q.append(float(np.mean(np.abs(qa - qb)) / np.mean(np.abs(qa))))
    return {"feature_relative_l2": float(np.mean(features)), "q_relative_change": float(np.mean(q))}


def save_run(directory: str, config, agent, step: int) -> None:
    """A run directory holding the agent's acting variables at `step`, readable by `load_agent` and `evaluate`."""
    os.makedirs(directory, exist_ok=True)
    save_config(config, f"{directory}/config.yaml")
    variables = {**agent.acting_variables(), "counters/step": tf.Variable(step, dtype=tf.int64, name="step")}
    print(f"saved {Checkpointer(f'{directory}/checkpoints', variables).save(step)}", flush=True)


def evaluate(agent, env, policy: str, episodes: int, gamma: float, acting: Policy | None = None) -> dict:
    """Test-phase returns of `policy` (acting through `acting`, default the agent's), and Q beside the real returns."""
    acting = acting or agent.policy
    acting.set_policies(test=policy)
    returns, critic = [], []
    for _ in range(episodes):
        episode = run_episode(env, acting, TEST)
        returns.append(float(np.sum(episode["reward"])))
        critic.append(critic_vs_returns(agent.world_model, agent.sac, episode, gamma))
    result = {"return": float(np.mean(returns)), "return_std": float(np.std(returns)), "returns": returns}
    for key in critic[0]:
        result[key] = float(np.mean([c[key] for c in critic]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--rounds", type=int, default=4000,
                        help="learner steps to imitate (each: sac.updates_per_step updates); 0 with --keep-head "
                             "evaluates the run's own head (e.g. planner variants with --guided)")
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=3, help="test episodes per evaluation")
    parser.add_argument("--set", nargs="*", default=[], dest="overrides", help="config overrides, e.g. sac.n_step=3")
    parser.add_argument("--keep-head", action="store_true", help="start from the run's own SAC head instead of a fresh one")
    parser.add_argument("--cem", action="store_true", help="also evaluate CEM on the same model (the yardstick)")
    parser.add_argument("--guided", nargs="*", default=[], metavar="OVERRIDES",
                        help="extra sac_guided_cem evaluations, each with comma-separated cem.* overrides")
    parser.add_argument("--planned", nargs="*", default=[], metavar="OVERRIDES",
                        help="extra CEM evaluations, each with comma-separated cem.* overrides")
    parser.add_argument("--drift", metavar="OTHER_LOGDIR", help="also measure feature and Q drift against this run's model")
    parser.add_argument("--head-only", action="store_true", help="evaluate only the head at the end (no sac_guided_cem)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-run", metavar="DIR", help="write the world model and the trained head as a run directory")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    if args.rounds < 0 or (args.rounds == 0 and not args.keep_head):
        parser.error(f"--rounds {args.rounds}: train a new head for 1 or more rounds, or pass --keep-head with 0")

    include = ("world_model/", "sac/") if args.keep_head else ("world_model/",)
    overrides = [*args.overrides, f"seed={args.seed}"]
    config, agent, env, step = load_agent(args.logdir, overrides, seed=10_000 + args.seed, include=include)
    world_model, sac = agent.world_model, agent.sac
    paths = list_episodes(f"{args.logdir}/train_episodes")
    episodes = [load_episode(path) for path in paths]
    rng = tf.random.Generator.from_seed(args.seed)
    started = time.time()
    embeds = embed_episodes(world_model, episodes, rng)
    length, batch_size = config.data.chunk_length, config.data.batch_size
    agent_steps = sum(len(ep["action"]) - 1 for ep in episodes)
    result = {
        "logdir": args.logdir, "checkpoint_step": step, "overrides": args.overrides, "seed": args.seed,
        "keep_head": args.keep_head,
        "rounds": args.rounds, "sac_updates": args.rounds * config.sac.updates_per_step,
        "episodes": len(episodes), "agent_steps": agent_steps,
        "sac_updates_per_agent_step": args.rounds * config.sac.updates_per_step / agent_steps,
        "embed_seconds": time.time() - started,
        "burn_in_gap": burn_in_gap(world_model, embeds, episodes, length),
        "discount_below_1": int(sum(int(np.sum(ep["discount"] < 1)) for ep in episodes)),
        "curve": [],
    }
    print(json.dumps({key: value for key, value in result.items() if key != "curve"}), flush=True)

    sampler = ChunkSampler(embeds, episodes, batch_size, length, args.seed)

    round_ = tf.function(lambda chunk: head_round(world_model, sac, chunk["embed"], chunk, rng), autograph=False)

    train_seconds, metrics = 0.0, {}
    for index in range(1, args.rounds + 1):
        tick = time.time()
        metrics = round_({key: tf.constant(value) for key, value in sampler().items()})
        train_seconds += time.time() - tick
        if index % args.eval_every == 0 or index == args.rounds:
            point = {"round": index, "sac_updates": index * config.sac.updates_per_step, "train_seconds": train_seconds,
                     **{key: float(value) for key, value in metrics.items()},
                     "sac": evaluate(agent, env, "sac", args.episodes, config.sac.discount)}
            result["curve"].append(point)
            print(json.dumps({key: point[key] for key in ("round", "train_seconds", "sac/q", "sac/alpha", "sac/entropy")}
                             | {"sac_return": point["sac"]["return"], "q_episode": point["sac"]["sac/q_episode"],
                                "return_episode": point["sac"]["sac/return_episode"]}), flush=True)
    if args.save_run:
        save_run(args.save_run, config, agent, step)
    trained_head = result["curve"][-1]["sac"] if result["curve"] else None  # --rounds 0: the head as loaded
    result["final"] = {"sac": trained_head or evaluate(agent, env, "sac", args.episodes, config.sac.discount)}
    if not args.head_only:
        result["final"]["sac_guided_cem"] = evaluate(agent, env, "sac_guided_cem", args.episodes, config.sac.discount)
    if args.cem:
        result["final"]["cem"] = evaluate(agent, env, "cem", args.episodes, config.sac.discount)
    for policy, variants in (("sac_guided_cem", args.guided), ("cem", args.planned)):
        for variant in variants:
            cem_config = apply_overrides(config, variant.split(",")).cem
            acting = Policy(world_model, sac, cem_config, seed=config.seed + 1, jit_compile=config.policy.jit_compile)
            result["final"][f"{policy}[{variant}]"] = evaluate(agent, env, policy, args.episodes,
                                                              config.sac.discount, acting)
    print(json.dumps({name: value["return"] for name, value in result["final"].items()}), flush=True)
    if args.drift:
        _, other, other_env, other_step = load_agent(args.drift, include=("world_model/",))
        other_env.close()
        result["drift"] = {"other_logdir": args.drift, "other_step": other_step,
                           **drift(world_model, other.world_model, sac, episodes)}
        print(json.dumps(result["drift"]), flush=True)
    env.close()
    with open(args.json, "w") as file:
        json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
