"""An estimator registered here alone gets its group sizes, rollout mode, record fields and checks.

Nothing in ``trainers/trainer.py`` or ``trainers/config.py`` names it: the registration's hooks
(``trainers.advantages.EstimatorSpec``) are all the trainer reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
import torch
from trainer_configs import small_step_config

from agentgym_rl import GroupVectorEnv
from trainers.advantages import _REGISTRY, register_estimator
from trainers.estimator_configs import EstimatorConfig
from trainers.tiny_models import tiny_qwen2_path
from trainers.trainer import StepGRPOTrainer

NAME = "hooks_demo"


@dataclass
class HooksDemoConfig(EstimatorConfig):
    """A constant advantage per row."""

    value: float = field(default=1.0, metadata={"help": "The advantage of every row."})


@pytest.fixture
def calls():
    """Registers ``hooks_demo`` for one test; yields what its hooks saw."""
    seen: dict[str, list] = {"group_sizes": [], "collect": [], "configure": [], "check": []}

    def constant(batch, config, state=None):
        return torch.full((batch.num_rows,), config.value), {}

    def group_sizes(initial_keys, state, config, group_size):
        seen["group_sizes"].append((list(initial_keys), group_size))
        return [1, group_size][: len(initial_keys)]  # one rollout for the first task, all for the second

    def configure(collector, config):
        seen["configure"].append(config)

    def check(args):
        seen["check"].append(args.num_tasks)
        if args.num_tasks > 2:
            raise ValueError(f"hooks_demo trains on 2 tasks at most, got num_tasks={args.num_tasks}")

    def branching(base, state, config, args):
        def collect(request):  # the plain collector, recording that this mode was the one used
            seen["collect"].append(request)
            return base.collect(request.generate, request.tasks, request.group_sizes, seed=request.seed)

        return collect

    register_estimator(
        NAME,
        constant,
        config_cls=HooksDemoConfig,
        group_sizes=group_sizes,
        rollout_modes={"branching": branching},
        configure_collector=configure,
        check_args=check,
    )
    yield seen
    _REGISTRY.pop(NAME)


@pytest.fixture(scope="module")
def envs():
    envs = GroupVectorEnv(
        "AgentGymRL/ALFWorld-v0", num_tasks=2, group_size=2, workers=1, split="train", data_dir="generated",
        max_episode_steps=2,  # short episodes: this is about which hooks run
    )  # fmt: skip
    yield envs
    envs.close()


def _config(tmp_path, **overrides):
    values = dict(
        estimator=NAME,
        estimator_kwargs={"value": 0.5},
        num_tasks=2,
        group_size=2,
        max_env_steps=2,
        per_device_train_batch_size=4,
        max_completion_length=4,  # a random model only babbles: short replies keep the step fast
        learning_rate=0.1,  # gradients of a random tiny model are tiny
    )
    values.update(overrides)
    return small_step_config(tmp_path / "out", **values)


@pytest.mark.parametrize("branching", [False, True])
def test_a_registered_estimator_drives_the_trainer_through_its_hooks(branching, calls, envs, tmp_path):
    args = _config(tmp_path, branching=branching)
    assert calls["check"] == [2]  # StepGRPOConfig ran the estimator's checks
    assert args.rollout_mode == ("branching" if branching else "episodes")
    trainer = StepGRPOTrainer(model=str(tiny_qwen2_path()), args=args, envs=envs)
    assert trainer.estimator_config == HooksDemoConfig(value=0.5)
    assert calls["configure"] == [trainer.estimator_config]  # asked for its record fields once
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    # Its group sizes: unseen tasks come with the unknown key 0, and the env's slots per task.
    assert calls["group_sizes"] == [([0, 0], 2)]
    rollout = trainer.last_rollout
    per_group: dict[int, int] = {}
    for episode in rollout.episodes:
        per_group[episode.group_id] = per_group.get(episode.group_id, 0) + 1
    assert sorted(per_group.values()) == [1, 2]
    # Its rollout mode, only when the config asks for it.
    assert len(calls["collect"]) == int(branching)
    if branching:
        request = calls["collect"][0]
        assert request.group_sizes == [1, 2] and len(request.tasks) == 2
    # Its advantages fed the loss: a constant 0.5 on every row moves every parameter.
    log = trainer.state.log_history[0]
    assert log["advantages/mean"] == pytest.approx(0.5) and math.isfinite(log["loss"])
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(before[n], p)]
    assert not unchanged, unchanged


def test_the_config_runs_the_estimator_checks_and_knows_its_rollout_modes(calls, tmp_path):
    with pytest.raises(ValueError, match="2 tasks at most"):
        _config(tmp_path, num_tasks=3)
    # post_step is a mode hooks_demo does not declare: the error names the estimators that do.
    with pytest.raises(ValueError, match=r"'post_step' rollout mode.*set estimator='3spo'"):
        _config(tmp_path, post_step_updates=2)
    # branching is declared by two estimators now
    with pytest.raises(ValueError, match=r"set estimator to one of \['3spo', 'hooks_demo'\]"):
        _config(tmp_path, estimator="grpo", estimator_kwargs={}, branching=True)
    with pytest.raises(ValueError, match=r"Did you mean 'valu' -> 'value'"):
        _config(tmp_path, estimator_kwargs={"valu": 1.0})


def test_an_unknown_estimator_is_refused_by_the_config(tmp_path):
    with pytest.raises(ValueError, match="Did you mean 'gigpo'"):
        small_step_config(tmp_path, estimator="gipgo")


def test_a_flag_prefix_must_be_an_identifier():
    with pytest.raises(ValueError, match="flag_prefix"):
        register_estimator("9lives", lambda batch, config, state=None: (torch.zeros(batch.num_rows), {}))
    assert "9lives" not in _REGISTRY
