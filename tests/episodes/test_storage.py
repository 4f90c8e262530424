"""Episode files: naming, atomic writes, round trips and rejection of bad files."""

from __future__ import annotations

import datetime as dt
import io
import os
import re
import time
import zipfile

import numpy as np
import pytest

from planet_sac.episodes.folder import list_episodes
from planet_sac.episodes.storage import (
    BadEpisodeError,
    EpisodeSpec,
    episode_filename,
    load_episode,
    save_episode,
    validate_episode,
)

NAME = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{32}-\d+\.npz$")


def make_episode(length: int = 20, state_dim: int = 3, action_dim: int = 1, image: int | None = None, seed: int = 0):
    """A valid aligned episode with ``length`` actions (arrays of length + 1)."""
    rng = np.random.default_rng(seed)
    episode = {
        "state": rng.normal(size=(length + 1, state_dim)).astype(np.float32),
        "action": rng.uniform(-1, 1, size=(length + 1, action_dim)).astype(np.float32),
        "reward": rng.normal(size=length + 1).astype(np.float32),
        "discount": np.ones(length + 1, np.float32),
    }
    episode["action"][0] = 0
    episode["reward"][0] = 0
    if image:
        episode["image"] = rng.integers(0, 256, size=(length + 1, image, image, 3), dtype=np.uint8)
    return episode


def write_npz(path, compressed: bool = True, **arrays) -> str:
    """Write arbitrary arrays with numpy directly (bypassing validation)."""
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return str(path)


def write_bytes(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def expect_bad(path, reason: str, **kwargs) -> BadEpisodeError:
    with pytest.raises(BadEpisodeError) as info:
        load_episode(str(path), **kwargs)
    error = info.value
    assert error.reason == reason, str(error)
    assert "\n" not in str(error)
    return error


# ------------------------------------------------------------------ writing


def test_episode_filename_pattern_and_utc():
    name = episode_filename(37, now=dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert NAME.match(name)
    assert name.startswith("20240506T050809-") and name.endswith("-37.npz")
    assert NAME.match(episode_filename(5))
    assert episode_filename(5) != episode_filename(5)


@pytest.mark.parametrize("image", [None, 8])
def test_round_trip(tmp_path, image):
    episode = make_episode(length=25, image=image)
    path = save_episode(str(tmp_path / "episodes"), episode)

    name = os.path.basename(path)
    assert NAME.match(name)
    assert name.endswith("-25.npz")  # length suffix = number of actions T
    loaded = load_episode(path)
    assert set(loaded) == set(episode)
    for key, value in episode.items():
        assert loaded[key].dtype == value.dtype, key
        assert loaded[key].shape == value.shape, key
        np.testing.assert_array_equal(loaded[key], value)
    if image:
        assert loaded["image"].dtype == np.uint8


def test_save_casts_float64_and_load_accepts_it(tmp_path):
    episode = make_episode()
    episode64 = {key: value.astype(np.float64) for key, value in episode.items()}
    path = save_episode(str(tmp_path), episode64)
    loaded = load_episode(path)
    assert all(value.dtype == np.float32 for value in loaded.values())
    # A float64 file written by someone else is also accepted and cast.
    other = write_npz(tmp_path / "other.npz", **episode64)
    assert load_episode(other)["state"].dtype == np.float32


def test_save_refuses_bad_episode_and_writes_nothing(tmp_path):
    episode = make_episode()
    episode["reward"][3] = np.nan
    with pytest.raises(BadEpisodeError, match="non-finite"):
        save_episode(str(tmp_path), episode)
    assert os.listdir(tmp_path) == []


def test_save_refuses_an_object_array_under_any_key_and_writes_nothing(tmp_path):
    episode = make_episode()
    info = np.empty(len(episode["action"]), dtype=object)  # np.savez would pickle it; loading refuses pickles
    with pytest.raises(BadEpisodeError, match="object arrays are not allowed: key 'info'"):
        save_episode(str(tmp_path), {**episode, "info": info})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("key", ["allow_pickle", "file"])
def test_save_refuses_keys_np_savez_would_take_as_its_arguments(tmp_path, key):
    # np.savez_compressed(file, allow_pickle=..., **arrays): an 'allow_pickle' array used to be dropped from
    # the file without a word, a 'file' array to raise a TypeError; other extra keys are kept.
    episode = make_episode()
    with pytest.raises(BadEpisodeError, match=f"reserved key: '{key}'"):
        save_episode(str(tmp_path), {**episode, key: np.zeros(len(episode["action"]), np.float32)})
    assert os.listdir(tmp_path) == []
    extra = np.arange(len(episode["action"]), dtype=np.float32)
    loaded = load_episode(save_episode(str(tmp_path), {**episode, "allow": extra}))
    np.testing.assert_array_equal(loaded["allow"], extra)


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    import tensorflow as tf

    def rename(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    with pytest.raises(OSError, match="disk full"):
        save_episode(str(tmp_path), make_episode())
    assert os.listdir(tmp_path) == []


def test_atomic_write_leaves_no_temp_and_list_ignores_partials(tmp_path):
    paths = [save_episode(str(tmp_path), make_episode(seed=i)) for i in range(3)]
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in paths)  # no temp files left
    # Partial / temporary / hidden files that writers may leave around are not episodes.
    (tmp_path / ".tmp-0123abcd.npz.part").write_bytes(b"partial")
    (tmp_path / ".hidden.npz").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "subdir.npz.part").mkdir()
    listed = list_episodes(str(tmp_path))
    assert listed == sorted(paths, key=os.path.basename)
    assert list_episodes(str(tmp_path / "missing")) == []


def test_list_is_time_ordered(tmp_path):
    times = [dt.datetime(2024, 1, 1, 0, 0, s, tzinfo=dt.timezone.utc) for s in (30, 10, 20)]
    for when in times:
        write_npz(tmp_path / episode_filename(20, now=when), **make_episode())
    names = [os.path.basename(p)[:15] for p in list_episodes(str(tmp_path))]
    assert names == ["20240101T000010", "20240101T000020", "20240101T000030"]


# ------------------------------------------------------------------ bad files


@pytest.fixture
def good_file(tmp_path) -> str:
    return save_episode(str(tmp_path / "good"), make_episode(length=40, image=8))


def test_truncated_zip(tmp_path, good_file):
    data = open(good_file, "rb").read()
    for cut in (len(data) // 2, len(data) - 10):
        path = tmp_path / f"cut{cut}.npz"
        path.write_bytes(data[:cut])
        error = expect_bad(path, "not a zip/npz file")
        assert "truncated" in str(error)


def test_corrupt_member_data(tmp_path, good_file):
    data = bytearray(open(good_file, "rb").read())
    data[200:260] = bytes(60)  # zero out part of the first member's compressed stream
    path = tmp_path / "corrupt.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(BadEpisodeError) as info:
        load_episode(str(path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("damage", ["encrypted flag", "unknown compression method"])
def test_zip_features_zipfile_cannot_read_are_a_corrupt_archive(tmp_path, good_file, damage):
    """zipfile raises RuntimeError / NotImplementedError for these (seen by flipping random bytes), not BadZipFile."""
    data = bytearray(open(good_file, "rb").read())
    central = data.find(b"PK\x01\x02")  # the first member's central-directory entry
    if damage == "encrypted flag":
        data[central + 8] |= 1
    else:
        data[central + 10:central + 12] = (99).to_bytes(2, "little")
    error = expect_bad(write_bytes(tmp_path / "damaged.npz", bytes(data)), "corrupt archive")
    assert "\n" not in str(error)


def test_a_zip_behind_other_bytes_is_no_npz_file(tmp_path, good_file):
    """zipfile finds an archive behind a prefix (a self-extracting archive); np.load does not, it tries to unpickle
    the bytes: the file is no npz file (it was counted as "object arrays are not allowed")."""
    data = open(good_file, "rb").read()
    expect_bad(write_bytes(tmp_path / "prefixed.npz", b"#!/bin/sh\n" + data), "not a zip/npz file")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")
    expect_bad(path, "empty file")


def test_text_file(tmp_path):
    path = tmp_path / "text.npz"
    path.write_text("this is not an episode\n" * 10)
    expect_bad(path, "not a zip/npz file")


def test_empty_archive(tmp_path):
    path = tmp_path / "nothing.npz"
    with zipfile.ZipFile(path, "w"):
        pass
    expect_bad(path, "empty archive")


def test_pickled_object_array(tmp_path):
    episode = make_episode()
    episode["reward"] = np.array([{"evil": 1}] * 21, dtype=object)
    path = write_npz(tmp_path / "pickle.npz", compressed=False, **episode)
    error = expect_bad(path, "object arrays are not allowed")
    assert "reward" in str(error)


def test_missing_keys(tmp_path):
    episode = make_episode()
    del episode["discount"]
    expect_bad(write_npz(tmp_path / "a.npz", **episode), "missing key")
    episode = make_episode()
    del episode["state"]
    error = expect_bad(write_npz(tmp_path / "b.npz", **episode), "missing key")
    assert "image" in str(error) and "state" in str(error)


@pytest.mark.parametrize(
    "key, value, detail",
    [
        ("image", np.zeros((21, 8, 8, 3), np.float32), "'image' is float32, expected uint8"),
        ("action", np.zeros((21, 1), np.int64), "'action' is int64, expected float32"),
        ("discount", np.ones(21, bool), "'discount' is bool"),
    ],
)
def test_wrong_dtype(tmp_path, key, value, detail):
    episode = make_episode(length=20)
    episode[key] = value
    error = expect_bad(write_npz(tmp_path / "bad.npz", **episode), "wrong dtype")
    assert detail in str(error)


@pytest.mark.parametrize(
    "key, shape",
    [("image", (21, 8, 8)), ("image", (21, 8, 8, 4)), ("image", (21, 8, 0, 3)), ("state", (21,)), ("reward", (21, 1)),
     ("state", (21, 0)), ("action", (21, 0)), ("discount", (21, 1))],
)
def test_wrong_shape(tmp_path, key, shape):
    episode = make_episode(length=20)
    episode[key] = np.zeros(shape, np.uint8 if key == "image" else np.float32)
    expect_bad(write_npz(tmp_path / "bad.npz", **episode), "wrong shape")


def test_mismatched_lengths(tmp_path):
    episode = make_episode(length=20)
    episode["reward"] = episode["reward"][:-1]
    error = expect_bad(write_npz(tmp_path / "bad.npz", **episode), "length mismatch")
    assert "reward=20" in str(error) and "action=21" in str(error)


def test_too_few_steps(tmp_path):
    episode = {key: value[:1] for key, value in make_episode().items()}
    expect_bad(write_npz(tmp_path / "bad.npz", **episode), "too few steps")


@pytest.mark.parametrize("key, bad", [("reward", np.nan), ("state", np.inf), ("action", -np.inf)])
def test_non_finite(tmp_path, key, bad):
    episode = make_episode()
    episode[key][5] = bad
    error = expect_bad(write_npz(tmp_path / "bad.npz", **episode), "non-finite values")
    assert key in str(error)


def test_float64_values_beyond_float32_range_are_refused_not_turned_into_inf(tmp_path):
    episode = {key: value.astype(np.float64) if value.dtype == np.float32 else value
               for key, value in make_episode().items()}
    episode["reward"][5] = 1e300
    error = expect_bad(write_npz(tmp_path / "big.npz", **episode), "non-finite values")
    assert "'reward'" in str(error) and "float32" in str(error)
    episode["reward"][5] = 3e38  # within float32's range: kept, as float32
    loaded = load_episode(write_npz(tmp_path / "ok.npz", **episode))
    assert loaded["reward"].dtype == np.float32 and loaded["reward"][5] == np.float32(3e38)


def test_discount_out_of_range(tmp_path):
    for value in (1.5, -0.5):
        episode = make_episode()
        episode["discount"][3] = value
        expect_bad(write_npz(tmp_path / "bad.npz", **episode), "discount out of range")


@pytest.mark.parametrize("step", [0, 3, 19])
def test_a_termination_before_the_last_step_is_refused(tmp_path, step):
    """Discount 0 marks a termination; steps after it are no experience of the task (an episode that went on)."""
    episode = make_episode(length=20)
    episode["discount"][step] = 0.0
    error = expect_bad(write_npz(tmp_path / "bad.npz", **episode), "discount 0 before the end")
    assert f"at step {step} of 20" in str(error)


def test_a_termination_at_the_last_step_and_partial_discounts_load(tmp_path):
    episode = make_episode(length=20)
    episode["discount"][-1] = 0.0
    episode["discount"][5] = 0.5  # a discount below 1 is no termination
    loaded = load_episode(write_npz(tmp_path / "ok.npz", **episode))
    assert loaded["discount"][-1] == 0.0 and loaded["discount"][5] == 0.5


@pytest.mark.parametrize("value", [2.0, -1.01, 1.001])
def test_actions_beyond_minus_one_to_one_are_refused(tmp_path, value):
    """Actions are stored in make_env's [-1, 1]; a dataset in the task's own units (Pendulum's [-2, 2]) would
    teach the model actions no policy can take."""
    episode = make_episode(action_dim=2)
    episode["action"][7, 1] = value
    error = expect_bad(write_npz(tmp_path / "bad.npz", **episode), "action out of range")
    assert f"{value:.4g}" in str(error) and "expected [-1, 1]" in str(error)
    with pytest.raises(BadEpisodeError, match="action out of range"):
        save_episode(str(tmp_path / "out"), episode)
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_actions_at_the_bounds_and_their_float32_rounding_load(tmp_path):
    episode = make_episode(action_dim=2)
    episode["action"][3] = [1.0, -1.0]
    episode["action"][4] = [np.nextafter(np.float32(1), np.float32(2)), -np.nextafter(np.float32(1), np.float32(2))]
    load_episode(write_npz(tmp_path / "ok.npz", **episode))


def test_spec_mismatch(tmp_path):
    spec = EpisodeSpec.from_episode(make_episode(state_dim=3, action_dim=1))
    assert spec == EpisodeSpec(obs=(("state", (3,), "float32"),), action_dim=1)
    load_episode(save_episode(str(tmp_path), make_episode(seed=1)), spec=spec)  # same shapes: fine
    expect_bad(save_episode(str(tmp_path), make_episode(state_dim=4)), "spec mismatch", spec=spec)
    expect_bad(save_episode(str(tmp_path), make_episode(action_dim=2)), "spec mismatch", spec=spec)
    # The spec's observation key must be there with its shape; another observation key beside it is not used.
    load_episode(save_episode(str(tmp_path), make_episode(image=8)), spec=spec)
    image_only = make_episode(image=8)
    del image_only["state"]
    error = expect_bad(save_episode(str(tmp_path), image_only), "spec mismatch", spec=spec)
    assert "no 'state' observations, has image" in str(error)
    with pytest.raises(BadEpisodeError, match="spec mismatch"):
        validate_episode(make_episode(action_dim=2), spec)


def test_max_bytes_guard_on_legit_file(good_file):
    load_episode(good_file)  # fine with the default limit
    error = expect_bad(good_file, "too large", max_bytes=1000)
    assert "max_bytes=1000" in str(error)


def test_a_file_larger_than_max_bytes_is_refused_by_its_size(tmp_path):
    """Random bytes do not compress: this file is larger than what its members declare, so a limit between the two
    is the file's size that is refused, before the file is read."""
    rng = np.random.default_rng(0)
    episode = make_episode(length=20, image=8)
    episode["image"] = rng.integers(0, 256, episode["image"].shape, dtype=np.uint8)
    path = save_episode(str(tmp_path), episode)
    size = os.path.getsize(path)
    with zipfile.ZipFile(path) as archive:
        declared = sum(member.file_size for member in archive.infolist())
    assert declared < size
    error = expect_bad(path, "too large", max_bytes=(declared + size) // 2)
    assert f"file has {size} bytes" in str(error)


def test_zip_bomb_rejected_before_decompressing(tmp_path):
    # 64 MB of zeros compress to ~64 KB; the declared size gives it away.
    path = tmp_path / "bomb.npz"
    episode = make_episode(length=20)
    episode["image"] = np.zeros((21, 1024, 1024, 3), np.uint8)
    write_npz(path, **episode)
    assert os.path.getsize(path) < 1_000_000
    start = time.perf_counter()
    error = expect_bad(path, "too large", max_bytes=10_000_000)
    assert time.perf_counter() - start < 0.5
    assert "uncompressed" in str(error)


def test_header_lying_about_shape(tmp_path):
    # A member whose npy header claims a terabyte array but holds a few bytes.
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": (2**40,)})
    path = tmp_path / "liar.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("image.npy", header.getvalue() + b"\0" * 16)
    error = expect_bad(path, "corrupt archive")
    assert "header shape (1099511627776,) exceeds its declared size" in str(error)  # found before any allocation


def test_unexpected_member(tmp_path):
    path = tmp_path / "extra.npz"
    write_npz(path, **make_episode())
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("run.sh", "rm -rf /")
    expect_bad(path, "unexpected archive member")
