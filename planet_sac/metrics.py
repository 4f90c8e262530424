"""Reading a run's `metrics.jsonl`: the one reader of the file the trainer's Logger writes.

One JSON object per line. A line that is not a complete JSON object (a run killed mid-write)
is skipped, so readers never fail on a partial record. TensorFlow is imported only for remote
paths (`gs://...`), so `planet-sac plot` and the suite's bookkeeping start without it.
"""

from __future__ import annotations

import json
import logging


def read_metrics(path: str) -> list[dict]:
    """The records of the metrics.jsonl file at `path`, in order, without incomplete or damaged lines.

    An incomplete last line (a run killed mid-write) is dropped quietly; any other line that is not a
    JSON object in UTF-8 (a damaged disk or copy) is skipped too, and their count is logged once per
    file as a warning.
    """
    if "://" in path:
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "rb") as file:
            lines = file.read().splitlines()
    else:
        with open(path, "rb") as file:
            lines = file.read().splitlines()
    records = []
    damaged = 0
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            record = None
        if isinstance(record, dict):
            records.append(record)
        elif number < len(lines) and line.strip():
            damaged += 1
    if damaged and path not in _WARNED:
        _WARNED.add(path)
        logging.getLogger("planet_sac").warning("%s: skipped %d damaged line%s (not a JSON record)", path, damaged,
                                                "" if damaged == 1 else "s")
    return records


_WARNED: set[str] = set()  # files whose damaged lines were reported (once per process)
