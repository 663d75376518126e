"""3SPO's rollouts: ranked backtracking DFS from env snapshots, post-step updates, a bounded table.

Real ALFWorld generated games in a real ``GroupVectorEnv`` (two workers, so restores
run both as in-process state copies and as deterministic replays in another process);
scripted policies pick admissible actions.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym_rl import GroupVectorEnv
from trainers.advantages import compute_advantages
from trainers.branching import BranchingCollector, action_key, split_budget
from trainers.estimator_configs import SPO3EstimatorConfig
from trainers.estimators.key_table import KeyTable
from trainers.estimators.spo3 import SPO3State
from trainers.post_step import PostStepCollector
from trainers.prompting import PromptConfig
from trainers.rollout import GeneratedReply, RolloutCollector
from trainers.step_batch import StepBatch

ENV_ID = "AgentGymRL/ALFWorld-v0"
MAX_STEPS = 6  # short episodes: enough depth for branches, backtracking and time-limit ends


def _admissible(conversation: list[dict[str, str]]) -> list[str]:
    text = conversation[-1]["content"]
    actions = text.split("admissible actions of the current situation are: [", 1)[1].split("]", 1)[0]
    return [a.strip().strip("'") for a in actions.split(",\n")]


def _reply(action: str) -> GeneratedReply:
    return GeneratedReply(
        prompt_ids=[1, 2], completion_ids=[3], text=f"<think>go</think><action>{action}</action>"
    )


def random_policy(seed: int):
    rng = np.random.default_rng(seed)
    return lambda conversations: [_reply(str(rng.choice(_admissible(c)))) for c in conversations]


def kth_policy(conversations):
    """The k-th copy of a prompt in one call answers the k-th admissible action (a fixed ranking input)."""
    seen: dict[str, int] = {}
    replies = []
    for conversation in conversations:
        text = conversation[-1]["content"]
        k = seen[text] = seen.get(text, -1) + 1
        replies.append(_reply(_admissible(conversation)[k]))
    return replies


@pytest.fixture(scope="module")
def envs():
    envs = GroupVectorEnv(
        ENV_ID, num_tasks=2, group_size=3, workers=2, split="train", data_dir="generated",
        max_episode_steps=MAX_STEPS,
    )  # fmt: skip
    yield envs
    envs.close()


def _collector(envs, state: SPO3State) -> BranchingCollector:
    return BranchingCollector(RolloutCollector(envs, PromptConfig(env_kind="alfworld")), state)


def _path(rollout, traj_id: int) -> list:
    """Rows from the task's first state to the end of branch ``traj_id`` (through its parents)."""
    by_traj: dict[int, list] = {}
    for row in rollout.rows:
        by_traj.setdefault(row.record["traj_id"], []).append(row)
    rows = sorted(by_traj[traj_id], key=lambda r: r.record["step"])
    while traj_id in rollout.parents:
        traj_id, count = rollout.parents[traj_id]
        rows = sorted(by_traj[traj_id], key=lambda r: r.record["step"])[:count] + rows
    return rows


def test_branches_from_snapshots_replay_like_fresh_episodes_and_respect_the_budget(envs):
    state = SPO3State()
    rollout = _collector(envs, state).collect(random_policy(0), envs.task_ids[:2], budget=30, seed=0)
    assert len(rollout.rows) == 30  # every env step is one row; the budget is spent exactly
    assert len(rollout.parents) > 0 and any(len(entry[4]) > 1 for entry in rollout.trace)  # it branched
    env = gym.make(ENV_ID, split="train", data_dir="generated", max_episode_steps=MAX_STEPS)
    try:
        for episode in rollout.episodes:
            path = _path(rollout, episode.traj_id)
            _, info = env.reset(options={"task": episode.task_id})
            for t, row in enumerate(path):
                # the branch from a restored snapshot sees exactly the states a fresh replay sees
                assert row.record["step"] == t
                assert row.record["state_key"] == info["state_key"]
                assert row.record["history_keys"] == list(info["history_keys"])
                assert row.record["first_visit"] == info["first_visit"]
                _, _, terminated, truncated, info = env.step(row.action)
                assert row.record["next_state_key"] == info["state_key"]
            assert path[-1].record["done"] == (terminated or truncated)
    finally:
        env.close()
    # the rows feed 3SPO as plain rollouts do; children of one state form its anchor group
    batch = StepBatch.from_records(rollout.records)
    assert torch.isfinite(compute_advantages("3spo", batch, state.config, state)).all()
    assert state.explored and all(len(actions) >= 1 for actions in state.explored.values())


def test_budget_follows_the_task_scores(envs):
    # Task 1's first state is hard (20 failures >= xi, success ratio 0 <= zeta): S = 0, n(s_0) = 0.
    probe = _collector(envs, SPO3State()).collect(kth_policy, envs.task_ids[:2], budget=2, seed=0)
    hard = next(e.initial_state_key for e in probe.episodes if e.group_id == 1)
    state = SPO3State()
    state.table = KeyTable.empty(2).merge(torch.tensor([hard]), torch.tensor([[20.0, 0.0]]))
    state.last_seen = torch.zeros(1, dtype=torch.long)
    rollout = _collector(envs, state).collect(random_policy(1), envs.task_ids[:2], budget=7, seed=0)
    assert len(rollout.rows) == 7 and {row.record["group_id"] for row in rollout.rows} == {0}
    assert split_budget(7, [3, 0]) == [7, 0] and split_budget(7, [3, 3]) == [4, 3]


def test_ranked_backtracking_dfs_order_on_a_hand_built_table(envs):
    task = envs.task_ids[:1]
    # Probe the first state and its first three children (a1, a2, a3) with a fresh table.
    probe = _collector(envs, SPO3State()).collect(kth_policy, task, budget=3, seed=0)
    root_key = probe.trace[0][3]
    a1, a2, a3 = _admissible(probe.rows[0].messages)[:3]
    child = {row.action: row.record["next_state_key"] for row in probe.rows}
    # Hand-built table: N(s_0) = 5 failures (S = 1, omega = 0.5 e^-0.5), a2's child is hopeless
    # (20 failures: S = 0). R(a2) = omega + (0.5 - omega) (1 - 0) = 0.5 > R(a1) = R(a3) = omega.
    state = SPO3State()
    state.table = KeyTable.empty(2).merge(
        torch.tensor([root_key, child[a2]]), torch.tensor([[5.0, 0.0], [20.0, 0.0]])
    )
    state.last_seen = torch.zeros(2, dtype=torch.long)
    rollout = _collector(envs, state).collect(kth_policy, task, budget=6, seed=0)
    omega = 0.5 * math.exp(-0.5)
    first, cut, third = rollout.trace
    assert [c[0] for c in first[4]] == [a2, a1, a3] and first[5] == a2
    assert [c[1] for c in first[4]] == pytest.approx([0.5, omega, omega])
    # a2's child has n = 0: the path is cut there, and the search backtracks to the best stacked child, a1
    assert cut[3] == child[a2] and cut[4] == []
    assert third[3] == child[a1] and third[1] == first[4][1][2] and len(third[4]) == 3
    assert len(rollout.rows) == 6
    assert state.explored_actions(root_key) == {action_key(a2)}
    assert state.explored_actions(child[a1]) == {action_key(third[5])}


def test_post_step_collector_keeps_episodes_alive_and_credits_the_end(envs):
    collector = PostStepCollector(RolloutCollector(envs, PromptConfig(env_kind="alfworld")))
    policy = random_policy(2)
    choose = lambda: (envs.task_ids[:2], None)  # noqa: E731
    first = collector.collect(policy, choose, steps=4, seed=0)
    assert len(first.rows) == 4 * envs.num_envs and not first.episodes and first.table_records == []
    assert collector.live == envs.num_envs  # nobody can win in 4 random steps here: all alive
    assert all(row.record["outcome"] == 0.0 and not row.record["done"] for row in first.rows)
    second = collector.collect(policy, choose, steps=3, seed=0)  # steps 5, 6 (time limit), then a reset
    assert len(second.episodes) == envs.num_envs and collector.resets == 2
    assert len(second.table_records) == envs.num_envs * MAX_STEPS  # whole episodes, earlier rows included
    assert {r["traj_id"] for r in second.table_records} == {r.record["traj_id"] for r in first.rows}
    done_rows = [row for row in second.rows if row.record["done"]]
    assert len(done_rows) == envs.num_envs and all(row.record["step"] == MAX_STEPS - 1 for row in done_rows)
    state = SPO3State()
    state.update(StepBatch.from_records(second.table_records))
    assert state.num_rollouts == envs.num_envs


def test_bounded_state_table_evicts_least_recently_seen_keys():
    state = SPO3State(SPO3EstimatorConfig(max_states=4))

    def rollout(keys: list[int], traj: int) -> StepBatch:
        return StepBatch.from_records(
            [
                dict(
                    group_id=0,
                    traj_id=traj,
                    step=t,
                    state_key=k,
                    history_keys=[k],
                    first_visit=True,
                    reward=0.0,
                    outcome=0.0,
                    done=t == len(keys) - 1,
                )  # fmt: skip
                for t, k in enumerate(keys)
            ]
        )

    state.mark_explored(2, 7)
    state.mark_explored(5, 8)
    for traj, keys in enumerate([[1, 2], [3, 4], [1, 5]]):
        state.update(rollout(keys, traj))
        assert len(state.table) <= 4
    # last seen: 1 and 5 in update 3, 3 and 4 in update 2, 2 in update 1: 2 goes, with its explored set
    assert state.table.keys.tolist() == [1, 3, 4, 5] and state.last_seen.tolist() == [3, 2, 2, 3]
    assert state.counts(torch.tensor([1]))[0].item() == 2.0 and state.num_rollouts == 3
    assert state.explored_actions(2) == frozenset() and state.explored_actions(5) == {8}
    # the bookkeeping survives a checkpoint: both evict 4 next (3 is seen again)
    restored = SPO3State(state.config)
    restored.load_state_dict(state.state_dict())
    for table in (state, restored):
        table.update(rollout([6, 3], 3))
        assert table.table.keys.tolist() == [1, 3, 5, 6]
    for _ in range(50):  # a long run: memory stays flat
        state.update(rollout(list(range(100 + 3 * _, 103 + 3 * _)), 4))
        assert len(state.table) == 4 and state.last_seen.numel() == 4


def test_trainer_branching_resume_gives_the_same_state_table(tmp_path):
    from trainers.config import StepGRPOConfig
    from trainers.tiny_models import tiny_qwen2_path
    from trainers.trainer import StepGRPOTrainer

    def config(**overrides) -> StepGRPOConfig:
        values = dict(
            output_dir=str(tmp_path / "out"), env_id="alfworld", env_kwargs={"data_dir": "generated"},
            num_tasks=2, group_size=3, max_env_steps=MAX_STEPS, env_workers=1, estimator="3spo",
            branching=True, branch_budget=8,  # 8 env steps per update: a few branches, fast
            per_device_train_batch_size=4, max_completion_length=8, learning_rate=0.1, max_steps=2,
            logging_steps=1, report_to="none", use_cpu=True, save_strategy="steps", save_steps=1, seed=0,
        )  # fmt: skip
        values.update(overrides)
        return StepGRPOConfig(**values)

    model = str(tiny_qwen2_path())
    # 2-step episodes: within 4 env steps per task, branches reach the time limit and the table fills
    envs = GroupVectorEnv(ENV_ID, num_tasks=2, group_size=3, workers=1, split="train", data_dir="generated",
                          max_episode_steps=2)  # fmt: skip
    try:
        trainer = StepGRPOTrainer(model=model, args=config(), envs=envs)
        trainer.train()
        assert all(log["env/rows"] == 8 for log in trainer.state.log_history if "env/rows" in log)
        saved = trainer.estimator_state.state_dict()
        resumed = StepGRPOTrainer(model=model, args=config(save_strategy="no"), envs=envs)
    finally:
        envs.close()
    assert saved["num_rollouts"] > 0 and len(saved["table"]["keys"]) > 0 and saved["explored"]
    assert saved["ticks"] == 2
    assert len(resumed.estimator_state.table) == 0  # a fresh table until the checkpoint is loaded
    # What `train(resume_from_checkpoint=...)` calls before its first step.
    resumed.create_optimizer_and_scheduler(num_training_steps=2)
    resumed._load_optimizer_and_scheduler(str(tmp_path / "out" / "checkpoint-2"))
    state = resumed.estimator_state.state_dict()
    assert torch.equal(state["table"]["keys"], saved["table"]["keys"])
    assert torch.equal(state["table"]["values"], saved["table"]["values"])
    assert torch.equal(state["last_seen"], saved["last_seen"])
    assert state["explored"] == saved["explored"] and state["num_rollouts"] == saved["num_rollouts"]


def test_trainer_post_step_updates(tmp_path, envs):
    from trainers.config import StepGRPOConfig
    from trainers.tiny_models import tiny_qwen2_path
    from trainers.trainer import StepGRPOTrainer

    args = StepGRPOConfig(
        output_dir=str(tmp_path / "out"), env_id="alfworld", env_kwargs={"data_dir": "generated"},
        num_tasks=2, group_size=3, env_workers=1, estimator="3spo",
        post_step_updates=3,  # an update every 3 env steps: the envs' 6-step episodes span two updates
        per_device_train_batch_size=4, max_completion_length=8, learning_rate=0.1, max_steps=2,
        logging_steps=1, report_to="none", use_cpu=True, save_strategy="no", seed=0,
    )  # fmt: skip
    trainer = StepGRPOTrainer(model=str(tiny_qwen2_path()), args=args, envs=envs)
    trainer.train()
    logs = [log for log in trainer.state.log_history if "loss" in log]
    assert len(logs) == 2 and all(math.isfinite(log["loss"]) for log in logs)
    # update 1: three steps of all six episodes, none ended; update 2: their sixth step ends them
    # (time limit), and only then does the table learn them, whole
    assert trainer.post_step.resets == 1 and all(log["env/rows"] == 18 for log in logs[1:])
    assert trainer.estimator_state.num_rollouts == 6
    with pytest.raises(ValueError, match="estimator='3spo'"):
        StepGRPOConfig(output_dir=str(tmp_path), estimator="grpo", post_step_updates=2, use_cpu=True)


def _fork_tree():
    """S0 -> S1 -> {S2a -> lose, lose; S2b -> win, lose} (a scripted game; rewards 1 on the win)."""
    from scripted_envs import End, ScriptedGame

    text = {
        "S0": "You are at the gate. Your task is to: find the treasure.",
        "S1": "A fork in the road.",
        "S2a": "The left room, with a red door and a blue door.",
        "S2b": "The right room, with a gold door and a gray door.",
        "La1": "A trap behind the red door.",
        "La2": "A trap behind the blue door.",
        "W": "The treasure behind the gold door.",
        "Lb": "A trap behind the gray door.",
    }
    moves = {
        "S0": {"go on": "S1"},
        "S1": {"go left": "S2a", "go right": "S2b"},
        "S2a": {"open red door": "La1", "open blue door": "La2"},
        "S2b": {"open gold door": "W", "open gray door": "Lb"},
    }
    lose = End(won=False, score=0.0, reward=0.0)
    ends = {"La1": lose, "La2": lose, "Lb": lose, "W": End(won=True, score=1.0, reward=1.0)}
    return ScriptedGame("S0", text, moves, ends), text


def test_dfs_paths_credit_every_state_on_them_including_the_shared_prefix():
    from scripted_envs import ScriptedGroupEnv, kth_policy

    from agentgym_rl.keys import state_key

    game, text = _fork_tree()
    envs = ScriptedGroupEnv({"tree": game}, num_tasks=1, group_size=2)
    state = SPO3State()
    # Two slots: n(s) = min(8, 2) = 2 replies a state; S0 has one action, so 1 + 2 + 2 + 2 = 7 env steps.
    rollout = _collector(envs, state).collect(kth_policy, ["tree"], budget=7, seed=0)
    assert len(rollout.rows) == 7 and sum(row.record["done"] for row in rollout.rows) == 4
    key = {name: state_key(t) for name, t in text.items()}
    # Four finished root-to-leaf paths, one won: every state counts once per path through it.
    expected = {"S0": (4, 1), "S1": (4, 1), "S2a": (2, 0), "S2b": (2, 1), "W": (1, 1), "La1": (1, 0)}
    # The trainer's table, updated from the rows as for plain rollouts, and the search's working
    # table (it ranks and sizes the later expansions with it).
    batch = StepBatch.from_records(rollout.records)
    assert torch.isfinite(compute_advantages("3spo", batch, state.config, state)).all()
    state.update(batch)
    for table in (state, rollout.table):
        assert table.num_rollouts == 4
        for name, (total, succ) in expected.items():
            counts = table.counts(torch.tensor([key[name]]))
            assert (counts[0].item(), counts[1].item()) == (total, succ), name
