"""`seed` determines a run on one machine: two runs with the same seed log the same metrics and end with the
same weights; another seed gives another run. (The same seed in other processes, each with its own string hashing,
through the command line: tests/test_exact_resume.py, whose stopped runs are `planet-sac train` processes and end
as the never-stopped run of the test process.)"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from planet_sac.checkpoints import list_variables, resolve
from planet_sac.config_loading import load_config
from tests.conftest import OLD_RUN, records_without_wall_clock

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.yaml"
# Image-free and tiny, but every random stream is in use: seed episodes, replay sampling, CEM and SAC acting
# with exploration noise (policy.train sac_guided_cem), imagined SAC transitions, a test phase, two collects
# (after updates 5 and 10). Episodes of 10 agent steps (11 entries), as long as a chunk needs.
SETTINGS = ["policy.train=sac_guided_cem", "policy.compare=[sac]", "sac.imagination_horizon=2", "sac.real_ratio=0.5",
            "schedule.train_steps=10", "schedule.collect_every=5", "env.time_limit=10", "data.seed_episodes=3"]


def _weights(logdir: Path) -> dict[str, np.ndarray]:
    import tensorflow as tf

    prefix = resolve(str(logdir))
    reader = tf.train.load_checkpoint(prefix)
    keys = {f"variables/{name}/.ATTRIBUTES/VARIABLE_VALUE": name for name, _ in list_variables(prefix)}
    return {name: reader.get_tensor(key) for key, name in keys.items()}


def _train(logdir: Path, seed: int) -> None:
    from planet_sac.training.trainer import train

    train(load_config(SMOKE, [*SETTINGS, f"seed={seed}", f"env.seed={seed}"]), str(logdir), progress=False)


@pytest.mark.slow
@pytest.mark.e2e
def test_same_seed_same_run_other_seed_other_run(tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        _train(tmp_path / name, seed=seed)

    a, b, c = (records_without_wall_clock(tmp_path / name) for name in "abc")
    assert [record["step"] for record in a][-1] == 10 and any("test/return/sac" in record for record in a)
    assert [record["step"] for record in a if "train/return" in record] == [5, 10]  # two collects
    assert a == b
    assert a != c
    weights_a, weights_b, weights_c = (_weights(tmp_path / name) for name in "abc")
    assert weights_a.keys() == weights_b.keys() == weights_c.keys()
    # run_state/ holds the replays' states and the episode files' names, which differ (a uuid per file): compared below
    different = [name for name in weights_a if not name.startswith("run_state/")
                 and not np.array_equal(weights_a[name], weights_b[name])]
    assert not different, f"{len(different)} variables differ, e.g. {different[:3]}"
    for name in ("run_state/replay", "run_state/held_out_replay"):
        state_a, state_b = (json.loads(weights[name].decode()) for weights in (weights_a, weights_b))
        assert state_a["rng"] == state_b["rng"] and state_a["stats"] == state_b["stats"], name
        assert len(state_a["cache"]) == len(state_b["cache"]) > 0, name
    trained = [name for name in weights_a if name.startswith(("world_model/", "sac/"))]
    assert all(not np.array_equal(weights_a[name], weights_c[name]) for name in trained)
    # The episodes the runs collected are the same too.
    for folder in ("train_episodes", "test_episodes"):
        lengths = [sorted(path.name.rsplit("-", 1)[1] for path in (tmp_path / name / folder).glob("*.npz")) for name in "ab"]
        assert lengths[0] == lengths[1]


def test_replay_samples_by_content_not_by_file_names(tmp_path):
    """The same episodes under other names (other uuids and seconds, so another name order) give the same chunks."""
    from planet_sac.episodes.loader import EpisodeReplay

    rng = np.random.default_rng(0)
    episodes = [{"state": rng.normal(size=(31, 3)).astype(np.float32),
                 "action": rng.uniform(-1, 1, (31, 1)).astype(np.float32),
                 "reward": rng.normal(size=31).astype(np.float32), "discount": np.ones(31, np.float32)}
                for _ in range(6)]
    chunks = []
    for folder, names in (("a", range(6)), ("b", reversed(range(6)))):  # name order reversed in b
        (tmp_path / folder).mkdir()
        for index, episode in zip(names, episodes):
            second = 0 if index < 3 else index  # three files of one second (ordered by uuid), three of their own
            np.savez_compressed(tmp_path / folder / f"20260101T0000{second:02d}-{index:032x}-30.npz", **episode)
        replay = EpisodeReplay(str(tmp_path / folder), chunk_length=5, every=4, seed=7)
        chunks.append([chunk["action"] for chunk in itertools.islice(iter(replay), 40)])
    np.testing.assert_array_equal(np.stack(chunks[0]), np.stack(chunks[1]))


def test_every_tensorflow_command_turns_on_op_determinism_and_turns_off_grappler():
    """Here `variables`: a command that trains nothing computes as training does (evaluate, collect, export too)."""
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config

    from planet_sac.cli import main

    tf_config.disable_op_determinism()  # as the session fixture left them: the other way round
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    assert main(["variables", str(OLD_RUN), "--quiet"]) == 0
    assert tf_config.is_op_determinism_enabled()
    assert tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer") is True


@pytest.mark.slow
def test_pixel_world_model_gradient_repeats_at_planet_batch():
    """At PlaNet's chunk batch (16 x 50 images, tiny networks) the compiled gradient of the world model's loss,
    called again on the same weights and inputs, is the same to the bit. With Grappler on it was not: the
    encoder's, GRU's and posterior's gradients changed from call to call (docs/determinism.md)."""
    import tensorflow as tf

    from planet_sac.benchmark import ACTION_SIZE, image_batch
    from planet_sac.models.world_model import WorldModel
    from planet_sac.startup import make_tensorflow_deterministic

    make_tensorflow_deterministic()
    config = load_config(ROOT / "configs" / "dmc_vision_cpu.yaml", [
        "model.cnn_depth=4", "model.decoder_depth=4", "model.deter_size=32", "model.hidden_size=32",
        "model.stoch_size=8", "optim.precision=float32"])
    model = WorldModel(config.model, "image", (64, 64, 3), ACTION_SIZE, precision="float32")
    batch = image_batch(16, 50)
    noise = model.sample_noise(tf.random.Generator.from_seed(1), 16, 50)

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            loss = model.loss(batch, noise)[0]
        return tape.gradient(loss, model.trainable_variables)

    calls = [[gradient.numpy() for gradient in gradients()] for _ in range(3)]
    names = [variable.name for variable in model.trainable_variables]
    assert any(name.startswith("world_model/encoder/") for name in names)
    differ = [name for k, name in enumerate(names) if not all(np.array_equal(calls[0][k], call[k]) for call in calls[1:])]
    assert not differ, f"{len(differ)} of {len(names)} gradients changed between calls, e.g. {differ[:3]}"


def _episode(tag: float) -> dict:
    return {"state": np.full((31, 3), tag, np.float32), "action": np.full((31, 1), tag / 100, np.float32),
            "reward": np.full(31, tag, np.float32), "discount": np.ones(31, np.float32)}


def test_batches_are_drawn_on_demand_so_new_episodes_enter_at_a_fixed_batch(tmp_path):
    """With prefetch=0 the directory is scanned when a batch is asked for, never ahead of it by a thread."""
    import time

    from planet_sac.episodes.loader import make_dataset
    from planet_sac.episodes.storage import save_episode

    save_episode(str(tmp_path), _episode(1.0))
    dataset, _ = make_dataset(str(tmp_path), batch_size=2, chunk_length=5, every=2, seed=0, prefetch=0)
    batches = iter(dataset)
    first = next(batches)  # one pass of `every` chunks: the generator stops before its next scan
    assert set(np.unique(first["reward"])) == {1.0}
    time.sleep(1.0)  # a prefetching thread would have scanned and drawn the next batches by now
    save_episode(str(tmp_path), _episode(2.0))
    second = next(batches)  # the scan before this pass finds episode 2; half a pass is recent episodes
    assert 2.0 in set(np.unique(second["reward"]))


def test_the_trainer_turns_on_op_determinism_turns_off_grappler_and_draws_batches_on_demand(tmp_path, monkeypatch):
    """One Trainer (a run of 0 updates, which makes its dataset and traces no update) for both: it turns on op
    determinism and turns off Grappler, and its dataset draws batches on demand (prefetch 0)."""
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config  # the public API can enable it only

    from planet_sac.training import run_state as run_state_module
    from planet_sac.training import trainer as trainer_module

    calls = []
    original = run_state_module.make_dataset

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(run_state_module, "make_dataset", recording)
    tf_config.disable_op_determinism()  # whatever an earlier test in this process did
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    # Trainer.run makes its dataset before the first update: a run of 0 updates makes it and traces no update.
    trainer_module.train(load_config(SMOKE), str(tmp_path / "run"), progress=False, train_steps=0)
    assert tf_config.is_op_determinism_enabled()
    assert tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer") is True
    assert calls and all(call.get("prefetch") == 0 for call in calls)
