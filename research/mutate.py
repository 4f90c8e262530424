r"""Break the code on purpose, one mutation at a time, and see whether its tests notice.

Each mutation replaces one unique snippet of a file with another and runs the named tests (`pytest -x`, serially);
`caught` means they failed, `SURVIVED` that they passed: a test to write, or an equivalent mutation to name. The file
is restored after every mutation, also on Ctrl-C. Run it in a clone, not in the checkout you work in: while a
mutation is applied, the checkout holds broken code.

Usage:
    git clone . /tmp/mutwork && cd /tmp/mutwork
    python research/mutate.py research/mutations/config_loading.json

A mutation file is a JSON list of {"file", "old", "new", "tests"}; `old` must occur exactly once in `file`.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python research/mutate.py MUTATIONS.json (from the clone's root)")
    root = pathlib.Path.cwd()
    for mutation in json.loads(pathlib.Path(sys.argv[1]).read_text()):
        path = root / mutation["file"]
        source = path.read_text()
        if source.count(mutation["old"]) != 1:
            print(f"SKIPPED   {mutation['file']}: {mutation['old'][:50]!r} occurs {source.count(mutation['old'])} times")
            continue
        path.write_text(source.replace(mutation["old"], mutation["new"]))
        try:
            result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
                                     *mutation["tests"]], cwd=root, capture_output=True, text=True)
        finally:
            path.write_text(source)
        status = "caught" if result.returncode != 0 else "SURVIVED"
        last = (result.stdout.strip().splitlines() or [result.stderr[-200:]])[-1]
        print(f"{status:9s} {mutation['file']}: {mutation['old'][:50]!r} -> {mutation['new'][:50]!r} | {last}",
              flush=True)


if __name__ == "__main__":
    main()
