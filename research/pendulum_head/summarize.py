"""One row per `first_run.sh` run directory: the evaluation table, wall-clock, CPU time and the `time/*` metrics.

Sums the trainer's own timers from metrics.jsonl: updates (`time/update_seconds` x the updates of each
window), collection (`time/collect_seconds`, split by the policy that collected, `train/return/<policy>`)
and test phases (`time/test_seconds`), and reads GNU time's lines (`train.time`, `evaluate.time`, and
`install.time` one level up when present). Prints Markdown; `--json` also writes the rows.

    python3 research/pendulum_head/summarize.py RUNDIR [RUNDIR ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re


def gnu_time(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    text = open(path).read()
    values = dict(re.findall(r"(wall|user|sys) ([\d.]+) s", text))
    if "wall" not in values:
        return None
    cpu = float(values["user"]) + float(values["sys"]) if "user" in values and "sys" in values else None
    return {"wall": float(values["wall"]), "cpu": cpu}  # cpu None: only the wall-clock was recorded


def evaluation(path: str) -> dict:
    rows = {}
    for line in open(path):
        parts = line.split()
        if len(parts) == 5 and parts[0] in ("random", "cem", "sac", "sac_guided_cem"):
            rows[parts[0]] = {"mean": float(parts[1]), "std": float(parts[2]), "min": float(parts[3]), "max": float(parts[4])}
    return rows


def timers(path: str, log_every: int = 50) -> dict:
    records = [json.loads(line) for line in open(path)]
    update = collect = test = 0.0
    collect_by: dict[str, float] = {}
    last_step = 0
    for record in records:
        if record.get("phase") == "test":
            test += record.get("time/test_seconds", 0.0)
            continue
        if "time/update_seconds" in record:
            update += record["time/update_seconds"] * (record["step"] - last_step)
            last_step = record["step"]
        if "time/collect_seconds" in record:
            collect += record["time/collect_seconds"]
            for key in record:
                if key.startswith("train/return/"):
                    name = key.split("/")[-1]
                    collect_by[name] = collect_by.get(name, 0.0) + record["time/collect_seconds"]
    return {"updates_s": update, "collect_s": collect, "collect_by_policy_s": collect_by, "test_phases_s": test,
            "steps": last_step}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for run in args.runs:
        row = {"run": run, "evaluation": evaluation(os.path.join(run, "evaluation.txt")),
               "train": gnu_time(os.path.join(run, "train.time")), "evaluate": gnu_time(os.path.join(run, "evaluate.time")),
               "install": gnu_time(os.path.join(run, "install.time"))
               or gnu_time(os.path.join(os.path.dirname(run.rstrip("/")), "install.time")),
               "timers": timers(os.path.join(run, "metrics.jsonl"))}
        rows.append(row)
    print("| run | random | CEM | SAC | train + evaluate wall (s) | CPU time (s) "
          "| updates / collection / test phases (s, time/*) | install wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        ev = row["evaluation"]
        cell = lambda name: f"{ev[name]['mean']:.1f} ± {ev[name]['std']:.1f}" if name in ev else "-"  # noqa: E731
        wall = row["train"]["wall"] + row["evaluate"]["wall"]
        cpu = row["train"]["cpu"] + row["evaluate"]["cpu"]
        t = row["timers"]
        by = ", ".join(f"{name} {seconds:.0f}" for name, seconds in sorted(t["collect_by_policy_s"].items()))
        install = f"{row['install']['wall']:.0f}" if row["install"] else "-"
        print(f"| {row['run']} | {cell('random')} | {cell('cem')} | {cell('sac')} | {wall:.0f} ({row['train']['wall']:.0f} + "
              f"{row['evaluate']['wall']:.0f}) | {cpu:.0f} ({row['train']['cpu']:.0f} + {row['evaluate']['cpu']:.0f}) | "
              f"{t['updates_s']:.0f} / {t['collect_s']:.0f} ({by}) / {t['test_phases_s']:.0f} | {install} |")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
