"""Run outputs: `metrics.jsonl` (one JSON object per log step) and TensorBoard events.

Videos go to TensorBoard as animated GIFs inside image summaries (as Dreamer writes
them): TensorBoard's image dashboard plays them.

`planet_sac.metrics.read_metrics` skips lines that are not complete JSON (a run killed mid-write), so
readers never fail on a partial record. A resumed run drops the records its restored
checkpoint does not hold (`Logger.drop_after`), so the steps it redoes are logged once.
"""

from __future__ import annotations

import io
import json
import math
import time
import uuid
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf
from PIL import Image

from planet_sac.metrics import read_metrics


class Logger:
    """Writes scalars to `LOGDIR/metrics.jsonl` and to TensorBoard event files."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._writer: tf.summary.SummaryWriter | None = None  # opened at the first event, after any drop_after
        self.metrics_path = f"{logdir}/metrics.jsonl"
        self._end_partial_line()

    @property
    def writer(self) -> tf.summary.SummaryWriter:
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        return self._writer

    def _end_partial_line(self) -> None:
        """A run killed mid-write leaves a partial last line; end it so new records stay parseable."""
        if not tf.io.gfile.exists(self.metrics_path):
            return
        with tf.io.gfile.GFile(self.metrics_path, "rb") as file:
            size = file.size()
            if size:
                file.seek(size - 1)
                if file.read(1) != b"\n":
                    with tf.io.gfile.GFile(self.metrics_path, "a") as append:
                        append.write("\n")

    def drop_after(self, step: int, test_pending: bool, unscheduled_train: bool = False) -> int:
        """Removes the records of work the restored checkpoint does not hold; returns how many.

        Those are the records past `step` (updates lost with a kill, or with a damaged newer
        checkpoint that was skipped) and, when the test phase at `step` is still to run
        (`test_pending`), its record at `step`; with `unscheduled_train`, also the training record at
        `step` that a run writes when it stops at a step its schedule does not log (the uninterrupted
        run has none there). The run redoes that work and logs it again,
        so without this it would appear twice. The file is rewritten atomically, and so are the
        TensorBoard event files, without the same events (TensorBoard would draw both versions).
        """
        records = read_metrics(self.metrics_path) if tf.io.gfile.exists(self.metrics_path) else []

        def lost(record: dict) -> bool:
            at = record.get("step")
            return isinstance(at, int) and (at > step or (at == step and (
                (test_pending and record.get("phase") == "test") or (unscheduled_train and record.get("phase") == "train"))))

        kept = [record for record in records if not lost(record)]
        tags_at_step = {key for record in records if lost(record) and record.get("step") == step for key in record}
        self._drop_events(step, tags_at_step | ({"eval/video"} if test_pending else set()))
        if len(kept) == len(records):
            return 0
        temp = self.metrics_path + ".rewrite"
        with tf.io.gfile.GFile(temp, "w") as file:
            file.write("".join(json.dumps(record, allow_nan=False, default=str) + "\n" for record in kept))
        tf.io.gfile.rename(temp, self.metrics_path, overwrite=True)
        return len(records) - len(kept)

    def _drop_events(self, step: int, tags_at_step: set[str]) -> None:
        """Rewrites each event file without the events past `step` and those of `tags_at_step` at `step`."""
        for path in tf.io.gfile.glob(f"{self.logdir}/events.out.tfevents.*"):
            kept, changed = [], False
            try:
                for raw in tf.data.TFRecordDataset(path):
                    data = raw.numpy()
                    event = tf.compat.v1.Event.FromString(data)
                    if event.step > step or (event.step == step and event.HasField("summary") and
                                             any(value.tag in tags_at_step for value in event.summary.value)):
                        changed = True
                        continue
                    kept.append(data)
            except tf.errors.DataLossError:  # a record cut short by a kill: the file ends before it
                changed = True
            if changed:
                temp = f"{self.logdir}/.rewrite-{uuid.uuid4().hex}"  # no "tfevents" in the name: TensorBoard skips it
                with tf.io.TFRecordWriter(temp) as writer:
                    for data in kept:
                        writer.write(data)
                tf.io.gfile.rename(temp, path, overwrite=True)

    def scalars(self, step: int, values: Mapping[str, float], **fields: object) -> dict:
        """Logs `values` at `step`; `fields` (env_steps, phase, ...) go into the JSON line only."""
        clean = {key: _to_float(value) for key, value in values.items()}
        record = {"step": int(step), **fields, **clean, "time": round(time.time(), 3)}
        with tf.io.gfile.GFile(self.metrics_path, "a") as file:
            file.write(json.dumps(record, allow_nan=False, default=str) + "\n")
        with self.writer.as_default(step=_step(step)):
            for key, value in clean.items():
                if value is not None:
                    tf.summary.scalar(key, np.asarray(value, np.float32))
        return record

    def last_record(self, select: Callable[[dict], bool]) -> dict:
        """The last record in metrics.jsonl for which `select(record)` is true ({} without one)."""
        if not tf.io.gfile.exists(self.metrics_path):
            return {}
        records = [record for record in read_metrics(self.metrics_path) if select(record)]
        return records[-1] if records else {}

    def video(self, step: int, name: str, frames: np.ndarray, fps: int = 10) -> None:
        """Logs frames [T, H, W, 3] (uint8, or floats in [0, 1]) as an animated GIF TensorBoard plays."""
        frames = to_uint8(frames)
        _, height, width, channels = frames.shape
        summary = tf.compat.v1.Summary()
        image = tf.compat.v1.Summary.Image(height=height, width=width, colorspace=channels,
                                           encoded_image_string=encode_gif(frames, fps))
        summary.value.add(tag=name, image=image)
        with self.writer.as_default(step=_step(step)):
            tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=_step(step))

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """uint8 frames as they are; float frames in [0, 1] scaled to 0..255."""
    frames = np.asarray(frames)
    if np.issubdtype(frames.dtype, np.floating):
        frames = np.clip(np.round(frames * 255.0), 0, 255)
    return frames.astype(np.uint8)


def encode_gif(frames: np.ndarray, fps: int = 10) -> bytes:
    """An animated, looping GIF of uint8 frames [T, H, W, 3]."""
    images = [Image.fromarray(frame) for frame in to_uint8(frames)]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
    return buffer.getvalue()


def _step(step: int) -> np.ndarray:
    """A step for TensorFlow as a 0-d int64 array, never a Python int (see `untracked`)."""
    return untracked(step, np.int64)


def untracked(value: float, dtype: type = np.float32) -> np.ndarray:
    """`value` as a 0-d numpy array, to hand to TensorFlow ops in a loop that runs for days.

    TensorFlow's eager runtime caches the tensor of every Python int and float it converts,
    keyed by value and never evicted (`TFE_TensorHandleCache`; only `context._clear_caches()`
    empties it). Logging ~40 new float values per record through `tf.summary.scalar` added
    about 1.5 KB each to the heap for good: the soak's linear +0.59 MB/min. NumPy values are
    converted without the cache.
    """
    return np.asarray(value, dtype)


def _to_float(value: object) -> float | None:
    number = float(np.asarray(value))
    return number if math.isfinite(number) else None
