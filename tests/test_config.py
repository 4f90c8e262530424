import os
import re

import pytest

from planet_sac.config import Config, ConfigError
from planet_sac.config_loading import apply_overrides, load_config
from tests.conftest import CONFIGS


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load(path):
    config = load_config(path)
    config.validate()


PLANET_BATCH = 50  # PlaNet's step counter counts samples: +50 per update, so its step counts / 50 = our updates
# Every default the README calls PlaNet's, with PlaNet's number (google-research/planet, scripts/configs.py)
# and the conversion to planet_sac's units where they differ.
PLANET_DEFAULTS = {
    "env.obs": "image", "env.image_size": 64,  # 64x64x3 observations
    "data.batch_size": 50, "data.chunk_length": 50,  # batch_shape [50, 50]
    "data.seed_episodes": 5, "data.test_seed_episodes": 5,  # num_seed_episodes 5, into both directories
    "data.every": 10,  # scan_episodes_every 10
    "model.deter_size": 200, "model.stoch_size": 30, "model.hidden_size": 200, "model.min_stddev": 0.1,
    "model.cnn_depth": 32, "model.reward_units": 100, "model.image_bits": 5,
    "model.free_nats": 3.0, "model.kl_scale": 1.0, "model.reward_scale": 10.0,
    "model.overshooting_distance": 0,  # overshooting off in PlaNet's default config
    "optim.learning_rate": 1e-3, "optim.adam_epsilon": 1e-4, "optim.grad_clip": 1000.0,
    "optim.warmup_updates": 10_000 // PLANET_BATCH,  # schedule.linear ramp 10000 samples -> 200 updates
    "cem.horizon": 12, "cem.candidates": 1000, "cem.iterations": 10, "cem.top_k": 100, "cem.discount": 0.99,
    "cem.exploration_noise": 0.3,
    "schedule.train_phase_steps": 50_000 // PLANET_BATCH,  # train_steps 50000 samples -> 1000 updates
    "schedule.collect_every": 5_000 // PLANET_BATCH,  # collect_every 5000 samples -> 100 updates per episode
    "schedule.train_steps": 20_000_000 // PLANET_BATCH,  # max_steps 2e7 samples -> 400000 updates
}


def test_default_yaml_is_planet_defaults():
    config = load_config(CONFIGS / "default.yaml")
    for key, expected in PLANET_DEFAULTS.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        assert value == expected and type(value) is type(expected), f"{key}={value!r}, PlaNet uses {expected!r}"
    assert (PLANET_DEFAULTS["optim.warmup_updates"], PLANET_DEFAULTS["schedule.train_phase_steps"],
            PLANET_DEFAULTS["schedule.collect_every"], PLANET_DEFAULTS["schedule.train_steps"]) == (200, 1000, 100, 400_000)


def test_default_yaml_equals_the_built_in_defaults():
    """`load_config()` without a file and configs/default.yaml are the same config, key by key."""
    assert load_config(CONFIGS / "default.yaml").to_dict() == Config().to_dict()


def test_action_repeats_of_pixel_tasks():
    assert load_config(CONFIGS / "cartpole_swingup.yaml").env.action_repeat == 8
    assert load_config(CONFIGS / "cheetah_run.yaml").env.action_repeat == 4


def test_set_overrides_parse_yaml_scalars():
    config = apply_overrides(load_config(), ["data.batch_size=16", "env.time_limit=null", "optim.jit_compile=true", "model.free_nats=2"])
    assert config.data.batch_size == 16 and config.env.time_limit is None
    assert config.optim.jit_compile is True and config.model.free_nats == 2.0


def test_yaml_1_2_floats_in_files_and_set(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e-4 and 3e6 as strings: `--set optim.learning_rate=1e-4` used to be refused."""
    path = tmp_path / "sci.yaml"
    path.write_text("optim:\n  learning_rate: 3e-4\n  adam_epsilon: 1.0E-5\n")
    config = load_config(path, ["schedule.train_steps=1e6", "model.free_nats=-0e0"])
    assert config.optim.learning_rate == 0.0003 and config.optim.adam_epsilon == 0.00001
    assert config.schedule.train_steps == 1_000_000 and isinstance(config.schedule.train_steps, int)
    assert load_config(path, ["env.task=gym:E1-v0"]).env.task == "gym:E1-v0"  # not a number: left a string


@pytest.mark.parametrize("item, key", [("data.batch_size=1:00", "data.batch_size"),
                                       ("data.wait_seconds=1:30", "data.wait_seconds"),
                                       ("data.wait_seconds=1:30.5", "data.wait_seconds")])
def test_base_60_numbers_of_yaml_1_1_are_refused_not_read_as_seconds(item, key):
    """PyYAML read `1:00` as 60 and `1:30` as 90 (YAML 1.1's base 60): a clock-like typo became a batch of 60."""
    with pytest.raises(ConfigError, match=re.escape(f"{key}='{item.split('=')[1]}' has the wrong type")):
        load_config(None, [item])


def test_integers_read_as_yaml_1_2_reads_them(tmp_path):
    """`010` is 10 (YAML 1.1: octal 8); `_` between digits and 0x hexadecimal are kept."""
    path = tmp_path / "ints.yaml"
    path.write_text("data:\n  batch_size: 010\n  chunk_length: 0x10\nschedule:\n  train_steps: 100_000\n")
    config = load_config(path)
    assert (config.data.batch_size, config.data.chunk_length, config.schedule.train_steps) == (10, 16, 100_000)
    assert load_config(None, ["seed=007"]).seed == 7


@pytest.mark.parametrize("item", ["data.batch_size=99999999999999999999", "model.deter_size=2147483648",
                                  "data.batch_size=1e30", "schedule.train_steps=-3000000000", "seed=.inf"])
def test_integers_beyond_int32_are_refused_at_validation(item):
    """They passed, then crashed TensorFlow with a traceback after the run's folder and config were written."""
    key = item.split("=")[0]
    with pytest.raises(ConfigError, match=re.escape(f"{key}=") + ".* is too large; a config's integers are at most "
                                          "2,147,483,647"):
        load_config(None, [item])
    assert load_config(None, ["schedule.train_steps=2147483647"]).schedule.train_steps == 2**31 - 1


@pytest.mark.parametrize("key", ["env.num_envs", "env.test_envs"])
def test_environment_processes_are_capped(key):
    """env.num_envs=1000 started a process of about 250 MB per environment."""
    with pytest.raises(ConfigError, match=re.escape(f"{key}=257: must be in [1, 256]")):
        load_config(None, ["env.obs=image", f"{key}=257"])
    assert getattr(load_config(None, [f"{key}=256"]).env, key.split(".")[1]) == 256


def test_infinity_where_it_means_something():
    config = load_config(None, ["data.wait_seconds=.inf", "optim.grad_clip=.inf"])  # wait forever, no clipping
    assert config.data.wait_seconds == config.optim.grad_clip == float("inf")


def test_a_key_written_twice_is_refused(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("data:\n  batch_size: 16\ndata:\n  chunk_length: 20\n")  # YAML keeps the last silently
    with pytest.raises(ConfigError, match=r"the key 'data' is written twice \(line 3\)"):
        load_config(path)
    path.write_text("? [a, b]\n: 1\n")  # a key YAML cannot hash: PyYAML's own one line, not a traceback
    with pytest.raises(ConfigError, match="found unhashable key"):
        load_config(path)


def test_setting_a_section_sets_the_keys_it_names_only():
    config = load_config(CONFIGS / "smoke.yaml", ["env={action_repeat: 3}"])
    assert config.env.action_repeat == 3 and config.env.task == "gym:Pendulum-v1"  # used to reset to the default


def test_typo_in_override_names_key_and_suggests():
    with pytest.raises(ConfigError, match=r"unknown config key 'data.batch_szie'.*did you mean 'data.batch_size'\?\)$"):
        apply_overrides(load_config(), ["data.batch_szie=16"])


def test_an_unknown_key_without_a_close_name_lists_its_section():
    with pytest.raises(ConfigError) as error:
        apply_overrides(load_config(), ["model.zzzqqq=1"])
    message = str(error.value)
    assert "did you mean" not in message and "allowed here: deter_size, stoch_size" in message and "obs_std" in message
    with pytest.raises(ConfigError, match=r"unknown config key 'modle' \(did you mean 'model'\?\)$"):
        apply_overrides(load_config(), ["modle.obs_std=1"])


def test_typo_in_file_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  deter_sise: 100\n")
    with pytest.raises(ConfigError, match=r"model.deter_sise.*did you mean 'model.deter_size'\?\)$"):
        load_config(path)


def test_a_section_that_is_no_mapping_is_one_line(tmp_path):
    path = tmp_path / "flat.yaml"
    path.write_text("env: 3\n")
    with pytest.raises(ConfigError, match=r"env must be a mapping of keys, got 3$"):
        load_config(path)


def test_unknown_section_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("trainer:\n  steps: 3\n")
    with pytest.raises(ConfigError, match="unknown config key 'trainer'"):
        load_config(path)


@pytest.mark.parametrize("override, message", [
    ("data.batch_size=abc", "data.batch_size='abc' has the wrong type; expected int"),
    ("data.batch_size=true", "expected int"),
    ("sac.alpha_lr=true", "sac.alpha_lr=True has the wrong type; expected float"),  # a bool is an int to Python
    ("env.obs=pixels", "choose one of image, state"),
    ("data.batch_size=-4", "data.batch_size=-4: must be > 0"),
    ("cem.horizon=0", "cem.horizon=0: must be > 0"),
    ("cem.top_k=2000", "cem.top_k=2000: must be <= cem.candidates"),
    ("env.task=Pendulum-v1", "must look like 'gym:Pendulum-v1'"),
    ("batch_size=3", "unknown config key 'batch_size'"),
    ("data.batch_size", "expected section.key=value"),
    ("cem.value_weight=-1", "cem.value_weight=-1.0: must be >= 0"),
    ("cem.select=best", "choose one of mean, elite"),
    ("cem.temperature=0", "cem.temperature=0.0: must be > 0"),
    ("cem.actor_std=-0.1", "cem.actor_std=-0.1: must be >= 0"),
    ("seed=-1", "seed=-1: must be in [0, 2147483647]"),  # numpy and gymnasium refuse negative seeds with a traceback
    ("env.seed=-3", "env.seed=-3: must be in [0, 2147483647]"),
    ("seed=5000000000", "seed=5000000000 is too large; a config's integers are at most 2,147,483,647"),  # dm_control: a traceback at 2**32
    ("cem.discount=.nan", "cem.discount=nan: must be in (0.0, 1.0]"),  # NaN compares false with every bound
    ("sac.tau=.nan", "sac.tau=nan: must be"),
    ("optim.learning_rate=.inf", "optim.learning_rate=inf: must be a finite number > 0"),
    ("model.free_nats=.inf", "model.free_nats=inf: must be a finite number >= 0"),
    ("model.free_nats=.nan", "model.free_nats=nan: must be a finite number >= 0"),
    ("sac.target_entropy=.nan", "sac.target_entropy=nan: must be a finite number (or null: -|A|)"),
    ("sac.target_entropy=-.inf", "sac.target_entropy=-inf: must be a finite number"),
    ("sac.min_std=0", "sac.min_std=0.0: must be in (0.0, 1.0]"),
    ("sac.min_std=2", "sac.min_std=2.0: must be in (0.0, 1.0]"),
    ("sac.min_alpha=-0.1", "sac.min_alpha=-0.1: must be >= 0"),
    ("sac.min_alpha=0.5", "sac.min_alpha=0.5 is above sac.init_alpha=0.1"),
    ("sac.min_alpha=0.15", "sac.min_alpha=0.15 is above sac.init_alpha=0.1"),  # just above: the temperature starts under
    ("model.kl_balance=1.0", "model.kl_balance=1.0: must be in (0, 1)"),
    ("model.kl_balance=0", "model.kl_balance=0.0: must be in (0, 1)"),
    ("model.augment_shift=-1", "model.augment_shift=-1: must be in [0, 16]"),
    ("model.foreground_weight=0.5", "model.foreground_weight=0.5: must be >= 1.0"),
])
def test_bad_values_are_rejected_with_a_clear_message(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_overrides(load_config(), [override])


@pytest.mark.parametrize("overrides, message", [
    (["optim.accumulate=3"], "optim.accumulate=3 splits each batch into equal micro-batches, so it must divide "
                             "data.batch_size=50"),
    (["sac.imagination_horizon=15"], "sac.imagination_horizon=15 imagines rollouts that sac.real_ratio=1.0 never uses"),
    (["model.overshooting_distance=4"], "model.overshooting_distance=4 computes a latent overshooting KL that "
                                        "model.overshooting_scale=0 leaves out of the loss"),
    (["sac.burn_in=46", "sac.n_step=4"], r"sac.burn_in=46 \+ sac.n_step=4 must be at most data.chunk_length - 1 = 49"),
    (["sac.real_ratio=0.5", "sac.imagination_horizon=2", "sac.n_step=3"],
     r"sac.real_ratio=0.5 mixes in imagined transitions, which need sac.imagination_horizon >= sac.n_step=3 \(it is 2\)"),
    (["env.obs=state", "env.test_envs=2"], "env.test_envs=2: parallel test episodes are for image tasks"),
    (["env.obs=state", "model.augment_shift=4"], "model.augment_shift=4 shifts images, and env.obs=state"),
    (["model.augment_target=shifted"], "model.augment_target=shifted shifts the image target as model.augment_shift"),
    (["model.value_scale=1", "sac.updates_per_step=0"], "model.value_scale=1.0 trains the model with the SAC critics"),
    (["model.value_scale=-1"], "model.value_scale"),
    (["env.obs=state", "model.foreground_weight=10"], "model.foreground_weight=10.0 weighs moving pixels, and env.obs=state"),
    (["model.foreground_mask=chunk_or_batch"], "model.foreground_mask=chunk_or_batch chooses the pixels that "
                                               "model.foreground_weight weights, and it is 1"),
    (["model.foreground_weight=10", "model.foreground_batch_threshold=0.2"],
     "model.foreground_batch_threshold=0.2 sets how far off the batch's background a pixel is weighted, and "
     "model.foreground_mask=chunk does not look at the batch"),
    (["model.foreground_mask=chunk_or_batch", "model.foreground_weight=10", "model.foreground_batch_threshold=0"],
     r"model.foreground_batch_threshold"),
])
def test_settings_that_would_fail_or_do_nothing_later_are_rejected_when_read(overrides, message):
    """Caught when the config is read, before a run directory is written (a run that failed at its first update
    would refuse the corrected config as a change), or where a key would silently have no effect."""
    with pytest.raises(ConfigError, match=message):
        apply_overrides(load_config(), overrides)


@pytest.mark.parametrize("overrides", [
    ["optim.accumulate=5"], ["optim.accumulate=50"],  # divisors of PlaNet's batch of 50
    ["sac.imagination_horizon=15", "sac.real_ratio=0.5"],
    ["model.overshooting_distance=4", "model.overshooting_scale=0.1"],
    ["sac.burn_in=46", "sac.n_step=3"],  # 49 = chunk_length - 1: one start per chunk
    ["sac.real_ratio=0.5", "sac.imagination_horizon=3", "sac.n_step=3"],  # one imagined 3-step transition per rollout
    ["sac.min_alpha=0.1"],  # the floor at the start value
    ["model.foreground_mask=chunk_or_batch", "model.foreground_weight=10"],
    ["model.foreground_mask=chunk_or_batch", "model.foreground_weight=10", "model.foreground_batch_threshold=0.2"],
])
def test_the_same_keys_in_working_combinations_are_accepted(overrides):
    apply_overrides(load_config(), overrides)


def test_actor_mean_needs_actor_trajectories():
    with pytest.raises(ConfigError, match="cem.actor_mean=true .* set cem.guide_fraction above 0"):
        apply_overrides(load_config(), ["cem.actor_mean=true", "cem.guide_fraction=0"])
    assert apply_overrides(load_config(), ["cem.actor_mean=true"]).cem.actor_mean


def test_missing_file_and_bad_yaml(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    path = tmp_path / "broken.yaml"
    path.write_text("env: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^\./broken\.yaml: not valid YAML"):  # named as typed, not as Path prints it
        load_config("./broken.yaml")


@pytest.mark.parametrize("text, kind", [("", "empty"), ("\n  \n", "empty"), ("# all commented out\n# env:\n", "only comments"),
                                        ("---\n# x\n...\n", "only comments"), ("null\n", "null"), ("~\n", "null")])
def test_a_config_file_with_no_settings_is_refused_not_taken_for_the_defaults(text, kind, tmp_path):
    """It trained PlaNet's full pixel run (400,000 updates) without a word; `{}` still says "defaults" on purpose."""
    path = tmp_path / "blank.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"blank.yaml: holds no settings \({kind}\); for PlaNet's defaults say so "
                                          r"with --config default"):
        load_config(path)
    path.write_text("{}\n")
    assert load_config(path) == load_config()


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("env: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_test_phases_due_by_hand():
    """schedule.first_test_phase=125, train_phase_steps=250 (the benchmark): phases at updates 125, 375, ..., 2375."""
    from planet_sac.config import ScheduleConfig

    schedule = ScheduleConfig(first_test_phase=125, train_phase_steps=250)
    assert [schedule.test_phases_due(step) for step in (0, 124, 125, 374, 375, 2374, 2375)] == [0, 0, 1, 1, 2, 9, 10]
    planet = ScheduleConfig(train_phase_steps=1000)  # null: after every train phase
    assert [planet.test_phases_due(step) for step in (999, 1000, 2999, 3000)] == [0, 1, 2, 3]
    later = ScheduleConfig(first_test_phase=12, train_phase_steps=10)  # the first later than train_phase_steps
    assert [later.test_phases_due(step) for step in (10, 11, 12, 21, 22)] == [0, 0, 1, 1, 2]


def test_config_modules_do_not_import_tensorflow():
    """The environment worker processes and `planet-sac configs` / `config-reference` load configs without TensorFlow."""
    import subprocess
    import sys

    code = ("import sys; import planet_sac; from planet_sac.config_docs import config_reference; "
            "from planet_sac.config_loading import find_config_file, load_config; "
            "load_config('smoke', ['sac.n_step=2']); config_reference(); find_config_file('pendulum'); planet_sac.load_config; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_heads_exploration_schedule_is_drqv2s_linear_one_by_hand():
    """linear(1.0, 0.1, 100000): 1.0 at 0, 0.55 halfway, 0.1 at and after 100,000 env steps; constant without steps."""
    from planet_sac.config import SACConfig

    schedule = SACConfig(exploration_noise=1.0, exploration_final=0.1, exploration_steps=100_000)
    for env_steps, expected in ((0, 1.0), (50_000, 0.55), (100_000, 0.1), (300_000, 0.1)):
        assert schedule.exploration_at(env_steps) == pytest.approx(expected, abs=1e-12)
    assert SACConfig(exploration_noise=0.3).exploration_at(77_000) == 0.3


@pytest.mark.parametrize("overrides, message", [
    (["sac.exploration_steps=1000"], "sac.exploration_steps=1000 schedules sac.exploration_noise, which is 0"),
    (["sac.exploration_noise=1.0", "sac.exploration_final=0.1"], "sac.exploration_final=0.1 is the end of a schedule"),
    (["sac.exploration_noise=1.0", "sac.exploration_steps=-5"], "sac.exploration_steps"),
    (["sac.exploration_share=0.5"], "sac.exploration_share=0.5 spreads sac.exploration_noise, which is 0"),
    (["sac.exploration_noise=1.0", "sac.exploration_share=0"], "sac.exploration_share"),
    (["sac.exploration_noise=1.0", "sac.exploration_share=1.5"], "sac.exploration_share"),
])
def test_the_exploration_schedule_keys_are_checked(overrides, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(load_config(CONFIGS / "smoke.yaml"), overrides)


@pytest.mark.parametrize("overrides, message", [
    (["sac.reset_every=-1"], "sac.reset_every=-1: must be >= 0"),
    (["sac.reset_rounds=-2", "sac.reset_every=5"], "sac.reset_rounds=-2: must be >= 0"),
    (["sac.reset_every=5", "sac.updates_per_step=0"], "sac.reset_every=5 starts over a head that sac.updates_per_step=0"),
    (["sac.reset_rounds=3"], "sac.reset_rounds=3 trains the head after each reset, and sac.reset_every=0 makes none"),
    (["sac.reset_every=5", "sac.reset_rounds=3", "optim.strategy=multi_worker", "optim.jit_compile=false"],
     "sac.reset_rounds runs on one worker's batches"),
])
def test_the_head_reset_keys_are_checked(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_overrides(load_config(CONFIGS / "smoke.yaml"), overrides)
    apply_overrides(load_config(CONFIGS / "smoke.yaml"), ["sac.reset_every=5", "sac.reset_rounds=3"])  # a valid pair


@pytest.mark.parametrize("overrides, message", [
    (["sac.imagined_targets=lambda"], "sac.imagined_targets=lambda sets the targets of imagined transitions, but "
                                      "sac.real_ratio=1.0 and sac.imagination_horizon=0 train on none"),
    (["sac.imagined_targets=lambda", "sac.imagination_horizon=2", "sac.actor_grad=dynamics"],  # rollouts, no half
     "sac.imagined_targets=lambda sets the targets of imagined transitions, but sac.real_ratio=1.0"),
    (["sac.return_lambda=0.5"], "sac.return_lambda=0.5 weighs the imagined returns"),
    (["sac.imagined_targets=td"], "sac.imagined_targets"),
])
def test_the_imagined_target_keys_are_checked(overrides, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(load_config(CONFIGS / "smoke.yaml"), overrides)


def test_lambda_targets_need_no_horizon_beyond_one_step_and_take_their_lambda():
    """n-step imagined targets need sac.imagination_horizon >= sac.n_step; lambda-returns start at every state."""
    base = load_config(CONFIGS / "smoke.yaml")
    with pytest.raises(ConfigError, match="sac.imagination_horizon >= sac.n_step=3"):
        apply_overrides(base, ["sac.n_step=3", "sac.imagination_horizon=2", "sac.real_ratio=0.5"])
    config = apply_overrides(base, ["sac.n_step=3", "sac.imagination_horizon=2", "sac.real_ratio=0.5", "sac.imagined_targets=lambda",
                                    "sac.return_lambda=0.5"])
    assert (config.sac.imagined_targets, config.sac.return_lambda) == ("lambda", 0.5)


def test_a_saved_config_reads_back_equal_and_leaves_no_temporary_file(tmp_path):
    """save_config writes through `config.yaml.tmp` and renames it: afterwards the folder holds config.yaml alone."""
    from planet_sac.config_loading import read_config_file, save_config

    config = apply_overrides(Config(), ["seed=7", "data.batch_size=8", "cem.actor_std=0.05"])
    path = tmp_path / "config.yaml"
    save_config(config, str(path))
    os.utime(path, ns=(1, 1))
    save_config(config, str(path))  # the same config: the file is left as it is
    assert path.stat().st_mtime_ns == 1
    changed = apply_overrides(config, ["seed=8"])
    save_config(changed, str(path))  # another one: written over it
    assert path.stat().st_mtime_ns != 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.yaml"]
    assert read_config_file(str(path)) == changed
    path.write_bytes(b"\xff\xfe not yaml")  # a damaged file is replaced, not read as the config's text
    save_config(config, str(path))
    assert read_config_file(str(path)) == config
