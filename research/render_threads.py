"""Time dm_control's 64x64 frames with Mesa llvmpipe's rasterizer threads (`LP_NUM_THREADS`) set or not.

llvmpipe reads `LP_NUM_THREADS` when the OpenGL context is made, so each setting renders in its own process: the
same seeded random-action states per task (the benchmark's offscreen buffer and 1024 shadow map, as `DMCEnv`), each
setting `--reps` times in turn. Prints the median milliseconds per frame and whether the frames equal the default's
(docs/performance.md, "Rendering dm_control frames"). Run with the machine otherwise idle:

    MUJOCO_GL=egl .venv/bin/python research/render_threads.py --frames 100 --reps 2 --threads 0 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

TASKS = ("cartpole-swingup", "reacher-easy", "cheetah-run", "finger-spin", "ball_in_cup-catch", "walker-walk")


def render(task: str, frames: int, out: str, seed: int = 0) -> None:
    """Child: renders `frames` seeded random-action steps of `task` into `out` (.npz: frames, seconds)."""
    from dm_control import suite

    domain, _, name = task.partition("-")
    env = suite.load(domain, name, task_kwargs={"random": seed})
    visual = env.physics.model.vis
    visual.quality.shadowsize = 1024
    visual.global_.offwidth = visual.global_.offheight = 64
    rng = np.random.default_rng(seed)
    spec = env.action_spec()
    env.reset()
    env.physics.render(64, 64, camera_id=0)  # creates the context: not timed
    seconds, images = [], []
    for _ in range(frames):
        env.step(rng.uniform(spec.minimum, spec.maximum))
        start = time.perf_counter()
        images.append(env.physics.render(64, 64, camera_id=0))
        seconds.append(time.perf_counter() - start)
    np.savez(out, frames=np.stack(images), seconds=np.array(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--threads", nargs="+", default=["0", "1"], help="LP_NUM_THREADS values beside the default")
    parser.add_argument("--child", nargs=2, metavar=("TASK", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        render(args.child[0], args.frames, args.child[1])
        return
    settings = ["default", *args.threads]
    with tempfile.TemporaryDirectory() as folder:
        for task in TASKS:
            times: dict[str, list[float]] = {setting: [] for setting in settings}
            frames = {}
            for rep in range(args.reps):
                for setting in settings:
                    env = {key: value for key, value in os.environ.items() if key != "LP_NUM_THREADS"}
                    if setting != "default":
                        env["LP_NUM_THREADS"] = setting
                    out = os.path.join(folder, f"{task}_{setting}_{rep}.npz")
                    subprocess.run([sys.executable, __file__, "--frames", str(args.frames), "--child", task, out],
                                   env=env, check=True)
                    with np.load(out) as saved:
                        times[setting].append(float(np.median(saved["seconds"])))
                        frames[setting] = saved["frames"]
            base = np.median(times["default"])
            cells = [f"{setting}: {[round(1000 * t, 1) for t in times[setting]]} ms "
                     f"({base / np.median(times[setting]):.2f}x, identical {np.array_equal(frames[setting], frames['default'])})"
                     for setting in settings]
            print(f"{task}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
