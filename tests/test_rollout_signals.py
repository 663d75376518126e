"""What the rollout collector records for the estimators: success/score signals, semantic and anchor keys.

Scripted games (``tests/scripted_envs.py``) give known scores, rewards and observations:
the success-based quantities of every estimator must not move with ``reward_scale``, the
outcome must be what the env paid, and the keys semantic expansion reads must be there.
"""

from __future__ import annotations

import pytest
import torch
from scripted_envs import End, ScriptedGame, ScriptedGroupEnv, first_policy, kth_policy

from trainers.advantages import compute_advantages, make_config
from trainers.estimators.common import BatchIndex, all_failed_groups
from trainers.estimators.progpo_r import fused_potentials
from trainers.estimators.spo3 import SPO3State, spo3_step_rewards
from trainers.prompting import PromptConfig
from trainers.rollout import RolloutCollector
from trainers.step_batch import StepBatch


def _shop(task: str, ends: dict[str, End]) -> ScriptedGame:
    """A one-page shop: each action buys one item and ends the episode as ``ends`` says."""
    text = {"start": f"Shop {task}. Your task is to: buy a red mug under 10 dollars."}
    text |= {name: f"Thank you for shopping. You bought the {name}." for name in ends}
    return ScriptedGame("start", text, {"start": {f"buy {name}": name for name in ends}}, ends)


#: WebShop with reward_type="score" (reward = score): a win and a 0.25 buy; a 0.25 and a 0.5 buy
#: (nobody wins); two 0-score buys (all failed).
SCORED = {
    "mixed": _shop("mixed", {"exact mug": End(True, 1.0, 1.0), "cheap mug": End(False, 0.25, 0.25)}),
    "partial": _shop("partial", {"cheap mug": End(False, 0.25, 0.25), "blue mug": End(False, 0.5, 0.5)}),
    "failed": _shop("failed", {"red hat": End(False, 0.0, 0.0), "red sock": End(False, 0.0, 0.0)}),
}


def _collect(games: dict[str, ScriptedGame], reward_scale: float, policy=kth_policy) -> tuple:
    envs = ScriptedGroupEnv(games, num_tasks=len(games), group_size=2)
    collector = RolloutCollector(envs, PromptConfig(env_kind="alfworld"), reward_scale=reward_scale)
    rollout = collector.collect(policy, list(games), seed=0)
    return rollout, StepBatch.from_records(rollout.records)


def test_success_signals_do_not_move_with_the_reward_scale():
    (_, one), (_, ten) = _collect(SCORED, 1.0), _collect(SCORED, 10.0)
    # Loss side: outcomes and rewards scale (verl-agent's 10 x reward) ...
    assert one.outcome.tolist() == [1.0, 0.25, 0.25, 0.5, 0.0, 0.0]
    torch.testing.assert_close(ten.outcome, 10 * one.outcome)
    torch.testing.assert_close(ten.reward, 10 * one.reward)

    # 3SPO: only the exact mug (score 1) is a success; the 0.25 buy at scale 10 (R = 2.5) is not.
    config = make_config("3spo")
    rewards = [spo3_step_rewards(batch, config)[0] for batch in (one, ten)]
    torch.testing.assert_close(rewards[0], rewards[1], rtol=0, atol=0)
    states = []
    for batch in (one, ten):
        state = SPO3State(config)
        state.update(batch)
        states.append(state)
    start_keys = torch.unique(one.state_key)  # the three tasks' first pages
    for state in states:
        assert sorted(state.counts(start_keys)[1].tolist()) == [0.0, 0.0, 1.0]
    torch.testing.assert_close(
        compute_advantages("3spo", one, config), compute_advantages("3spo", ten, config), rtol=0, atol=0
    )
    # The env's score in [0, 1] does not scale: success and potentials read it.
    assert one.score.tolist() == ten.score.tolist() == [1.0, 0.25, 0.25, 0.5, 0.0, 0.0]

    # ProGPO-R: potentials and their variances (Beta estimates of a success rate) stay in [0, 1].
    progpo = make_config("progpo_r")
    fused = [fused_potentials(b, BatchIndex.build(b), progpo) for b in (one, ten)]
    for a, b in zip(fused[0], fused[1], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    phi = fused[0][0]
    assert bool(((phi >= 0) & (phi <= 1)).all())
    # "mixed": p_0 = (1 + 0.25) / 2 = 0.625, the start key seen twice with S = 1.25: Phi = 0.625.
    assert float(phi[0]) == pytest.approx(0.625)

    # GRPO / GiGPO / ProGPO-C: the all-failed groups (the env paid nothing) are the same, and so
    # are the WebShop-style "all below 1" groups.
    for threshold in (None, 1.0):
        masks = [all_failed_groups(BatchIndex.build(b), threshold).tolist() for b in (one, ten)]
        assert masks[0] == masks[1] == ([False, False, True] if threshold is None else [False, True, True])
    for name in ("grpo", "gigpo", "progpo_c"):
        diagnostics = [compute_advantages(name, b, return_diagnostics=True)[1] for b in (one, ten)]
        assert diagnostics[0]["groups/all_zero_frac"] == diagnostics[1]["groups/all_zero_frac"] == 1 / 3
    coverage = make_config("progpo_c", failed_threshold=1.0)
    fractions = [compute_advantages("progpo_c", b, coverage, return_diagnostics=True)[1] for b in (one, ten)]
    assert fractions[0]["coverage/failed_frac"] == fractions[1]["coverage/failed_frac"] == 2 / 3


def test_env_side_won_shaping_makes_an_all_failed_group():
    # WebShop with reward_type="won" and the env's reward_scale=10: buys scoring 0.75 and 0.5 pay
    # r_T = 10 * won = 0. R_i must be what the env paid (0), so the group is all-failed for
    # ProGPO-C (coverage ranks it) and GRPO gives it no signal; the scores stay 0.75 and 0.5.
    games = {
        "won-shaped": _shop(
            "won-shaped", {"red mug": End(False, 0.75, 0.0), "pink mug": End(False, 0.5, 0.0)}
        ),
        "won-shaped-win": _shop(
            "won-shaped-win", {"exact mug": End(True, 1.0, 10.0), "pink mug": End(False, 0.5, 0.0)}
        ),
    }
    _, batch = _collect(games, 1.0)
    assert batch.outcome.tolist() == [0.0, 0.0, 10.0, 0.0]
    assert batch.score.tolist() == [0.75, 0.5, 1.0, 0.5]
    assert all_failed_groups(BatchIndex.build(batch)).tolist() == [True, False]
    _, diagnostics = compute_advantages("progpo_c", batch, return_diagnostics=True)
    assert diagnostics["coverage/failed_frac"] == 0.5
    assert compute_advantages("grpo", batch)[:2].abs().sum() == 0
    # 3SPO: the win (score 1) is a success whatever the env paid for it.
    state = SPO3State()
    state.update(batch)
    assert state.counts(batch.state_key[2:3])[1].item() == 1.0


#: Two rooms whose text differs only in an object's instance number, per rollout (``{r}``).
ROOMS = ScriptedGame(
    "start",
    {
        "start": "You are in the kitchen. Your task is to: put an apple in the fridge.",
        "table": "You arrive at the table 1. On the table 1, you see a apple {r}, a bread 1, a knife 1, "
        "a mug 1, a plate 1, and a spoon 1.",
        "fridge": "You arrive at the fridge 1. The fridge 1 is closed.",
    },
    {"start": {"go to table 1": "table"}, "table": {"go to fridge 1": "fridge"}, "fridge": {}},
)


def test_collector_rows_carry_the_keys_semantic_expansion_reads():
    games = {"rooms": ROOMS}
    envs = ScriptedGroupEnv(games, num_tasks=1, group_size=2, max_steps=3)
    collector = RolloutCollector(envs, PromptConfig(env_kind="alfworld"), similarity_threshold=0.95)
    rollout = collector.collect(first_policy, ["rooms"], seed=0)
    batch = StepBatch.from_records(rollout.records)
    assert batch.semantic_key is not None and batch.anchor_key is not None
    by_step = {(r.record["traj_id"], r.record["step"]): r.record for r in rollout.rows}
    a, b = by_step[(0, 1)], by_step[(1, 1)]  # the table, seen as "apple 1" and "apple 2"
    assert a["state_key"] != b["state_key"] and a["history_keys"][-1] != b["history_keys"][-1]
    assert a["semantic_key"] == b["semantic_key"] and a["anchor_key"] == b["anchor_key"]
    # ProGPO-R: the step-1 and step-2 rows have unique exact prefixes (n_inf = 1 < n_min = 2); the
    # table's semantic key pools both rollouts (n_sem = 2 > 1), the fridge's is the same text in both.
    advantages, diagnostics = compute_advantages("progpo_r", batch, return_diagnostics=True)
    assert diagnostics["potential/semantic_frac"] == pytest.approx(4 / 6)
    assert diagnostics["potential/expanded_groups"] == 1.0
    # GiGPO's similarity option: the two table observations share one anchor group.
    config = make_config("gigpo", enable_similarity=True)
    _, diagnostics = compute_advantages("gigpo", batch, config, return_diagnostics=True)
    assert diagnostics["anchor/merged_groups"] == 1.0
    assert compute_advantages("gigpo", batch, return_diagnostics=True)[1]["anchor/merged_groups"] == 0.0
    # Without a threshold the collector skips the (quadratic) similarity clustering.
    plain = RolloutCollector(envs, PromptConfig(env_kind="alfworld")).collect(first_policy, ["rooms"], seed=0)
    assert all("anchor_key" not in row.record for row in plain.rows)
    assert all(row.record["semantic_key"] for row in plain.rows)


def test_the_inadmissible_penalty_follows_the_envs_verdict_on_webshop():
    """A typed search is valid (never the offered template ``search[<your query>]``); a click the
    page does not offer is refused (and marked so) and penalised."""
    from scripted_envs import reply

    from agentgym_rl.vector import GroupVectorEnv

    script = ["search[red mug]", "click[no such product]"]

    def policy(conversations):
        return [reply(script.pop(0)) for _ in conversations]

    envs = GroupVectorEnv(
        "AgentGymRL/WebShop-v0", num_tasks=1, group_size=1, workers=1, split="test", num_products=60
    )
    try:
        collector = RolloutCollector(
            envs, PromptConfig(env_kind="webshop"), invalid_action_penalty=0.1, penalize_inadmissible=True
        )
        rollout = collector.collect(policy, [0], seed=0, max_steps=2)
    finally:
        envs.close()
    penalties = [record["penalty"] for record in rollout.records]
    assert penalties == [0.0, pytest.approx(0.1)]
    # The same verdict marks the refused step for 3SPO, penalty or not.
    assert [record["refused"] for record in rollout.records] == [False, True]
