"""Which call stacks' live allocations grew between two jemalloc heap profiles (`research/soak_heap.py`'s dumps).

Usage:
    python3 research/soak_heapdiff.py /tmp/soak_heap_prof/warm.heap /tmp/soak_heap_prof/end.heap [TOP] [DEPTH]

A stand-in for `jeprof --base`, which did not finish symbolizing TensorFlow's libraries within
5 minutes on the shared machine. It un-samples each stack's bytes as jeprof does
(`bytes / (1 - exp(-mean size / sample period))`) and names frames by the nearest symbol
`nm` lists in the mapped library (exported and local symbols), so a name is the function
an address falls in only where that library keeps its symbols; treat names as hints.
"""

from __future__ import annotations

import bisect
import collections
import math
import re
import subprocess
import sys

Stack = tuple[int, ...]
Mapping = tuple[int, int, int, str]  # start, end, file offset, path of an executable mapping


def parse(path: str) -> tuple[dict[Stack, float], list[Mapping]]:
    """{stack: estimated live bytes} and the executable mappings of a heap_v2 profile."""
    with open(path) as file:
        lines = file.read().splitlines()
    period = int(lines[0].split("/")[1])
    stacks: dict[Stack, float] = {}
    mappings: list[Mapping] = []
    stack: Stack | None = None
    in_maps = False
    for line in lines[1:]:
        if line.startswith("MAPPED_LIBRARIES"):
            in_maps = True
        elif in_maps:
            match = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s+(\S+)", line)
            if match and "x" in match.group(3):
                mappings.append((int(match.group(1), 16), int(match.group(2), 16), int(match.group(4), 16), match.group(5)))
        elif line.startswith("@"):
            stack = tuple(int(address, 16) for address in line[1:].split())
        elif stack is not None and line.strip().startswith("t*:"):
            match = re.match(r"\s*t\*: (\d+): (\d+)", line)
            count, size = int(match.group(1)), int(match.group(2))
            if count:
                stacks[stack] = stacks.get(stack, 0.0) + size / (1 - math.exp(-size / count / period))
            stack = None
    return stacks, mappings


_symbols: dict[str, tuple[list[int], list[str]]] = {}


def symbols(library: str) -> tuple[list[int], list[str]]:
    """Sorted (addresses, names) of the functions `nm` finds in `library` (dynamic and local tables)."""
    if library not in _symbols:
        found = []
        for flags in (["-D"], []):
            listing = subprocess.run(["nm", *flags, "-C", "--defined-only", library], capture_output=True, text=True).stdout
            for line in listing.splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3 and parts[1] in "TtWw" and re.fullmatch(r"[0-9a-f]+", parts[0]):
                    found.append((int(parts[0], 16), parts[2]))
        found.sort()
        _symbols[library] = ([address for address, _ in found], [name for _, name in found])
    return _symbols[library]


def name(address: int, mappings: list[Mapping]) -> str:
    for start, end, offset, library in mappings:
        if start <= address < end:
            addresses, names = symbols(library)
            index = bisect.bisect_right(addresses, address - start + offset) - 1
            return f"{library.rsplit('/', 1)[-1]}:{names[index][:150] if index >= 0 else '?'}"
    return hex(address)


def main() -> None:
    base, _ = parse(sys.argv[1])
    end, mappings = parse(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    depth = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    growth = collections.Counter({stack: end.get(stack, 0.0) - base.get(stack, 0.0) for stack in set(base) | set(end)})
    print(f"total base {sum(base.values()) / 2**20:.1f} MB end {sum(end.values()) / 2**20:.1f} MB "
          f"diff {sum(growth.values()) / 2**20:+.2f} MB")
    for stack, grown in growth.most_common(top):
        print(f"\n{grown / 2**10:+.1f} KB (base {base.get(stack, 0.0) / 2**10:.1f} KB)")
        for address in stack[:depth]:
            print("   ", name(address - 1, mappings))  # return address - 1: inside the calling instruction


if __name__ == "__main__":
    main()
