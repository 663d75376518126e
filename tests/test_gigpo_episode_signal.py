"""GiGPO's episode signal (``episode_signal``) and penalty placement (``step_penalty``) against verl-agent.

verl-agent (``gigpo/core_gigpo.py``, ``verl/trainer/ppo/ray_trainer.py``,
``agent_system/multi_turn_rollout/rollout_loop.py``, ``agent_system/reward_manager/episode.py``)
computes, for every step row of rollout ``i`` in task group ``g``:

- the episode score ``e = Σ_j r^env_j - c · invalid_t``: the reward manager writes the rollout's
  summed env rewards (``episode_rewards``, no penalty: the env does not apply it) on the step's
  last token, then ``apply_invalid_action_penalty`` subtracts ``c`` there when *this* step's
  action was invalid, and ``episode_norm_reward`` reads ``token_level_rewards.sum(-1)``;
- the step return ``q = Σ_{j≥t} γ^{j-t} r^env_j - c · invalid_t``:
  ``compute_step_discounted_returns`` discounts the env rewards, and the same
  ``apply_invalid_action_penalty`` subtracts the step's own penalty from ``step_rewards``;
- ``A = z(e | rows of g) + w · z(q | rows of g with the same anchor observation)``, unbiased std,
  ``ε = 1e-6``; a one-row group has mean 0 and std 1 in the episode term and gives 0 in the
  step term; ``mean_norm`` only subtracts the mean.

:func:`verl_agent_gigpo` below is that formula in plain Python, written from this description.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch

from trainers.advantages import compute_advantages, make_config
from trainers.step_batch import StepBatch

COEF = 0.1  # verl-agent's invalid_action_penalty_coef
GAMMA = 0.95
SCALE = 10.0  # verl-agent's ALFWorld reward: 10 x won

# (group, [(anchor observation, action valid), ...], won): rollouts of three tasks.
ROLLOUTS = [
    # Task 0: every rollout fails; rollouts 0 and 2 make invalid actions.
    (0, [("a0", True), ("a1", False), ("a2", True)], False),
    (0, [("a0", True), ("a1", True), ("a1", True)], False),
    (0, [("a0", False), ("a2", False)], False),
    # Task 1: one success (rollout 3, with an invalid first action).
    (1, [("b0", False), ("b1", True), ("b2", True)], True),
    (1, [("b0", True), ("b1", True)], False),
    (1, [("b0", True), ("b3", True), ("b1", False)], False),
    # Task 2: two identical failures without penalties: every advantage is 0.
    (2, [("c0", True), ("c1", True)], False),
    (2, [("c0", True), ("c1", True)], False),
]


def steps(rollouts: list, scale: float, coef: float) -> list[dict]:
    """One dict per env step: the env's reward and the penalty, as verl-agent's batch holds them."""
    out = []
    for traj, (group, trajectory, won) in enumerate(rollouts):
        for t, (obs, valid) in enumerate(trajectory):
            last = t == len(trajectory) - 1
            out.append(
                dict(
                    group=group,
                    traj=traj,
                    step=t,
                    obs=obs,
                    env_reward=scale * float(won and last),
                    penalty=0.0 if valid else coef,
                    done=last,
                    won=won,
                )
            )
    return out


def records_of(rows: list[dict], keys: dict[str, int]) -> list[dict]:
    """Our collector's records of the same steps (``reward = env reward - penalty``)."""
    outcome = defaultdict(float)
    for row in rows:
        outcome[row["traj"]] += row["env_reward"]
    seen: dict[int, set] = defaultdict(set)
    records = []
    for row in rows:
        key = keys.setdefault(row["obs"], len(keys) + 1)
        records.append(
            dict(
                group_id=row["group"],
                traj_id=row["traj"],
                step=row["step"],
                state_key=key,
                history_keys=[key],
                first_visit=key not in seen[row["traj"]],
                reward=row["env_reward"] - row["penalty"],
                penalty=row["penalty"],
                outcome=outcome[row["traj"]],
                score=float(row["won"]),
                done=row["done"],
            )
        )
        seen[row["traj"]].add(key)
    return records


def _normalize(
    values: list[float], ids: list, mean_std: bool, singleton_zero: bool, eps: float
) -> list[float]:
    members: dict = defaultdict(list)
    for value, i in zip(values, ids, strict=True):
        members[i].append(value)
    out = []
    for value, i in zip(values, ids, strict=True):
        group = members[i]
        if len(group) == 1:
            mean, std = (value, 1.0) if singleton_zero else (0.0, 1.0)
        else:
            mean = sum(group) / len(group)
            std = math.sqrt(sum((v - mean) ** 2 for v in group) / (len(group) - 1))
        out.append((value - mean) / (std + eps) if mean_std else value - mean)
    return out


def verl_agent_gigpo(
    rows: list[dict], *, gamma: float = GAMMA, w: float = 1.0, mean_std: bool = True, eps: float = 1e-6
) -> list[float]:
    """verl-agent's GiGPO advantage of every row (see the module docstring)."""
    episode_rewards = defaultdict(float)
    for row in rows:
        episode_rewards[row["traj"]] += row["env_reward"]
    scores = [episode_rewards[row["traj"]] - row["penalty"] for row in rows]
    episode = _normalize(scores, [row["group"] for row in rows], mean_std, False, eps)
    step_rewards = []
    for row in rows:
        later = [r for r in rows if r["traj"] == row["traj"] and r["step"] >= row["step"]]
        ret = sum(gamma ** (r["step"] - row["step"]) * r["env_reward"] for r in later)
        step_rewards.append(ret - row["penalty"])
    step = _normalize(step_rewards, [(row["group"], row["obs"]) for row in rows], mean_std, True, eps)
    return [e + w * s for e, s in zip(episode, step, strict=True)]


def gigpo(batch: StepBatch, **overrides) -> torch.Tensor:
    return compute_advantages("gigpo", batch, make_config("gigpo", **overrides)).double()


@pytest.fixture
def penalized():
    rows = steps(ROLLOUTS, SCALE, COEF)
    return rows, StepBatch.from_records(records_of(rows, {}))


@pytest.mark.parametrize("norm,mean_std", [("std", True), ("mean", False)])
def test_verl_agent_setting_reproduces_verl_agent(penalized, norm, mean_std):
    rows, batch = penalized
    expected = torch.tensor(verl_agent_gigpo(rows, mean_std=mean_std), dtype=torch.float64)
    ours = gigpo(batch, norm=norm, episode_signal="verl_agent", step_penalty="own_step")
    parity = (ours - expected).abs().max().item()
    print(f"GiGPO parity (norm={norm}): max |ours(verl_agent, own_step) - verl-agent| = {parity:.2e}")
    assert parity < 1e-6


def test_defaults_and_return_differ_from_verl_agent(penalized):
    # The figure on this batch: how far our other settings are from verl-agent.
    rows, batch = penalized
    expected = torch.tensor(verl_agent_gigpo(rows), dtype=torch.float64)
    # Task 0 fails everywhere, so "success" gives its rows an episode term of 0. verl-agent's
    # scores there are -0.1 on the 3 penalized rows and 0 on the other 5: the penalty is the
    # group's whole spread (mean -0.0375, std 0.0518), and z turns it into -1.2076 / +0.7246.
    scores = [-row["penalty"] for row in rows if row["group"] == 0]
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((v - mean) ** 2 for v in scores) / (len(scores) - 1))
    assert (-COEF - mean) / (std + 1e-6) == pytest.approx(-1.2076, abs=1e-4)
    assert (0.0 - mean) / (std + 1e-6) == pytest.approx(0.7246, abs=1e-4)
    episode_gap = (gigpo(batch, omega=0.0) - gigpo(batch, omega=0.0, episode_signal="verl_agent")).abs()
    assert episode_gap[batch.group_id == 0].max().item() == pytest.approx(1.2076, abs=1e-4)
    # The whole advantage adds the step term's placement of the penalty: verl-agent's own-step
    # penalty versus later penalties discounted into Q_t. The largest gap is on rollout 2's first
    # row (both its steps penalized): -1.0084 ours, -2.3623 verl-agent.
    gap_success = (gigpo(batch) - expected).abs().max().item()
    gap_return = (gigpo(batch, episode_signal="return") - expected).abs().max().item()
    gap_episode_only = (gigpo(batch, episode_signal="verl_agent") - expected).abs().max().item()
    print(
        f"max |ours - verl-agent|: success {gap_success:.4f}, return {gap_return:.4f}, "
        f"verl_agent with step_penalty='discounted' {gap_episode_only:.4f}"
    )
    assert gap_success == pytest.approx(1.3538, abs=1e-4)
    assert gap_return == pytest.approx(1.4346, abs=1e-4)
    assert gap_episode_only == pytest.approx(0.5602, abs=1e-4)


def test_success_and_return_differ_on_penalized_batch(penalized):
    _, batch = penalized
    success = gigpo(batch)
    ret = gigpo(batch, episode_signal="return")
    gap = (success - ret).abs().max().item()
    print(f"max |success - return| = {gap:.4f}")
    # Task 0's rollout returns are -0.1, 0, -0.2 (per row: 3, 3 and 2 rows): z of -0.2 is
    # (-0.2 - mean) / std over those 8 rows, while "success" gives 0 there.
    group0 = [-0.1] * 3 + [0.0] * 3 + [-0.2] * 2
    mean = sum(group0) / 8
    std = math.sqrt(sum((v - mean) ** 2 for v in group0) / 7)
    assert gap == pytest.approx(abs((-0.2 - mean) / (std + 1e-6)), abs=1e-5)
    # Task 2 has no penalty and equal outcomes: every setting gives 0 there.
    task2 = batch.group_id == 2
    assert ret[task2].abs().max() == 0 and success[task2].abs().max() == 0


def test_signals_agree_without_penalties():
    # 0/1 outcomes paid on the last step and no invalid action: R_i = Σ_t r_t = R_i - p_t.
    clean = [(group, [(obs, True) for obs, _ in trajectory], won) for group, trajectory, won in ROLLOUTS]
    batch = StepBatch.from_records(records_of(steps(clean, 1.0, COEF), {}))
    success = gigpo(batch)
    for overrides in (
        {"episode_signal": "return"},
        {"episode_signal": "verl_agent", "step_penalty": "own_step"},
    ):
        torch.testing.assert_close(gigpo(batch, **overrides), success, rtol=0, atol=0, msg=str(overrides))
    per_rollout = gigpo(batch, episode_stats="rollouts")
    for signal in ("return", "verl_agent"):
        ours = gigpo(batch, episode_stats="rollouts", episode_signal=signal)
        torch.testing.assert_close(ours, per_rollout, rtol=0, atol=0, msg=signal)


def test_default_ignores_penalty_field(penalized):
    # The defaults read neither StepBatch.penalty nor anything new: dropping the field changes nothing.
    rows, batch = penalized
    records = records_of(rows, {})
    for record in records:
        del record["penalty"]
    bare = StepBatch.from_records(records)
    assert torch.equal(gigpo(batch), gigpo(bare))
    assert torch.equal(gigpo(batch, episode_signal="return"), gigpo(bare, episode_signal="return"))


def test_penalty_placement_needs_the_penalty():
    rows = steps(ROLLOUTS, SCALE, COEF)
    records = records_of(rows, {})
    for record in records:
        del record["penalty"]
    batch = StepBatch.from_records(records)
    with pytest.raises(ValueError, match="StepBatch.penalty"):
        gigpo(batch, episode_signal="verl_agent")
    with pytest.raises(ValueError, match="StepBatch.penalty"):
        gigpo(batch, step_penalty="own_step")


@pytest.mark.parametrize(
    "field,value", [("episode_signal", "score"), ("episode_signal", "won"), ("step_penalty", "before")]
)
def test_bad_values_raise(field, value):
    with pytest.raises(ValueError, match=f"{field}='{value}' is not one of"):
        make_config("gigpo", **{field: value})


def test_collector_records_the_penalty_for_verl_agent_parity():
    # The rollout collector (reward scale 10, penalty 0.1) records p_t next to r_t; on its batch
    # the verl-agent setting equals the plain formula fed with the env's rewards and the penalties.
    from scripted_envs import End, ScriptedGame, ScriptedGroupEnv, admissible, reply

    from trainers.prompting import PromptConfig
    from trainers.rollout import GeneratedReply, RolloutCollector

    def shop(task: str, ends: dict[str, End]) -> ScriptedGame:
        text = {"start": f"Shop {task}. Your task is to: buy a red mug under 10 dollars."}
        text |= {name: f"Thank you for shopping. You bought the {name}." for name in ends}
        return ScriptedGame("start", text, {"start": {f"buy {name}": name for name in ends}}, ends)

    games = {
        "mixed": shop("mixed", {"exact mug": End(True, 1.0, 1.0), "cheap mug": End(False, 0.0, 0.0)}),
        "failed": shop("failed", {"red hat": End(False, 0.0, 0.0), "red sock": End(False, 0.0, 0.0)}),
    }

    def policy(conversations):
        # The first copy of a prompt answers well-formed, the second without tags (invalid format).
        seen: dict[str, int] = {}
        out = []
        for conversation in conversations:
            k = seen[conversation[-1]["content"]] = seen.get(conversation[-1]["content"], -1) + 1
            action = admissible(conversation)[k % 2]
            out.append(
                reply(action)
                if k == 0
                else GeneratedReply(prompt_ids=[1, 2], completion_ids=[3], text=action)
            )
        return out

    envs = ScriptedGroupEnv(games, num_tasks=2, group_size=2)
    collector = RolloutCollector(envs, PromptConfig(env_kind="alfworld"), reward_scale=SCALE)
    rollout = collector.collect(policy, list(games), seed=0)
    batch = StepBatch.from_records(rollout.records)
    assert [row.record["penalty"] for row in rollout.rows] == [
        0.0 if row.format_valid else COEF for row in rollout.rows
    ]
    assert {row.format_valid for row in rollout.rows} == {True, False}
    rows = [
        dict(
            group=row.record["group_id"],
            traj=row.record["traj_id"],
            step=row.record["step"],
            obs=row.record["state_key"],
            env_reward=SCALE * row.env_reward,
            penalty=row.record["penalty"],
        )
        for row in rollout.rows
    ]
    expected = torch.tensor(verl_agent_gigpo(rows), dtype=torch.float64)
    ours = gigpo(batch, episode_signal="verl_agent", step_penalty="own_step")
    assert (ours - expected).abs().max().item() < 1e-6
