"""Cross-iteration state (3SPO table, ProGPO-R moving averages) against the reference over iterations."""

from __future__ import annotations

import pytest
import torch

from benchmarks.reference_advantages import (
    Interner,
    random_batch,
    ref_adaptive_sizes,
    ref_progpo_r,
    ref_progpo_r_update,
    ref_spo3,
    ref_spo3_update,
    rows_of,
)
from trainers.advantages import compute_advantages, make_config, make_state
from trainers.estimators.progpo_r import ProGPORState
from trainers.estimators.spo3 import SPO3State, adaptive_group_sizes


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"xi": 2.0, "alpha": 1.0, "per_task": True},
        {"alpha": 0.3, "zeta": 0.4, "use_returns": True},
        {"refusals": 0.3},
        {"refusals": 0.3, "per_task": True, "alpha": 1.0},
        {"refusals": 0.3, "refusal_keeps_state": False},
    ],
)
def test_spo3_state_matches_reference_over_iterations(overrides):
    overrides = dict(overrides)
    refusals = overrides.pop("refusals", 0.0)
    config = make_config("3spo", **overrides)
    state = make_state("3spo", config)
    assert isinstance(state, SPO3State)
    intern = Interner()  # shared: the same state gets the same key in every iteration
    table: dict = {}
    rollouts = 0
    for iteration in range(4):
        batch = random_batch(
            10 + iteration, intern, num_groups=4, terminal_keys=True, unfinished=0.2, refusals=refusals
        )
        rows = rows_of(batch)
        expected = torch.tensor(ref_spo3(rows, config, table, rollouts), dtype=torch.float64)
        torch.testing.assert_close(
            compute_advantages("3spo", batch, config, state).double(),
            expected,
            rtol=1e-5,
            atol=1e-5,
            msg=f"iteration {iteration}",
        )
        state.update(batch)
        table, rollouts = ref_spo3_update(rows, config, table, rollouts)
        assert state.num_rollouts == rollouts
        keys = sorted(table)
        total, succ = state.counts(torch.tensor(keys))
        assert total.tolist() == [table[k][0] for k in keys] and succ.tolist() == [table[k][1] for k in keys]
        assert len(state.table) == len(table)
        initial = [intern(("s", 0)), intern(("s", 1)), 10**9]
        if config.per_task:
            initial = [int(k) for k in batch.history_keys[:3, 0]]
        assert adaptive_group_sizes(initial, state, config) == ref_adaptive_sizes(
            initial, config, table, rollouts
        )


def test_progpo_r_state_matches_reference_over_iterations():
    config = make_config("progpo_r", ema_decay=0.5)
    state = make_state("progpo_r", config)
    assert isinstance(state, ProGPORState)
    intern = Interner()
    table: dict = {}
    for iteration in range(3):
        batch = random_batch(20 + iteration, intern, num_groups=4, semantic=True)
        rows = rows_of(batch)
        expected = torch.tensor(ref_progpo_r(rows, config, table), dtype=torch.float64)
        torch.testing.assert_close(
            compute_advantages("progpo_r", batch, config, state).double(),
            expected,
            rtol=1e-5,
            atol=1e-5,
            msg=f"iteration {iteration}",
        )
        state.update(batch)
        table = ref_progpo_r_update(rows, config, table)
        keys = sorted(table)
        pooled = state.table.lookup(torch.tensor(keys))
        torch.testing.assert_close(pooled, torch.tensor([table[k] for k in keys], dtype=torch.float64))
    # The table changes the advantages (a test that the state is actually read).
    fresh = compute_advantages("progpo_r", batch, config)
    assert not torch.allclose(fresh, compute_advantages("progpo_r", batch, config, state))


@pytest.mark.parametrize("name", ["3spo", "progpo_r"])
def test_state_dict_round_trip(name):
    config = make_config(name)
    state = make_state(name, config)
    intern = Interner()
    for seed in range(2):
        state.update(random_batch(seed, intern, semantic=True))
    restored = make_state(name, config)
    restored.load_state_dict(state.state_dict())
    batch = random_batch(5, intern, semantic=True)
    torch.testing.assert_close(
        compute_advantages(name, batch, config, state), compute_advantages(name, batch, config, restored)
    )
    assert all(t.device.type == "cpu" for t in state.state_dict()["table"].values())


def test_stateless_estimators_have_no_state_and_wrong_state_type_fails():
    assert make_state("grpo") is None and make_state("gigpo") is None
    with pytest.raises(TypeError, match="SPO3State"):
        compute_advantages("3spo", random_batch(0), state=ProGPORState())


@pytest.mark.parametrize("keeps_state", [True, False])
def test_spo3_pays_no_refusal(keeps_state):
    """Hand-computed: a refusal ("Nothing happens.", key 9, 20 visits and no success, so the
    filter sets S = 0) taken from A (5 visits, no success: S = 1, ω = 0.5 e^-0.5 = 0.3033).

    Rollout 0: A --refused--> NH --valid--> B (unvisited: S = 1). Rollout 1: A --valid--> B.
    Keyed as an observation, the refusal earns ω + (0.5 - ω)(S(A) - S(NH)) = 0.5, more than the
    valid move's 0.3033, and the step out of it ω(20) + (0.5 - ω(20))(0 - 1) = -0.3647.
    With the state kept across it, the refusal earns 0 and the step out of it is A -> B (0.3033).
    """
    from trainers.estimators.key_table import KeyTable
    from trainers.estimators.spo3 import spo3_step_rewards
    from trainers.step_batch import StepBatch

    config = make_config("3spo", refusal_keeps_state=keeps_state)
    state = SPO3State(config)
    state.table = KeyTable.empty(2).merge(torch.tensor([1, 9]), torch.tensor([[5.0, 0.0], [20.0, 0.0]]))
    state.num_rollouts = 25
    A, B, NH = 1, 2, 9

    def row(traj, step, key, next_key, refused):
        return dict(group_id=0, traj_id=traj, step=step, state_key=key, history_keys=[key],
                    first_visit=True, next_state_key=next_key, next_first_visit=True,
                    reward=0.0, outcome=0.0, done=False, refused=refused)  # fmt: skip

    batch = StepBatch.from_records([row(0, 0, A, NH, True), row(0, 1, NH, B, False), row(1, 0, A, B, False)])
    rewards, _ = spo3_step_rewards(batch, config, state)
    omega_a, omega_nh = 0.5 * torch.exp(torch.tensor(-0.5)), 0.5 * torch.exp(torch.tensor(-2.0))
    if keeps_state:
        expected = [0.0, omega_a, omega_a]
    else:
        expected = [0.5, omega_nh - (0.5 - omega_nh), omega_a]
    torch.testing.assert_close(rewards, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-6)
