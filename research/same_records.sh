#!/bin/bash
# Do two code trees compute the same run? Each trains the same config for the same number of updates on this
# machine (one TensorFlow thread, as the queue's workers), then every metrics record is compared but the clock's.
#
#   research/same_records.sh OLD_TREE NEW_TREE OUT [CONFIG] [UPDATES]
#
# OLD_TREE / NEW_TREE: folders holding planet_sac/ (a `git archive` snapshot, or the checkout); CONFIG defaults to
# the checkout's configs/dmc_vision_cpu.yaml (cartpole-swingup, its seed episodes, then UPDATES updates, default 60,
# with the training episodes collected between them). Prints "identical" or the first differing record's keys.
set -euo pipefail
old=$(realpath "${1:?usage: research/same_records.sh OLD_TREE NEW_TREE OUT [CONFIG] [UPDATES]}")
new=$(realpath "${2:?usage: research/same_records.sh OLD_TREE NEW_TREE OUT [CONFIG] [UPDATES]}")
out=${3:?usage: research/same_records.sh OLD_TREE NEW_TREE OUT [CONFIG] [UPDATES]}
repo=$(cd "$(dirname "$0")/.." && pwd)
config=$(realpath "${4:-$repo/configs/dmc_vision_cpu.yaml}")
updates=${5:-60}
export MUJOCO_GL=${MUJOCO_GL:-egl} TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1
mkdir -p "$out"
for side in old new; do
  tree=$old; [ $side = new ] && tree=$new
  rm -rf "${out:?}/$side"
  PYTHONPATH=$tree nice -n 5 "$repo/.venv/bin/python" -m planet_sac train --config "$config" --logdir "$out/$side" \
    --train-steps "$updates" --quiet > "$out/$side.log" 2>&1
done
"$repo/.venv/bin/python" - "$out" <<'PY'
import json, sys

def records(path):
    with open(path) as file:
        return [{key: value for key, value in json.loads(line).items()
                 if key != "time" and not key.startswith("time/") and key != "train/steps_per_second"} for line in file]

old, new = (records(f"{sys.argv[1]}/{side}/metrics.jsonl") for side in ("old", "new"))
differing = [(a, b) for a, b in zip(old, new) if a != b]
print(f"{len(old)} and {len(new)} records:", "identical" if len(old) == len(new) and not differing else "DIFFER")
for a, b in differing[:1]:
    print({key: (a.get(key), b.get(key)) for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)})
PY
