"""`planet-sac bench`: the speed figures that matter to a PlaNet user, measured in one run.

Everything is timed after a warm-up call (tracing and compilation excluded) as the median
of `reps` calls. `--size full` uses PlaNet's sizes (64x64x3 images, RSSM 200/30/200, conv
depth 32, CEM 12/1000/10/100, action size 6 as cheetah); `--size tiny` is a seconds-long
smoke run of the same code with small sizes (the test suite uses it). With `peer`, the
mbrl-lib PlaNet (PyTorch) is timed in the same run by `../shared/bench/peer_mbrl_planet.py`,
so ratios are comparable even on a shared, noisy machine.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Callable

import numpy as np
import tensorflow as tf

from planet_sac.agent import Agent
from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import apply_overrides
from planet_sac.control import cem
from planet_sac.control.sac import SAC
from planet_sac.models.precision import bfloat16_crashes, cpu_flags, cpu_vendor, resolve_precision
from planet_sac.models.world_model import WorldModel
from planet_sac.training.learner import Learner

ACTION_SIZE = 6
PEER_SCRIPT = "../shared/bench/peer_mbrl_planet.py"


@dataclasses.dataclass(frozen=True)
class Size:
    """The shapes one benchmark run uses."""

    updates: tuple[tuple[int, int], ...]  # (batch, chunk length) of the timed updates
    overrides: tuple[str, ...]  # config overrides on top of PlaNet's defaults
    envs: tuple[int, ...]  # batch sizes (environments) of the timed CEM actions
    loader_episodes: int
    loader_length: int
    matmul_rows: int


SIZES = {
    "full": Size(updates=((50, 50), (16, 50)), overrides=(), envs=(1, 4), loader_episodes=20, loader_length=500,
                 matmul_rows=1000),
    "tiny": Size(updates=((4, 10),), overrides=("model.deter_size=16", "model.stoch_size=4", "model.hidden_size=16",
                                                 "model.cnn_depth=4", "model.reward_units=8", "cem.horizon=3",
                                                 "cem.candidates=32", "cem.iterations=2", "cem.top_k=4", "sac.units=16",
                                                 "policy.jit_compile=false"),  # XLA once, for the comparison only
                 envs=(1, 2), loader_episodes=3, loader_length=60, matmul_rows=64),
}


def median_time(fn: Callable[[], object], reps: int) -> float:
    """Median wall-clock seconds of `reps` calls of `fn`, after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine(cpuinfo: str | None = None) -> dict:
    """CPU model, vendor, family and model number, core count and the instruction-set flags that decide bfloat16 speed.

    :param cpuinfo: the text of /proc/cpuinfo (read from the machine when None; not Linux: the CPU from `platform`).
    :return: `cpu`, `cores`, `tensorflow`, and from cpuinfo `vendor`, `family` and `model` (ints, None where not
        given: two CPUs of one model name, e.g. "AMD EPYC", can differ 2x in speed) and one bool per flag.
    """
    info: dict = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "tensorflow": tf.__version__}
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as file:
                cpuinfo = file.read()
        except OSError:  # not Linux: the CPU model from platform is all we know
            return info
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    if model:
        info["cpu"] = model.group(1).strip()
    info["vendor"] = cpu_vendor(cpuinfo)
    for key, field in (("family", "cpu family"), ("model", "model")):
        number = re.search(rf"^{field}\s*:\s*(\d+)\s*$", cpuinfo, re.M)
        info[key] = int(number.group(1)) if number else None
    present = cpu_flags(cpuinfo)
    info.update({flag: flag in present for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")})
    return info


def matmul_rate(dtype: tf.DType, rows: int, size: int, reps: int, chain: int = 10) -> float:
    """GFLOP/s of a chain of dependent [rows, size] x [size, size] matmuls (no common subexpressions to fold)."""
    a = tf.Variable(tf.random.normal([rows, size], seed=0) * 0.05)
    b = tf.Variable(tf.random.normal([size, size], seed=1) * 0.05)

    @tf.function
    def chained():
        x, w = tf.cast(a, dtype), tf.cast(b, dtype)
        for _ in range(chain):
            x = tf.matmul(x, w) + x
        return tf.reduce_sum(tf.cast(x, tf.float32))

    seconds = median_time(lambda: chained().numpy(), reps)
    return 2.0 * rows * size * size * chain / seconds / 1e9


def image_batch(batch: int, length: int, seed: int = 0, action_size: int = ACTION_SIZE) -> dict[str, tf.Tensor]:
    """A random batch of `batch` chunks of `length` 64x64 frames, actions, rewards and discounts (timing input)."""
    rng = np.random.default_rng(seed)
    return {
        "image": tf.constant(rng.integers(0, 256, (batch, length, 64, 64, 3), dtype=np.uint8)),
        "action": tf.constant(rng.uniform(-1, 1, (batch, length, action_size)).astype(np.float32)),
        "reward": tf.constant(rng.normal(size=(batch, length)).astype(np.float32)),
        "discount": tf.ones((batch, length)),
    }


def world_model_learner(config: Config, precision: str) -> tuple[WorldModel, Learner]:
    """A pixel world model at the benchmark's sizes and its learner, SAC off, in `optim.precision`."""
    config = apply_overrides(config, ["sac.updates_per_step=0", f"optim.precision={precision}"])
    model = WorldModel(config.model, "image", (64, 64, 3), ACTION_SIZE, precision=config.optim.precision)
    return model, Learner(config, model, SAC(config.sac, model.rssm.feature_size, ACTION_SIZE))


def time_update(config: Config, batch: int, length: int, reps: int, precision: str = "float32") -> float:
    """Seconds of one compiled world-model update (SAC off) on a [batch, length] image chunk, in `optim.precision`."""
    _, learner = world_model_learner(config, precision)
    data = image_batch(batch, length)
    return median_time(lambda: learner.update(data)["loss/total"].numpy(), reps)


def profile_update(config: Config, batch: int, length: int, reps: int) -> dict:
    """Where one float32 world-model update's time goes: each part's forward + backward timed alone.

    `encoder`: the conv encoder on the preprocessed images; `decoder`: the conv decoder on
    the features; `rssm`: filtering the chunk (`rssm.observe`); each differentiated with
    respect to its own variables. `rest` is the whole update minus the three: the losses
    (image log-likelihood and dequantisation over every pixel, KL, reward head), the
    optimizer and the gradient plumbing.
    """
    model, learner = world_model_learner(config, "float32")
    data = image_batch(batch, length)
    noise = model.sample_noise(tf.random.Generator.from_seed(0), batch, length)
    obs = model.preprocess(data["image"], noise["image"])
    embed = model.encoder(obs)
    features = model.rssm.features(model.rssm.observe(embed, data["action"], noise["posterior"])[0])

    def forward_backward(module: tf.Module, forward: Callable[[], tf.Tensor]) -> Callable[[], tf.Tensor]:
        @tf.function(autograph=False)
        def step():
            with tf.GradientTape() as tape:
                out = forward()
                loss = tf.reduce_mean(tf.square(out))
            grads = tape.gradient(loss, module.trainable_variables)
            return tf.add_n([tf.reduce_sum(g) for g in grads])
        return step

    parts = {
        "encoder": forward_backward(model.encoder, lambda: model.encoder(obs)),
        "decoder": forward_backward(model.decoder, lambda: model.decoder(features)),
        "rssm": forward_backward(model.rssm, lambda: model.rssm.features(
            model.rssm.observe(embed, data["action"], noise["posterior"])[0])),
    }
    result = {"total": median_time(lambda: learner.update(data)["loss/total"].numpy(), reps)}
    for name, step in parts.items():
        result[name] = median_time(lambda: step().numpy(), reps)
    result["rest"] = max(result["total"] - sum(result[name] for name in parts), 0.0)
    return result


def planning_flops(model: WorldModel, config: Config, envs: int) -> float:
    """Useful floating-point work of one CEM action: 2 x (matmul sizes) per imagined step, counted from the layers.

    Per candidate and horizon step: the prior (input layer, GRU gates and candidate,
    hidden and output layers) and the reward head. Elementwise work is not counted.
    """
    rssm = model.rssm
    kernels = [rssm.prior_in.kernel, rssm.gru.gates_kernel, rssm.gru.candidate_kernel, rssm.prior_hidden.kernel,
               rssm.prior_out.kernel] + [layer.kernel for layer in (*model.reward.hidden, model.reward.out)]
    per_step = sum(2.0 * int(np.prod(kernel.shape)) for kernel in kernels)
    c = config.cem
    return per_step * c.candidates * c.horizon * c.iterations * envs


def acting_agent(config: Config, jit_compile: bool, precision: str = "float32") -> Agent:
    """An agent at the benchmark's sizes whose policy plans in `precision`, compiled with or without XLA.

    Its encoder stays float32 (`optim.precision=float32`, not the default `auto`), so the figures compare
    CEM's rollout precision alone, on any CPU, as they always have."""
    config = apply_overrides(config, [f"cem.precision={precision}", f"policy.jit_compile={str(jit_compile).lower()}",
                                      "optim.precision=float32"])
    return Agent.build(config, "image", (64, 64, 3), ACTION_SIZE)


def policy_action_seconds(agent: Agent, name: str, envs: int, reps: int) -> float:
    """Seconds of one action of the phase-gated policy (test phase, acting by `name`) for `envs` environments.

    This is the path an agent acts by: filter the new 64x64 frame into the latent state,
    then plan (CEM), run the actor (SAC) or both, inside the one compiled policy function.
    """
    agent.policy.set_policies(test=name)
    obs = tf.zeros([envs, 64, 64, 3], tf.uint8)
    state = agent.policy.initial_state(envs)
    phase = tf.constant(1, tf.int32)
    return median_time(lambda: agent.policy(obs, state, phase)[0].numpy(), reps)


def time_actions(config: Config, envs: tuple[int, ...], reps: int, bfloat16: bool = True) -> dict:
    """One CEM action per environment (float32 and, with `bfloat16`, bfloat16 rollouts, batched over `envs`) and
    one SAC action, through the compiled policy with and without XLA, and where one float32 CEM action's time goes."""
    jit = config.policy.jit_compile
    other = not jit  # the other compile mode, timed at 1 environment to show what XLA is worth here
    agents = {"float32": acting_agent(config, jit), "other": acting_agent(config, other)}
    if bfloat16:
        agents["bfloat16"] = acting_agent(config, jit, "bfloat16")
    result: dict = {"policy_jit_compile": jit}
    model = agents["float32"].world_model
    for precision, suffix in (("float32", ""), ("bfloat16", "_bfloat16"))[:2 if bfloat16 else 1]:
        result[f"cem_action{suffix}_s"], result[f"cem_gflops_per_s{suffix}"] = {}, {}
        for count in envs:
            seconds = policy_action_seconds(agents[precision], "cem", count, reps)
            result[f"cem_action{suffix}_s"][str(count)] = seconds / count
            result[f"cem_gflops_per_s{suffix}"][str(count)] = planning_flops(model, config, count) / seconds / 1e9
    result["cem_action_xla_vs_graph"] = {str(jit): result["cem_action_s"]["1"],
                                         str(other): policy_action_seconds(agents["other"], "cem", 1, reps)}
    result["cem_profile_s"] = profile_cem(model, config, tf.random.Generator.from_seed(0), reps)
    sac_reps = max(reps, 100)
    result["sac_action_ms"] = 1000.0 * policy_action_seconds(agents["float32"], "sac", 1, sac_reps)
    result["sac_action_xla_vs_graph_ms"] = {str(jit): result["sac_action_ms"],
                                            str(other): 1000.0 * policy_action_seconds(agents["other"], "sac", 1, sac_reps)}
    return result


def time_export(config: Config, reps: int) -> dict:
    """One SAC action (1 environment, 64x64 frame) of the exported SavedModel, loaded back, against the in-process
    policy it was exported from, timed alternately; and the SavedModel's size (`planet-sac export`)."""
    from planet_sac.export import export_agent

    agent = acting_agent(config, config.policy.jit_compile)
    folder = tempfile.mkdtemp(prefix="planet_sac_bench_export_")
    try:
        written = export_agent(agent, config, "sac", os.path.join(folder, "sac"))
        loaded = tf.saved_model.load(written["path"])
        obs = tf.zeros([1, 64, 64, 3], tf.uint8)
        exported_state = loaded.get_initial_state(1)
        sac_reps = max(reps, 100)
        exported, in_process = [], []
        for _ in range(3):  # alternated, so load on a shared machine hits both alike
            exported.append(median_time(lambda: loaded.action(obs, exported_state).action.numpy(), sac_reps))
            in_process.append(policy_action_seconds(agent, "sac", 1, sac_reps))
        return {"export_sac_action_ms": 1000.0 * statistics.median(exported),
                "export_in_process_sac_action_ms": 1000.0 * statistics.median(in_process),
                "export_saved_model_mb": written["bytes"] / 1e6}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def profile_cem(model: WorldModel, config: Config, rng: tf.random.Generator, reps: int) -> dict:
    """Where one float32 CEM action (1 environment) spends its time, each part timed alone for all iterations.

    `prior_rollout`: the RSSM prior over the horizon for every candidate (`rssm.imagine`);
    `reward_head`: the reward MLP on those states; `rest`: the whole action minus both
    (sampling, clipping, top-k, refitting, observing the frame, the loop itself).
    """
    c = config.cem
    state = model.rssm.initial(1)
    start = tf.nest.map_structure(lambda t: tf.repeat(t, c.candidates, 0), state)
    actions = tf.random.uniform([c.candidates, c.horizon, ACTION_SIZE], -1, 1, seed=0)
    noise = tf.random.normal([c.candidates, c.horizon, model.rssm.stoch_size], seed=1)
    states = model.rssm.imagine(start, actions, noise)
    obs = tf.zeros([1, 64, 64, 3], tf.uint8)

    def repeated(part: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[], tf.Tensor]:
        """`part` run `iterations` times in a loop, as CEM runs it (an input that changes per iteration: nothing folded)."""
        def body(i, total):
            return i + 1, total + part(1.0 + 1e-6 * tf.cast(i, tf.float32))
        return tf.function(lambda: tf.while_loop(lambda i, _: i < c.iterations, body, (0, tf.constant(0.0)))[1],
                           autograph=False, jit_compile=config.policy.jit_compile)

    rollouts = repeated(lambda scale: tf.reduce_sum(model.rssm.imagine(start, actions * scale, noise)["deter"]))
    rewards = repeated(lambda scale: tf.reduce_sum(model.predict_reward(
        tf.nest.map_structure(lambda t: t * scale, states))))

    @tf.function(autograph=False, jit_compile=config.policy.jit_compile)
    def action():
        embed = model.embed(obs, model.observation_noise(rng, obs))
        latent, _ = model.rssm.obs_step(state, tf.zeros([1, ACTION_SIZE]), embed, tf.zeros([1, model.rssm.stoch_size]))
        return cem.plan(model, latent, c, rng)

    total = median_time(lambda: action().numpy(), reps)
    prior = median_time(lambda: rollouts().numpy(), reps)
    reward = median_time(lambda: rewards().numpy(), reps)
    return {"total": total, "prior_rollout": prior, "reward_head": reward, "rest": max(total - prior - reward, 0.0)}


def time_loader(episodes: int, length: int, batch: int, chunk: int, batches: int = 20) -> dict:
    """Chunks per second of the streaming replay (tf.data) and its cache size against the raw arrays."""
    from planet_sac.episodes.loader import make_dataset
    from planet_sac.episodes.storage import save_episode

    directory = tempfile.mkdtemp(prefix="planet_sac_bench_")
    try:
        rng = np.random.default_rng(0)
        raw = 0
        episode: dict[str, np.ndarray]
        for _ in range(episodes):
            episode = {"image": rng.integers(0, 256, (length + 1, 64, 64, 3), dtype=np.uint8),
                       "action": rng.uniform(-1, 1, (length + 1, ACTION_SIZE)).astype(np.float32),
                       "reward": rng.normal(size=length + 1).astype(np.float32),
                       "discount": np.ones(length + 1, np.float32)}
            raw += sum(value.nbytes for value in episode.values())
            save_episode(directory, episode)
        dataset, replay = make_dataset(directory, batch, chunk, seed=0)
        iterator = iter(dataset)
        seconds = median_time(lambda: [next(iterator) for _ in range(batches)], 3)
        return {"loader_chunks_per_s": batch * batches / seconds, "cache_bytes_ratio": replay.stats["cache_bytes"] / raw}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def check_peer(python: str, size: str) -> None:
    """Fails before any timing if `--peer` cannot run: the peer always times PlaNet's full sizes, its script must
    be there, and `python` must import mbrl-lib."""
    if size != "full":
        raise ConfigError(f"--peer times mbrl-lib's PlaNet at PlaNet's full sizes; use it with --size full, not {size}")
    if not os.path.exists(PEER_SCRIPT):
        raise ConfigError(f"{PEER_SCRIPT} not found: run planet-sac bench --peer from the repository root")
    try:
        probe = subprocess.run([python, "-c", "import mbrl, torch"], capture_output=True, text=True, timeout=300)
    except OSError as error:
        raise ConfigError(f"--peer {python}: cannot run it ({error.strerror or error})") from None
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"--peer {python} cannot import mbrl-lib and torch ({last[:160]}); see {PEER_SCRIPT}'s README")


def run_peer(python: str, batch: int, length: int, reps: int, plan: bool) -> dict:
    """mbrl-lib PlaNet's update (and, if `plan`, CEM action) times, in seconds."""
    command = [python, PEER_SCRIPT, "--action-dim", str(ACTION_SIZE), "--batch", str(batch), "--seq", str(length),
               "--train-reps", str(reps), "--plan-reps", str(reps)] + ([] if plan else ["--skip-plan"])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"the peer benchmark failed (exit status {done.returncode}): {last[:200]}")
    out = done.stdout
    train = re.search(r"TRAIN .*?median ([\d.]+)\s?s", out)
    if train is None:
        raise RuntimeError(f"unexpected output of the peer benchmark: {out[-300:]!r}")
    result = {"update_s": float(train.group(1))}
    plans = [float(value) for value in re.findall(r"PLAN .*?median ([\d.]+)\s?s", out)]  # agent.act, optimize w/o tiling
    if plans:
        result["cem_action_s"] = min(plans)  # the faster of the two, as the peer's README asks
    return result


def run(size: str = "full", reps: int = 3, peer: str | None = None) -> dict:
    """All figures of one benchmark run, as the JSON `planet-sac bench --json` writes."""
    shape = SIZES[size]
    config = apply_overrides(Config(), list(shape.overrides))
    results: dict = {"size": size, "reps": reps, "machine": machine()}
    results["precision_auto"] = resolve_precision("auto", "image")  # what optim.precision: auto picks for pixels here
    bfloat16 = not bfloat16_crashes()
    if not bfloat16:  # ONEDNN_MAX_CPU_ISA hides the CPU's bfloat16 kernels from oneDNN: TensorFlow would crash
        results["bfloat16_not_measured"] = f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA')}"
    matmul_size = config.model.hidden_size + config.model.deter_size  # the GRU's input width
    results["matmul_gflops_per_s"] = {dtype.name: matmul_rate(dtype, shape.matmul_rows, matmul_size, reps)
                                      for dtype in (tf.float32, tf.bfloat16)[:2 if bfloat16 else 1]}
    results["train_update_s"] = {f"{b}x{t}": time_update(config, b, t, reps) for b, t in shape.updates}
    results["train_update_profile_s"] = {f"{b}x{t}": profile_update(config, b, t, reps) for b, t in shape.updates[-1:]}
    if bfloat16:
        results["train_update_mixed_bfloat16_s"] = {f"{b}x{t}": time_update(config, b, t, reps, "mixed_bfloat16")
                                                    for b, t in shape.updates}
    results.update(time_actions(config, shape.envs, reps, bfloat16))
    results.update(time_export(config, reps))
    batch, length = shape.updates[-1]
    results.update(time_loader(shape.loader_episodes, shape.loader_length, batch, length))
    results["training_chunks_per_s"] = {key: int(key.split("x")[0]) / seconds
                                        for key, seconds in results["train_update_s"].items()}
    if peer:
        results["peer"] = {}
        for index, (b, t) in enumerate(shape.updates):
            measured = run_peer(peer, b, t, reps, plan=index == 0)
            results["peer"].setdefault("train_update_s", {})[f"{b}x{t}"] = measured["update_s"]
            if "cem_action_s" in measured:
                results["peer"]["cem_action_s"] = measured["cem_action_s"]
        results["peer_ratio"] = {f"train_update_{key}": results["peer"]["train_update_s"][key] / seconds
                                 for key, seconds in results["train_update_s"].items()}
        if "cem_action_s" in results["peer"]:
            results["peer_ratio"]["cem_action"] = results["peer"]["cem_action_s"] / results["cem_action_s"]["1"]
            if bfloat16:
                results["peer_ratio"]["cem_action_bfloat16"] = (results["peer"]["cem_action_s"]
                                                                / results["cem_action_bfloat16_s"]["1"])
    return results


def table(results: dict) -> str:
    """The results as a readable table (one line a figure)."""
    m = results["machine"]
    flags = ", ".join(flag for flag in ("avx512_bf16", "amx_bf16") if m.get(flag)) or "no bfloat16 instructions"
    lines = [f"planet-sac bench ({results['size']}, median of {results['reps']}) on {m['cpu']}, {m['cores']} cores ({flags})"]

    def row(name: str, value: str, peer: str = "") -> None:
        lines.append(f"  {name:<44}{value:>16}   {peer}")

    for dtype, rate in results["matmul_gflops_per_s"].items():
        row(f"matmul {dtype}", f"{rate:.0f} GFLOP/s")
    peer = results.get("peer", {})
    ratio = results.get("peer_ratio", {})
    for key, seconds in results["train_update_s"].items():
        other = peer.get("train_update_s", {}).get(key)
        row(f"world-model update {key}", f"{seconds:.3f} s",
            f"mbrl-lib {other:.3f} s ({ratio[f'train_update_{key}']:.2f}x)" if other else "")
        mixed = results.get("train_update_mixed_bfloat16_s", {}).get(key)
        if mixed:
            row("  ... mixed_bfloat16", f"{mixed:.3f} s", f"{seconds / mixed:.2f}x float32's speed")
    if "precision_auto" in results:
        row("optim.precision auto picks", results["precision_auto"])
    for key, profile in results["train_update_profile_s"].items():
        for part in ("encoder", "decoder", "rssm", "rest"):
            label = "rest (losses, optimizer)" if part == "rest" else f"{part} (forward + backward)"
            row(f"  update {key}: {label}", f"{profile[part]:.3f} s",
                f"{100 * profile[part] / profile['total']:.0f}%")
    rates = results["matmul_gflops_per_s"]
    if "bfloat16_not_measured" in results:
        row("bfloat16", "not measured", f"{results['bfloat16_not_measured']} hides its kernels (TensorFlow crashes)")
    for suffix, dtype in (("", "float32"), ("_bfloat16", "bfloat16")):
        for envs, seconds in results.get(f"cem_action{suffix}_s", {}).items():
            other = peer.get("cem_action_s") if envs == "1" else None
            peer_text = f"mbrl-lib {other:.3f} s ({other / seconds:.2f}x)" if other else ""
            row(f"CEM action ({dtype}), {envs} env(s), per env", f"{seconds:.3f} s", peer_text)
            gflops = results[f"cem_gflops_per_s{suffix}"][envs]
            row("  useful work", f"{gflops:.0f} GFLOP/s", f"{100 * gflops / rates[dtype]:.0f}% of {dtype} matmul")
    profile = results["cem_profile_s"]
    for part in ("prior_rollout", "reward_head", "rest"):
        row(f"  CEM float32, 1 env: {part}", f"{profile[part]:.3f} s", f"{100 * profile[part] / profile['total']:.0f}%")
    xla = results["cem_action_xla_vs_graph"]
    row("  CEM float32, 1 env, XLA off / on", f"{xla['False']:.3f} / {xla['True']:.3f} s",
        f"XLA {xla['False'] / xla['True']:.2f}x")
    row("SAC action", f"{results['sac_action_ms']:.2f} ms")
    xla = results["sac_action_xla_vs_graph_ms"]
    row("  SAC action, XLA off / on", f"{xla['False']:.2f} / {xla['True']:.2f} ms", f"XLA {xla['False'] / xla['True']:.2f}x")
    exported, in_process = results["export_sac_action_ms"], results["export_in_process_sac_action_ms"]
    row("SAC action, exported SavedModel", f"{exported:.2f} ms",
        f"{exported / in_process:.2f}x the in-process policy's {in_process:.2f} ms")
    row("  SavedModel size (planet-sac export)", f"{results['export_saved_model_mb']:.2f} MB")
    row("loader (tf.data)", f"{results['loader_chunks_per_s']:.0f} chunks/s")
    for key, rate in results["training_chunks_per_s"].items():
        row(f"training consumes at {key}", f"{rate:.1f} chunks/s")
    row("replay cache / raw bytes", f"{results['cache_bytes_ratio']:.3f}")
    return "\n".join(lines)
