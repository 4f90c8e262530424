"""A pytest plugin that writes each test's CPU seconds, so that suites run with different worker counts compare.

Wall-clock durations (`--durations`) grow with whatever else shares the cores; a test's CPU time does not (much).
Per test (setup, call and teardown) one JSON line is appended to `$PYTEST_CPU_TIME_OUT` (default
`cpu_time.jsonl`): `id`, `self` (this process's CPU seconds, all its threads), `children` (CPU seconds of the
child processes it waited for), `wall`, `start` (its Unix time, for a timeline of the workers), `pid`. Under
pytest-xdist every worker appends to the same file.

    PYTEST_CPU_TIME_OUT=/tmp/cpu.jsonl .venv/bin/python -m pytest -p tests.cpu_time -n 2 -m "not e2e"
    .venv/bin/python -m tests.cpu_time /tmp/cpu.jsonl 20    # the total and the 20 costliest tests
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator

import pytest


def _cpu_seconds() -> tuple[float, float]:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    own, children = _cpu_seconds()
    start, started = time.perf_counter(), time.time()
    yield
    own_after, children_after = _cpu_seconds()
    record = {"id": item.nodeid, "self": own_after - own, "children": children_after - children,
              "wall": time.perf_counter() - start, "start": started, "pid": os.getpid()}
    with open(os.environ.get("PYTEST_CPU_TIME_OUT", "cpu_time.jsonl"), "a") as file:
        file.write(json.dumps(record) + "\n")


def summary(path: str, top: int = 20) -> str:
    """The file's total CPU seconds (own and children's), then one line per test process (pytest-xdist worker): its
    tests' wall-clock against their CPU, the difference being time spent waiting (on other processes, or for a core),
    and when its first test started and its last one ended (seconds after the first test of all: a process that ends
    long before another was idle at the end), then the `top` costliest tests, one per line."""
    records = [json.loads(line) for line in open(path)]
    cost = {record["id"]: record["self"] + record["children"] for record in records}
    lines = [f"{len(records)} tests, {sum(cost.values()):.0f} CPU s ({sum(r['self'] for r in records):.0f} own, "
             f"{sum(r['children'] for r in records):.0f} in child processes)"]
    first = min(record.get("start", 0.0) for record in records)
    for pid in sorted({record["pid"] for record in records}):
        mine = [record for record in records if record["pid"] == pid]
        span = ""
        if all("start" in record for record in mine):  # files written before the start times were
            start, end = min(r["start"] for r in mine), max(r["start"] + r["wall"] for r in mine)
            span = f", from {start - first:.1f} s to {end - first:.1f} s"
        lines.append(f"  process {pid}: {len(mine)} tests, {sum(r['wall'] for r in mine):.1f} s wall, "
                     f"{sum(r['self'] for r in mine):.1f} own, {sum(r['children'] for r in mine):.1f} in children{span}")
    lines += [f"{seconds:7.1f}  {test}" for test, seconds in sorted(cost.items(), key=lambda item: -item[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20))
