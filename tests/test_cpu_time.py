"""tests/cpu_time.py (a pytest plugin): each test's CPU seconds, its own and its child processes', and their summary."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

from tests import cpu_time


def run_hook(nodeid: str, body) -> None:
    steps = cpu_time.pytest_runtest_protocol(SimpleNamespace(nodeid=nodeid), None)
    next(steps)  # before the test
    body()
    next(steps, None)  # after it: the record is written


def test_each_test_gets_one_line_with_its_child_processes_counted_apart(tmp_path, monkeypatch):
    out = tmp_path / "cpu.jsonl"
    monkeypatch.setenv("PYTEST_CPU_TIME_OUT", str(out))
    run_hook("tests/a.py::test_child", lambda: subprocess.run([sys.executable, "-c", "sum(range(10**6))"], check=True))
    run_hook("tests/a.py::test_alone", lambda: sum(range(10**6)))
    child, alone = [json.loads(line) for line in out.read_text().splitlines()]
    assert (child["id"], alone["id"]) == ("tests/a.py::test_child", "tests/a.py::test_alone")
    assert child["children"] > 0 and alone["children"] == 0.0  # a waited-for child's CPU, and none without one
    assert alone["self"] > 0 and alone["wall"] > 0
    assert child["start"] <= alone["start"] and abs(alone["start"] - time.time()) < 60  # Unix time, in run order


def test_the_summary_totals_and_orders_by_own_plus_children(tmp_path):
    path = tmp_path / "cpu.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in [
        {"id": "a", "self": 1.0, "children": 2.0, "wall": 9.0, "pid": 1},
        {"id": "b", "self": 4.0, "children": 0.0, "wall": 5.0, "pid": 2},
        {"id": "c", "self": 0.5, "children": 0.0, "wall": 1.0, "pid": 1}]) + "\n")
    # by hand: 1 + 2 + 4 + 0.5 = 7.5 (rounded to 8 by the format), own 5.5 (rounded to 6), children 2; b 4 > a 3 > c;
    # process 1 ran a and c (wall 9 + 1, own 1 + 0.5, children 2), process 2 ran b
    assert cpu_time.summary(str(path), top=2).splitlines() == [
        "3 tests, 8 CPU s (6 own, 2 in child processes)",
        "  process 1: 2 tests, 10.0 s wall, 1.5 own, 2.0 in children",
        "  process 2: 1 tests, 5.0 s wall, 4.0 own, 0.0 in children",
        "    4.0  b", "    3.0  a"]


def test_the_summary_gives_each_process_its_span_after_the_first_test(tmp_path):
    path = tmp_path / "cpu.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in [
        {"id": "a", "self": 1.0, "children": 0.0, "wall": 3.0, "start": 1000.0, "pid": 1},
        {"id": "b", "self": 1.0, "children": 0.0, "wall": 2.0, "start": 1001.5, "pid": 2},
        {"id": "c", "self": 1.0, "children": 0.0, "wall": 4.0, "start": 1003.0, "pid": 1}]) + "\n")
    # by hand: the first test starts at 1000; process 1 runs 1000-1007 (c ends at 1003 + 4), process 2 1001.5-1003.5
    assert cpu_time.summary(str(path), top=0).splitlines()[1:] == [
        "  process 1: 2 tests, 7.0 s wall, 2.0 own, 0.0 in children, from 0.0 s to 7.0 s",
        "  process 2: 1 tests, 2.0 s wall, 1.0 own, 0.0 in children, from 1.5 s to 3.5 s"]
