#!/usr/bin/env bash
# One `make train` sequence (train configs/pendulum.yaml, then evaluate random / cem / sac on
# 5 episodes) into RUNDIR, with its wall-clock and the processes' own CPU time (GNU time).
# Usage: research/pendulum_head/first_run.sh RUNDIR SEED [--set key=value ...]
# Run from the repository root. Writes RUNDIR/{train,evaluate}.time and RUNDIR/evaluation.txt.
set -euo pipefail
rundir=$1; seed=$2; shift 2
py=.venv/bin/python
export MUJOCO_GL=${MUJOCO_GL:-egl}
mkdir -p "$rundir"
start=$(date +%s.%N)
/usr/bin/time -f "wall %e s, user %U s, sys %S s, max rss %M KB" -o "$rundir/train.time" \
  $py -m planet_sac train --config configs/pendulum.yaml --logdir "$rundir" --quiet \
  --set seed="$seed" --set env.seed="$seed" "$@"
/usr/bin/time -f "wall %e s, user %U s, sys %S s, max rss %M KB" -o "$rundir/evaluate.time" \
  $py -m planet_sac evaluate --logdir "$rundir" --episodes 5 --policy random cem sac | tee "$rundir/evaluation.txt"
end=$(date +%s.%N)
echo "train:    $(cat "$rundir/train.time")" | tee -a "$rundir/evaluation.txt"
echo "evaluate: $(cat "$rundir/evaluate.time")" | tee -a "$rundir/evaluation.txt"
echo "total wall $(echo "$end - $start" | bc) s (train + evaluate)" | tee -a "$rundir/evaluation.txt"
