#!/usr/bin/env bash
# Stages a long run's state in git so that the next session, on a new machine, resumes it with
# the same command: its config, metrics, TensorBoard events, episodes and only the newest
# checkpoint (about 66 MB for PlaNet's pixel model with its Adam slots). Run directories are
# gitignored; this adds one on purpose. Commit afterwards.
#   bench/keep_run.sh RUN_DIR [BASE]
# BASE is the commit the session started from (default: HEAD). The script prints how many bytes
# of diff the commits since BASE plus what is staged add up to, since a session's submission is
# refused whole above 256 MiB of diffs (binary files count in full, and a checkpoint replaced
# counts twice: the new one added and the old one removed). One checkpoint replacement is about
# 130 MB: keep one run per session, at the end of it, not each time its curve grows.
set -euo pipefail
run=${1:?usage: bench/keep_run.sh RUN_DIR [BASE]}
base=${2:-HEAD}
state="$run/checkpoints/checkpoint"
[ -f "$state" ] || { echo "keep_run: $state not found: the run has no checkpoint yet" >&2; exit 2; }
newest=$(sed -n 's/^model_checkpoint_path: "\(.*\)"$/\1/p' "$state")
[ -n "$newest" ] || { echo "keep_run: $state names no model_checkpoint_path" >&2; exit 2; }
# The kept state lists only the kept checkpoint, so no stale names travel with the run. It has no
# timestamps, and tf.train.CheckpointManager ignores checkpoints listed without them: the run's
# Checkpointer rebuilds the state from the files when it resumes (checkpoints.reconcile_state).
printf 'model_checkpoint_path: "%s"\nall_model_checkpoint_paths: "%s"\n' "$newest" "$newest" > "$state.kept"
mv "$state.kept" "$state"
git rm -r -q --cached --ignore-unmatch "$run/checkpoints"
git add -f "$run/config.yaml" "$run/metrics.jsonl" "$run"/events.out.tfevents.* "$run/train_episodes" \
    "$run/test_episodes" "$state" "$run/checkpoints/$newest".*
echo "staged $run with checkpoint $newest"
total=$(git diff --cached --binary | wc -c)
for commit in $(git rev-list "$base..HEAD"); do
    total=$((total + $(git show --binary --format= "$commit" | wc -c)))
done
limit=$((256 * 1024 * 1024))
echo "diff since $base incl. staged: $((total / 1024 / 1024)) MiB of the 256 MiB a session may submit"
if [ "$total" -gt $((limit * 9 / 10)) ]; then
    echo "keep_run: WARNING: within 10% of (or over) the submission limit; unstage something (git reset $run)" >&2
fi
