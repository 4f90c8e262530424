"""Evaluating a trained run: test-phase episodes with returns, and an optional video.

`evaluate_policies` builds the run's environment and agent once and switches policies on the
compiled policy (`Policy.set_policies`, no retrace, no second restore). Each policy starts from
the same state a fresh build would have: the environment's first reset is seeded with `seed`
and the policy's random generator is rewound to its state after the build, so a policy's result
does not depend on the policies evaluated before it, and an evaluation stopped midway can keep the
policies it finished (`progress`) and evaluate only the others, with the results of one never stopped.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from typing import Any, Generator, Iterable, Mapping, Sequence

import gymnasium
import numpy as np

from planet_sac.acting.actor import TEST, Actor, RecordFrames
from planet_sac.agent import load_agent
from planet_sac.atomic_file import atomic_open, atomic_path
from planet_sac.checkpoints import find_run_config, resolve
from planet_sac.config import ConfigError
from planet_sac.errors import check_output_file

log = logging.getLogger("planet_sac")


def check_run(logdir: str, video: str | None = None) -> None:
    """Fails fast, before any episode runs, if `logdir` has no usable run or `video` cannot be written."""
    find_run_config(logdir)
    resolve(logdir)
    if video:
        if not video.endswith((".mp4", ".gif")):
            raise ConfigError(f"--video {video}: the file name must end in .mp4 or .gif")
        check_output_file(video, "--video")


class SeededResets(gymnasium.Wrapper):
    """Seeds every reset that is not given its own seed: `seed`, `seed + 1`, ... (from `seed` again after `reseed`).

    Each episode gets its own seed, so every policy compared meets the same start states even in environments
    that draw from their generator while stepping (the generator's state at the next reset would follow the
    policy's actions).
    """

    def __init__(self, env: gymnasium.Env, seed: int):
        super().__init__(env)
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self.next_seed = seed

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is None:
            seed, self.next_seed = self.next_seed, self.next_seed + 1
        return self.env.reset(seed=seed, options=options)


def evaluate_policies(logdir: str, episodes: int | Mapping[str, int], policies: Sequence[str], seed: int = 12345,
                      video: str | None = None, overrides: Sequence[str] = (),
                      progress: str | None = None) -> Generator[tuple[str, dict], None, None]:
    """Yields (policy, result) for each policy in turn: its test-phase episodes' mean/std/min/max return.

    :param episodes: the episodes of every policy, or of each policy by name.
    :param video: a file that records the first episode of the first policy (always evaluated, never kept).
    :param progress: a JSON file rewritten after each policy with the results so far (`logdir`, `checkpoint_step`,
        `seed`, `overrides`, `episodes` and per policy its result under `policies`). Called again with the same
        file, checkpoint, seed and overrides, the evaluation yields the results kept there for the same number of
        episodes without running them again; a file of another evaluation is replaced.
    :return: results holding the returns, the checkpoint's `step`, the `episodes` and the `seconds` they took.
    """
    counts: dict[str, int] = {}
    for policy in policies:
        count = episodes if isinstance(episodes, int) else episodes.get(policy)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            where = "" if isinstance(episodes, int) else f" for {policy}"
            raise ConfigError(f"episodes={count!r}{where}: evaluate at least 1 episode")
        counts[policy] = count
    logdir = os.fspath(logdir)
    check_run(logdir, video)
    _, agent, env, step = load_agent(logdir, overrides, seed, policies=policies)
    identity = {"logdir": logdir, "checkpoint_step": step, "seed": seed, "overrides": list(overrides)}
    counts_given = episodes if isinstance(episodes, int) else dict(episodes)  # as the caller gave them, for `progress`
    kept = kept_results(progress, identity, counts)
    env = SeededResets(env, seed)
    fresh_rng = agent.policy.rng.state.numpy()
    recorder = RecordFrames(env) if video else None
    try:
        for index, policy in enumerate(policies):
            record = recorder is not None and index == 0
            if policy in kept and not record:
                yield policy, kept[policy]
                continue
            start = time.perf_counter()
            env.reseed(seed)
            agent.policy.rng.state.assign(fresh_rng)
            agent.policy.set_policies(test=policy)
            actor = Actor(recorder if record and recorder is not None else env, agent.policy, TEST)
            returns = []
            for episode in range(counts[policy]):
                (summary,) = actor.run(1)
                returns.append(summary["return"])
                if record and episode == 0:
                    assert recorder is not None and video is not None  # record: recording the video
                    write_video(video, recorder.frames)
            kept[policy] = {"mean": float(np.mean(returns)), "std": float(np.std(returns)),
                            "min": float(np.min(returns)), "max": float(np.max(returns)), "returns": returns,
                            "step": step, "episodes": counts[policy], "seconds": time.perf_counter() - start}
            if progress:
                with atomic_open(progress) as file:
                    json.dump({**identity, "episodes": counts_given, "policies": kept}, file, indent=1)
            yield policy, kept[policy]
    finally:
        env.close()


def kept_results(progress: str | None, identity: Mapping, counts: Mapping[str, int]) -> dict[str, dict]:
    """The results in the `progress` file of `evaluate_policies` that an evaluation of the same `identity` (logdir,
    checkpoint step, seed, overrides) keeps: those of the policies in `counts` with as many episodes. {} if none; a
    file that cannot be read is logged and evaluated anew."""
    if not progress or not os.path.exists(progress):
        return {}
    try:
        with open(progress) as file:
            saved = json.load(file)
        if any(saved.get(key) != value for key, value in identity.items()):
            log.info("%s holds another evaluation (checkpoint, seed or overrides); evaluating again", progress)
            return {}
        results = {policy: dict(result) for policy, result in dict(saved["policies"]).items()
                   if policy in counts and result.get("episodes") == counts[policy]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        log.warning("%s: not read (%s: %s); evaluating again", progress, type(error).__name__, error)
        return {}
    if results:
        log.info("%s: %s kept from an earlier evaluation", progress, ", ".join(results))
    return results


def evaluate(logdir: str, episodes: int, policy: str, seed: int = 12345, video: str | None = None,
             overrides: Sequence[str] = ()) -> dict:
    """Runs `episodes` test-phase episodes with `policy`; returns mean/std/min/max return."""
    results = evaluate_policies(logdir, episodes, [policy], seed, video, overrides)
    try:
        return next(results)[1]
    finally:
        results.close()


def write_video(path: str, frames: Iterable[np.ndarray], fps: int = 30) -> None:
    """Encodes `frames` into `path` (.mp4 or .gif) atomically: a hidden temporary file in the same folder, renamed when complete.

    An interrupted or failed encoding leaves no file under `path` (and removes the temporary one).
    """
    import imageio.v2 as imageio

    extension = posixpath.splitext(path)[1]
    options = {"duration": 1000 / fps, "loop": 0} if extension == ".gif" else {"fps": fps, "macro_block_size": 1}
    with atomic_path(path) as temp:
        if extension == ".gif":  # the GIF writer takes all frames at once
            imageio.mimsave(temp, [np.asarray(frame, np.uint8) for frame in frames], **options)
        else:
            writer = imageio.get_writer(temp, **options)
            try:
                for frame in frames:
                    writer.append_data(np.asarray(frame, np.uint8))
            finally:  # waits for ffmpeg to exit (a `with` block leaves it writing the file after an exception)
                writer.close()
