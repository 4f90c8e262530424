"""TensorBoard summaries: open-loop and evaluation videos as playable GIFs, free-nats share and SAC temperature."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator

from planet_sac.cli import main
from planet_sac.config_loading import load_config
from planet_sac.models.world_model import WorldModel
from planet_sac.training.logger import Logger, encode_gif
from tests.conftest import CONFIGS, DATA, state_batch

SMOKE = str(CONFIGS / "smoke.yaml")


def summaries(logdir: str) -> dict[str, list]:
    """{tag: [summary values]} of every event file in `logdir`."""
    values: dict[str, list] = {}
    for path in tf.io.gfile.glob(f"{logdir}/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                values.setdefault(value.tag, []).append(value)
    return values


def gif_frames(value) -> list[np.ndarray]:
    gif = Image.open(io.BytesIO(value.image.encoded_image_string))
    assert gif.format == "GIF"
    frames = []
    for index in range(gif.n_frames):
        gif.seek(index)
        frames.append(np.asarray(gif.convert("RGB")))
    assert (frames[0].shape[0], frames[0].shape[1]) == (value.image.height, value.image.width)
    return frames


def test_a_record_after_a_partial_last_line_starts_a_line_of_its_own(tmp_path):
    """A run killed mid-write left half a record: the next run's first record is still a whole line of its own."""
    (tmp_path / "metrics.jsonl").write_text('{"step": 5, "phase": "train"}\n{"step": 10, "loss/to')
    logger = Logger(str(tmp_path))
    try:
        logger.scalars(10, {"loss/total": 2.5}, phase="train")
    finally:
        logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert lines[:2] == ['{"step": 5, "phase": "train"}', '{"step": 10, "loss/to']
    assert {key: value for key, value in json.loads(lines[2]).items() if key != "time"} == {
        "step": 10, "phase": "train", "loss/total": 2.5}


def test_an_event_file_cut_short_by_a_kill_is_mended_even_with_nothing_to_drop(tmp_path):
    """Resuming at the last logged step drops no event, but the record a kill cut short goes: the file is whole
    records again, which a reader takes to its end without a data-loss error."""
    first = Logger(str(tmp_path))
    for step in (1, 2):
        first.scalars(step, {"loss/total": float(step)}, phase="train")
    first.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    with open(path, "rb") as file:
        header = file.read(12)  # a record's length and its checksum
    with open(path, "ab") as file:
        file.write(header + b"\x00\x00")  # a record cut short by the kill: its header whole, its data not
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))
    second = Logger(str(tmp_path))
    assert second.drop_after(2, test_pending=False) == 0  # no record of metrics.jsonl goes
    second.close()
    events = [tf.compat.v1.Event.FromString(record.numpy()) for record in tf.data.TFRecordDataset(str(path))]
    assert [event.step for event in events if event.summary.value] == [1, 2]


def test_a_non_finite_value_is_logged_as_null_and_left_out_of_tensorboard(tmp_path):
    """metrics.jsonl stays strict JSON (no NaN or Infinity, which JSON does not have): a diverged loss is `null` there,
    and TensorBoard gets the finite values only."""
    logger = Logger(str(tmp_path))
    try:
        record = logger.scalars(3, {"loss/total": float("nan"), "loss/kl": float("inf"), "loss/reward": 0.5}, phase="train")
    finally:
        logger.close()
    (line,) = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line)["loss/total"] is None and json.loads(line)["loss/kl"] is None
    assert record["loss/reward"] == 0.5 and json.loads(line)["loss/reward"] == 0.5
    assert set(summaries(str(tmp_path))) == {"loss/reward"}


def test_last_record_is_the_newest_that_matches(tmp_path):
    logger = Logger(str(tmp_path))
    try:
        for step, phase in ((5, "train"), (5, "test"), (10, "train"), (10, "test"), (15, "train")):
            logger.scalars(step, {"x": float(step)}, phase=phase)
        assert logger.last_record(lambda record: record["phase"] == "test")["step"] == 10
        assert logger.last_record(lambda record: True)["step"] == 15
        assert logger.last_record(lambda record: record["phase"] == "eval") == {}
    finally:
        logger.close()


def test_gif_round_trip_keeps_frames():
    rng = np.random.default_rng(0)
    frames = np.zeros((4, 8, 12, 3), np.uint8)
    for index in range(4):
        frames[index, :, : 3 * (index + 1)] = rng.integers(0, 255, 3)  # a growing bar of one colour per frame
    decoded = Image.open(io.BytesIO(encode_gif(frames, fps=5)))
    assert decoded.n_frames == 4
    assert decoded.info["loop"] == 0 and decoded.info["duration"] == 200  # loops for ever, 5 frames a second
    for index in range(4):
        decoded.seek(index)
        np.testing.assert_array_equal(np.asarray(decoded.convert("RGB")), frames[index])


def test_logger_video_is_an_image_summary_tensorboard_plays(tmp_path):
    logger = Logger(str(tmp_path))
    frames = np.linspace(0.0, 1.0, 5)[:, None, None, None] * np.ones((5, 6, 7, 3))
    logger.video(3, "eval/video", frames)
    logger.close()
    (value,) = summaries(str(tmp_path))["eval/video"]
    decoded = gif_frames(value)
    assert len(decoded) == 5 and decoded[0].shape == (6, 7, 3)
    np.testing.assert_array_equal([frame[0, 0, 0] for frame in decoded], np.round(np.linspace(0, 255, 5)))


@pytest.mark.slow
def test_open_loop_video_shows_truth_model_and_error(tmp_path):
    """Offline training of an image model: the open-loop video and `model/open_loop_mse` beside `loss/image`."""
    logdir = str(tmp_path / "pixels")
    assert main(["train", "--config", SMOKE, "--logdir", logdir, "--offline-data", str(DATA / "cartpole_swingup_image"),
                 "--set", "env.obs=image", "--set", "model.cnn_depth=4", "--set", "data.batch_size=2",
                 "--set", "schedule.video_every=2", "--set", "schedule.log_every=1", "--train-steps", "2", "--quiet"]) == 0
    with open(f"{logdir}/metrics.jsonl") as file:
        rows = [json.loads(line) for line in file]
    assert any("loss/image" in row for row in rows) and any("model/open_loop_mse" in row for row in rows)
    (value,) = summaries(logdir)["openloop/truth_model_error"]
    frames = gif_frames(value)
    assert len(frames) == 10  # data.chunk_length of the smoke config
    assert frames[0].shape == (64, 3 * 64, 3)  # truth | model | error side by side
    truth, model, error = frames[5][:, :64], frames[5][:, 64:128], frames[5][:, 128:]
    assert truth.std() > 5  # a real cartpole frame, not a blank one
    difference = np.abs(truth.astype(int) - model.astype(int))
    assert np.abs(difference - error.astype(int)).mean() < 8  # the error panel is |truth - model| (GIF palette aside)


def test_test_phase_logs_an_evaluation_video_and_the_new_scalars(smoke_run):
    logdir, _ = smoke_run
    values = summaries(logdir)
    assert len(values["eval/video"]) == 2  # a test phase at step 10 and one at step 20 (after the resume)
    frames = gif_frames(values["eval/video"][0])
    assert len(frames) == 51  # reset frame + env.time_limit=50 steps of the smoke config
    assert frames[0].shape == (128, 128, 3) and not np.array_equal(frames[0], frames[-1])  # the pendulum moves
    for tag in ("sac/alpha", "model/free_nats_clipped", "loss/total", "test/return"):
        assert tag in values, tag
    accumulator = event_accumulator.EventAccumulator(logdir, size_guidance={"images": 0})
    accumulator.Reload()  # what TensorBoard's image dashboard reads
    assert "eval/video" in accumulator.Tags()["images"]
    assert accumulator.Images("eval/video")[0].encoded_image_string.startswith(b"GIF89a")


@pytest.mark.parametrize("free_nats, expected", [(0.0, 0.0), (1e6, 1.0)])
def test_free_nats_clipped_is_the_share_of_kl_values_below_free_nats(free_nats, expected):
    config = load_config(CONFIGS / "smoke.yaml", [f"model.free_nats={free_nats}"])
    model = WorldModel(config.model, "state", (3,), 1)
    batch = {key: tf.constant(value) for key, value in state_batch().items()}
    rng = tf.random.Generator.from_seed(0)
    _, metrics, _ = model.loss(batch, model.sample_noise(rng, 4, 10))
    assert float(metrics["model/free_nats_clipped"]) == expected


def test_free_nats_clipped_counts_kl_values_below_free_nats(monkeypatch):
    config = load_config(CONFIGS / "smoke.yaml", ["model.free_nats=1.0"])
    model = WorldModel(config.model, "state", (3,), 1)
    kl = np.array([[0.5, 0.5, 0.5], [2.0, 2.0, 2.0], [0.0, 0.0, 2.5], [1.5, 0.0, 0.0]], np.float32)
    monkeypatch.setattr(model.rssm, "kl_divergence", lambda *args, **kwargs: tf.constant(kl))
    batch = {key: tf.constant(value) for key, value in state_batch(length=3).items()}
    _, metrics, _ = model.loss(batch, model.sample_noise(tf.random.Generator.from_seed(0), 4, 3))
    assert float(metrics["model/free_nats_clipped"]) == pytest.approx(7 / 12)  # 3 + 0 + 2 + 2 of 12 steps below 1 nat


def test_open_loop_truth_is_what_the_decoder_is_trained_towards():
    """The truth panel is the 5-bit bin's centre (PlaNet's target, noise averaged out), not x / 255: a perfect
    model used to show an error of up to 1/64 per pixel."""
    from planet_sac.diagnostics import open_loop

    config = load_config(SMOKE, ["model.cnn_depth=4"]).model
    model = WorldModel(config, "image", (64, 64, 3), 1, precision="float32")
    image = np.zeros((1, 4, 64, 64, 3), np.uint8)
    image[..., 0], image[..., 1], image[..., 2] = 200, 7, 255
    truth, predicted = open_loop(model, {"image": image, "action": np.zeros((1, 4, 1), np.float32)}, context=2)
    # By hand: floor(200 / 8) = 25 -> 25.5 / 32; floor(7 / 8) = 0 -> 0.5 / 32; floor(255 / 8) = 31 -> 31.5 / 32.
    np.testing.assert_allclose(truth[0, 0, 0], [25.5 / 32, 0.5 / 32, 31.5 / 32])
    assert truth.shape == predicted.shape == (4, 64, 64, 3)
