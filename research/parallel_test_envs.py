"""What do a test phase's episodes cost in one environment process against two (`env.test_envs`)?

The SAC head of an untrained agent of `configs/dmc_vision_cpu.yaml` plays `EPISODES` test-phase episodes of a
dm_control task from pixels, twice in each setting (1, 2, 1, 2 environments; each timed after a warm-up episode
that traces the policy and starts the processes). Run it on an idle machine:

    MUJOCO_GL=egl .venv/bin/python research/parallel_test_envs.py dmc:cartpole-swingup 4
"""

from __future__ import annotations

import sys
import time

from planet_sac.acting.actor import TEST, Actor
from planet_sac.agent import Agent
from planet_sac.config_loading import load_config
from planet_sac.envs import make_env, make_envs
from planet_sac.startup import make_tensorflow_deterministic


def main(task: str, episodes: int) -> None:
    make_tensorflow_deterministic()
    config = load_config("dmc_vision_cpu", [f"env.task={task}", "env.action_repeat=4", "env.test_envs=1"])
    probe = make_env(config.env, seed=1)
    action_size = int(probe.action_space.shape[0])
    probe.close()
    agent = Agent.build(config, "image", (64, 64, 3), action_size)
    agent.policy.set_policies(test="sac")
    for count in (1, 2, 1, 2):
        envs = make_env(config.env, seed=1) if count == 1 else make_envs(config.env, seed=1, num_envs=count)
        try:
            Actor(envs, agent.policy, TEST).run(1, seeds=[0])
            start = time.perf_counter()
            Actor(envs, agent.policy, TEST).run(episodes, seeds=list(range(1, episodes + 1)))
            print(f"{task} env.test_envs={count}: {episodes} episodes in {time.perf_counter() - start:.1f} s", flush=True)
        finally:
            envs.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
