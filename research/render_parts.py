"""What a dm_control frame's rendering time goes to: the same 64x64 frame with one part of the scene left out.

For each task, the benchmark's settings (offscreen buffer 64x64, shadow map 1024) and then each variant alone:
no reflections, no shadows, no multisampling, no tendons, 8 slices per round geom instead of 28. Prints the median
milliseconds per frame (100 renders of the reset state) and, over 100 seeded random-action steps, how the variant's
pixels differ from the benchmark's (docs/performance.md, "Rendering dm_control frames"). Run with the machine idle:

    MUJOCO_GL=egl .venv/bin/python research/render_parts.py ball_in_cup-catch walker-walk
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
from dm_control import suite

VARIANTS: dict[str, Callable | None] = {
    "benchmark": None,
    "no reflections": lambda physics: physics.model.mat_reflectance.__setitem__(slice(None), 0),
    "no shadows": lambda physics: physics.model.light_castshadow.__setitem__(slice(None), 0),
    "no multisampling": lambda physics: setattr(physics.model.vis.quality, "offsamples", 0),
    "no tendons": lambda physics: physics.model.tendon_width.__setitem__(slice(None), 0),
    "8 slices": lambda physics: setattr(physics.model.vis.quality, "numslices", 8),
}


def load(task: str, variant: Callable | None, seed: int = 0):
    domain, _, name = task.partition("-")
    env = suite.load(domain, name, task_kwargs={"random": seed})
    env.physics.model.vis.quality.shadowsize = 1024
    env.physics.model.vis.global_.offwidth = env.physics.model.vis.global_.offheight = 64
    if variant is not None:
        variant(env.physics)
    env.reset()
    return env


def milliseconds(task: str, variant: Callable | None, renders: int = 100) -> float:
    env = load(task, variant)
    env.physics.render(64, 64, camera_id=0)  # creates the context: not timed
    seconds = []
    for _ in range(renders):
        start = time.perf_counter()
        env.physics.render(64, 64, camera_id=0)
        seconds.append(time.perf_counter() - start)
    return 1000 * float(np.median(seconds))


def frames(task: str, variant: Callable | None, steps: int = 100, seed: int = 0) -> np.ndarray:
    env = load(task, variant, seed)
    rng = np.random.default_rng(seed)
    spec = env.action_spec()
    images = []
    for _ in range(steps):
        env.step(rng.uniform(spec.minimum, spec.maximum))
        images.append(env.physics.render(64, 64, camera_id=0).astype(np.int16))
    return np.stack(images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", help="dm_control DOMAIN-TASK names")
    args = parser.parse_args()
    for task in args.tasks:
        base = frames(task, None)
        for name, variant in VARIANTS.items():
            difference = np.abs(frames(task, variant) - base)
            print(f"{task:20} {name:17} {milliseconds(task, variant):6.1f} ms  mean abs. diff "
                  f"{difference.mean():.3f}, {100 * (difference.max(-1) > 8).mean():.2f}% of pixels off by > 8",
                  flush=True)


if __name__ == "__main__":
    main()
