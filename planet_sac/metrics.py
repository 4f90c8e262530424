"""Reading a run's `metrics.jsonl`: the one reader of the file the trainer's Logger writes.

One JSON object per line. A line that is not a complete JSON object (a run killed mid-write)
is skipped, so readers never fail on a partial record. TensorFlow is imported only for remote
paths (`gs://...`), so `planet-sac plot` and the suite's bookkeeping start without it.
"""

from __future__ import annotations

import json


def read_metrics(path: str) -> list[dict]:
    """The records of the metrics.jsonl file at `path`, in order, without incomplete lines."""
    if "://" in path:
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "r") as file:
            lines = file.read().splitlines()
    else:
        with open(path) as file:
            lines = file.read().splitlines()
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records
