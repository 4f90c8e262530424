#!/usr/bin/env python3
"""Fails when a tracked file outside data/ and tests/fixtures/ is larger than 2 MB (run by `make test`).

Run artifacts (checkpoints, replay episodes, TensorBoard event files) never go into git:
every clone carries what history holds, and a submission whose diff exceeds 256 MiB is
rejected whole. A file counts as tracked when it is in the index; its size is the larger
of the staged blob and the working-tree file, so a file grown after `git add` is caught too.

    python3 scripts/check_large_files.py [--repo DIR] [--limit BYTES]

Exit status 0 when every file is within the limit, 1 (with one line per file) otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

LIMIT_BYTES = 2_000_000
"""2 MB: larger than any config, metrics.jsonl, score file or figure the project keeps."""

ALLOWED_FOLDERS = ("data/", "tests/fixtures/")
"""Example data and test fixtures: small by review, allowed to be binary."""

def tracked_sizes(repo: str) -> dict[str, int]:
    """{path: size in bytes} of every file in the index of the git repository `repo`."""
    listing = subprocess.run(["git", "-C", repo, "ls-files", "-s", "-z"], check=True, capture_output=True).stdout
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, blob = meta.split()[:2]
        if mode != b"160000":  # submodules have no blob here
            entries.append((path.decode(errors="surrogateescape"), blob.decode()))
    sizes = {}
    if entries:
        answer = subprocess.run(["git", "-C", repo, "cat-file", "--batch-check=%(objectsize)"], check=True,
                                capture_output=True, input="".join(f"{blob}\n" for _, blob in entries).encode()).stdout
        for (path, _), line in zip(entries, answer.decode().splitlines()):
            staged = int(line) if line.strip().isdigit() else 0
            try:
                on_disk = os.path.getsize(os.path.join(repo, path))
            except OSError:  # deleted in the working tree but still staged
                on_disk = 0
            sizes[path] = max(staged, on_disk)
    return sizes


def violations(sizes: dict[str, int], limit: int = LIMIT_BYTES) -> list[tuple[str, int]]:
    """(path, size) of the files over `limit` outside the allowed folders."""
    return sorted((path, size) for path, size in sizes.items() if size > limit and not path.startswith(ALLOWED_FOLDERS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=".", help="git work tree to check (default: the current folder)")
    parser.add_argument("--limit", type=int, default=LIMIT_BYTES, help=f"bytes (default: {LIMIT_BYTES})")
    args = parser.parse_args(argv)
    try:
        sizes = tracked_sizes(args.repo)
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        print(f"check_large_files: error: cannot list the tracked files of {args.repo}: {error}", file=sys.stderr)
        return 2
    found = violations(sizes, args.limit)
    for path, size in found:
        print(f"check_large_files: {path} is {size / 1e6:.1f} MB (limit {args.limit / 1e6:g} MB outside "
              f"{', '.join(ALLOWED_FOLDERS)}): run artifacts stay out of git (untrack it with git rm --cached)",
              file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
