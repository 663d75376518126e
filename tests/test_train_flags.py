"""``agentgym-rl train``: estimator settings as flags, one --help group per estimator; the env in a YAML."""

from __future__ import annotations

import dataclasses
import os

import pytest

from agentgym_cli.commands.train import parse_args
from agentgym_cli.main import main
from trainers.advantages import get_estimator, list_estimators
from trainers.estimator_configs import GiGPOEstimatorConfig

#: A non-default value of one field per estimator, as a flag value and as the config holds it.
SAMPLES = {
    "grpo": ("--grpo_norm", "mean", {"norm": "mean"}),
    "gigpo": ("--gigpo_omega", "0.5", {"omega": 0.5}),
    "progpo_c": ("--progpo_c_coverage_lambda", "0.25", {"coverage_lambda": 0.25}),
    "progpo_r": ("--progpo_r_ema_decay", "0.5", {"ema_decay": 0.5}),
    "3spo": ("--spo3_alpha", "10", {"alpha": 10.0}),
}


def _parse(tmp_path, *argv: str):
    script_args, config = parse_args(
        [*argv, "--output_dir", str(tmp_path / "out"), "--use_cpu", "True", "--report_to", "none"]
    )
    return config


def _error(capsys, tmp_path, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        _parse(tmp_path, *argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_help_shows_one_group_per_estimator_with_every_field(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in list_estimators():
        spec = get_estimator(name)
        assert f"estimator {name} (with --estimator {name}):" in out
        for f in dataclasses.fields(spec.config_cls):
            assert f"--{spec.flag_prefix}_{f.name} " in out, (name, f.name)
    # the help gives the estimator's default, not argparse's "not given"
    assert "Weight omega of the anchor-state step term. (default: 1.0)" in " ".join(out.split())


def test_every_estimator_is_covered_here():
    assert set(SAMPLES) == set(list_estimators())


@pytest.mark.parametrize("estimator", sorted(SAMPLES))
def test_a_flag_sets_the_same_config_as_estimator_kwargs(estimator, tmp_path):
    flag, value, fields = SAMPLES[estimator]
    by_flag = _parse(tmp_path, "--estimator", estimator, flag, value)
    by_kwargs = _parse(
        tmp_path, "--estimator", estimator, "--estimator_kwargs", str(fields).replace("'", '"')
    )
    assert by_flag.estimator_kwargs == by_kwargs.estimator_kwargs == fields
    assert by_flag.make_estimator_config() == by_kwargs.make_estimator_config()
    default = get_estimator(estimator).config_cls()
    assert all(getattr(by_flag.make_estimator_config(), k) != getattr(default, k) for k in fields)
    # the hyphenated spelling is an alias
    hyphenated = _parse(tmp_path, "--estimator", estimator, flag.replace("_", "-"), value)
    assert hyphenated.estimator_kwargs == fields


def test_flags_of_each_type(tmp_path):
    config = _parse(
        tmp_path, "--estimator", "3spo", "--spo3_per_task", "--spo3_max_states", "none", "--spo3_g_max", "4"
    )
    assert config.estimator_kwargs == {"per_task": True, "max_states": None, "g_max": 4}
    config = _parse(tmp_path, "--estimator", "progpo_r", "--progpo_r_depth_columns", "0", "2")
    assert config.make_estimator_config().depth_columns == (0, 2)
    config = _parse(tmp_path, "--estimator", "progpo_c", "--progpo_c_failed_threshold", "1.0")
    assert config.make_estimator_config().failed_threshold == 1.0
    # a flag and estimator_kwargs that agree are no conflict
    config = _parse(tmp_path, "--gigpo_omega", "0.5", "--estimator_kwargs", '{"omega": 0.5, "gamma": 0.9}')
    assert config.estimator_kwargs == {"omega": 0.5, "gamma": 0.9}


def test_conflicting_unknown_and_bad_estimator_flags_fail_clearly(capsys, tmp_path):
    err = _error(capsys, tmp_path, "--gigpo_omega", "0.7", "--estimator_kwargs", '{"omega": 0.5}')
    assert "--gigpo_omega 0.7" in err and "'omega': 0.5" in err and "keep one" in err
    err = _error(capsys, tmp_path, "--estimator", "grpo", "--gigpo_omega", "0.5")
    assert "--gigpo_omega: a flag of estimator 'gigpo'" in err and "--estimator gigpo" in err
    assert "--grpo_<field>" in err
    err = _error(capsys, tmp_path, "--estimator", "gigpo", "--gigpo_omga", "0.5")
    assert "--gigpo_omga" in err
    err = _error(capsys, tmp_path, "--estimator", "gigpo", "--estimator_kwargs", '{"omga": 0.5}')
    assert "Did you mean 'omga' -> 'omega'" in err
    err = _error(capsys, tmp_path, "--estimator", "grpo", "--grpo_norm", "zscore")  # the config's own check
    assert "norm='zscore'" in err
    err = _error(capsys, tmp_path, "--gigpo_omega", "half")
    assert "invalid float value: 'half'" in err


def test_yaml_sets_estimator_fields_and_flags_override_it(tmp_path):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("estimator: gigpo\ngigpo_omega: 0.25\ngigpo_step_penalty: own_step\n")
    config = _parse(tmp_path, "--config", str(yaml_file))
    assert config.estimator_kwargs == {"omega": 0.25, "step_penalty": "own_step"}
    config = _parse(tmp_path, "--config", str(yaml_file), "--gigpo_omega", "0.75")
    assert config.estimator_kwargs == {"omega": 0.75, "step_penalty": "own_step"}
    nested = tmp_path / "nested.yaml"
    nested.write_text("estimator: gigpo\nestimator_kwargs:\n  omega: 0.25\n  step_penalty: own_step\n")
    expected = GiGPOEstimatorConfig(omega=0.25, step_penalty="own_step")
    assert _parse(tmp_path, "--config", str(nested)).make_estimator_config() == expected


def test_yaml_sets_the_env_with_env_id_and_env_is_trls_environment(tmp_path, capsys, monkeypatch):
    yaml_file = tmp_path / "env.yaml"
    yaml_file.write_text("env_id: webshop\n")
    assert _parse(tmp_path, "--config", str(yaml_file)).env_id == "AgentGymRL/WebShop-v0"
    assert _parse(tmp_path, "--env", "webshop").env_id == "AgentGymRL/WebShop-v0"  # the flag alias
    # `env: webshop` (meaning the env) is refused with the fix, before TRL's own error
    yaml_file.write_text("env: webshop\n")
    err = _error(capsys, tmp_path, "--config", str(yaml_file))
    assert "env_id: webshop" in err and "environment" in err
    # `env:` as a mapping stays TRL's: environment variables
    monkeypatch.delenv("AGENTGYM_RL_TEST_VAR", raising=False)
    yaml_file.write_text("env:\n  AGENTGYM_RL_TEST_VAR: '1'\nenv_id: bandit\n")
    config = _parse(tmp_path, "--config", str(yaml_file))
    assert config.env_id == "AgentGymRL/TextBandit-v0" and os.environ.pop("AGENTGYM_RL_TEST_VAR") == "1"
    err = _error(capsys, tmp_path, "--env", "alfwrold")
    assert "unknown env 'alfwrold'" in err and "alfworld" in err
