"""The one agent protocol: every env's expert wins through it, prompt kinds come from env classes.

Agents run as the leaderboard and ``agentgym-rl play`` run them: a
:class:`~agentgym_rl.agents.BatchPolicy` in a ``GroupVectorEnv``, stepped by
:func:`agentgym_rl.episodes.step_episodes`. One worker per env: tests share two cores.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import agentgym_rl  # noqa: F401 - registers the envs
from agentgym_rl.agents import ExpertPolicy, RandomPolicy, make_agent
from agentgym_rl.episodes import EpisodeRecord, start_episodes, step_episodes
from agentgym_rl.registration import ENV_SPECS, env_class, prompt_kind
from agentgym_rl.vector import GroupVectorEnv
from benchmarks.leaderboard.policies import env_kind
from benchmarks.leaderboard.results import EpisodeStore
from trainers.prompting import env_kind_of

#: Each registered id on its embedded default data, and how many of its tasks to play (None: all).
EMBEDDED = {
    "AgentGymRL/ALFWorld-v0": ({"split": "valid_unseen", "data_dir": "generated"}, None),
    "AgentGymRL/WebShop-v0": ({"split": "test"}, 8),  # a spread sample of the generated shop's goals
    "AgentGymRL/TextBandit-v0": ({}, None),
}


def _play(envs: GroupVectorEnv, policy, tasks: list, seed: int = 0) -> list[EpisodeRecord]:
    """Every task once, ``envs.num_tasks`` at a time, to the end: the leaderboard's loop."""
    played = []
    for start in range(0, len(tasks), envs.num_tasks):
        observations, info = envs.reset(seed=seed, options={"tasks": tasks[start : start + envs.num_tasks]})
        records = start_episodes(info)
        policy.begin(envs, observations, info, [seed + i for i in range(envs.num_envs)])
        while envs.active.any():
            actions = policy.act(observations, info)
            observations, _, _, _, info = step_episodes(envs, actions, records)
        played.extend(records.values())
    return played


def test_every_registered_id_is_covered():
    assert sorted(EMBEDDED) == sorted(spec["id"] for spec in ENV_SPECS)


@pytest.mark.parametrize("env_id", sorted(EMBEDDED))
def test_the_expert_of_every_env_wins_its_embedded_tasks(env_id):
    kwargs, count = EMBEDDED[env_id]
    envs = GroupVectorEnv(env_id, num_tasks=4, group_size=1, workers=1, **kwargs)
    try:
        tasks = list(envs.task_ids)
        if count is not None:
            tasks = tasks[:: max(1, len(tasks) // count)][:count]
        records = _play(envs, ExpertPolicy(), tasks)
    finally:
        envs.close()
    assert [r.task_id for r in records] == tasks
    for record in records:
        assert record.won and record.score == 1.0 and record.done and not record.truncated, record
        assert record.inadmissible == 0 and record.format_errors == 0
        assert len(record.state_keys) == record.steps + 1 == len(record.actions) + 1


def test_random_policy_replays_an_episode_from_its_seed():
    envs = GroupVectorEnv("AgentGymRL/WebShop-v0", num_tasks=2, group_size=1, workers=1, split="test")
    try:
        task = envs.task_ids[0]
        # The same task in both slots with the same episode seed: the same actions, whatever the slot.
        observations, info = envs.reset(seed=0, options={"tasks": [task, task]})
        records = start_episodes(info)
        policy = make_agent("random")
        policy.begin(envs, observations, info, [7, 7])
        while envs.active.any():
            observations, _, _, _, info = step_episodes(envs, policy.act(observations, info), records)
    finally:
        envs.close()
    first, second = records[0], records[1]
    assert first.actions == second.actions and first.score == second.score
    assert first.actions[0].startswith("search[") and first.actions[0] != "search[<your query>]"


@pytest.mark.parametrize("env_id", sorted(EMBEDDED))
def test_the_prompt_kind_of_every_id_is_its_env_class_attribute(env_id):
    kinds = {"AgentGymRL/ALFWorld-v0": "alfworld", "AgentGymRL/WebShop-v0": "webshop"}
    expected = kinds.get(env_id, "generic")
    assert env_class(env_id).prompt_kind == expected
    assert prompt_kind(env_id) == env_kind_of(env_id) == env_kind(env_id) == expected
    assert prompt_kind(f"agentgym_rl:{env_id}") == expected


def test_the_prompt_kind_ignores_what_the_id_says():
    # An id that reads like WebShop but makes the bandit: the class decides, not the string.
    env_id = "AgentGymRLTest/WebShopLookalike-v0"
    gym.register(id=env_id, entry_point="agentgym_rl.bandit:TextBanditEnv")
    try:
        assert env_kind_of(env_id) == env_kind(env_id) == "generic"
    finally:
        del gym.registry[env_id]


def test_unknown_agent_names_the_choices():
    with pytest.raises(ValueError, match=r"\['random', 'expert'\]"):
        make_agent("gpt")


def test_random_policy_leaves_idle_slots_alone():
    info = {"active": np.array([False, True]), "admissible_actions": np.array([None, []], dtype=object)}
    policy = RandomPolicy()
    policy.begin(None, np.array(["", "obs"], dtype=object), info, [None, 3])
    assert policy.act(np.array(["", "obs"], dtype=object), info) == [None, "look"]


def test_results_written_with_the_old_key_are_read_under_the_new_one(tmp_path):
    path = tmp_path / "episodes_alfworld.json"
    identity = {"env": "alfworld", "group_size": 1}
    old = {"task_id": "a", "rollout": 0, "won": False, "invalid_actions": 3, "format_errors": 0}
    path.write_text(json.dumps({"identity": identity, "episodes": [old]}))
    (episode,) = EpisodeStore(path, identity).episodes
    assert episode["inadmissible"] == 3 and "invalid_actions" not in episode
