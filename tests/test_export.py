"""`planet-sac export`: a SavedModel that acts as the in-process policy, loaded where planet_sac cannot be imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import gymnasium
import numpy as np
import pytest
import yaml

from planet_sac.cli import main
from tests.conftest import CONFIGS, OLD_RUN, ROOT, old_run_copy

FIXTURE_RUN = OLD_RUN  # a smoke run (Pendulum states) with a checkpoint at step 10

# Runs where planet_sac cannot be imported: plays the recorded observations through each SavedModel it is given
# (argv[1]: a JSON list of [saved_model, observations.npz, actions.npz]), one JSON report line each.
SERVE = textwrap.dedent("""
    import json, sys
    sys.modules["planet_sac"] = None  # import planet_sac now raises ImportError
    try:
        import planet_sac  # noqa: F401
        raise SystemExit("planet_sac is importable")
    except ImportError:
        pass
    import numpy as np
    import tensorflow as tf

    for saved_model, observations_file, actions_file in json.loads(sys.argv[1]):
        policy = tf.saved_model.load(saved_model)
        observations = np.load(observations_file)["observations"]
        state = policy.get_initial_state(1)
        actions, normalized = [], []
        for obs in observations:
            step = policy.action(tf.constant(obs[None]), state)
            state = step.state
            actions.append(step.action.numpy()[0])
            normalized.append(step.info["normalized_action"].numpy()[0])
        metadata = {key: value.numpy() for key, value in policy.get_metadata().items()}
        np.savez(actions_file, actions=np.array(actions), normalized=np.array(normalized))
        extra = {}
        if metadata["observation_key"] == b"image":  # a frame of another size is resized inside
            extra["big_frame_action_shape"] = list(policy.action(
                tf.zeros([2, 128, 96, 3], tf.uint8), policy.get_initial_state(2)).action.shape)
        signature = policy.signatures["action"](observation=tf.constant(observations[:1]), **policy.get_initial_state(1))
        print(json.dumps({"train_step": int(policy.get_train_step().numpy()),
                          "metadata": {k: (v.decode() if isinstance(v, bytes) else v.tolist()) for k, v in metadata.items()},
                          "signature_keys": sorted(signature), "state_keys": sorted(state), **extra}), flush=True)
    if len(sys.argv) > 2:  # then a script of its own (a fresh namespace, as `python SCRIPT`), in this same process
        with open(sys.argv[2]) as file:
            exec(compile(file.read(), sys.argv[2], "exec"), {"__name__": "__main__"})
""")


def serve_elsewhere(jobs: list[tuple], tmp_path, then_run=None) -> tuple[list[tuple[dict, dict]], str]:
    """Each SavedModel's actions for its `observations` (one episode): `jobs` is a list of (saved_model, observations),
    all served by one process without planet_sac (one TensorFlow start for all); then, in the same process, the
    script `then_run` if given. Returns (report, served actions) per job, and what that script printed."""
    files = []
    for index, (saved_model, observations) in enumerate(jobs):
        np.savez(tmp_path / f"observations{index}.npz", observations=observations)
        files.append([str(saved_model), str(tmp_path / f"observations{index}.npz"), str(tmp_path / f"actions{index}.npz")])
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    result = subprocess.run([sys.executable, str(script), json.dumps(files), *([str(then_run)] if then_run else [])],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600, env=dict(os.environ, PYTHONPATH=""))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    reports = [index for index, line in enumerate(lines) if line.startswith('{"train_step"')]
    assert len(reports) == len(jobs), result.stdout[-3000:]
    served = [(json.loads(lines[index]), dict(np.load(actions))) for index, (_, _, actions) in zip(reports, files)]
    return served, "\n".join(lines[reports[-1] + 1:])


def in_process_episode(logdir, policy: str) -> dict:
    """One test-phase episode of the run's own policy, as `evaluate` plays it."""
    from planet_sac.acting.actor import TEST, run_episode
    from planet_sac.agent import load_agent

    _, agent, env, _ = load_agent(str(logdir))
    agent.policy.set_policies(test=policy)
    try:
        return run_episode(env, agent.policy, TEST)
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.e2e
def test_exported_policies_act_as_in_process_without_planet_sac(tmp_path, image_run, capsys):
    """Three SavedModels, served by one process without planet_sac (one TensorFlow start for all three):

    - the SAC head of a Pendulum-states run acts as the in-process head, with its metadata, signature and state, and
      docs/export.md's serving loop runs on it as written (`check_state_sac`);
    - the SAC head and CEM of a run from pixels take raw uint8 frames: the dequantisation noise (and CEM's sampling)
      come from the exported generator (`check_image_policy`).
    """
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    out = tmp_path / "saved_sac"
    assert main(["export", "--logdir", str(run), "--policy", "sac", "--out", str(out)]) == 0
    assert f"wrote {out}: sac policy of checkpoint step 10" in capsys.readouterr().out
    episode = in_process_episode(run, "sac")
    image_outs = {policy: tmp_path / f"saved_image_{policy}" for policy in ("sac", "cem")}
    image_episodes = {}
    for policy, image_out in image_outs.items():
        assert main(["export", "--logdir", str(image_run), "--policy", policy, "--out", str(image_out), "--quiet"]) == 0
        image_episodes[policy] = in_process_episode(image_run, policy)
    # docs/export.md's serving loop, as written there, with gymnasium and the SavedModel only: run as a script by
    # the same process without planet_sac, after it served the episodes
    text = (ROOT / "docs" / "export.md").read_text()
    loop = text.split("## Serving it with gymnasium only", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    assert len(loop.strip().splitlines()) <= 20 and "logdir/pendulum/export/sac" in loop
    docs_loop = tmp_path / "docs_loop.py"
    docs_loop.write_text('import sys\nsys.modules["planet_sac"] = None\n' + loop.replace("logdir/pendulum/export/sac", str(out)))
    jobs = [(out, episode["state"][:-1])]  # the observation each action was chosen from
    jobs += [(image_outs[policy], image_episodes[policy]["image"][:-1]) for policy in ("sac", "cem")]
    (state_sac, *image_policies), docs_loop_output = serve_elsewhere(jobs, tmp_path, then_run=docs_loop)
    check_state_sac(*state_sac, episode, run, docs_loop_output)
    for policy, (report, served) in zip(("sac", "cem"), image_policies):
        check_image_policy(policy, report, served, image_episodes[policy], image_outs[policy])


@pytest.mark.slow
def test_an_exported_sac_head_acts_as_the_in_process_head(tmp_path, capsys):
    """The export's contract, checked in this process (serving without planet_sac, pixel policies and the docs' loop
    are the `e2e` test above): the SavedModel of a Pendulum-states run's SAC head chooses the in-process head's actions
    over a whole test episode, scaled to the task's action box, and carries the checkpoint's step and task.

    The run acts as a graph (policy.jit_compile=false, as configs/smoke.yaml): the fixture's default compiled the
    in-process policy and the loaded SavedModel with XLA at their first call, 7 CPU seconds each; the `e2e` test
    above exports and serves the fixture's XLA policy."""
    import tensorflow as tf

    run = old_run_copy(tmp_path / "run")
    out = tmp_path / "saved_sac"
    assert main(["export", "--logdir", str(run), "--policy", "sac", "--out", str(out), "--quiet"]) == 0
    episode = in_process_episode(run, "sac")
    policy = tf.saved_model.load(str(out))
    state = policy.get_initial_state(1)
    actions, normalized = [], []
    for obs in episode["state"][:-1]:  # the observation each action was chosen from
        step = policy.action(tf.constant(obs[None]), state)
        state = step.state
        actions.append(step.action.numpy()[0])
        normalized.append(step.info["normalized_action"].numpy()[0])
    expected = episode["action"][1:]
    assert len(expected) == 50
    np.testing.assert_allclose(np.array(normalized), expected, atol=1e-6)
    np.testing.assert_allclose(np.array(actions), -2.0 + (expected + 1.0) / 2.0 * 4.0, atol=1e-5)  # Pendulum: [-2, 2]
    metadata = policy.get_metadata()
    assert int(policy.get_train_step().numpy()) == 10 and int(metadata["checkpoint_step"].numpy()) == 10
    assert metadata["task"].numpy() == b"gym:Pendulum-v1" and metadata["policy"].numpy() == b"sac"
    # Was "Incompatible shapes" deep in the policy; then, with the check unordered against the policy's ops, the
    # policy's own error came first now and then (8 calls of 200 in a process set up as a run, 36 without Grappler off):
    # 100 calls all give the check's message.
    for _ in range(100):
        with pytest.raises(tf.errors.InvalidArgumentError, match="the observation and the state hold different batch sizes"):
            policy.action(tf.zeros([3, 3]), policy.get_initial_state(2))


def check_state_sac(report: dict, served: dict, episode: dict, run, docs_loop_output: str) -> None:
    expected = episode["action"][1:]
    assert len(expected) == 50  # a whole episode (time limit 50)
    np.testing.assert_allclose(served["normalized"], expected, atol=1e-6)  # the SAC head's mean action: equal
    np.testing.assert_allclose(served["actions"], -2.0 + (expected + 1.0) / 2.0 * 4.0, atol=1e-5)  # Pendulum: [-2, 2]
    metadata = report["metadata"]
    assert report["train_step"] == 10 and metadata["checkpoint_step"] == 10
    assert metadata["task"] == "gym:Pendulum-v1" and metadata["policy"] == "sac" and metadata["action_repeat"] == 2
    assert metadata["observation_shape"] == [3] and metadata["action_shape"] == [1]
    assert metadata["action_low"] == [-2.0] and metadata["action_high"] == [2.0]
    from planet_sac.checkpoints import find_run_config

    assert yaml.safe_load(metadata["config"]) == find_run_config(str(run)).to_dict()  # the resolved config
    assert report["state_keys"] == ["deter", "mean", "plan", "previous_action", "std", "stoch"]
    assert "action" in report["signature_keys"] and "state/deter" in report["signature_keys"]
    assert docs_loop_output.startswith("return ") and len(docs_loop_output.splitlines()) == 1, docs_loop_output


@pytest.fixture
def image_run(tmp_path, monkeypatch):
    """A run directory of the example environment from pixels, with an (untrained) agent's checkpoint at step 7."""
    from planet_sac.agent import Agent
    from planet_sac.checkpoints import Checkpointer
    from planet_sac.config_loading import load_config, save_config

    registered = set(gymnasium.envs.registry)
    folder = tmp_path / "modules"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "myenvs.py", folder / "myreach_export.py")
    monkeypatch.syspath_prepend(str(folder))
    config = load_config(CONFIGS / "smoke.yaml", ["env.task=gym:myreach_export:MyReach-v0", "env.obs=image",
                                                  "env.time_limit=12", "model.cnn_depth=4", "cem.candidates=16"])
    run = tmp_path / "image_run"
    run.mkdir()
    save_config(config, str(run / "config.yaml"))
    agent = Agent.build(config, "image", (64, 64, 3), 2)
    import tensorflow as tf

    step = {"counters/step": tf.Variable(7, dtype=tf.int64)}  # as the trainer's counters
    Checkpointer(str(run / "checkpoints"), {**agent.acting_variables(), **step}).save(7)
    yield run
    sys.modules.pop("myreach_export", None)
    for env_id in set(gymnasium.envs.registry) - registered:  # the next test registers MyReach-v0 afresh, unwarned
        del gymnasium.envs.registry[env_id]


def check_image_policy(policy: str, report: dict, served: dict, episode: dict, saved_model) -> None:
    """Raw uint8 frames in; the dequantisation noise (and CEM's sampling) come from the exported generator."""
    expected = episode["action"][1:]
    assert len(expected) == 12
    # the same generator state and the same compiled function: equal actions, CEM's included
    np.testing.assert_allclose(served["normalized"], expected, atol=1e-5, err_msg=policy)
    assert report["metadata"]["observation_key"] == "image" and report["metadata"]["observation_dtype"] == "uint8"
    assert "5-bit" in report["metadata"]["preprocessing"] and report["metadata"]["image_size"] == 64
    assert report["big_frame_action_shape"] == [2, 2] and report["train_step"] == 7
    if policy == "sac":
        assert_the_noise_lives_in_the_saved_model(saved_model)


def assert_the_noise_lives_in_the_saved_model(saved_model) -> None:
    """Two calls on the same frame and state differ only by the dequantisation noise the policy draws each time."""
    import tensorflow as tf

    policy = tf.saved_model.load(str(saved_model))
    frame = tf.fill([1, 64, 64, 3], tf.constant(100, tf.uint8))
    state = policy.get_initial_state(1)
    first, second = (policy.action(frame, state).state["mean"].numpy() for _ in range(2))
    assert not np.array_equal(first, second)


def test_a_run_without_a_checkpoint_gets_one_line_and_nothing_is_written(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    shutil.rmtree(run / "checkpoints")
    out = tmp_path / "saved"
    assert main(["export", "--logdir", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("planet-sac export: error:") and "checkpoint" in err[0], err
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_a_policy_the_run_cannot_act_with_gets_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["sac"]["updates_per_step"] = 0  # a run that never trained its SAC head
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    for policy in ("sac", "sac_guided_cem"):
        assert main(["export", "--logdir", str(run), "--policy", policy, "--out", str(tmp_path / "saved")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "never trained its SAC head" in err[0], err
    assert not (tmp_path / "saved").exists()
    with pytest.raises(SystemExit) as info:  # random is no policy to deploy
        main(["export", "--logdir", str(run), "--policy", "random"])
    assert info.value.code == 2


@pytest.mark.slow
def test_a_failed_write_leaves_nothing_under_out(tmp_path, monkeypatch, capsys):
    import tensorflow as tf

    from planet_sac import export

    real_save = tf.saved_model.save
    target = tmp_path / "out" / "saved"
    seen = []

    def save_then_fail(module, path, **kwargs):
        real_save(module, path, **kwargs)  # everything written ...
        seen.append((os.path.dirname(path), os.path.exists(target)))  # (a kill here must leave no `target`)
        raise OSError(28, "No space left on device")  # ... then the disk fills up before the rename

    monkeypatch.setattr(export.tf.saved_model, "save", save_then_fail)
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    with pytest.raises(OSError):
        export.export_run(str(run), "sac", str(target))
    assert seen == [(str(tmp_path / "out"), False)]  # written to a sibling of `target`, not to it
    assert os.listdir(tmp_path / "out") == []  # no SavedModel, no temporary sibling
    monkeypatch.undo()
    (tmp_path / "taken").mkdir()
    assert main(["export", "--logdir", str(run), "--out", str(tmp_path / "taken")]) == 2
    assert "exists already" in capsys.readouterr().err


@pytest.mark.parametrize("out, message", [
    ("{tmp}/file/saved", "--out {tmp}/file/saved: {tmp}/file is a file, not a folder"),
    ("{tmp}/file/deeper/saved", "--out {tmp}/file/deeper/saved: {tmp}/file is a file, not a folder"),
    ("{tmp}/locked/saved", "--out {tmp}/locked/saved: the folder {tmp}/locked is not writable"),
    ("{tmp}/taken", "--out {tmp}/taken exists already"),
    ("{tmp}/dangling", "--out {tmp}/dangling exists already"),
    ("gs://bucket/saved", "--out gs://bucket/saved: an export is written to a local folder"),
])
def test_an_out_that_cannot_be_made_is_one_line_before_the_agent_is_built(out, message, tmp_path, capsys, monkeypatch):
    """`--out FILE/sub` raised FileExistsError with its traceback after the agent was built; `gs://` made a local
    `gs:` folder."""
    import planet_sac.export

    monkeypatch.setattr(planet_sac.export, "load_agent", lambda *args: pytest.fail("built the agent first"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "taken").mkdir()
    (tmp_path / "locked").mkdir(mode=0o555)
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    if "locked" in out:  # root writes into a read-only folder: the check asks os.access, which says no here
        access = os.access
        monkeypatch.setattr(planet_sac.export.os, "access", lambda path, mode: access(path, mode) and not str(
            path).endswith("locked"))
    before = sorted(os.listdir(tmp_path))
    assert main(["export", "--logdir", str(FIXTURE_RUN), "--out", out.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"planet-sac export: error: {message.format(tmp=tmp_path)}"] or (
        len(err) == 1 and message.format(tmp=tmp_path) in err[0]), err
    assert sorted(os.listdir(tmp_path)) == before
