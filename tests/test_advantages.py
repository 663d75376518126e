"""Vectorized estimators equal the plain-Python reference on seeded random batches; registry and batch API."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch

from benchmarks.reference_advantages import REFERENCES, Interner, random_batch, random_records, rows_of
from trainers.advantages import (
    compute_advantages,
    get_estimator,
    list_estimators,
    make_config,
    make_state,
    register_estimator,
)
from trainers.estimator_configs import GRPOEstimatorConfig, ProGPOCEstimatorConfig
from trainers.step_batch import StepBatch

SEEDS = range(6)

# (estimator, config overrides, batch options): defaults plus every option of ALGORITHMS.md.
CASES = [
    ("grpo", {}, {}),
    ("grpo", {"norm": "mean", "reward_scale": 10.0}, {}),
    ("grpo", {"episode_stats": "rollouts"}, {}),
    ("gigpo", {}, {}),
    ("gigpo", {"norm": "mean", "gamma": 0.5, "omega": 0.7, "episode_stats": "rollouts"}, {}),
    ("gigpo", {"enable_similarity": True}, {"anchor": True}),
    ("progpo_c", {}, {}),
    ("progpo_c", {"base": "gigpo", "level": "step"}, {"terminal_keys": True}),
    ("progpo_c", {"coverage_per_step": True, "failed_threshold": 1.0, "coverage_stats": "steps"}, {}),
    ("progpo_c", {"base": "gigpo", "replace_base": True, "norm": "mean", "coverage_lambda": 0.5}, {}),
    ("progpo_r", {}, {}),
    ("progpo_r", {}, {"semantic": True}),
    ("progpo_r", {"depth_columns": (0, -1), "always_both": True, "min_prefix_visits": 3}, {"semantic": True}),
    (
        "progpo_r",
        {"outcome_in_reward": False, "norm": "mean", "omega_prefix": 0.5, "omega_potential": 2.0},
        {},
    ),
    ("3spo", {}, {"terminal_keys": True, "unfinished": 0.2}),
    ("3spo", {"alpha": 1.0, "xi": 3.0}, {"terminal_keys": True, "paths": True}),
    ("3spo", {"per_task": True, "xi": 2.0, "alpha": 1.0}, {}),
    (
        "3spo",
        {"use_returns": True, "add_episode": True, "norm": "std", "alpha": 0.5},
        {"terminal_keys": True},
    ),
    # At the trainer's reward scale 10 (verl-agent's): success and potentials read the unscaled scores.
    ("grpo", {"norm": "mean"}, {"scale": 10.0}),
    ("gigpo", {}, {"scale": 10.0}),
    ("progpo_c", {"failed_threshold": 1.0}, {"scale": 10.0}),
    ("progpo_r", {}, {"scale": 10.0, "semantic": True}),
    ("3spo", {"add_episode": True, "alpha": 1.0}, {"scale": 10.0, "terminal_keys": True}),
    # Episode signals and verl-agent's placement of the invalid-action penalty.
    ("grpo", {"episode_signal": "return"}, {}),
    ("grpo", {"episode_signal": "verl_agent", "episode_stats": "rollouts"}, {"penalties": True}),
    ("gigpo", {"episode_signal": "verl_agent", "step_penalty": "own_step"}, {"penalties": True}),
    ("gigpo", {"episode_signal": "return", "norm": "mean", "episode_stats": "rollouts"}, {}),
    (
        "gigpo",
        {"episode_signal": "verl_agent", "step_penalty": "own_step"},
        {"penalties": True, "scale": 10.0},
    ),
    (
        "progpo_c",
        {"base": "gigpo", "episode_signal": "return", "step_penalty": "own_step"},
        {"penalties": True},
    ),
    ("progpo_r", {"episode_signal": "verl_agent"}, {"penalties": True}),
    ("3spo", {"add_episode": True, "episode_signal": "return"}, {"terminal_keys": True}),
]


@pytest.mark.parametrize("name,overrides,batch_options", CASES)
def test_vectorized_matches_reference(name, overrides, batch_options):
    config = make_config(name, **overrides)
    for seed in SEEDS:
        batch = random_batch(seed, **batch_options)
        advantages = compute_advantages(name, batch, config)
        expected = torch.tensor(REFERENCES[name](rows_of(batch), config), dtype=torch.float64)
        assert advantages.dtype == torch.float32 and advantages.shape == (batch.num_rows,)
        torch.testing.assert_close(advantages.double(), expected, rtol=1e-5, atol=1e-5, msg=f"seed {seed}")


@pytest.mark.parametrize("name", ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"])
def test_row_order_does_not_matter(name):
    records = random_records(random.Random(7), terminal_keys=True)
    shuffled = list(records)
    random.Random(8).shuffle(shuffled)
    first = compute_advantages(name, StepBatch.from_records(records))
    second = compute_advantages(name, StepBatch.from_records(shuffled))
    position = {id(r): i for i, r in enumerate(shuffled)}
    permutation = torch.tensor([position[id(r)] for r in records])
    torch.testing.assert_close(first, second[permutation], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"])
def test_nan_free_on_degenerate_batches(name):
    # Long rollouts of one repeated state, all-failed groups and single rollouts.
    for seed in range(4):
        batch = random_batch(seed, num_states=1, max_len=12, max_group=2, num_actions=1)
        advantages, diagnostics = compute_advantages(name, batch, return_diagnostics=True)
        assert torch.isfinite(advantages).all()
        assert all(value == value for value in diagnostics.values()), diagnostics


@pytest.mark.parametrize("name", ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"])
def test_empty_batch(name):
    advantages, diagnostics = compute_advantages(
        name, StepBatch.empty(history_width=3), return_diagnostics=True
    )
    assert advantages.shape == (0,) and advantages.dtype == torch.float32
    assert diagnostics == {}
    assert StepBatch.from_records([]).num_rows == 0


def test_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    for name in list_estimators():
        batch = random_batch(3, semantic=True, terminal_keys=True)
        cpu = compute_advantages(name, batch, state=make_state(name))
        gpu = compute_advantages(name, batch.to("cuda"), state=make_state(name))
        assert gpu.device.type == "cuda"
        torch.testing.assert_close(cpu, gpu.cpu(), rtol=1e-5, atol=1e-5)


def test_discounted_returns_long_rollout_is_exact():
    # 3,000 steps: a gamma**-t rescaling would overflow; the doubling scan does not.
    n, gamma = 3000, 0.95
    records = [
        dict(
            group_id=0,
            traj_id=0,
            step=t,
            state_key=t + 1,
            history_keys=[t + 1],
            first_visit=True,
            reward=1.0,
            outcome=0.0,
            done=t == n - 1,
        )
        for t in range(n)
    ]
    from trainers.estimators.common import BatchIndex
    from trainers.segment_ops import discounted_returns

    batch = StepBatch.from_records(records)
    returns = discounted_returns(batch.reward.double(), BatchIndex.build(batch).layout, gamma)
    expected = torch.tensor([(1 - gamma ** (n - t)) / (1 - gamma) for t in range(n)], dtype=torch.float64)
    torch.testing.assert_close(returns, expected, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ StepBatch


def test_from_records_derives_next_state_and_accepts_objects():
    @dataclass
    class StepRecord:
        group_id: str
        traj_id: str
        step: int
        state_key: int
        history_keys: tuple[int, ...]
        first_visit: bool
        reward: float
        outcome: float
        done: bool

    records = [
        StepRecord("task-a", "roll-1", 1, 20, (2, 3), True, 1.0, 1.0, True),
        StepRecord("task-a", "roll-1", 0, 10, (1, 4), True, 0.0, 1.0, False),
        StepRecord("task-b", "roll-2", 0, 10, (1, 5), True, 0.0, 0.0, True),
    ]
    batch = StepBatch.from_records(records)
    assert batch.group_id.tolist() == [0, 0, 1] and batch.traj_id.tolist() == [0, 0, 1]
    assert batch.next_state_key.tolist() == [0, 20, 0]
    assert batch.next_first_visit.tolist() == [False, True, False]
    assert batch.prefix_key.tolist() == [3, 4, 5]
    assert batch.reward.dtype == torch.float32 and batch.done.dtype == torch.bool


def test_from_records_errors_name_the_fix():
    good = dict(
        group_id=0,
        traj_id=0,
        step=0,
        state_key=1,
        history_keys=[1],
        first_visit=True,
        reward=0.0,
        outcome=0.0,
        done=True,
    )
    with pytest.raises(ValueError, match="missing \\['outcome'\\]"):
        StepBatch.from_records([{k: v for k, v in good.items() if k != "outcome"}])
    with pytest.raises(ValueError, match="same history depths"):
        StepBatch.from_records([good, good | {"history_keys": [1, 2]}])
    with pytest.raises(ValueError, match="every record or none"):
        StepBatch.from_records([good | {"semantic_key": 3}, good | {"traj_id": 1}])


def test_to_device_roundtrip():
    batch = random_batch(0, semantic=True)
    moved = batch.to("cpu")
    assert moved is batch
    assert moved.semantic_key is not None and moved.device.type == "cpu"


# ------------------------------------------------------------------ registry and configs


def test_unknown_estimator_suggests_a_name():
    with pytest.raises(ValueError, match="Did you mean 'gigpo'"):
        get_estimator("gigp0")


def test_register_custom_estimator_by_name():
    @dataclass
    class ConstantConfig:
        value: float = 0.5

    def constant(batch, config, state=None):
        return torch.full((batch.num_rows,), config.value, dtype=torch.float64), {}

    register_estimator("constant_test", constant, config_cls=ConstantConfig)
    try:
        advantages = compute_advantages("constant_test", random_batch(0), ConstantConfig(2.0))
        assert advantages.dtype == torch.float32 and bool((advantages == 2.0).all())
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("constant_test", constant, config_cls=ConstantConfig)
    finally:
        from trainers import advantages as registry

        registry._REGISTRY.pop("constant_test")


def test_wrong_config_type_is_rejected():
    with pytest.raises(TypeError, match="GiGPOEstimatorConfig"):
        compute_advantages("gigpo", random_batch(0), GRPOEstimatorConfig())


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"norm": "zscore"}, "norm='zscore'"),
        ({"episode_stats": "episodes"}, "episode_stats"),
        ({"base": "ppo"}, "base='ppo'"),
        ({"level": "token"}, "level='token'"),
        ({"gamma": 1.5}, "gamma=1.5"),
        ({"coverage_lambda": -1.0}, "coverage_lambda"),
    ],
)
def test_config_validation_names_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ProGPOCEstimatorConfig(**kwargs)


def test_depth_column_out_of_range():
    with pytest.raises(ValueError, match="depth_columns holds 7"):
        compute_advantages("progpo_r", random_batch(0), make_config("progpo_r", depth_columns=(7,)))


def test_similarity_needs_anchor_keys():
    with pytest.raises(ValueError, match="anchor_key"):
        compute_advantages("gigpo", random_batch(0), make_config("gigpo", enable_similarity=True))


def test_every_config_field_has_help():
    from dataclasses import fields

    for name in list_estimators():
        for field in fields(get_estimator(name).config_cls):
            assert field.metadata.get("help"), f"{name}: field {field.name} lacks help"


def test_interner_keys_nonzero():
    intern = Interner()
    assert intern("a") == 1 and intern("b") == 2 and intern("a") == 1


# ------------------------------------------------------------------ segment ops and key helpers


def test_dense_ids_survives_a_crafted_mixing_collision():
    from trainers.segment_ops import _MIX, dense_ids

    # key_b ^ (1 * C) == key_a ^ (0 * C): the one-sort path collides and must fall back.
    key_a = 123456789
    key_b = key_a ^ _MIX
    groups = torch.tensor([0, 1, 1, 0])
    keys = torch.tensor([key_a, key_b, key_a, key_a])
    ids, num = dense_ids((groups, 2), keys)
    assert num == 3
    assert ids[0] == ids[3] and len({int(ids[0]), int(ids[1]), int(ids[2])}) == 3


def test_layout_with_sparse_steps_uses_the_sorting_path():
    from trainers.segment_ops import TrajectoryLayout, discounted_returns

    # Steps 0 and 5000 of one rollout, 0 of another, shuffled: the key range is too wide
    # for counting placement, so rows are sorted.
    layout = TrajectoryLayout.build(torch.tensor([1, 0, 1]), torch.tensor([5000, 0, 0]))
    assert layout.next_row.tolist() == [-1, -1, 0]
    returns = discounted_returns(torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64), layout, 0.5)
    assert returns.tolist() == [1.0, 2.0, 4.5]


def test_semantic_keys_and_similarity_anchors():
    from trainers.semantic import canonical_text, semantic_state_key, similarity_anchor_keys

    assert (
        canonical_text("On the desk 1, you see a pen 3, and a apple 2.")
        == "a apple, on the desk, you see a pen"
    )
    assert semantic_state_key("a pen 1, a apple 2", "t") == semantic_state_key("A apple 7, and a pen 1.", "t")
    assert semantic_state_key("a pen 1", "t") != semantic_state_key("a pen 1", "u")
    observations = [
        "You arrive at loc 12. On the countertop 1, you see a apple 1, a bread 2.",
        "You arrive at loc 12. On the countertop 1, you see a apple 1, a bread 3.",
        "You arrive at loc 12. On the countertop 1, you see a apple 1, a bread 3.",
        "Nothing happens.",
    ]
    keys = similarity_anchor_keys(observations, [0, 0, 1, 0])
    # Rows 0 and 1 differ by one character (ratio >= 0.95) within group 0 and share the
    # representative's key; row 2 is alone in group 1, so it is its own representative.
    from agentgym_rl.keys import state_key

    assert keys[0] == keys[1] == state_key(observations[0])
    assert keys[2] == state_key(observations[2]) != keys[1]
    assert keys[3] == state_key("Nothing happens.")
    with pytest.raises(ValueError, match="group ids"):
        similarity_anchor_keys(observations, [0])


# ------------------------------------------------------------------ edge cases


def _identical_rollouts(outcome: float, reward: float) -> StepBatch:
    # Two task groups, three identical rollouts each: s1 -> s2 -> s3, same rewards. (A
    # revisit would put two different steps of one rollout in one anchor group.)
    records = []
    for group in range(2):
        for copy in range(3):
            traj = 3 * group + copy
            for t in range(3):
                records.append(
                    dict(
                        group_id=group,
                        traj_id=traj,
                        step=t,
                        state_key=t + 1,
                        history_keys=[t + 1, 100 * group + t],
                        first_visit=True,
                        reward=reward + (outcome if t == 2 else 0.0),
                        outcome=outcome,
                        done=t == 2,
                    )
                )
    return StepBatch.from_records(records)


@pytest.mark.parametrize("name", ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"])
@pytest.mark.parametrize("outcome,reward", [(0.0, 0.0), (1.0, -0.1), (0.5, 0.0)])
def test_identical_rollouts_give_zero_advantages(name, outcome, reward):
    # All rewards equal within every comparison group: nothing to prefer, every estimator gives 0.
    advantages = compute_advantages(name, _identical_rollouts(outcome, reward))
    torch.testing.assert_close(advantages, torch.zeros(18), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"])
def test_one_rollout_per_group(name):
    records = [r for r in random_records(random.Random(3), num_groups=6, max_group=1)]
    batch = StepBatch.from_records(records)
    assert int(batch.traj_id.unique().numel()) == 6
    advantages, diagnostics = compute_advantages(name, batch, return_diagnostics=True)
    assert torch.isfinite(advantages).all()
    assert diagnostics["groups/singleton_frac"] == 1.0
    expected = torch.tensor(REFERENCES[name](rows_of(batch), make_config(name)), dtype=torch.float64)
    torch.testing.assert_close(advantages.double(), expected, rtol=1e-5, atol=1e-5)
    if name == "grpo":  # over rollouts a lone rollout keeps its return
        rollouts = compute_advantages(name, batch, make_config(name, episode_stats="rollouts"))
        torch.testing.assert_close(rollouts, batch.outcome / (1 + 1e-6))
