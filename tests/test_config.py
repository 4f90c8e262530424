import pytest

from planet_sac.config import ConfigError, apply_overrides, load_config
from tests.conftest import CONFIGS


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load(path):
    config = load_config(path)
    config.validate()


def test_default_yaml_is_plaNet_defaults():
    config = load_config(CONFIGS / "default.yaml")
    assert (config.data.batch_size, config.data.chunk_length) == (50, 50)
    assert (config.model.deter_size, config.model.stoch_size, config.model.hidden_size) == (200, 30, 200)
    assert config.model.free_nats == 3.0
    assert (config.optim.learning_rate, config.optim.adam_epsilon, config.optim.grad_clip) == (1e-3, 1e-4, 1000.0)
    assert (config.cem.horizon, config.cem.candidates, config.cem.iterations, config.cem.top_k) == (12, 1000, 10, 100)
    assert config.schedule.collect_every == 100 and config.cem.exploration_noise == 0.3 and config.data.seed_episodes == 5


def test_action_repeats_of_pixel_tasks():
    assert load_config(CONFIGS / "cartpole_swingup.yaml").env.action_repeat == 8
    assert load_config(CONFIGS / "cheetah_run.yaml").env.action_repeat == 4


def test_set_overrides_parse_yaml_scalars():
    config = apply_overrides(load_config(), ["data.batch_size=16", "env.time_limit=null", "optim.jit_compile=true", "model.free_nats=2"])
    assert config.data.batch_size == 16 and config.env.time_limit is None
    assert config.optim.jit_compile is True and config.model.free_nats == 2.0


def test_typo_in_override_names_key_and_suggests():
    with pytest.raises(ConfigError, match=r"unknown config key 'data.batch_szie'.*did you mean 'batch_size'"):
        apply_overrides(load_config(), ["data.batch_szie=16"])


def test_typo_in_file_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  deter_sise: 100\n")
    with pytest.raises(ConfigError, match=r"model.deter_sise.*did you mean 'deter_size'"):
        load_config(path)


def test_unknown_section_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("trainer:\n  steps: 3\n")
    with pytest.raises(ConfigError, match="unknown config key 'trainer'"):
        load_config(path)


@pytest.mark.parametrize("override, message", [
    ("data.batch_size=abc", "data.batch_size='abc' has the wrong type; expected int"),
    ("data.batch_size=true", "expected int"),
    ("env.obs=pixels", "choose one of image, state"),
    ("data.batch_size=-4", "data.batch_size=-4: must be > 0"),
    ("cem.horizon=0", "cem.horizon=0: must be > 0"),
    ("cem.top_k=2000", "cem.top_k=2000: must be <= cem.candidates"),
    ("env.task=Pendulum-v1", "must look like 'gym:Pendulum-v1'"),
    ("batch_size=3", "unknown config key 'batch_size'"),
    ("data.batch_size", "expected section.key=value"),
])
def test_bad_values_are_rejected_with_a_clear_message(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        apply_overrides(load_config(), [override])


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    path = tmp_path / "broken.yaml"
    path.write_text("env: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("env: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
