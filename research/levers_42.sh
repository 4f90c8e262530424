#!/bin/bash
# The lever runs of issue #42: 50k env steps each, seeds 0 and 1 of the tasks each lever targets, the first
# published benchmark's config (the snapshot's configs/dmc_vision_cpu.yaml, today's dmc_vision_cpu_v1.yaml) plus the
# lever's keys, from one code snapshot.
#
#   research/levers_42.sh run OUT        one queue worker; start two on 2 cores (the suite's claims keep them
#                                        apart, finished runs are skipped, stopped ones resume from checkpoints)
#   research/levers_42.sh publish OUT    copy each run's metrics.jsonl, config.yaml and result.json into
#                                        bench/results/levers_42/<lever>/<task>/seed<k>/ (no checkpoints, episodes
#                                        or event files)
#
# OUT holds one suite folder per lever (OUT/<lever>/) and the code snapshot (OUT/src-<commit>/, made by
# `git archive` on first use). The runs of docs/results.md ("Closing the gap to DreamerV3") used OUT=~/runs/levers
# and snapshot f2d375c (its tree in ~/runs/src-004dcfe). Compare a lever with the published runs at the same seeds and steps:
#
#   .venv/bin/python bench/lever_table.py bench/results/dmc_vision OUT/<lever> --at 50000
set -euo pipefail
mode=${1:?usage: research/levers_42.sh run|publish OUT}
out=$(realpath "${2:?usage: research/levers_42.sh run|publish OUT}")
repo=$(cd "$(dirname "$0")/.." && pwd)
snapshot=${SNAPSHOT:-f2d375c}

# lever task seed keys...: in the order they run.
queue() {
  local kl="model.kl_balance=0.8 model.free_nats=1.0"
  cat <<EOF
std01 dmc:finger-spin 0 sac.min_std=0.1
std01 dmc:ball_in_cup-catch 0 sac.min_std=0.1
std01 dmc:finger-spin 1 sac.min_std=0.1
std01 dmc:ball_in_cup-catch 1 sac.min_std=0.1
shift4 dmc:reacher-easy 0 model.augment_shift=4
kl08 dmc:ball_in_cup-catch 0 $kl
kl08 dmc:cartpole-swingup 0 $kl
kl08 dmc:ball_in_cup-catch 1 $kl
shift4 dmc:ball_in_cup-catch 0 model.augment_shift=4
std01 dmc:cheetah-run 0 sac.min_std=0.1
kl08 dmc:cartpole-swingup 1 $kl
shift4 dmc:reacher-easy 1 model.augment_shift=4
shift4 dmc:ball_in_cup-catch 1 model.augment_shift=4
std01 dmc:cheetah-run 1 sac.min_std=0.1
alpha001 dmc:finger-spin 0 sac.min_alpha=0.01
alpha001 dmc:ball_in_cup-catch 0 sac.min_alpha=0.01
alpha001 dmc:finger-spin 1 sac.min_alpha=0.01
alpha001 dmc:ball_in_cup-catch 1 sac.min_alpha=0.01
EOF
}

case $mode in
run)
  src=$out/src-$snapshot
  if [ ! -d "$src" ]; then
    mkdir -p "$src.tmp" && git -C "$repo" archive "$snapshot" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"
  fi
  export PYTHONPATH=$src MUJOCO_GL=${MUJOCO_GL:-egl}
  queue | while read -r lever task seed keys; do
    sets=(); for key in $keys; do sets+=(--set "$key"); done
    nice -n 5 "$repo/.venv/bin/python" -m planet_sac suite --config "$src/configs/dmc_vision_cpu.yaml" \
      --tasks "$task" --seeds "$seed" --env-steps 50000 --out "$out/$lever" --eval-episodes 10 \
      --compare-episodes 0 "${sets[@]}" < /dev/null
  done
  ;;
publish)
  for run in "$out"/*/runs/*/seed*/; do
    [ -f "$run/metrics.jsonl" ] || continue
    lever=$(basename "$(dirname "$(dirname "$(dirname "$run")")")")
    task=$(basename "$(dirname "$run")") seed=$(basename "$run")
    dest=$repo/bench/results/levers_42/$lever/$task/$seed
    mkdir -p "$dest"
    cp "$run/metrics.jsonl" "$run/config.yaml" "$dest/"
    result=$out/$lever/results/$task/$seed/result.json
    if [ -f "$result" ]; then cp "$result" "$dest/"; fi
  done
  ;;
*) echo "research/levers_42.sh: unknown mode $mode (run or publish)" >&2; exit 2 ;;
esac
