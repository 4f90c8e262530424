r"""Where a cartpole head loses its reward: dm_control's four reward terms along the head's own episodes.

dm_control's cartpole pays, per simulator step, upright x centered x small_control x small_velocity
(`cartpole.Balance._get_reward`, dense): upright = (cos(pole angle) + 1) / 2; centered = (1 + tolerance(cart
position, margin 2)) / 2; small_control = (4 + tolerance(action, margin 1, quadratic)) / 5, so a saturated action
keeps 0.8; small_velocity = (1 + tolerance(pole angular velocity, margin 5)) / 2. A head scoring 0.65 per env step
could be losing any of them. This script loads a run's latest checkpoint, plays `--episodes` test-phase episodes of
the policy from the start states `planet-sac evaluate --seed` uses (episode k from seed + k), records its actions,
replays them in a fresh dm_control environment reset with the same seed (the simulation is deterministic, so the
replay's return must equal the episode's, and is checked), and prints per episode each term's mean per simulator
step, the cart's mean distance from the centre, the share of steps with the pole within 18 degrees of upright,
and the reward per simulator step in each quarter of the episode.

Usage:
    MUJOCO_GL=egl python research/cartpole_reward.py --logdir RUN --episodes 5 --seed 50000 [--policy sac] \
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import planet_sac  # noqa: F401  (before TensorFlow: it turns oneDNN on)

# isort: split
import gymnasium
import numpy as np

from planet_sac.acting.actor import TEST, Actor
from planet_sac.acting.evaluation import SeededResets
from planet_sac.agent import load_agent
from planet_sac.startup import make_tensorflow_deterministic


class RecordActions(gymnasium.Wrapper):
    """Keeps each episode's actions as the environment received them."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.episodes: list[list[np.ndarray]] = []

    def reset(self, **kwargs: Any):
        self.episodes.append([])
        return self.env.reset(**kwargs)

    def step(self, action: np.ndarray):
        self.episodes[-1].append(np.array(action, np.float64))
        return self.env.step(action)


def reward_terms(task: str, seed: int, actions: list[np.ndarray], action_repeat: int) -> dict[str, np.ndarray]:
    """The dense cartpole reward's terms per simulator step when `actions` (each held `action_repeat` steps) are
    replayed from the start state that `seed` gives, and the cart position, pole cosine and reward there.

    The replay renders nothing: called before dm_control is imported in this process, it imports it without an
    OpenGL back-end (EGL beside TensorFlow in one process crashes at exit, after the results).
    """
    if "dm_control" not in sys.modules:
        os.environ["MUJOCO_GL"] = "disable"  # the environment processes that render were started before
    from dm_control import suite
    from dm_control.utils import rewards

    domain, _, name = task.removeprefix("dmc:").partition("-")
    env = suite.load(domain, name, task_kwargs={"random": seed, "time_limit": float("inf")})
    env.task.random.seed(seed)
    env.reset()
    physics = env.physics
    terms: dict[str, list[float]] = {key: [] for key in (
        "upright", "centered", "small_control", "small_velocity", "cart_position", "cosine", "reward")}
    for action in actions:
        for _ in range(action_repeat):
            step = env.step(np.clip(action, -1.0, 1.0))
            cosine = float(np.mean(physics.pole_angle_cosine()))
            terms["upright"].append((cosine + 1) / 2)
            terms["centered"].append((1 + float(rewards.tolerance(physics.cart_position(), margin=2))) / 2)
            control = rewards.tolerance(physics.control(), margin=1, value_at_margin=0, sigmoid="quadratic")
            terms["small_control"].append((4 + float(np.asarray(control).ravel()[0])) / 5)
            velocity = rewards.tolerance(physics.angular_vel(), margin=5)
            terms["small_velocity"].append((1 + float(np.min(velocity))) / 2)
            terms["cart_position"].append(float(physics.cart_position()))
            terms["cosine"].append(cosine)
            terms["reward"].append(float(step.reward or 0.0))
    return {key: np.array(values) for key, values in terms.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=50000, help="episode k starts from seed + k (as evaluate)")
    parser.add_argument("--policy", default="sac")
    parser.add_argument("--json")
    args = parser.parse_args()
    make_tensorflow_deterministic()
    config, agent, env, step = load_agent(args.logdir, seed=args.seed)
    if not config.env.task.startswith("dmc:cartpole-"):
        raise SystemExit(f"{args.logdir}: a cartpole run is needed (this one is {config.env.task})")
    recorder = RecordActions(SeededResets(env, args.seed))
    agent.policy.set_policies(test=args.policy)
    try:
        summaries = Actor(recorder, agent.policy, TEST).run(args.episodes)
    finally:
        recorder.close()
    report = []
    print(f"{args.logdir} at update {step}, {config.env.task}, action repeat {config.env.action_repeat}, "
          f"policy {args.policy}")
    for index, (summary, actions) in enumerate(zip(summaries, recorder.episodes)):
        terms = reward_terms(config.env.task, args.seed + index, actions, config.env.action_repeat)
        replayed = float(terms["reward"].sum())
        if not np.isclose(replayed, summary["return"], rtol=1e-4, atol=1e-3):
            raise SystemExit(f"episode {index}: the replay returned {replayed:.3f}, the episode {summary['return']:.3f}:"
                             " the replay does not reproduce it")
        quarters = [float(part.mean()) for part in np.array_split(terms["reward"], 4)]
        row = {"seed": args.seed + index, "return": replayed,
               **{key: float(terms[key].mean()) for key in ("upright", "centered", "small_control", "small_velocity")},
               "mean_abs_cart_position": float(np.abs(terms["cart_position"]).mean()),
               "share_upright_18deg": float(np.mean(terms["cosine"] > np.cos(np.radians(18)))),
               "mean_abs_action": float(np.mean(np.abs(actions))), "reward_by_quarter": quarters}
        report.append(row)
        print(f"seed {row['seed']}: return {replayed:7.1f} | upright {row['upright']:.3f} centered "
              f"{row['centered']:.3f} small_control {row['small_control']:.3f} small_velocity "
              f"{row['small_velocity']:.3f} | |cart| {row['mean_abs_cart_position']:.2f} m, pole within 18 deg "
              f"{row['share_upright_18deg']:.0%}, |action| {row['mean_abs_action']:.2f} | reward per step by quarter "
              + " / ".join(f"{value:.2f}" for value in quarters))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"logdir": args.logdir, "checkpoint_step": step, "policy": args.policy, "episodes": report},
                      file, indent=1)


if __name__ == "__main__":
    main()
