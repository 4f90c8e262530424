"""Streaming replay: chunks, recent/cache passes, new files, caps, bad files, waiting, tf.data."""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import json
import os
import shutil
import time

import numpy as np
import pytest

from planet_sac.episodes.loader import EpisodeReplay, NoEpisodesError, make_dataset
from planet_sac.episodes.storage import EpisodeSpec, episode_filename, save_episode
from tests.conftest import logged_warnings

BASE_TIME = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def make_episode(tag: int, length: int = 40, image: int | None = None, state_dim: int = 3, action_dim: int = 1):
    """Episode whose state column 0 is the step index and column 1 the tag (to identify chunks)."""
    steps = np.arange(length + 1, dtype=np.float32)
    state = np.zeros((length + 1, state_dim), np.float32)
    state[:, 0] = steps
    state[:, 1 % state_dim] = tag
    episode = {
        "state": state,
        "action": np.full((length + 1, action_dim), 0.5, np.float32),
        "reward": np.full(length + 1, float(tag), np.float32),
        "discount": np.ones(length + 1, np.float32),
    }
    episode["action"][0] = 0
    episode["reward"][0] = 0
    if image:
        episode["image"] = np.full((length + 1, image, image, 3), tag % 256, np.uint8)
        episode["image"][:, 0, 0, 0] = np.arange(length + 1) % 256
    return episode


def put(directory, tag: int, length: int = 40, **kwargs) -> str:
    """Write an episode whose file name sorts by ``tag`` (time stamp = BASE_TIME + tag seconds)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(str(directory), episode_filename(length, now=BASE_TIME + dt.timedelta(seconds=tag)))
    np.savez_compressed(path, **make_episode(tag, length, **kwargs))
    return path


def tag_of(chunk) -> int:
    return int(chunk["state"][0, 1])


def take(iterator, n):
    return list(itertools.islice(iterator, n))


@pytest.fixture
def warnings_log():
    """Warning records of the ``planet_sac`` logger (independent of propagation settings)."""
    yield from logged_warnings("planet_sac")


# ------------------------------------------------------------------ chunks


def test_chunks_have_right_shapes_dtypes_and_are_consecutive(tmp_path):
    for tag in range(3):
        put(tmp_path, tag, length=30, image=8)
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=6, seed=0)
    assert replay.spec.keys == ("image", "state", "action", "reward", "discount")
    starts = set()
    for chunk in take(iter(replay), 60):
        assert chunk["image"].shape == (10, 8, 8, 3) and chunk["image"].dtype == np.uint8
        assert chunk["state"].shape == (10, 3) and chunk["state"].dtype == np.float32
        assert chunk["action"].shape == (10, 1) and chunk["action"].dtype == np.float32
        assert chunk["reward"].shape == (10,) and chunk["discount"].shape == (10,)
        steps = chunk["state"][:, 0]
        np.testing.assert_array_equal(steps, steps[0] + np.arange(10))  # consecutive steps
        np.testing.assert_array_equal(chunk["image"][:, 0, 0, 0], steps.astype(np.uint8))  # keys aligned
        assert chunk["image"][0, 1, 1, 0] == tag_of(chunk)
        starts.add(int(steps[0]))
    assert min(starts) >= 0 and max(starts) <= 31 - 10
    assert len(starts) > 10  # uniform random starts, not a fixed offset
    # The cache keeps raw uint8 images: memory = raw bytes of the cached arrays.
    raw = 3 * 31 * (8 * 8 * 3 + 4 * (3 + 1 + 1 + 1))
    assert replay.stats["cache_bytes"] == raw
    with pytest.raises(ValueError):  # chunks are read-only views into the cache
        chunk["image"][0, 0, 0, 0] = 1


def test_same_seed_same_stream(tmp_path):
    for tag in range(4):
        put(tmp_path, tag)
    streams = [take(EpisodeReplay(str(tmp_path), 8, every=5, seed=3).iter_with_info(), 30) for _ in range(2)]
    assert [info for _, info in streams[0]] == [info for _, info in streams[1]]


def test_episodes_that_differ_in_their_rewards_only_are_sampled_by_content_not_by_name(tmp_path):
    """make_episode's actions are all alike, its rewards differ (test_determinism's episodes differ in their actions):
    the same files under names in the reverse order give the same chunks."""
    streams = []
    for folder, seconds in (("a", range(6)), ("b", range(5, -1, -1))):
        os.makedirs(tmp_path / folder)
        for tag, second in zip(range(6), seconds):
            name = episode_filename(40, now=BASE_TIME + dt.timedelta(seconds=second))
            np.savez_compressed(tmp_path / folder / name, **make_episode(tag))
        replay = EpisodeReplay(str(tmp_path / folder), chunk_length=5, every=4, seed=7)
        streams.append([(tag_of(chunk), info.start, info.source) for chunk, info in take(replay.iter_with_info(), 40)])
    assert streams[0] == streams[1]


def test_keys_and_several_directories(tmp_path):
    put(tmp_path / "a", 1)
    put(tmp_path / "b", 2)
    replay = EpisodeReplay([str(tmp_path / "a"), str(tmp_path / "b")], 5, every=4, keys=["state", "reward"], seed=0)
    chunks = take(iter(replay), 20)
    assert all(set(chunk) == {"state", "reward"} for chunk in chunks)
    assert {tag_of(chunk) for chunk in chunks} == {1, 2}
    with pytest.raises(ValueError, match="unknown keys"):
        next(iter(EpisodeReplay(str(tmp_path / "a"), 5, keys=["image"])))


# ------------------------------------------------------------------ passes


def test_new_file_is_picked_up_while_iterating(tmp_path):
    put(tmp_path, 0)
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=4, seed=0)
    iterator = iter(replay)
    assert {tag_of(chunk) for chunk in take(iterator, 9)} == {0}
    save_episode(str(tmp_path), make_episode(7))  # written by a "collector" mid-training
    tags = [tag_of(chunk) for chunk in take(iterator, 8)]  # covers the next full pass
    assert 7 in tags
    assert replay.stats["files_loaded"] == 2


def test_recent_and_cache_proportions(tmp_path):
    for tag in range(3):
        put(tmp_path, tag)
    replay = EpisodeReplay(str(tmp_path), chunk_length=5, every=10, seed=1)
    iterator = replay.iter_with_info()

    # Pass 1: the cache is empty, so only the 3 recent episodes, once each.
    first = take(iterator, 3)
    assert [info.source for _, info in first] == ["recent"] * 3
    assert sorted(tag_of(chunk) for chunk, _ in first) == [0, 1, 2]

    # Pass 2: 4 new files -> each exactly once as recent, the other 6 from the (old) cache.
    for tag in range(10, 14):
        put(tmp_path, tag)
    second = take(iterator, 10)
    recent = [tag_of(chunk) for chunk, info in second if info.source == "recent"]
    cached = [tag_of(chunk) for chunk, info in second if info.source == "cache"]
    assert sorted(recent) == [10, 11, 12, 13]
    assert len(cached) == 6 and set(cached) <= {0, 1, 2}
    assert replay.stats["recent_yielded"] == 7 and replay.stats["cache_yielded"] == 6
    assert replay.stats["cache_episodes"] == 7

    # Pass 3: 8 new files, but only about half a pass (5) is recent; the rest come from the cache of 7.
    for tag in range(20, 28):
        put(tmp_path, tag)
    third = take(iterator, 10)
    recent = [tag_of(chunk) for chunk, info in third if info.source == "recent"]
    cached = [tag_of(chunk) for chunk, info in third if info.source == "cache"]
    assert len(recent) == 5 and len(set(recent)) == 5 and set(recent) <= set(range(20, 28))
    assert len(cached) == 5 and set(cached) <= {0, 1, 2, 10, 11, 12, 13}
    assert replay.stats["cache_episodes"] == 15  # unyielded recent episodes still join the cache

    # Pass 4: nothing new -> the whole pass is sampled from the cache, new episodes included.
    fourth = take(iterator, 200)
    assert all(info.source == "cache" for _, info in fourth)
    assert {tag_of(chunk) for chunk, _ in fourth} == {0, 1, 2, 10, 11, 12, 13, *range(20, 28)}
    assert replay.stats["recent_yielded"] == 12
    assert replay.stats["files_loaded"] == 15
    assert replay.stats["scans"] >= 4


def test_a_pass_is_all_recent_while_the_cache_is_empty_then_half_of_every_rounded_up(tmp_path):
    for tag in range(7):
        put(tmp_path, tag)
    replay = EpisodeReplay(str(tmp_path), chunk_length=5, every=5, seed=0)
    iterator = replay.iter_with_info()
    first = take(iterator, 5)  # no cache yet: a whole pass of 5 different recent episodes of the 7
    assert [info.source for _, info in first] == ["recent"] * 5
    assert len({tag_of(chunk) for chunk, _ in first}) == 5
    for tag in range(10, 16):
        put(tmp_path, tag)
    assert replay.stats["passes"] == 1
    second = take(iterator, 5)  # a cache of 7: ceil(5 / 2) = 3 of the 6 new episodes, then 2 from the cache
    assert sorted(info.source for _, info in second) == ["cache"] * 2 + ["recent"] * 3
    assert {tag_of(chunk) for chunk, info in second if info.source == "recent"} <= set(range(10, 16))
    assert replay.stats["passes"] == 2


def test_which_recent_episodes_a_pass_takes_is_drawn_by_the_seed(tmp_path):
    """7 new episodes, a pass of 5 with an empty cache: each seed takes 5 different ones, not every seed the same 5."""
    for tag in range(7):
        put(tmp_path, tag)
    chosen = set()
    for seed in range(8):
        tags = [tag_of(chunk) for chunk in take(iter(EpisodeReplay(str(tmp_path), chunk_length=5, every=5, seed=seed)), 5)]
        assert len(set(tags)) == 5
        chosen.add(frozenset(tags))
    assert len(chosen) > 1


def test_max_episodes_drops_the_oldest(tmp_path):
    for tag in range(3):
        put(tmp_path, tag)
    replay = EpisodeReplay(str(tmp_path), chunk_length=5, every=4, max_episodes=3, seed=0)
    iterator = iter(replay)
    take(iterator, 3)
    put(tmp_path, 3)
    put(tmp_path, 4)
    take(iterator, 4)  # the pass that merges 3 and 4 into the cache
    assert replay.stats["cache_episodes"] == 3 and replay.stats["cache_dropped"] == 2
    later = {tag_of(chunk) for chunk in take(iterator, 100)}
    assert later == {2, 3, 4}
    assert len(os.listdir(tmp_path)) == 5  # dropped episodes stay on disk


def test_max_episodes_never_loads_files_it_would_drop(tmp_path):
    for tag in range(10):
        put(tmp_path, tag)
    replay = EpisodeReplay(str(tmp_path), chunk_length=5, every=8, max_episodes=4, seed=0)
    tags = {tag_of(chunk) for chunk in take(iter(replay), 100)}
    assert tags == {6, 7, 8, 9}
    assert replay.stats["files_loaded"] == 4 and replay.stats["files_ignored"] == 6


def test_max_episodes_fills_the_cache_with_the_newest_usable_files(tmp_path):
    """The newest file is bad: the cap of 2 is filled from the two newest good ones, not left at one."""
    for tag in range(4):
        put(tmp_path, tag)
    newest = os.path.join(str(tmp_path), episode_filename(40, now=BASE_TIME + dt.timedelta(seconds=99)))
    with open(newest, "w") as file:
        file.write("not an episode")
    replay = EpisodeReplay(str(tmp_path), chunk_length=5, every=8, max_episodes=2, seed=0)
    tags = {tag_of(chunk) for chunk in take(iter(replay), 100)}
    assert tags == {2, 3}
    assert replay.stats["files_loaded"] == 2 and replay.stats["files_skipped"] == 1
    assert replay.stats["files_ignored"] == 2


def test_with_several_folders_max_episodes_keeps_the_newest_files_of_all(tmp_path):
    """Files are ordered by the time stamps of their names across the folders, not folder by folder: with a cap of 2
    the two newest are loaded, both in the first folder."""
    for tag in (5, 6):
        put(tmp_path / "a", tag)
    for tag in (1, 2):
        put(tmp_path / "b", tag)
    replay = EpisodeReplay([str(tmp_path / "a"), str(tmp_path / "b")], chunk_length=5, every=4, max_episodes=2, seed=0)
    assert {tag_of(chunk) for chunk in take(iter(replay), 40)} == {5, 6}
    assert replay.stats["files_ignored"] == 2


# ------------------------------------------------------------------ bad and short files


def write_bad_files(directory) -> dict[str, str]:
    """One file of each bad kind, named after the good ones; returns {reason: path}."""
    good = put(directory, 1000, length=30)
    data = open(good, "rb").read()
    bad = {}

    def name(tag):
        return os.path.join(str(directory), episode_filename(30, now=BASE_TIME + dt.timedelta(seconds=2000 + tag)))

    bad["not a zip/npz file"] = name(1)
    open(bad["not a zip/npz file"], "wb").write(data[: len(data) // 2])  # truncated
    bad["empty file"] = name(2)
    open(bad["empty file"], "wb").close()
    bad["object arrays are not allowed"] = name(3)
    episode = make_episode(3, 30)
    episode["reward"] = np.array([None] * 31, dtype=object)
    np.savez(bad["object arrays are not allowed"], **episode)
    bad["missing key"] = name(4)
    episode = make_episode(4, 30)
    del episode["action"]
    np.savez_compressed(bad["missing key"], **episode)
    bad["wrong dtype"] = name(5)
    np.savez_compressed(bad["wrong dtype"], **dict(make_episode(5, 30), action=np.zeros((31, 1), np.int64)))
    bad["non-finite values"] = name(6)
    episode = make_episode(6, 30)
    episode["reward"][4] = np.nan
    np.savez_compressed(bad["non-finite values"], **episode)
    bad["spec mismatch"] = name(7)
    np.savez_compressed(bad["spec mismatch"], **make_episode(7, 30, state_dim=5))
    return bad


def test_bad_files_are_skipped_once_while_good_chunks_flow(tmp_path, warnings_log):
    put(tmp_path, 0)
    bad = write_bad_files(tmp_path)
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=5, seed=0)
    iterator = iter(replay)
    tags = [tag_of(chunk) for chunk in take(iterator, 30)]
    text_file = os.path.join(str(tmp_path), "zz-notes.npz")
    with open(text_file, "w") as file:  # a bad file that shows up later
        file.write("hello")
    tags += [tag_of(chunk) for chunk in take(iterator, 30)]

    assert set(tags) == {0, 1000}
    assert replay.stats["files_skipped"] == len(bad) + 1
    expected = collections.Counter(bad.keys())
    expected["not a zip/npz file"] += 1
    assert replay.stats["skipped_reasons"] == expected
    assert replay.stats["scans"] > 5  # rescanned many times, yet warned only once per file
    messages = [record.getMessage() for record in warnings_log]
    assert len(messages) == len(bad) + 1
    for reason, path in [*bad.items(), ("not a zip/npz file", text_file)]:
        assert sum(path in message and reason in message for message in messages) == 1, reason


def test_half_written_file_is_read_again_once_complete(tmp_path, warnings_log):
    """A non-atomic writer (plain cp): the first scan sees half the file, a later scan the whole of it."""
    put(tmp_path / "source", 1)
    (complete,) = os.listdir(tmp_path / "source")
    data = (tmp_path / "source" / complete).read_bytes()
    put(tmp_path / "replay", 0)
    target = tmp_path / "replay" / complete
    target.write_bytes(data[: len(data) // 2])
    replay = EpisodeReplay(str(tmp_path / "replay"), chunk_length=10, every=5, seed=0)
    iterator = iter(replay)
    take(iterator, 20)
    assert replay.stats["files_skipped"] == 1 and replay.stats["files_loaded"] == 1
    scans = replay.stats["scans"]
    take(iterator, 20)
    assert replay.stats["scans"] > scans and replay.stats["files_skipped"] == 1  # unchanged: not read again
    assert replay.stats["files_retried"] == 0 and len(warnings_log) == 1

    target.write_bytes(data)  # the copy finishes
    tags = {tag_of(chunk) for chunk in take(iterator, 40)}
    assert tags == {0, 1}
    assert replay.stats["files_retried"] == 1 and replay.stats["files_loaded"] == 2


def test_a_file_that_cannot_be_read_is_counted_warned_once_and_read_once_it_can(tmp_path, warnings_log, monkeypatch):
    """An I/O error (here a PermissionError; root ignores chmod) is not bad content: retried at every scan,
    warned once, counted in files_unreadable, and loaded as soon as it can be read."""
    import planet_sac.episodes.loader as loader

    put(tmp_path, 0)
    locked = put(tmp_path, 1)
    real_load = loader.load_episode

    def load(path, **kwargs):
        if path == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_load(path, **kwargs)

    monkeypatch.setattr(loader, "load_episode", load)
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=5, seed=0)
    iterator = iter(replay)
    assert {tag_of(chunk) for chunk in take(iterator, 30)} == {0}
    assert replay.stats["scans"] > 3 and replay.stats["files_unreadable"] == 1
    assert replay.stats["files_skipped"] == 0 and replay.stats["files_loaded"] == 1
    messages = [record.getMessage() for record in warnings_log]
    assert len(messages) == 1 and locked in messages[0] and "PermissionError" in messages[0]

    monkeypatch.setattr(loader, "load_episode", real_load)  # permissions fixed
    assert {tag_of(chunk) for chunk in take(iterator, 40)} == {0, 1}
    assert replay.stats["files_unreadable"] == 0 and replay.stats["files_loaded"] == 2 and len(warnings_log) == 1


def test_only_unreadable_files_say_so_when_no_episode_comes(tmp_path, monkeypatch):
    import planet_sac.episodes.loader as loader

    put(tmp_path, 0)
    monkeypatch.setattr(loader, "load_episode", lambda path, **kwargs: (_ for _ in ()).throw(PermissionError(13, "denied")))
    with pytest.raises(NoEpisodesError) as info:
        next(iter(EpisodeReplay(str(tmp_path), chunk_length=10, wait_seconds=0.3, poll_seconds=0.1)))
    message = str(info.value)
    assert "(1 files skipped: 1 unreadable, e.g. PermissionError" in message and "permissions" in message
    assert "Collect some" not in message


def test_rejected_file_with_new_mtime_but_same_size_is_read_again(tmp_path):
    put(tmp_path, 0)
    path = put(tmp_path, 1)
    data = open(path, "rb").read()
    with open(path, "wb") as file:
        file.write(b"\0" * len(data))  # same size, garbage
    os.utime(path, ns=(10**18, 10**18))
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=5, seed=0)
    iterator = iter(replay)
    take(iterator, 10)
    assert replay.stats["files_skipped"] == 1
    with open(path, "wb") as file:
        file.write(data)
    os.utime(path, ns=(2 * 10**18, 2 * 10**18))
    assert {tag_of(chunk) for chunk in take(iterator, 40)} == {0, 1}
    assert replay.stats["files_retried"] == 1


def test_episodes_ending_in_a_termination_are_counted(tmp_path):
    """`terminated_episodes` counts loaded episodes with a discount of 0 (a true termination), not truncations."""
    for tag in range(3):
        put(tmp_path, tag)
    ended = make_episode(7)
    ended["discount"][-1] = 0.0
    np.savez_compressed(os.path.join(str(tmp_path), episode_filename(40, now=BASE_TIME + dt.timedelta(seconds=7))),
                        **ended)
    replay = EpisodeReplay([str(tmp_path)], chunk_length=10, every=2, seed=0)
    take(iter(replay), 20)
    assert replay.stats["files_loaded"] == 4
    assert replay.stats["terminated_episodes"] == 1


def test_only_a_discount_of_0_ends_an_episode_in_a_termination(tmp_path):
    """Episodes whose last discount is 0.5 (discounts may be anything in [0, 1]) did not terminate: the short one is
    skipped as too short, not padded; the other gets no absorbing steps (13 entries, chunks of 7: starts 0 to 6) and
    is no terminated episode."""
    for tag, length in ((1, 3), (2, 12)):
        episode = make_episode(tag, length=length)
        episode["discount"][-1] = 0.5
        np.savez_compressed(tmp_path / episode_filename(length, now=BASE_TIME + dt.timedelta(seconds=tag)), **episode)
    replay = EpisodeReplay(str(tmp_path), chunk_length=7, every=2, seed=0, absorbing_steps=2)
    chunks = take(replay.iter_with_info(), 200)
    assert {tag_of(chunk) for chunk, _ in chunks} == {2} and {info.start for _, info in chunks} == set(range(7))
    assert replay.stats["too_short_skipped"] == 1 and replay.stats["padded_episodes"] == 0
    assert replay.stats["terminated_episodes"] == 0


def test_too_short_episodes_are_skipped_with_one_warning(tmp_path, warnings_log):
    short = put(tmp_path, 0, length=20)  # 21 steps
    put(tmp_path, 1, length=29)  # 30 steps: exactly one chunk
    put(tmp_path, 2, length=60)
    replay = EpisodeReplay(str(tmp_path), chunk_length=30, every=4, seed=0)
    chunks = take(iter(replay), 40)
    assert {tag_of(chunk) for chunk in chunks} == {1, 2}
    assert all(chunk["state"][0, 0] == 0 for chunk in chunks if tag_of(chunk) == 1)
    assert replay.stats["too_short_skipped"] == 1 and replay.stats["files_skipped"] == 0
    assert len(warnings_log) == 1 and short in warnings_log[0].getMessage()
    assert "too short" in warnings_log[0].getMessage()
    assert os.path.exists(short)


# ------------------------------------------------------------------ waiting


def test_empty_directory_raises_clear_error_after_wait(tmp_path):
    replay = EpisodeReplay(str(tmp_path / "nothing"), chunk_length=10, wait_seconds=0.5, poll_seconds=0.1)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        next(iter(replay))
    elapsed = time.monotonic() - start
    assert 0.4 <= elapsed < 3
    message = str(info.value)
    assert message.startswith(f"No usable episodes in {tmp_path / 'nothing'} after 0.5s (0 files skipped")
    assert f"Collect some with: planet-sac collect --task TASK --episodes 5 --outdir {tmp_path / 'nothing'}" in message


def test_a_terminated_episode_shorter_than_a_chunk_is_padded_with_its_absorbing_state(tmp_path, warnings_log):
    """A 4-step episode that ended in a termination, chunk_length 7: its steps, then three copies of its
    last observation with action 0, reward 0 and discount 0. A truncated one as short is still skipped."""
    episode = make_episode(5, length=3)
    episode["discount"][-1] = 0.0
    os.makedirs(tmp_path / "a")
    np.savez_compressed(tmp_path / "a" / episode_filename(3, now=BASE_TIME), **episode)
    put(tmp_path / "a", 1, length=3)  # truncated: skipped
    replay = EpisodeReplay(str(tmp_path / "a"), chunk_length=7, every=2, seed=0)
    chunk = next(iter(replay))
    np.testing.assert_array_equal(chunk["state"][:, 0], [0, 1, 2, 3, 3, 3, 3])
    np.testing.assert_array_equal(chunk["state"][:, 1], [5] * 7)
    np.testing.assert_array_equal(chunk["action"][:, 0], [0, 0.5, 0.5, 0.5, 0, 0, 0])
    np.testing.assert_array_equal(chunk["reward"], [0, 5, 5, 5, 0, 0, 0])
    np.testing.assert_array_equal(chunk["discount"], [1, 1, 1, 0, 0, 0, 0])
    assert all(value.dtype == episode[key].dtype for key, value in chunk.items())
    assert replay.stats["padded_episodes"] == 1 and replay.stats["too_short_skipped"] == 1
    assert replay.stats["files_loaded"] == 1 and replay.stats["terminated_episodes"] == 1
    assert len(warnings_log) == 1 and "too short" in warnings_log[0].getMessage()


@pytest.mark.parametrize("absorbing_steps", [0, 2])
def test_terminated_episodes_get_absorbing_steps_so_chunks_reach_past_the_termination(tmp_path, absorbing_steps):
    """A terminated 12-step episode (13 entries), chunk 5: with 2 absorbing steps chunks start at 0..10 (the last
    is steps 10-12 then two absorbing copies of step 12), so n-step SAC starts reach the states just before the end;
    without, at 0..8. A truncated episode is never extended."""
    terminated = make_episode(5, length=12)
    terminated["discount"][-1] = 0.0
    os.makedirs(tmp_path / "a")
    np.savez_compressed(tmp_path / "a" / episode_filename(12, now=BASE_TIME), **terminated)
    put(tmp_path / "a", 7, length=12)  # truncated (discount 1 at the end)
    replay = EpisodeReplay(str(tmp_path / "a"), chunk_length=5, every=2, seed=0, absorbing_steps=absorbing_steps)
    starts = {5: set(), 7: set()}
    last = None
    for chunk, info in itertools.islice(replay.iter_with_info(), 600):
        tag = int(chunk["state"][0, 1])
        starts[tag].add(info.start)
        if tag == 5 and info.start == 8 + absorbing_steps:
            last = chunk
    assert starts[5] == set(range(9 + absorbing_steps)) and starts[7] == set(range(9))
    np.testing.assert_array_equal(last["state"][:, 0], [8 + absorbing_steps, *range(9 + absorbing_steps, 13)] + [12] * absorbing_steps)
    np.testing.assert_array_equal(last["reward"], [5] * (5 - absorbing_steps) + [0] * absorbing_steps)
    np.testing.assert_array_equal(last["discount"], [1] * (4 - absorbing_steps) + [0] * (1 + absorbing_steps))
    np.testing.assert_array_equal(last["action"][:, 0], [0.5] * (5 - absorbing_steps) + [0] * absorbing_steps)
    assert replay.stats["padded_episodes"] == 0 and replay.stats["terminated_episodes"] == 1


def test_when_every_episode_is_too_short_the_error_says_to_lower_chunk_length(tmp_path):
    """A terminating task whose random episodes end after a few steps: more episodes would not help."""
    put(tmp_path, 0, length=6)  # 7 steps
    put(tmp_path, 1, length=3)  # 4 steps
    with pytest.raises(TimeoutError) as info:
        make_dataset(str(tmp_path), batch_size=2, chunk_length=10, wait_seconds=0.2)
    message = str(info.value)
    assert "(2 files skipped: 2 shorter than chunk_length 10)" in message
    assert "the longest has 7 steps): lower data.chunk_length" in message and "Collect some" not in message


def test_error_lists_skip_reasons(tmp_path):
    (tmp_path / "a.npz").write_text("nope")
    put(tmp_path, 1, length=5)
    with pytest.raises(TimeoutError) as info:
        make_dataset(str(tmp_path), batch_size=2, chunk_length=10, wait_seconds=0.2)
    message = str(info.value)
    assert "(2 files skipped:" in message
    assert "1 not a zip/npz file" in message and "1 shorter than chunk_length 10" in message
    assert "Collect some with" in message  # not only short ones: the directory may be the wrong one


def test_waits_for_first_episode(tmp_path):
    import threading

    timer = threading.Timer(0.3, lambda: save_episode(str(tmp_path), make_episode(5)))
    timer.start()
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, wait_seconds=10, poll_seconds=0.05)
    assert tag_of(next(iter(replay))) == 5
    timer.join()


# ------------------------------------------------------------------ tf.data


def test_make_dataset_batches(tmp_path):
    import tensorflow as tf

    for tag in range(3):
        put(tmp_path, tag, length=30, image=64)
    dataset, replay = make_dataset(str(tmp_path), batch_size=4, chunk_length=12, every=5, seed=0)
    assert dataset.element_spec["image"] == tf.TensorSpec((4, 12, 64, 64, 3), tf.uint8)
    batches = list(dataset.take(3))
    for batch in batches:
        assert batch["image"].shape == (4, 12, 64, 64, 3) and batch["image"].dtype == tf.uint8
        assert batch["state"].shape == (4, 12, 3) and batch["state"].dtype == tf.float32
        assert batch["action"].shape == (4, 12, 1) and batch["action"].dtype == tf.float32
        assert batch["reward"].shape == (4, 12) and batch["discount"].shape == (4, 12)
        steps = batch["state"].numpy()[:, :, 0]
        np.testing.assert_array_equal(np.diff(steps, axis=1), 1)
    assert replay.stats["recent_yielded"] + replay.stats["cache_yielded"] >= 12

    subset, _ = make_dataset(str(tmp_path), batch_size=2, chunk_length=5, keys=("image", "action"), seed=0)
    batch = next(iter(subset))
    assert set(batch) == {"image", "action"} and batch["image"].shape == (2, 5, 64, 64, 3)


def test_with_prefetch_0_no_chunk_is_drawn_ahead_of_the_consumer(tmp_path):
    """tf.data would otherwise put a prefetch of its own behind the batches (inject_prefetch): a thread drawing chunks,
    and scanning the folders, at moments set by timing. A run's op determinism happens to prevent that too; a script
    that calls make_dataset without it has only make_dataset's option (here: op determinism off for the test)."""
    from tensorflow.python.framework import config as tf_config  # the public API can enable it only

    for tag in range(3):
        put(tmp_path, tag)
    tf_config.disable_op_determinism()
    try:
        dataset, replay = make_dataset(str(tmp_path), batch_size=2, chunk_length=5, every=4, seed=0, prefetch=0)
        batches = iter(dataset)
        for _ in range(3):
            next(batches)
        time.sleep(0.5)
    finally:
        tf_config.enable_op_determinism()
    assert replay.stats["recent_yielded"] + replay.stats["cache_yielded"] == 6


# ------------------------------------------------------------------ state


def test_a_restored_replay_goes_on_as_the_one_whose_state_it_took(tmp_path):
    """state() in the middle of a pass, through JSON, given to make_dataset over the run's folders moved elsewhere (named
    with a trailing slash): the same chunks as the replay that went on, while four new files arrive, and then the same
    state. The cache (max_episodes 5) drops its oldest by arrival, a0 a1 a2 b3 a4, not by name; the bad file,
    rejected before the state was taken, is not read again."""
    run = tmp_path / "run"
    for tag in (0, 1, 2, 4):
        put(run / "a", tag)
    put(run / "b", 3)
    with open(os.path.join(str(run / "a"), episode_filename(40, now=BASE_TIME + dt.timedelta(seconds=50))), "w") as file:
        file.write("not an episode")

    def folders(root):
        return [str(root / "a") + "/", str(root / "b")]

    original = EpisodeReplay(folders(run), chunk_length=5, every=4, max_episodes=5, seed=0)
    chunks = original.iter_with_info()
    take(chunks, 6)  # the first pass and half of the second
    state = json.loads(json.dumps(original.state()))
    assert len(state["pending"]) == 2 and state["scan_due"] and original.stats["files_skipped"] == 1
    shutil.copytree(run, tmp_path / "moved")
    for tag in range(10, 14):
        path = put(tmp_path / "new", tag)
        for root in (run, tmp_path / "moved"):
            shutil.copy(path, root / "a")
    dataset, restored = make_dataset(folders(tmp_path / "moved"), batch_size=2, chunk_length=5, every=4, max_episodes=5,
                                     seed=1, prefetch=0, state=state)
    expected = [(tag_of(chunk), int(chunk["state"][0, 0])) for chunk, _ in take(chunks, 40)]
    got = [(int(batch["state"][row, 0, 1]), int(batch["state"][row, 0, 0])) for batch in dataset.take(20) for row in (0, 1)]
    assert got == expected
    assert {tag for tag, _ in expected[12:]} == {4, 10, 11, 12, 13}  # from the fourth pass on: a4 kept, b3 dropped
    assert json.loads(json.dumps(restored.state())) == json.loads(json.dumps(original.state()))


def test_folders_and_dangling_symlinks_named_like_episodes_are_counted_as_skipped(tmp_path, warnings_log):
    put(tmp_path, 0)
    os.mkdir(tmp_path / "20240101T000001-folder-40.npz")
    os.symlink(tmp_path / "nowhere.npz", tmp_path / "20240101T000002-dangling-40.npz")
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=5, seed=0)
    assert {tag_of(chunk) for chunk in take(iter(replay), 20)} == {0}
    assert replay.stats["files_loaded"] == 1 and replay.stats["files_skipped"] == 2
    assert replay.stats["skipped_reasons"] == {"not a file": 2}
    assert replay.stats["scans"] > 2  # rescanned, yet warned once per path
    messages = [record.getMessage() for record in warnings_log]
    assert len(messages) == 2
    assert sum("folder-40.npz: not a file: a directory" in message for message in messages) == 1
    assert sum("dangling-40.npz: not a file: a dangling symlink" in message for message in messages) == 1


def test_a_given_spec_decides_the_format_not_the_first_file(tmp_path):
    put(tmp_path, 0, action_dim=2)  # sorts first
    put(tmp_path, 1, state_dim=5)
    put(tmp_path, 2)
    put(tmp_path, 3)
    spec = EpisodeSpec.for_task("state", (3,), 1)
    assert spec == EpisodeSpec(obs=(("state", (3,), "float32"),), action_dim=1)
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=5, seed=0, spec=spec)
    assert {tag_of(chunk) for chunk in take(iter(replay), 30)} == {2, 3}
    assert replay.spec == spec
    assert replay.stats["files_loaded"] == 2 and replay.stats["files_mismatched"] == 2
    assert replay.stats["mismatch_reasons"] == {"action dim 2, expected 1": 1,
                                                "'state' observations of shape (5,), expected (3,)": 1}
    # Without a spec the first file decides (and the 1-d ones are the mismatches).
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, every=5, seed=0)
    assert {tag_of(chunk) for chunk in take(iter(replay), 30)} == {0}
    assert replay.spec.action_dim == 2


def test_no_episode_in_the_given_format_is_one_message_with_counts_and_the_format(tmp_path):
    put(tmp_path, 0, action_dim=2)
    put(tmp_path, 1, action_dim=2)
    replay = EpisodeReplay(str(tmp_path), chunk_length=10, wait_seconds=0.2, poll_seconds=0.05,
                           spec=EpisodeSpec.for_task("state", (3,), 1))
    with pytest.raises(NoEpisodesError) as error:
        next(iter(replay))
    message = str(error.value)
    assert "(2 files skipped: 2 spec mismatch (action dim 2, expected 1))" in message
    assert "The task expects 'state' observations of shape (3,) and 1-d actions" in message
