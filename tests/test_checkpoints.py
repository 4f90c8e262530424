import os

import numpy as np
import pytest
import tensorflow as tf

from planet_sac.checkpoints import (
    Checkpointer,
    CheckpointError,
    checkpoint_files,
    find_run_config,
    list_variables,
    named_variables,
    resolve,
    restore_filtered,
)
from planet_sac.config import ConfigError


class Net(tf.Module):
    def __init__(self, scale=1.0, shape=(2, 3)):
        super().__init__(name="net")
        with tf.name_scope("world_model/"):
            self.kernel = tf.Variable(tf.fill(shape, scale), name="encoder/kernel")
            self.bias = tf.Variable(tf.fill([3], scale), name="rssm/bias")
        with tf.name_scope("sac/"):
            self.actor = tf.Variable(tf.fill([4], scale), name="actor/kernel")
        with tf.name_scope("optimizer/world_model/"):
            self.slot = tf.Variable(tf.fill(shape, scale), name="m/world_model/encoder/kernel")


def saved(tmp_path, scale=1.0):
    net = Net(scale)
    checkpointer = Checkpointer(str(tmp_path / "run" / "checkpoints"), named_variables([net]))
    checkpointer.save(7)
    return net


def test_names_are_hierarchical_and_listed(tmp_path):
    saved(tmp_path)
    names = dict(list_variables(str(tmp_path / "run")))
    assert names == {"optimizer/world_model/m/world_model/encoder/kernel": [2, 3], "sac/actor/kernel": [4],
                     "world_model/encoder/kernel": [2, 3], "world_model/rssm/bias": [3]}


def test_two_different_variables_under_one_name_are_refused_one_variable_twice_is_not():
    """Two variables named alike would share one checkpoint entry, one of them restored with the other's value; the same
    variable reached through two modules is one entry."""
    first = Net(1.0)
    with pytest.raises(CheckpointError, match="two different variables are both named 'sac/actor/kernel'"):
        named_variables([first, Net(2.0)])
    shared = tf.Module()
    shared.kernel = first.kernel
    named = named_variables([first, shared])
    assert list(named) == list(named_variables([first])) and named["world_model/encoder/kernel"] is first.kernel


def test_resolve_accepts_logdir_checkpoints_folder_and_prefix(tmp_path):
    saved(tmp_path)
    prefix = str(tmp_path / "run" / "checkpoints" / "ckpt-7")
    assert resolve(str(tmp_path / "run")) == prefix
    assert resolve(str(tmp_path / "run" / "checkpoints")) == prefix
    assert resolve(prefix) == prefix
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        resolve(str(tmp_path / "elsewhere"))


def test_the_newest_checkpoint_is_the_largest_number_and_other_names_are_no_checkpoints(tmp_path):
    """ckpt-9 and ckpt-10: the newest is ckpt-10 (sorted by name, ckpt-9 would be); a hand-made `ckpt-best.index`
    beside them is not one of the run's checkpoints."""
    directory = str(tmp_path / "checkpoints")
    net = Net(9.0)
    checkpointer = Checkpointer(directory, named_variables([net]))
    checkpointer.save(9)
    net.kernel.assign(tf.fill([2, 3], 10.0))
    checkpointer.save(10)
    open(f"{directory}/ckpt-best.index", "w").close()
    assert [os.path.basename(prefix) for prefix in checkpoint_files(directory)] == ["ckpt-9", "ckpt-10"]
    assert resolve(str(tmp_path)).endswith("ckpt-10")
    restored = Net(0.0)
    assert Checkpointer(directory, named_variables([restored])).restore_latest().endswith("ckpt-10")
    np.testing.assert_array_equal(restored.kernel.numpy(), 10.0)


def test_the_run_config_is_found_from_a_logdir_its_checkpoints_folder_or_a_prefix(tmp_path):
    saved(tmp_path)
    (tmp_path / "run" / "config.yaml").write_text("seed: 123\n")
    run = tmp_path / "run"
    for path in (run, run / "checkpoints", run / "checkpoints" / "ckpt-7"):
        assert find_run_config(str(path)).seed == 123, path
    with pytest.raises(ConfigError, match="has no config.yaml"):
        find_run_config(str(tmp_path / "elsewhere"))


def test_filtered_restore_restores_exactly_the_matched_variables(tmp_path):
    saved(tmp_path, scale=5.0)
    fresh = Net(scale=0.0)
    variables = named_variables([fresh])
    report = restore_filtered(variables, str(tmp_path / "run"), include=["world_model/"], exclude=["world_model/rssm/"])
    assert report.restored == ["world_model/encoder/kernel"]
    assert "world_model/rssm/bias" in report.untouched and "sac/actor/kernel" in report.untouched
    np.testing.assert_array_equal(fresh.kernel.numpy(), 5.0)
    np.testing.assert_array_equal(fresh.bias.numpy(), 0.0)
    np.testing.assert_array_equal(fresh.actor.numpy(), 0.0)
    np.testing.assert_array_equal(fresh.slot.numpy(), 0.0)  # optimizer slots are not under world_model/
    # the checkpoint holds world_model/encoder/kernel, world_model/rssm/bias, sac/actor/kernel and one optimizer slot:
    # one restored, the other three neither taken nor (in this run) restored, counted per top-level name
    assert report.summary() == ("restored 1 (world_model 1); not taken from the checkpoint 3 (optimizer 1, sac 1, "
                                "world_model 1); at their initial values 3 (optimizer 1, sac 1, world_model 1)")


def test_patterns_match_from_the_start_of_a_name_as_planets_re_match(tmp_path):
    """An exclude pattern removes only the names that begin with it (`re.match`, as PlaNet's saver); the report's
    `skipped` are the checkpoint's other variables."""
    saved(tmp_path, scale=5.0)
    fresh = Net(scale=0.0)
    report = restore_filtered(named_variables([fresh]), str(tmp_path / "run"), include=["world_model/"],
                              exclude=["rssm/"])
    assert report.restored == ["world_model/encoder/kernel", "world_model/rssm/bias"]
    np.testing.assert_array_equal(fresh.bias.numpy(), 5.0)
    assert report.skipped == ["optimizer/world_model/m/world_model/encoder/kernel", "sac/actor/kernel"]
    assert report.untouched == ["optimizer/world_model/m/world_model/encoder/kernel", "sac/actor/kernel"]


def test_several_include_patterns_select_their_union_and_each_must_match(tmp_path):
    saved(tmp_path, scale=5.0)
    fresh = Net(scale=0.0)
    report = restore_filtered(named_variables([fresh]), str(tmp_path / "run"), include=["world_model/encoder/", "sac/"])
    assert report.restored == ["sac/actor/kernel", "world_model/encoder/kernel"]
    np.testing.assert_array_equal(fresh.actor.numpy(), 5.0)
    np.testing.assert_array_equal(fresh.kernel.numpy(), 5.0)
    np.testing.assert_array_equal(fresh.bias.numpy(), 0.0)
    other = Net(scale=0.0)
    with pytest.raises(CheckpointError, match="--include 'policy/' matches no variable"):  # a typo in the second
        restore_filtered(named_variables([other]), str(tmp_path / "run"), include=["world_model/", "policy/"])
    np.testing.assert_array_equal(other.kernel.numpy(), 0.0)


def test_the_report_tells_the_checkpoints_variables_from_the_runs(tmp_path):
    """The checkpoint has counters/step, which this run lacks; this run has sac/log_alpha, which the checkpoint lacks:
    `skipped` counts the checkpoint's variables not taken, `untouched` this run's variables not restored. The
    report names the checkpoint and its step."""
    step = tf.Variable(1234, dtype=tf.int64, name="step")
    Checkpointer(str(tmp_path / "run" / "checkpoints"), named_variables([Net(5.0)], extra={"counters/step": step})).save(1234)
    fresh = Net(0.0)
    variables = named_variables([fresh], extra={"sac/log_alpha": tf.Variable(0.0, name="log_alpha")})
    report = restore_filtered(variables, str(tmp_path / "run"), include=["world_model/"])
    assert report.skipped == ["counters/step", "optimizer/world_model/m/world_model/encoder/kernel", "sac/actor/kernel"]
    assert report.untouched == ["optimizer/world_model/m/world_model/encoder/kernel", "sac/actor/kernel", "sac/log_alpha"]
    assert report.summary() == ("restored 2 (world_model 2); not taken from the checkpoint 3 (counters 1, optimizer 1, "
                                "sac 1); at their initial values 3 (optimizer 1, sac 2)")
    assert report.step == 1234 and report.prefix.endswith("ckpt-1234")
    # Everything from a checkpoint of the same variables: nothing left on either side, and no step stored.
    saved(tmp_path / "same", scale=5.0)
    report = restore_filtered(named_variables([Net(0.0)]), str(tmp_path / "same" / "run"))
    assert report.summary() == ("restored 4 (optimizer 1, sac 1, world_model 2); not taken from the checkpoint 0; "
                                "at their initial values 0")
    assert report.step is None


def test_a_selected_variable_the_checkpoint_lacks_is_refused_before_anything_is_assigned(tmp_path):
    saved(tmp_path, scale=5.0)
    fresh = Net(0.0)
    variables = named_variables([fresh], extra={"world_model/decoder/kernel": tf.Variable(tf.zeros([2]), name="decoder")})
    with pytest.raises(CheckpointError, match=r"1 selected variables are not in .*, e.g. 'world_model/decoder/kernel'; "
                                              r"narrow --include or add --exclude"):
        restore_filtered(variables, str(tmp_path / "run"), include=["world_model/"])
    np.testing.assert_array_equal(fresh.kernel.numpy(), 0.0)


def test_no_include_pattern_restores_everything_but_never_what_belongs_to_the_run(tmp_path):
    saved(tmp_path, scale=5.0)
    fresh = Net(scale=0.0)
    variables = named_variables([fresh])
    report = restore_filtered(variables, str(tmp_path / "run"), include=[], never=["sac/"])
    assert sorted(report.restored) == ["optimizer/world_model/m/world_model/encoder/kernel",
                                       "world_model/encoder/kernel", "world_model/rssm/bias"]
    np.testing.assert_array_equal(fresh.slot.numpy(), 5.0)
    np.testing.assert_array_equal(fresh.actor.numpy(), 0.0)  # `never`, whatever the user's patterns
    with pytest.raises(CheckpointError, match="--include sac/ selects only what belongs to a run"):
        restore_filtered(variables, str(tmp_path / "run"), include=["sac/"], never=["sac/"])


def test_resume_needs_every_variable_of_the_run_but_the_optional_ones(tmp_path):
    """A checkpoint written by another model is refused before anything is assigned; a variable named optional
    (one that checkpoints written before it existed lack) keeps its value."""
    directory = str(tmp_path / "checkpoints")
    Checkpointer(directory, named_variables([Net(1.0)])).save(1)
    restored, counter = Net(0.0), tf.Variable(3.0, name="counter")
    variables = named_variables([restored], extra={"run_state/counter": counter})
    with pytest.raises(CheckpointError, match="1 variables of this run are not in the checkpoints of .*"
                                              "'run_state/counter'.*use a new logdir"):
        Checkpointer(directory, variables).restore_latest()
    np.testing.assert_array_equal(restored.kernel.numpy(), 0.0)
    assert Checkpointer(directory, variables, optional=["run_state/counter"]).restore_latest().endswith("ckpt-1")
    np.testing.assert_array_equal(restored.kernel.numpy(), 1.0)
    assert counter.numpy() == 3.0


def test_resume_refuses_checkpoints_of_other_shapes_in_one_line(tmp_path):
    directory = str(tmp_path / "checkpoints")
    Checkpointer(directory, named_variables([Net(1.0)])).save(1)
    other = Net(0.0, shape=(4, 3))
    with pytest.raises(CheckpointError, match=r"shape mismatch for optimizer/world_model/m/world_model/encoder/kernel: "
                                              r"the checkpoints of .* have \[2, 3\], this run needs \[4, 3\]; use a new logdir"):
        Checkpointer(directory, named_variables([other])).restore_latest()
    np.testing.assert_array_equal(other.bias.numpy(), 0.0)


def test_include_matching_nothing_is_rejected(tmp_path):
    saved(tmp_path)
    with pytest.raises(CheckpointError, match="--include 'policy/' matches no variable"):
        restore_filtered(named_variables([Net()]), str(tmp_path / "run"), include=["policy/"])


def test_shape_mismatch_is_rejected_before_anything_is_assigned(tmp_path):
    saved(tmp_path, scale=5.0)
    other = Net(scale=0.0, shape=(4, 3))
    with pytest.raises(CheckpointError, match=r"shape mismatch for world_model/encoder/kernel: checkpoint has \[2, 3\], this run needs \[4, 3\]"):
        restore_filtered(named_variables([other]), str(tmp_path / "run"), include=["world_model/"])
    np.testing.assert_array_equal(other.bias.numpy(), 0.0)


def test_exact_resume_falls_back_when_the_newest_checkpoint_is_damaged(tmp_path):
    directory = str(tmp_path / "checkpoints")
    net = Net(1.0)
    checkpointer = Checkpointer(directory, named_variables([net]))
    checkpointer.save(1)
    net.kernel.assign(tf.fill([2, 3], 2.0))
    newest = checkpointer.save(2)
    for path in tf.io.gfile.glob(newest + ".data-*"):
        with open(path, "wb") as file:
            file.write(b"garbage")
    restored = Net(0.0)
    prefix = Checkpointer(directory, named_variables([restored])).restore_latest()
    assert prefix.endswith("ckpt-1")
    np.testing.assert_array_equal(restored.kernel.numpy(), 1.0)
    # The damaged one, both its files, is moved out of the rotation (kept, in damaged/), so that the next saves
    # rotate the good ones only.
    assert [os.path.basename(prefix) for prefix in checkpoint_files(directory)] == ["ckpt-1"]
    damaged = sorted(os.listdir(f"{directory}/damaged"))
    assert len(damaged) == 2 and damaged[0].startswith("ckpt-2.data-") and damaged[1] == "ckpt-2.index"


def test_missing_shard_falls_back_and_all_damaged_is_a_clear_error(tmp_path):
    directory = str(tmp_path / "checkpoints")
    net = Net(1.0)
    checkpointer = Checkpointer(directory, named_variables([net]))
    first = checkpointer.save(1)
    second = checkpointer.save(2)
    for path in tf.io.gfile.glob(second + ".data-*"):
        tf.io.gfile.remove(path)
    assert Checkpointer(directory, named_variables([Net(0.0)])).restore_latest() == first
    for path in tf.io.gfile.glob(first + ".data-*"):
        tf.io.gfile.remove(path)
    with pytest.raises(CheckpointError, match=r"no readable checkpoint in .*: 1 unreadable, the newest ckpt-1 \("):
        Checkpointer(directory, named_variables([Net(0.0)])).restore_latest()
    # Two damaged at once: the line names the newest, the one a resume would have taken.
    directory = str(tmp_path / "two")
    two_checkpoints(directory)
    for path in tf.io.gfile.glob(f"{directory}/ckpt-*.data-*"):
        tf.io.gfile.remove(path)
    with pytest.raises(CheckpointError, match=r"no readable checkpoint in .*: 2 unreadable, the newest ckpt-2 \("):
        Checkpointer(directory, named_variables([Net(0.0)])).restore_latest()


def two_checkpoints(directory: str) -> None:
    """ckpt-1 with kernel 1 and ckpt-2 with kernel 2 in `directory`."""
    net = Net(1.0)
    checkpointer = Checkpointer(directory, named_variables([net]))
    checkpointer.save(1)
    net.kernel.assign(tf.fill([2, 3], 2.0))
    checkpointer.save(2)


@pytest.mark.parametrize("state", [
    'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n',  # trimmed by hand, no timestamps
    'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n'
    "all_model_checkpoint_timestamps: 5.0\nlast_preserved_timestamp: 1.0\n",  # older than a save that finished its files
    None,  # the state file lost (a copied folder)
    'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-2"\n',
    # both listed, without timestamps (the manager would rotate neither)
    'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-2"\n'
    "all_model_checkpoint_timestamps: 5.0\nall_model_checkpoint_timestamps: 6.0\nlast_preserved_timestamp: 10.0\n",
    # both listed, older than the last preserved time (the manager would keep them forever)
    'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-2"\n'
    "all_model_checkpoint_timestamps: 5.0\nall_model_checkpoint_timestamps: 6.0\nlast_preserved_timestamp: 1.0\n",
    # both listed, the older named latest
])
def test_resume_finds_the_newest_checkpoint_whatever_the_state_file_says(tmp_path, state):
    directory = str(tmp_path / "checkpoints")
    two_checkpoints(directory)
    if state is None:
        tf.io.gfile.remove(f"{directory}/checkpoint")
    else:
        with open(f"{directory}/checkpoint", "w") as file:
            file.write(state)
    assert resolve(str(tmp_path)).endswith("ckpt-2")  # evaluate, collect --reload-every, --restore-from
    restored = Net(0.0)
    checkpointer = Checkpointer(directory, named_variables([restored]))
    assert checkpointer.latest.endswith("ckpt-2") and tf.train.latest_checkpoint(directory).endswith("ckpt-2")
    assert checkpointer.restore_latest().endswith("ckpt-2")
    np.testing.assert_array_equal(restored.kernel.numpy(), 2.0)
    # The rebuilt state lists both, relative to the folder, and rotation still deletes the oldest.
    text = open(f"{directory}/checkpoint").read()
    assert 'all_model_checkpoint_paths: "ckpt-1"' in text and str(tmp_path) not in text
    for step in (3, 4):
        checkpointer.save(step)
    assert sorted(p.rsplit("/", 1)[1] for p in tf.io.gfile.glob(f"{directory}/ckpt-*.index")) == \
        ["ckpt-2.index", "ckpt-3.index", "ckpt-4.index"]


def test_a_consistent_state_file_is_left_alone(tmp_path):
    directory = str(tmp_path / "checkpoints")
    two_checkpoints(directory)
    before = open(f"{directory}/checkpoint").read()
    Checkpointer(directory, named_variables([Net(0.0)]))
    assert open(f"{directory}/checkpoint").read() == before
