"""Train a world model offline on the shipped Pendulum episodes, reuse it under a fresh SAC head, evaluate.

    python examples/train_world_model.py [LOGDIR] [CONFIG] [section.key=value ...]

Defaults: logdir/example and configs/pendulum.yaml (a few minutes on 2 CPU cores).
"""

import sys
from pathlib import Path

import planet_sac

root = Path(__file__).resolve().parents[1]
logdir = sys.argv[1] if len(sys.argv) > 1 else "logdir/example"
config_file = sys.argv[2] if len(sys.argv) > 2 else root / "configs/pendulum.yaml"
config = planet_sac.load_config(config_file, ["env.action_repeat=1", *sys.argv[3:]])  # the data has action repeat 1

# 1. World model (and a SAC head) from episodes on disk only: no environment is stepped.
metrics = planet_sac.train(config, f"{logdir}/offline", offline_data=str(root / "data/pendulum_state"))
print(f"offline world model: loss {metrics['loss/total']:.2f} after {metrics['step']} updates")

# 2. Its world model under a fresh SAC head (filtered restore), trained on in the environment.
planet_sac.train(config, f"{logdir}/new_head", restore_from=f"{logdir}/offline", include=["world_model/"])

# 3. Evaluate the new run.
for policy in ("random", "cem", "sac"):
    result = planet_sac.evaluate(f"{logdir}/new_head", episodes=3, policy=policy)
    print(f"{policy:<6} return {result['mean']:8.1f} ± {result['std']:.1f} over 3 episodes")
