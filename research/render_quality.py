"""What a cheaper MuJoCo render setting saves per 64x64 frame, and what it changes in the pixels.

dm_control renders offscreen with the model's `visual.quality` settings: a 4096 shadow map and
4x multisampling by default, all in software under llvmpipe/EGL on a CPU machine. This times
frames of the PlaNet tasks with the default and cheaper settings (same states: the same seeded
random actions), and compares the frames (mean absolute pixel difference, share of pixels that
differ by more than 8 levels).

    MUJOCO_GL=egl python research/render_quality.py --frames 200 --out research/results/render_quality.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

TASKS = ["cartpole-swingup", "reacher-easy", "cheetah-run", "finger-spin", "ball_in_cup-catch", "walker-walk"]
SETTINGS = {  # name: (shadowsize, offsamples)
    "default": (None, None),
    "shadow1024": (1024, None),
    "shadow512": (512, None),
    "shadow256": (256, None),
    "shadow1024_msaa0": (1024, 0),
    "noshadow_msaa0": (0, 0),
}


def frames(task: str, shadowsize: int | None, offsamples: int | None, count: int, size: int) -> tuple[np.ndarray, float]:
    from dm_control import suite

    domain, _, name = task.partition("-")
    env = suite.load(domain, name, task_kwargs={"random": 0})
    quality = env.physics.model.vis.quality
    if shadowsize is not None:
        quality.shadowsize = shadowsize
    if offsamples is not None:
        quality.offsamples = offsamples
    rng = np.random.default_rng(0)
    spec = env.action_spec()
    env.reset()
    env.physics.render(size, size, camera_id=0)  # creates the context (not timed)
    out, seconds = [], 0.0
    for _ in range(count):
        env.step(rng.uniform(spec.minimum, spec.maximum))
        start = time.perf_counter()
        out.append(env.physics.render(size, size, camera_id=0))
        seconds += time.perf_counter() - start
    env.close()
    return np.stack(out), seconds / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = {}
    for task in args.tasks:
        reference, _ = None, None
        row = {}
        for name, (shadow, samples) in SETTINGS.items():
            images, seconds = frames(task, shadow, samples, args.frames, args.size)
            if reference is None:
                reference = images.astype(np.int16)
            diff = np.abs(images.astype(np.int16) - reference)
            row[name] = {"ms_per_frame": round(1000 * seconds, 2), "mean_abs_diff": round(float(diff.mean()), 3),
                         "share_over_8": round(float((diff.max(-1) > 8).mean()), 4)}
            print(task, name, row[name], flush=True)
        results[task] = row
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as file:
            json.dump({"frames": args.frames, "size": args.size, "results": results}, file, indent=1)


if __name__ == "__main__":
    main()
