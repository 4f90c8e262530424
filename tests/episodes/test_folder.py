"""A run's episode folder (episodes/folder.py): what its episodes are, what their names count, set aside, staging."""

from __future__ import annotations

import datetime as dt
import logging
import os

import numpy as np
import pytest

from planet_sac.episodes.folder import EpisodeFolder, list_episodes
from planet_sac.episodes.loader import EpisodeReplay
from planet_sac.episodes.storage import episode_filename, episode_length, load_episode


def name(length: int, second: int) -> str:
    """An episode file's name as a run writes it, at a chosen second of 2026-01-01 (so the order is known)."""
    return episode_filename(length, now=dt.datetime(2026, 1, 1, 0, 0, second))


def episode(length: int, value: float = 0.0) -> dict:
    """A valid state episode of `length` actions whose rewards all hold `value`."""
    return {"state": np.zeros((length + 1, 3), np.float32), "action": np.zeros((length + 1, 1), np.float32),
            "reward": np.full(length + 1, value, np.float32), "discount": np.ones(length + 1, np.float32)}


@pytest.fixture
def folder(tmp_path) -> tuple[EpisodeFolder, dict[str, str]]:
    """train_episodes/ with two collections (30 and 45 steps), a hand-copied junk.npz, and what is not an episode:
    a writer's temporary file, a hidden .npz, a text file, an episode set aside and one of a staged test phase.
    With the names given to the files: collections `first`, `second`, the one set aside `aside`."""
    root = tmp_path / "train_episodes"
    (root / "interrupted").mkdir(parents=True)
    (root / ".test_phase-1").mkdir()
    names = {"first": name(30, 1), "second": name(45, 2), "aside": name(60, 3)}
    (root / names["first"]).write_bytes(b"")
    (root / names["second"]).write_bytes(b"")
    (root / "junk.npz").write_bytes(b"")
    (root / ".tmp-0123.npz.part").write_bytes(b"")
    (root / ".hidden-7.npz").write_bytes(b"")
    (root / "notes.txt").write_text("")
    (root / "interrupted" / names["aside"]).write_bytes(b"")
    (root / ".test_phase-1" / name(70, 4)).write_bytes(b"")
    return EpisodeFolder(str(root)), names


def test_the_length_suffix_is_read_back_from_the_name_the_writer_gives():
    assert episode_length(name(30, 1)) == 30
    assert episode_length(f"/runs/a/train_episodes/{name(0, 1)}") == 0
    assert episode_length("/runs/a/train_episodes/junk.npz") is None
    assert episode_length("episode-12.npz.part") is None


def test_what_counts_as_an_episode_and_as_the_runs_own(folder):
    """Episodes are the visible .npz files directly inside; the run's own are those named with a length."""
    folder, names = folder
    root = folder.directory
    first, second = f"{root}/{names['first']}", f"{root}/{names['second']}"
    assert folder.paths() == list_episodes(root) == [first, second, f"{root}/junk.npz"]  # "2026..." < "junk"
    assert folder.collected() == [first, second]
    assert folder.counts() == (2, 30 + 45)
    assert folder.counts(oldest=1) == (1, 30)
    assert EpisodeFolder(f"{root}/missing").paths() == [] and EpisodeFolder(f"{root}/missing").counts() == (0, 0)


def test_write_saves_a_validated_episode_named_with_its_length(tmp_path):
    folder = EpisodeFolder(str(tmp_path / "new"))  # made by the first write
    path = folder.write(episode(7, value=1.5))
    assert folder.paths() == [path] and folder.counts() == (1, 7)
    np.testing.assert_array_equal(load_episode(path)["reward"], np.full(8, 1.5, np.float32))
    assert os.listdir(folder.directory) == [os.path.basename(path)]  # no temporary file left


def test_set_aside_moves_episodes_into_interrupted_where_no_replay_reads_them(folder):
    folder, names = folder
    first, second, junk = folder.paths()
    assert folder.set_aside([second]) == 1
    assert folder.set_aside([]) == 0
    assert folder.paths() == [first, junk] and folder.counts() == (1, 30)
    assert [os.path.basename(path) for path in folder.interrupted.paths()] == [names["second"], names["aside"]]


def test_setting_aside_an_episode_already_in_interrupted_replaces_that_copy(folder):
    """An episode copied back from interrupted/ by hand and set aside again (a later resume) replaces the older copy
    instead of failing the resume."""
    folder, names = folder
    again = os.path.join(folder.directory, names["aside"])
    with open(again, "wb") as file:
        file.write(b"the copy brought back")
    assert folder.set_aside([again]) == 1
    assert not os.path.exists(again)
    with open(os.path.join(folder.interrupted.directory, names["aside"]), "rb") as file:
        assert file.read() == b"the copy brought back"


def test_settle_moves_checkpointed_phases_up_and_later_ones_to_interrupted(tmp_path):
    folder = EpisodeFolder(str(tmp_path / "test_episodes"))
    staged = {phase: folder.stage(phase).write(episode(5, value=phase)) for phase in (1, 2, 3)}
    assert [os.path.basename(os.path.dirname(path)) for path in staged.values()] == [
        ".test_phase-1", ".test_phase-2", ".test_phase-3"]
    assert folder.paths() == [] and folder.counts() == (0, 0)  # staged episodes are not the folder's yet
    (tmp_path / "test_episodes" / ".test_phase-x").mkdir()  # not a phase's folder: left alone
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    logger = logging.getLogger("planet_sac")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        folder.settle(committed=2)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
    by_name = {os.path.basename(path): phase for phase, path in staged.items()}
    assert sorted(by_name[os.path.basename(path)] for path in folder.paths()) == [1, 2]
    assert [by_name[os.path.basename(path)] for path in folder.interrupted.paths()] == [3]
    assert sorted(os.listdir(folder.directory)) == sorted([".test_phase-x", "interrupted", *(
        os.path.basename(staged[phase]) for phase in (1, 2))])
    assert [record.getMessage() for record in records] == [
        f"1 test episode(s) of test phase 3, which the checkpoint does not hold, moved to {folder.directory}/interrupted; "
        "the phase is redone"]
    folder.settle(committed=2)  # nothing staged: nothing moves
    assert len(folder.paths()) == 2 and len(folder.interrupted.paths()) == 1
    EpisodeFolder(str(tmp_path / "missing")).settle(committed=5)  # no folder: nothing to do


def test_the_replay_reads_the_folders_episodes_only(tmp_path):
    """A replay of a folder sees its visible episodes, never those set aside or staged (rewards tell them apart)."""
    folder = EpisodeFolder(str(tmp_path / "train_episodes"))
    folder.write(episode(12, value=1.0))
    aside = folder.write(episode(12, value=2.0))
    folder.set_aside([aside])
    folder.stage(1).write(episode(12, value=3.0))
    replay = EpisodeReplay(folder.directory, chunk_length=10, every=4, wait_seconds=0.0, seed=0)
    chunks = [chunk for chunk, _ in zip(replay, range(8))]
    assert {float(value) for chunk in chunks for value in chunk["reward"]} == {1.0}
    assert replay.stats["files_loaded"] == 1
