#!/usr/bin/env bash
# Stages a long run's state in git so that the next session, on a new machine, resumes it with
# the same command: its config, metrics, TensorBoard events, episodes and only the newest
# checkpoint (about 66 MB for PlaNet's pixel model with its Adam slots). Run directories are
# gitignored; this adds one on purpose. Commit afterwards.
#   bench/keep_run.sh bench/results/cartpole_pixels/run
set -euo pipefail
run=${1:?usage: bench/keep_run.sh RUN_DIR}
state="$run/checkpoints/checkpoint"
[ -f "$state" ] || { echo "keep_run: $state not found: the run has no checkpoint yet" >&2; exit 2; }
newest=$(sed -n 's/^model_checkpoint_path: "\(.*\)"$/\1/p' "$state")
git rm -r -q --cached --ignore-unmatch "$run/checkpoints"
git add -f "$run/config.yaml" "$run/metrics.jsonl" "$run"/events.out.tfevents.* "$run/train_episodes" \
    "$run/test_episodes" "$state" "$run/checkpoints/$newest".*
echo "staged $run with checkpoint $newest"
