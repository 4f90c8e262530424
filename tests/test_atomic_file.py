"""`atomic_path`: the file under its name is the old one or the whole new one, never part, never a leftover."""

import os

import pytest

from planet_sac.atomic_file import atomic_open, atomic_path


def test_a_finished_block_replaces_the_file_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "out" / "result.json"  # the folder does not exist yet
    with atomic_path(str(path)) as temp:
        assert os.path.dirname(temp) == str(path.parent) and temp.endswith(".json")  # same folder, same format
        with open(temp, "w") as file:
            file.write("new")
        assert not path.exists()  # nothing under the name until the block ends
    assert path.read_text() == "new"
    assert os.listdir(path.parent) == ["result.json"]


def test_a_failed_block_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    path = tmp_path / "scores.json.gz"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(str(path)) as temp:
            with open(temp, "w") as file:
                file.write("half of the ne")
            raise KeyboardInterrupt  # Ctrl-C while writing
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["scores.json.gz"]


def test_two_writers_of_one_file_get_separate_temporary_paths(tmp_path):
    path = str(tmp_path / "scores.json.gz")
    with atomic_path(path) as first, atomic_path(path) as second:
        assert first != second
        for temp, text in ((first, "first"), (second, "second")):
            with open(temp, "w") as file:
                file.write(text)
    assert open(path).read() == "first"  # the outer block ends last: its whole file wins, neither is torn
    assert os.listdir(tmp_path) == ["scores.json.gz"]


def test_atomic_open_writes_bytes_whole_and_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "scores.json.gz"
    with atomic_open(str(path), "wb") as file:
        file.write(b"\x1f\x8bnew")
        assert not path.exists()  # renamed only once closed
    assert path.read_bytes() == b"\x1f\x8bnew"
    with pytest.raises(ValueError):
        with atomic_open(str(path)) as file:
            file.write("half")
            raise ValueError("a record json cannot encode")
    assert path.read_bytes() == b"\x1f\x8bnew" and os.listdir(tmp_path) == ["scores.json.gz"]
