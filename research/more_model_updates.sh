#!/bin/bash
# Does more training draw the small objects? A run's world model trained on further, offline and model only, on
# the run's own training episodes; its held-out reconstructions measured every few hundred updates. With
# --scratch a new world model is trained on the same episodes instead (compare loss weights on the same data).
#
#   research/more_model_updates.sh RUN OUT [--scratch] [--set KEY=VALUE]... [STEPS...]
#                                                         (default steps: 250 500 750 1000 1500 2000)
#
# RUN: a finished run directory (its latest checkpoint's world model is restored unless --scratch, its
# test_episodes/ are the held-out data, its config.yaml the config); OUT: a new run directory for the training;
# --set: a config key changed for it (e.g. model.kl_scale=0.55). Prints research/reconstructions.py's line after
# each segment.
set -euo pipefail
usage="usage: research/more_model_updates.sh RUN OUT [--scratch] [--set KEY=VALUE]... [STEPS...]"
src=$(realpath "${1:?$usage}")
out=${2:?$usage}
shift 2
restore=(--restore-from "$src" --include "world_model/")
sets=() steps=()
while [ $# -gt 0 ]; do
  case $1 in
    --scratch) restore=() ;;
    --set) sets+=(--set "${2:?$usage}"); shift ;;
    *) steps+=("$1") ;;
  esac
  shift
done
if [ ${#steps[@]} -eq 0 ]; then steps=(250 500 750 1000 1500 2000); fi
repo=$(cd "$(dirname "$0")/.." && pwd)
export MUJOCO_GL=${MUJOCO_GL:-egl}
for total in "${steps[@]}"; do
  "$repo/.venv/bin/python" -m planet_sac train --config "$src/config.yaml" --logdir "$out" \
    --offline-data "$src/train_episodes" "${restore[@]}" "${sets[@]}" \
    --set sac.updates_per_step=0 --set schedule.checkpoint_every=250 --train-steps "$total" --force > /dev/null
  echo "$total updates: $("$repo/.venv/bin/python" "$repo/research/reconstructions.py" "$out" --held-out "$src/test_episodes" 2>/dev/null | grep error)"
done
