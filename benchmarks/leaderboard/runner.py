"""Play a leaderboard run: tasks in groups of G rollouts through ``GroupVectorEnv``, saved as they finish.

The tasks are a seeded permutation of the split (its first ``episodes`` when a number
is given, so a sample spreads over task types and a larger run extends a smaller
one). Tasks are played ``batch_size // G`` at a time; each finished batch's episodes
go to the env's results file at once, so an interrupted run loses at most the batch
in flight and a rerun skips every stored task.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from agentgym_rl.episodes import start_episodes, step_episodes
from benchmarks.leaderboard.config import LeaderboardConfig
from benchmarks.leaderboard.policies import BatchPolicy, make_policy
from benchmarks.leaderboard.results import EpisodeStore

__all__ = ["env_kwargs", "plan_tasks", "play_env"]

#: Called with each finished task's episode records (tests use it to interrupt a run).
GroupCallback = Callable[[list[dict[str, Any]]], None]


def env_kwargs(config: LeaderboardConfig, env: str) -> dict[str, Any]:
    """The ``gym.make`` kwargs of ``env`` for this run."""
    kwargs: dict[str, Any] = {"split": config.split_for(env)}
    if config.data_dir is not None:
        kwargs["data_dir" if env == "alfworld" else "catalog"] = config.data_dir
    if config.max_steps is not None:
        kwargs["max_episode_steps"] = config.max_steps
    return kwargs


def plan_tasks(task_ids: list[Any], seed: int, episodes: int | None) -> list[Any]:
    """The tasks of a run, in play order: a seeded permutation of the split, cut at ``episodes``.

    >>> plan_tasks(["a", "b", "c", "d"], seed=0, episodes=2) == plan_tasks(["a", "b", "c", "d"], 0, 3)[:2]
    True
    """
    order = np.random.default_rng(seed).permutation(len(task_ids))
    tasks = [task_ids[int(i)] for i in order]
    return tasks if episodes is None else tasks[:episodes]


def _episode_seed(seed: int, plan_index: int, rollout: int) -> int:
    """An episode's own seed: independent of batching, so resumed runs replay nothing differently."""
    return int(np.random.SeedSequence([seed, plan_index, rollout]).generate_state(1)[0])


def _play_batch(
    envs: Any, policy: BatchPolicy, batch: list[tuple[int, Any]], config: LeaderboardConfig
) -> list[dict[str, Any]]:
    """Play a batch of (plan index, task), G rollouts each, to the end; one record per rollout."""
    tasks = [task for _, task in batch]
    observations, info = envs.reset(seed=config.seed + batch[0][0], options={"tasks": tasks})
    records = start_episodes(info)
    seeds: list[int | None] = [None] * envs.num_envs
    for i, record in records.items():
        seeds[i] = _episode_seed(config.seed, batch[record.group_id][0], record.rollout)
    policy.begin(envs, observations, info, seeds)
    while envs.active.any():
        actions = policy.act(observations, info)
        format_valid = getattr(policy, "format_valid", None) or None
        observations, _, _, _, info = step_episodes(envs, actions, records, format_valid)
    return [record.to_json() for record in records.values()]


def play_env(
    config: LeaderboardConfig,
    env: str,
    store: EpisodeStore,
    policy: BatchPolicy | None = None,
    on_group: GroupCallback | None = None,
) -> list[dict[str, Any]]:
    """Play every task of ``env`` not yet in ``store``; returns all its episodes (stored ones too).

    Args:
        config: The run's settings.
        env: ``"alfworld"`` or ``"webshop"``.
        store: Where finished tasks are saved (and read back on resume).
        policy: The agent (default: made from ``config.agent``).
        on_group: Called with each finished task's records, after they are saved.
    """
    from tqdm.auto import tqdm

    import agentgym_rl  # noqa: F401 - registers the envs
    from agentgym_rl.registration import resolve_env_id
    from agentgym_rl.vector import GroupVectorEnv

    env_id = resolve_env_id(env)
    group_size, at_once = config.group_size, config.tasks_at_once
    workers = config.workers or None
    envs = GroupVectorEnv(
        env_id, num_tasks=at_once, group_size=group_size, workers=workers, **env_kwargs(config, env)
    )
    try:
        plan = plan_tasks(list(envs.task_ids), config.seed, config.num_episodes)
        done = {json.dumps(t) for t in store.finished_tasks()}
        todo = [(index, task) for index, task in enumerate(plan) if json.dumps(task) not in done]
        kept = [e for e in store.episodes if json.dumps(e["task_id"]) in {json.dumps(t) for t in plan}]
        wins = sum(bool(e["won"]) for e in kept)
        bar = tqdm(
            total=len(plan) * group_size,
            initial=len(kept),
            desc=f"{env} {config.split_for(env)} {config.agent}",
            unit="ep",
            disable=not config.progress,
            dynamic_ncols=True,
        )
        bar.set_postfix(success=f"{wins / max(1, len(kept)):.1%}")
        if policy is None:
            policy = make_policy(config.agent, env_id, config)
        for start in range(0, len(todo), at_once):
            records = _play_batch(envs, policy, todo[start : start + at_once], config)
            by_task: dict[str, list[dict[str, Any]]] = {}
            for record in records:
                by_task.setdefault(json.dumps(record["task_id"]), []).append(record)
            for group in by_task.values():
                store.add(group)
                wins += sum(bool(e["won"]) for e in group)
                bar.update(len(group))
                bar.set_postfix(success=f"{wins / max(1, bar.n):.1%}")
                if on_group is not None:
                    on_group(group)
        bar.close()
    finally:
        envs.close()
    order = {json.dumps(task): i for i, task in enumerate(plan)}
    episodes = [e for e in store.episodes if json.dumps(e["task_id"]) in order]
    return sorted(episodes, key=lambda e: (order[json.dumps(e["task_id"])], e["rollout"]))
