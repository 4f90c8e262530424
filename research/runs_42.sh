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
# OUT holds one suite folder per lever (OUT/<lever>/) and the code snapshots (OUT/src-<commit>/, made by
# `git archive` on first use). The runs of docs/results.md ("Closing the gap to DreamerV3") used OUT=~/runs/levers
# (the snapshot f2d375c's tree in ~/runs/src-004dcfe). Compare a lever with the published runs at the same seeds and steps:
#
#   .venv/bin/python bench/lever_table.py bench/results/dmc_vision OUT/<lever> --at 50000
set -euo pipefail
mode=${1:?usage: research/levers_42.sh run|publish OUT}
out=$(realpath "${2:?usage: research/levers_42.sh run|publish OUT}")
repo=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}  # REPO: the checkout, when this runs from a copy

# lever snapshot task seed keys...: in the order they run. `base` is the control: no keys, the same snapshot, so
# its final evaluation at 50k is what a lever's is compared with (the published runs were evaluated at 100k only).
# f2d375c for every lever it has. Return normalisation came later (bca04ef), so its runs use e3f9c23, whose training
# is the same (the random streams are not: the published runs' 0971fac differs from both, docs/results.md).
# `rr50` (twice the model updates per env step, the SAC updates per env step kept) and `dec32` (PlaNet's full
# decoder width) target the world model, which at 50k draws neither cup nor ball; they use 71f2c87, whose test
# phases log the held-out reconstruction error on moving pixels. Neither drew them on ball_in_cup seed 0, and both
# cost 1.3-1.5x the update time, so they stop there (docs/results.md).
queue() {
  local kl="model.kl_balance=0.8 model.free_nats=1.0" old=f2d375c
  local rr50="schedule.collect_every=50 schedule.train_phase_steps=250 sac.updates_per_step=20"
  cat <<EOF
std01 $old dmc:finger-spin 0 sac.min_std=0.1
std01 $old dmc:ball_in_cup-catch 0 sac.min_std=0.1
std01 $old dmc:finger-spin 1 sac.min_std=0.1
std01 $old dmc:ball_in_cup-catch 1 sac.min_std=0.1
shift4 $old dmc:reacher-easy 0 model.augment_shift=4
kl08 $old dmc:ball_in_cup-catch 0 $kl
kl08 $old dmc:cartpole-swingup 0 $kl
kl08 $old dmc:ball_in_cup-catch 1 $kl
shift4 $old dmc:ball_in_cup-catch 0 model.augment_shift=4
std01 $old dmc:cheetah-run 0 sac.min_std=0.1
kl08 $old dmc:cartpole-swingup 1 $kl
rr50 71f2c87 dmc:ball_in_cup-catch 0 $rr50
dec32 71f2c87 dmc:ball_in_cup-catch 0 model.decoder_depth=32
kl08 $old dmc:cheetah-run 0 $kl
alpha001 $old dmc:finger-spin 0 sac.min_alpha=0.01
base $old dmc:ball_in_cup-catch 0
alpha001 $old dmc:ball_in_cup-catch 0 sac.min_alpha=0.01
alpha001 $old dmc:finger-spin 1 sac.min_alpha=0.01
alpha001 $old dmc:cheetah-run 0 sac.min_alpha=0.01
expl03 $old dmc:finger-spin 0 sac.exploration_noise=0.3
expl03 $old dmc:ball_in_cup-catch 0 sac.exploration_noise=0.3
base $old dmc:ball_in_cup-catch 1
retnorm e3f9c23 dmc:finger-spin 0 sac.return_normalization=true
retnorm e3f9c23 dmc:ball_in_cup-catch 0 sac.return_normalization=true
alpha001 $old dmc:ball_in_cup-catch 1 sac.min_alpha=0.01
expl03 $old dmc:finger-spin 1 sac.exploration_noise=0.3
expl03 $old dmc:ball_in_cup-catch 1 sac.exploration_noise=0.3
retnorm e3f9c23 dmc:finger-spin 1 sac.return_normalization=true
retnorm e3f9c23 dmc:ball_in_cup-catch 1 sac.return_normalization=true
shift4 $old dmc:reacher-easy 1 model.augment_shift=4
shift4 $old dmc:ball_in_cup-catch 1 model.augment_shift=4
std01 $old dmc:cheetah-run 1 sac.min_std=0.1
base $old dmc:finger-spin 0
base $old dmc:finger-spin 1
EOF
}

case $mode in
run)
  export MUJOCO_GL=${MUJOCO_GL:-egl}
  queue | while read -r lever snapshot task seed keys; do
    src=$out/src-$snapshot
    if [ ! -d "$src" ]; then  # two workers may both make it: the first rename wins
      tmp=$(mktemp -d "$src.XXXX") && git -C "$repo" archive "$snapshot" | tar -x -C "$tmp"
      mv -T "$tmp" "$src" 2>/dev/null || rm -rf "$tmp"
    fi
    config=$src/configs/dmc_vision_cpu_v1.yaml  # the first benchmark's config; named dmc_vision_cpu.yaml until d0c7fdf
    if [ ! -f "$config" ]; then config=$src/configs/dmc_vision_cpu.yaml; fi
    sets=(); for key in $keys; do sets+=(--set "$key"); done
    PYTHONPATH=$src nice -n 5 "$repo/.venv/bin/python" -m planet_sac suite --config "$config" \
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
