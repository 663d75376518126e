"""Hand-computed examples: every expected number is derived in the comments from ALGORITHMS.md."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.advantages import compute_advantages, make_config
from trainers.estimators.spo3 import SPO3State, adaptive_group_sizes, spo3_step_rewards
from trainers.step_batch import StepBatch

EPS = 1e-6


def rec(group, traj, step, state, reward, outcome, done, hist=None, first=True, **extra):
    """One step record; ``hist`` defaults to ``[state, unique prefix]``."""
    hist = hist if hist is not None else [state, 1000 * (traj + 1) + step]
    return dict(
        group_id=group,
        traj_id=traj,
        step=step,
        state_key=state,
        history_keys=hist,
        first_visit=first,
        reward=reward,
        outcome=outcome,
        done=done,
        **extra,
    )


def close(actual: torch.Tensor, expected: list[float], tol: float = 1e-5) -> None:
    torch.testing.assert_close(actual.double(), torch.tensor(expected, dtype=torch.float64), rtol=0, atol=tol)


# ------------------------------------------------------------------ GRPO


def test_grpo_two_rollout_group():
    # Rollout 0 wins in two steps (R = 1), rollout 1 fails in one step (R = 0).
    batch = StepBatch.from_records(
        [
            rec(0, 0, 0, 1, 0.0, 1.0, False),
            rec(0, 0, 1, 2, 1.0, 1.0, True),
            rec(0, 1, 0, 1, 0.0, 0.0, True),
        ]
    )
    # episode_stats="steps": values [1, 1, 0], mean 2/3, unbiased var (1/9 + 1/9 + 4/9) / 2 = 1/3,
    # std 0.577350: winner (1/3) / 0.577350 = 0.577350, loser (-2/3) / 0.577350 = -1.154700.
    close(compute_advantages("grpo", batch), [0.577350, 0.577350, -1.154700])
    # episode_stats="rollouts": values [1, 0], mean 0.5, std 0.707107: +-0.707106.
    config = make_config("grpo", episode_stats="rollouts")
    close(compute_advantages("grpo", batch, config), [0.707106, 0.707106, -0.707106])
    # norm="mean" with reward_scale 10 (verl-agent's 10 x won): 10 - 20/3 = 3.333333, 0 - 20/3.
    config = make_config("grpo", norm="mean", reward_scale=10.0)
    close(compute_advantages("grpo", batch, config), [3.333333, 3.333333, -6.666667])


def test_grpo_single_member_group_keeps_its_return():
    # A one-row group: mean 0, std 1, advantage R / (1 + eps). A one-rollout, two-row group
    # (episode_stats="steps"): rows [1, 1], std 0, advantage 0.
    batch = StepBatch.from_records(
        [
            rec(0, 0, 0, 1, 1.0, 1.0, True),
            rec(1, 1, 0, 1, 0.0, 1.0, False),
            rec(1, 1, 1, 2, 1.0, 1.0, True),
        ]
    )
    close(compute_advantages("grpo", batch), [1.0 / (1.0 + EPS), 0.0, 0.0])
    # Over rollouts both groups have one member: each row keeps R = 1.
    close(compute_advantages("grpo", batch, make_config("grpo", episode_stats="rollouts")), [1.0, 1.0, 1.0])


# ------------------------------------------------------------------ GiGPO


def test_gigpo_anchor_group():
    # gamma = 0.95. Rollout A (R = 1): s0 (r 0), s1 (r 1). Rollout B (R = 0): s0 with an
    # invalid action (r -0.1), s2 (r 0), s1 (r 0).
    batch = StepBatch.from_records(
        [
            rec(0, 0, 0, 10, 0.0, 1.0, False),
            rec(0, 0, 1, 11, 1.0, 1.0, True),
            rec(0, 1, 0, 10, -0.1, 0.0, False),
            rec(0, 1, 1, 12, 0.0, 0.0, False),
            rec(0, 1, 2, 11, 0.0, 0.0, True),
        ]
    )
    # Q: A = [0 + 0.95 * 1, 1] = [0.95, 1]; B = [-0.1, 0, 0].
    # Episode term over rows [1, 1, 0, 0, 0]: mean 0.4, var (2 * 0.36 + 3 * 0.16) / 4 = 0.3,
    # std 0.547723: A 0.6 / 0.547723 = 1.095445, B -0.4 / 0.547723 = -0.730297.
    # Anchor s0 = {0.95, -0.1}: mean 0.425, std 1.05 / sqrt 2 = 0.742462, z = +-0.707106.
    # Anchor s1 = {1, 0}: z = +-0.707106. Anchor s2 is a singleton: 0.
    expected = [
        1.095445 + 0.707106,
        1.095445 + 0.707106,
        -0.730297 - 0.707106,
        -0.730297,
        -0.730297 - 0.707106,
    ]
    advantages, diagnostics = compute_advantages("gigpo", batch, return_diagnostics=True)
    close(advantages, expected)
    # Anchors s0 (2 rows), s1 (2), s2 (1): mean size 5/3, one singleton in three.
    assert diagnostics["anchor/mean_size"] == pytest.approx(5 / 3)
    assert diagnostics["anchor/singleton_frac"] == pytest.approx(1 / 3)
    assert diagnostics["groups/all_zero_frac"] == 0.0 and diagnostics["groups/mean_rollouts"] == 2.0
    # omega = 0.5 halves the step term only.
    halved = [1.095445 + 0.353553, 1.095445 + 0.353553, -0.730297 - 0.353553, -0.730297, -0.730297 - 0.353553]
    close(compute_advantages("gigpo", batch, make_config("gigpo", omega=0.5)), halved)


def test_gigpo_anchor_groups_stay_within_a_task_group():
    # The same state key in two task groups forms two singleton anchors: step term 0 each.
    batch = StepBatch.from_records(
        [
            rec(0, 0, 0, 10, 1.0, 1.0, True),
            rec(1, 1, 0, 10, 0.0, 0.0, True),
        ]
    )
    close(compute_advantages("gigpo", batch), [1.0 / (1.0 + EPS), 0.0])


# ------------------------------------------------------------------ ProGPO-C


def test_progpo_c_ranks_all_failed_rollouts_by_coverage():
    # Group 0 fails everywhere. Rollout 0 visits s1, s2, s3 (C = 3), rollout 1 visits
    # s1, s1, s2 (f = 1, 0, 1: C = 2), rollout 2 stays at s1 (C = 1).
    visits = {0: [1, 2, 3], 1: [1, 1, 2], 2: [1, 1, 1]}
    records = []
    for traj, states in visits.items():
        seen: set[int] = set()
        for t, s in enumerate(states):
            records.append(rec(0, traj, t, s, 0.0, 0.0, t == 2, first=s not in seen))
            seen.add(s)
    # Group 1 has a winner and a loser, one step each.
    records += [rec(1, 3, 0, 1, 1.0, 1.0, True), rec(1, 4, 0, 1, 0.0, 0.0, True)]
    batch = StepBatch.from_records(records)
    advantages = compute_advantages("progpo_c", batch)
    # C = [3, 2, 1]: mean 2, std 1, z = [1, 0, -1] / (1 + eps); lambda = 0.1; GRPO gives 0 there.
    expected_failed = [0.1] * 3 + [0.0] * 3 + [-0.1] * 3
    # Group 1 keeps GRPO's advantages: rows [1, 0], mean 0.5, std 0.707107 -> +-0.707106.
    close(advantages, expected_failed + [0.707106, -0.707106])
    diagnostics = compute_advantages("progpo_c", batch, return_diagnostics=True)[1]
    assert diagnostics["groups/all_zero_frac"] == 0.5 and diagnostics["coverage/active_frac"] == 1.0
    assert diagnostics["coverage/failed_mean"] == 2.0  # (3 + 2 + 1) / 3
    close(advantages[9:], compute_advantages("grpo", batch)[9:].tolist(), tol=0)
    assert advantages[0] > advantages[3] > advantages[6]


def test_progpo_c_step_level_adds_new_states_ahead():
    # Two failed rollouts of two steps; rollout 0 reaches a new state after each step,
    # rollout 1 never does (f_{t+1} = 1, 1 versus 0, 0).
    batch = StepBatch.from_records(
        [
            rec(0, 0, 0, 1, 0.0, 0.0, False, first=True),
            rec(0, 0, 1, 2, 0.0, 0.0, True, first=True, next_state_key=3, next_first_visit=True),
            rec(0, 1, 0, 1, 0.0, 0.0, False, first=True),
            rec(0, 1, 1, 1, 0.0, 0.0, True, first=False, next_state_key=1, next_first_visit=False),
        ]
    )
    config = make_config("progpo_c", level="step")
    # C = [2, 1]: z = +-0.707106. U (gamma 0.95): rollout 0 = [1 + 0.95, 1] = [1.95, 1],
    # rollout 1 = [0, 0]. Anchor s1 = rows {0, 2, 3} with U {1.95, 0, 0}: mean 0.65,
    # std sqrt((1.69 + 0.4225 * 2) / 2) = 1.125833: z = [1.154700, -0.577350, -0.577350];
    # anchor s2 = row 1 alone: 0.
    expected = [
        0.1 * (0.707106 + 1.154700),
        0.1 * (0.707106 + 0.0),
        0.1 * (-0.707106 - 0.577350),
        0.1 * (-0.707106 - 0.577350),
    ]
    close(compute_advantages("progpo_c", batch, config), expected)


# ------------------------------------------------------------------ ProGPO-R


def test_progpo_r_singleton_prefix_gets_fused_potential_credit():
    # history_keys = [depth-0 key, exact prefix]. One group, gamma 0.95, m = 2, kappa = 4.
    # Rollout A (R = 1): s0 (prefix P0, r 0) -> s1 (prefix PA, r 1).
    # Rollout B (R = 0): s0 (prefix P0, r 0) -> s1 (prefix PB, r 0).
    batch = StepBatch.from_records(
        [
            rec(0, 0, 0, 1, 0.0, 1.0, False, hist=[100, 200]),
            rec(0, 0, 1, 2, 1.0, 1.0, True, hist=[101, 201]),
            rec(0, 1, 0, 1, 0.0, 0.0, False, hist=[100, 200]),
            rec(0, 1, 1, 2, 0.0, 0.0, True, hist=[101, 202]),
        ]
    )
    advantages, diagnostics = compute_advantages("progpo_r", batch, return_diagnostics=True)
    # Prior p0 = 0.5 (the group's mean outcome), m = 2.
    # Step-0 rows: depth 0 and prefix both n = 2, S = 1: Phi_d = (1 + 2 p0) / 4 = 0.5 -> Phi = 0.5.
    # Step-1 rows, depth 0 (key 101, n = 2, S = 1): Phi_0 = 0.5, Var_0 = 0.25 / 5 = 0.05, weight 20.
    # Prefix PA (n = 1, S = 1): Phi = (1 + 1) / 3 = 2/3, Var = (2/9) / 4 = 1/18, weight 18.
    # Prefix PB (n = 1, S = 0): Phi = 1/3, Var = 1/18, weight 18.
    phi_a = (20 * 0.5 + 18 * (2 / 3)) / 38  # = 22/38 = 0.578947
    phi_b = (20 * 0.5 + 18 * (1 / 3)) / 38  # = 16/38 = 0.421053
    # Reliability: V = 1/38, n_eff = Phi (1 - Phi) * 38 = 352/38 for both, rho = 352 / 504.
    rho = (phi_a * (1 - phi_a) * 38) / (phi_a * (1 - phi_a) * 38 + 4)
    assert rho == pytest.approx(352 / 504)
    # Credits c = r + 0.95 Phi(next) - Phi: A0 0.95 * 22/38 - 0.5 = 0.05, A1 1 - 22/38,
    # B0 0.95 * 16/38 - 0.5 = -0.1, B1 -16/38; z over the task group's four rows.
    credit = [0.05, 1 - phi_a, -0.1, -phi_b]
    mean = sum(credit) / 4
    std = math.sqrt(sum((c - mean) ** 2 for c in credit) / 3)
    z_a1, z_b1 = (credit[1] - mean) / (std + EPS), (credit[3] - mean) / (std + EPS)
    # Episode term over rows [1, 1, 0, 0]: +-0.5 / 0.577350 = +-0.866025.
    # Step-0 rows share prefix P0 (|P| = 2): z(Q) with Q = [0.95, 0] gives +-0.707106.
    expected = [0.866025 + 0.707106, 0.866025 + rho * z_a1, -0.866025 - 0.707106, -0.866025 + rho * z_b1]
    close(advantages, expected)
    # The numbers: rho = 0.698413, z_a1 = 1.240499, z_b1 = -1.168970.
    assert (rho, z_a1, z_b1) == pytest.approx((0.698413, 1.240499, -1.168970), abs=1e-5)
    # Prefix groups P0 (2 rows), PA, PB: mean size 4/3, two singletons in three, half the rows.
    assert diagnostics["prefix/mean_size"] == pytest.approx(4 / 3)
    assert diagnostics["prefix/singleton_frac"] == pytest.approx(2 / 3)
    assert diagnostics["prefix/singleton_row_frac"] == 0.5
    assert diagnostics["potential/reliability_mean"] == pytest.approx(352 / 504)


def test_progpo_r_semantic_key_joins_only_below_n_min():
    # Same batch shape; a semantic key pools the two step-1 observations with a third,
    # successful visit in another rollout (n_sem = 3, S_sem = 2), only for |P| < 2 rows.
    records = [
        rec(0, 0, 0, 1, 0.0, 1.0, False, hist=[100, 200], semantic_key=7),
        rec(0, 0, 1, 2, 1.0, 1.0, True, hist=[101, 201], semantic_key=8),
        rec(0, 1, 0, 1, 0.0, 0.0, False, hist=[100, 200], semantic_key=7),
        rec(0, 1, 1, 2, 0.0, 0.0, True, hist=[101, 202], semantic_key=8),
        rec(0, 2, 0, 3, 1.0, 1.0, True, hist=[102, 203], semantic_key=8),
    ]
    from trainers.estimators.common import BatchIndex
    from trainers.estimators.progpo_r import fused_potentials

    batch = StepBatch.from_records(records)
    phi, variance, used = fused_potentials(batch, BatchIndex.build(batch), make_config("progpo_r"))
    assert used.tolist() == [False, True, False, True, True]
    # Row A1: p0 = 2/3. Depth 0 (n 2, S 1): Phi = (1 + 4/3) / 4 = 7/12, Var = (7/12)(5/12) / 5.
    # Prefix (n 1, S 1): Phi = (1 + 4/3) / 3 = 7/9, Var = (7/9)(2/9) / 4.
    # Semantic (n 3, S 2): Phi = (2 + 4/3) / 5 = 2/3, Var = (2/3)(1/3) / 6.
    parts = [
        (7 / 12, (7 / 12) * (5 / 12) / 5),
        (7 / 9, (7 / 9) * (2 / 9) / 4),
        (2 / 3, (2 / 3) * (1 / 3) / 6),
    ]
    precision = sum(1 / v for _, v in parts)
    assert float(phi[1]) == pytest.approx(sum(p / v for p, v in parts) / precision, abs=1e-9)
    assert float(variance[1]) == pytest.approx(1 / precision, abs=1e-12)


# ------------------------------------------------------------------ 3SPO


def test_spo3_two_iterations_with_the_filter_firing():
    # xi = 2 and alpha = 1 keep the numbers readable; zeta = 0.1, omega_k = 0.1, mean norm.
    config = make_config("3spo", xi=2.0, alpha=1.0)
    state = SPO3State(config)
    s0, s1, s2 = 1, 2, 3

    # Iteration 1: both rollouts fail along s0 -> s1.
    first = StepBatch.from_records(
        [
            rec(0, 0, 0, s0, 0.0, 0.0, False),
            rec(0, 0, 1, s1, 0.0, 0.0, True),
            rec(0, 1, 0, s0, 0.0, 0.0, False),
            rec(0, 1, 1, s1, 0.0, 0.0, True),
        ]
    )
    # Table with this batch: s0 (N_total 2, N_succ 0), s1 (2, 0); N_fail = 2 is not < xi and
    # 0 / 2 is not > zeta, so the filter zeroes both: S = 0. omega(s0) = 0.5 e^-0.2 = 0.409365.
    # R(s0 -> s1) = 0.409365 * 1 + (0.5 - 0.409365) * (0 - 0) = 0.409365; last steps: 0.
    rewards, parts = spo3_step_rewards(first, config, state)
    close(rewards, [0.409365, 0.0, 0.409365, 0.0])
    assert parts["filtered"].all()
    advantages, diagnostics = compute_advantages("3spo", first, config, state, return_diagnostics=True)
    close(advantages, [0.0, 0.0, 0.0, 0.0])  # equal rewards within each anchor group
    assert diagnostics["spo3/filtered_frac"] == 1.0
    assert state.num_rollouts == 0  # compute_advantages does not touch the state
    state.update(first)
    assert state.tau == 3
    assert state.counts(torch.tensor([s0, s1])) == (pytest.approx([2.0, 2.0]), pytest.approx([0.0, 0.0]))

    # Iteration 2: A fails along s0 -> s1, B wins along s0 -> s2.
    second = StepBatch.from_records(
        [
            rec(0, 0, 0, s0, 0.0, 0.0, False),
            rec(0, 0, 1, s1, 0.0, 0.0, True),
            rec(0, 1, 0, s0, 0.0, 1.0, False),
            rec(0, 1, 1, s2, 1.0, 1.0, True),
        ]
    )
    # Table: s0 (4, 1), s1 (3, 0), s2 (1, 1); tau = 1 + 4 = 5, lambda = ln 5.
    # S(s0): N_fail 3 >= xi but 1/4 > zeta: kept, exp(-ln5 / 4) = 0.668740.
    # S(s1): N_fail 3, ratio 0: filtered, 0.  S(s2): exp(-ln5) = 0.2.
    # omega(s0) = 0.5 e^-0.4 = 0.335160, 0.5 - omega = 0.164840.
    # R_A0 = 0.335160 + 0.164840 * (0.668740 - 0) = 0.445395
    # R_B0 = 0.335160 + 0.164840 * (0.668740 - 0.2) = 0.412427; R_B1 = 0.5 r_succ = 0.5.
    rewards, _ = spo3_step_rewards(second, config, state)
    close(rewards, [0.445395, 0.0, 0.412427, 0.5])
    # Anchor s0 = {0.445395, 0.412427}, mean 0.428911: +-0.016484; s1, s2 singletons: 0.
    close(compute_advantages("3spo", second, config, state), [0.016484, 0.0, -0.016484, 0.0])
    state.update(second)

    # Adaptive group sizes n = ceil(8 S(s)): s0 8 * 0.668740 = 5.35 -> 6, s1 filtered -> 0,
    # s2 8 * 0.2 = 1.6 -> 2, an unvisited state -> 8.
    assert adaptive_group_sizes([s0, s1, s2, 99], state, config) == [6, 0, 2, 8]
    assert adaptive_group_sizes([s0], None, config) == [8]


def test_spo3_state_round_trip_and_explored_actions():
    config = make_config("3spo")
    state = SPO3State(config)
    state.update(StepBatch.from_records([rec(0, 0, 0, 5, 1.0, 1.0, True, next_state_key=6)]))
    state.mark_explored(5, 42)
    restored = SPO3State(config)
    restored.load_state_dict(state.state_dict())
    assert restored.num_rollouts == 1 and restored.explored_actions(5) == frozenset({42})
    # The terminal observation's key (next_state_key of the last step) counts as visited.
    assert restored.counts(torch.tensor([5, 6, 7])) == (
        pytest.approx([1.0, 1.0, 0.0]),
        pytest.approx([1.0, 1.0, 0.0]),
    )


# ------------------------------------------------------------------ review fixes (group sizes, lone rollouts)


def _table(state: SPO3State, rows: dict[int, tuple[float, float]], rollouts: int) -> SPO3State:
    """``state`` with a hand-built table ``key -> (N_total, N_succ)`` and ``rollouts`` recorded."""
    from trainers.estimators.key_table import KeyTable

    keys = sorted(rows)
    state.table = KeyTable.empty(2).merge(torch.tensor(keys), torch.tensor([rows[k] for k in keys]))
    state.last_seen = torch.zeros(len(keys), dtype=torch.long)
    state.num_rollouts = rollouts
    return state


def test_spo3_group_size_of_a_tiny_positive_score_is_one():
    from trainers.branching import BranchingCollector

    # s1 = (7 visits, 2 successes), tau = 13 (12 rollouts recorded): lambda = 50 ln 13 = 128.247468,
    # S = exp(-128.247468 * 2 / 7) = 1.2205e-16 > 0, and N_fail = 5 < xi keeps s1: n = ceil(8 S) = 1.
    # s2 = (1, 1) at tau = 1e9 + 1: S = exp(-50 ln(1e9 + 1)) underflows float64 to 0, yet it is > 0.
    # s3 = (20, 0): N_fail 20 >= xi and ratio 0 <= zeta: the filter gives S = 0, n = 0.
    s1, s2, s3, fresh = 11, 12, 13, 99
    state = _table(SPO3State(), {s1: (7.0, 2.0), s3: (20.0, 0.0)}, 12)
    assert float(state.score(torch.tensor([s1]))[0]) == pytest.approx(1.2205e-16, rel=1e-3)
    assert adaptive_group_sizes([s1, s3, fresh], state) == [1, 0, 8]
    # The DFS reads the same rule at every state (capped by the task's slots).
    collector = BranchingCollector(None, state)  # type: ignore[arg-type]
    assert collector._width(state, {"state_key": s1}, 8) == 1
    assert collector._width(state, {"state_key": s3}, 8) == 0
    assert collector._width(state, {"state_key": fresh}, 3) == 3
    late = _table(SPO3State(), {s2: (1.0, 1.0)}, 10**9)
    assert float(late.score(torch.tensor([s2]))[0]) == 0.0
    assert adaptive_group_sizes([s2], late) == [1]
    assert BranchingCollector(None, late)._width(late, {"state_key": s2}, 8) == 1  # type: ignore[arg-type]


def _lone_rollout(outcome: float, last_reward: float) -> list[dict]:
    # One rollout: s0 -> s1 -> s0 -> s2 (a revisit of s0), an invalid action at t = 1.
    return [
        rec(0, 0, 0, 1, 0.0, outcome, False, first=True),
        rec(0, 0, 1, 2, -0.1, outcome, False, first=True),
        rec(0, 0, 2, 1, 0.0, outcome, False, first=False),
        rec(0, 0, 3, 3, last_reward, outcome, True, first=True),
    ]


def test_spo3_lone_rollout_gets_no_update():
    # Prior table: s2 (key 3) is hopeless (20 failures: S = 0). With this failed rollout counted,
    # s0 = (1, 0), s1 = (1, 0): S = 1; omega(s0) = 0.5 e^-0.1 = 0.452419.
    # R_0 (s0 -> s1) = 0.452419 + 0.047581 (1 - 1) = 0.452419; R_2 (s0 -> s2) = 0.452419 + 0.047581 (1 - 0)
    # = 0.5. Anchor s0 = {0.452419, 0.5} would give [-0.023791, 0, +0.023791, 0] (mean norm), but the
    # rollout is alone in its group: n = 1 rolls out without update, so every row gets 0.
    config = make_config("3spo")
    state = _table(SPO3State(config), {3: (20.0, 0.0)}, 20)
    batch = StepBatch.from_records(_lone_rollout(0.0, 0.0))
    rewards, _ = spo3_step_rewards(batch, config, state)
    close(rewards, [0.452419, 0.452419, 0.5, 0.0])
    close(compute_advantages("3spo", batch, config, state), [0.0, 0.0, 0.0, 0.0])
    # A one-step lone winner with the episode term on: the term alone would give R / (1 + eps) = 1.0.
    winner = StepBatch.from_records([rec(0, 0, 0, 5, 1.0, 1.0, True)])
    close(compute_advantages("3spo", winner, make_config("3spo", add_episode=True)), [0.0])
    # A group of two rollouts next to a lone one: only the lone group is silenced.
    pair = _lone_rollout(0.0, 0.0) + [
        rec(1, 1, 0, 1, 0.0, 0.0, False),
        rec(1, 1, 1, 2, 0.0, 0.0, True),
        rec(1, 2, 0, 1, 0.0, 1.0, False),
        rec(1, 2, 1, 4, 1.0, 1.0, True),
    ]
    advantages = compute_advantages("3spo", StepBatch.from_records(pair), config, state)
    assert advantages[:4].abs().sum() == 0 and advantages[4:].abs().sum() > 0


def test_lone_rollout_rules_of_the_other_estimators():
    gamma = 0.95
    won = StepBatch.from_records(_lone_rollout(1.0, 1.0))
    lost = StepBatch.from_records(_lone_rollout(0.0, 0.0))
    one_step = StepBatch.from_records([rec(0, 0, 0, 5, 1.0, 1.0, True)])
    # GRPO (verl-agent): over the group's step rows, four rows of R = 1 have std 0: z = 0; over
    # rollouts (or with a single row) the lone member keeps its return, R / (1 + eps).
    close(compute_advantages("grpo", won), [0.0] * 4)
    rollouts = make_config("grpo", episode_stats="rollouts")
    close(compute_advantages("grpo", won, rollouts), [1.0 / (1.0 + EPS)] * 4)
    close(compute_advantages("grpo", one_step), [1.0 / (1.0 + EPS)])
    # GiGPO: the episode term as GRPO; the step term compares the rollout's own revisits of s0.
    # Q = [0.95 * 0.8025, -0.1 + 0.95 * 0.95, 0.95, 1] = [0.762375, 0.8025, 0.95, 1]; anchor s0 =
    # {0.762375, 0.95}: z = -+0.707107 (two members); s1, s2 singletons: 0.
    assert 0.762375 == pytest.approx(gamma * (-0.1 + gamma * gamma))
    close(compute_advantages("gigpo", won), [-0.707107, 0.0, 0.707107, 0.0])
    # ProGPO-C: no peer, so z(C_i | group) = 0; in this all-failed group the GRPO base is 0 as well.
    close(compute_advantages("progpo_c", lost), [0.0] * 4)
    # ProGPO-R: every visit's outcome is the prior p_0 = 0, so Phi = 0 and c_t = r_t = [0, -0.1, 0, 0]:
    # mean -0.025, std 0.05, z = [0.5, -1.5, 0.5, 0.5] / (1 + 2e-5). Every exact prefix is unique, so
    # the potential term applies, with rho = n_eff / (n_eff + 4), n_eff = sum_d (n_d + m + 1) (Phi
    # floored): s0's rows (depth 0 n = 2, prefix n = 1) 9, the others 8: rho = 9/13, 8/12.
    z = [0.5 / (1 + 2e-5), -1.5 / (1 + 2e-5), 0.5 / (1 + 2e-5), 0.5 / (1 + 2e-5)]
    expected = [9 / 13 * z[0], 8 / 12 * z[1], 9 / 13 * z[2], 8 / 12 * z[3]]
    close(compute_advantages("progpo_r", lost), expected)
