"""Time dm_control's 64x64 frames with MuJoCo's default offscreen buffer (640 x 480) and with one the frame's size.

Renders the same seeded random-action states both ways, each setting `--reps` times in turn per task, and prints
the median milliseconds per frame and whether the frames are identical (docs/performance.md, "Rendering
dm_control frames"). Run with the machine otherwise idle:

    MUJOCO_GL=egl .venv/bin/python research/render_offscreen.py --frames 100 --reps 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from dm_control import suite

TASKS = (("cartpole", "swingup"), ("reacher", "easy"), ("cheetah", "run"), ("finger", "spin"),
         ("ball_in_cup", "catch"), ("walker", "walk"))


def render(domain: str, task: str, buffer: int | None, frames: int, size: int = 64, shadow: int = 1024,
           seed: int = 0) -> tuple[np.ndarray, float]:
    """(frames, median seconds per frame) of `frames` steps of seeded random actions; `buffer` None keeps
    the model's offscreen size."""
    env = suite.load(domain, task, task_kwargs={"random": seed})
    visual = env.physics.model.vis
    visual.quality.shadowsize = shadow
    if buffer:
        visual.global_.offwidth = visual.global_.offheight = buffer
    rng = np.random.default_rng(seed)
    spec = env.action_spec()
    env.reset()
    env.physics.render(size, size, camera_id=0)  # creates the context: not timed
    seconds, images = [], []
    for _ in range(frames):
        env.step(rng.uniform(spec.minimum, spec.maximum))
        start = time.perf_counter()
        images.append(env.physics.render(size, size, camera_id=0))
        seconds.append(time.perf_counter() - start)
    env.close()
    return np.stack(images), float(np.median(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    for domain, task in TASKS:
        times: dict[str, list[float]] = {"default": [], "frame": []}
        images = {}
        for _ in range(args.reps):
            for name, buffer in (("default", None), ("frame", 64)):
                images[name], seconds = render(domain, task, buffer, args.frames)
                times[name].append(seconds)
        ratio = np.median(times["default"]) / np.median(times["frame"])
        print(f"{domain}-{task}: 640x480 buffer {[round(1000 * t, 1) for t in times['default']]} ms, 64x64 buffer "
              f"{[round(1000 * t, 1) for t in times['frame']]} ms, {ratio:.2f}x, identical "
              f"{np.array_equal(images['default'], images['frame'])}", flush=True)


if __name__ == "__main__":
    main()
