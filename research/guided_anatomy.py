"""What the SAC-guided planner does at the states its head visits: the anatomy of its choices.

Runs one test episode of LOGDIR's SAC head (the actor's mode), filters the episode's posterior
states (no sampling noise, as the test phase acts) and, at every `--every`-th state, runs
each planner variant's search once and records, against the head's own action a_pi:

- `actor_elite_share`: the share of the last iteration's elites that are actor trajectories
  (the rest are samples of the planner's Gaussian);
- `best_sampled_minus_actor`: the best sampled candidate's score minus the best actor
  trajectory's (model rewards over the horizon plus the critic's value at its end): how much
  the search believes it beats the head;
- `action_distance`: mean |a_plan - a_pi| per action dimension;
- `q_plan_minus_q_pi`: the critic's Q(z, a_plan) - Q(z, a_pi): whether the head's own critic
  prefers the planner's first action to the actor's;
- `q_plan_minus_q_elites`: Q(z, a_plan) minus the mean Q of the elites' own first actions: what
  taking the elites' mean (PlaNet's choice) costs against the actions the elites start with.

Variants are comma-separated `cem.*` overrides ("" for the run's own settings); a variant
prefixed with `cem:` plans without the head (plain CEM, for comparison).

    .venv/bin/python research/guided_anatomy.py --logdir RUN --every 5 \\
        --variants "" "cem.value_weight=0.5" "cem:" --json research/results/sac_head/anatomy.json
"""

from __future__ import annotations

import argparse
import json

import planet_sac  # noqa: F401  (first: TensorFlow's CPU options)

# isort: split
import numpy as np
import tensorflow as tf

from planet_sac.acting.actor import TEST, run_episode
from planet_sac.agent import load_agent
from planet_sac.config_loading import apply_overrides
from planet_sac.control import cem
from planet_sac.diagnostics import episode_posteriors


def anatomy(world_model, sac, cem_config, state: dict[str, tf.Tensor], rng: tf.random.Generator,
            guided: bool) -> dict[str, float]:
    """One search from one state [1, ...]; the measures of the module docstring.

    Runs eagerly, so the search's while loop calls the score once per iteration in Python and the
    last recorded call holds the last iteration's candidates and scores.
    """
    recorded = []
    score = cem.rollout_return(world_model, sac if guided else None, cem_config.discount, cem_config.value_weight)

    def recording(start, actions, noise):
        returns = score(start, actions, noise)
        recorded.append((actions, returns))
        return returns

    fraction = cem_config.guide_fraction if guided else 0.0
    action, _ = cem.search(world_model, state, cem_config, rng, sac if guided else None, fraction, recording)
    candidates, returns = recorded[-1]  # the last iteration: [N, H, A] and [N]
    total = int(returns.shape[0])
    sampled = total - int(round(fraction * total))
    elites = tf.math.top_k(returns, cem_config.top_k).indices.numpy()
    features = world_model.rssm.features(state)
    a_pi = sac.act(features, tf.zeros_like(action), True)
    first = tf.gather(candidates[:, 0], elites)
    q_elites = sac.q_value(tf.repeat(features, len(elites), 0), first)
    q_plan, q_pi = float(sac.q_value(features, action)[0]), float(sac.q_value(features, a_pi)[0])
    result = {"action_distance": float(tf.reduce_mean(tf.abs(action - a_pi))), "q_plan_minus_q_pi": q_plan - q_pi,
              "q_plan_minus_q_elites": q_plan - float(tf.reduce_mean(q_elites))}
    if guided and sampled < total:
        result["actor_elite_share"] = float(np.mean(elites >= sampled))
    if guided and 0 < sampled < total:
        returns = returns.numpy()
        result["best_sampled_minus_actor"] = float(returns[:sampled].max() - returns[sampled:].max())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--variants", nargs="+", default=[""], help='cem.* overrides per variant; "cem:" prefix = plain CEM')
    parser.add_argument("--every", type=int, default=5, help="search at every k-th state of the head's episode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    if args.every < 1:
        parser.error(f"--every {args.every}: must be 1 or more")

    config, agent, env, step = load_agent(args.logdir, [f"seed={args.seed}"], seed=10_000 + args.seed)
    agent.policy.set_policies(test="sac")
    episode = run_episode(env, agent.policy, TEST)
    env.close()
    states = episode_posteriors(agent.world_model, episode)
    indices = list(range(1, len(episode["action"]), args.every))
    result = {"logdir": args.logdir, "checkpoint_step": step, "seed": args.seed, "head_return": float(np.sum(episode["reward"])),
              "states": len(indices), "variants": {}}
    print(json.dumps({key: result[key] for key in ("checkpoint_step", "head_return", "states")}), flush=True)
    for variant in args.variants:
        guided = not variant.startswith("cem:")
        overrides = [item for item in variant.removeprefix("cem:").split(",") if item]
        cem_config = apply_overrides(config, overrides).cem
        rng = tf.random.Generator.from_seed(args.seed)
        rows = [anatomy(agent.world_model, agent.sac, cem_config, {key: value[i:i + 1] for key, value in states.items()},
                        rng, guided) for i in indices]
        summary = {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
        summary |= {f"{key}_std": float(np.std([row[key] for row in rows])) for key in rows[0]}
        result["variants"][variant or "defaults"] = summary
        print(json.dumps({"variant": variant or "defaults", **{k: round(v, 3) for k, v in summary.items()}}), flush=True)
    with open(args.json, "w") as file:
        json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
