#!/bin/bash
# Does more training draw the small objects? A run's world model trained on further, offline and model only, on
# the run's own training episodes; its held-out reconstructions measured every few hundred updates.
#
#   research/more_model_updates.sh RUN OUT [STEPS...]     (default steps: 250 500 750 1000 1500 2000)
#
# RUN: a finished run directory (its latest checkpoint's world model is restored, its test_episodes/ are the
# held-out data); OUT: a new run directory for the continued training. Prints research/reconstructions.py's line
# after each segment.
set -euo pipefail
src=$(realpath "${1:?usage: research/more_model_updates.sh RUN OUT [STEPS...]}")
out=${2:?usage: research/more_model_updates.sh RUN OUT [STEPS...]}
shift 2
steps=("$@"); if [ ${#steps[@]} -eq 0 ]; then steps=(250 500 750 1000 1500 2000); fi
repo=$(cd "$(dirname "$0")/.." && pwd)
export MUJOCO_GL=${MUJOCO_GL:-egl}
for total in "${steps[@]}"; do
  "$repo/.venv/bin/python" -m planet_sac train --config "$src/config.yaml" --logdir "$out" \
    --offline-data "$src/train_episodes" --restore-from "$src" --include "world_model/" \
    --set sac.updates_per_step=0 --set schedule.checkpoint_every=250 --train-steps "$total" --force > /dev/null
  "$repo/.venv/bin/python" "$repo/research/reconstructions.py" "$out" --held-out "$src/test_episodes" 2>/dev/null | grep error
done
