"""Episode bookkeeping, and the one step of a batch of actions in a ``GroupVectorEnv``.

Every loop that plays envs with a policy (``agentgym-rl play``, the leaderboard runner,
the trainer's rollout, branching and post-step collectors) keeps one
:class:`EpisodeRecord` per rollout and updates it with :meth:`EpisodeRecord.record_step`;
loops whose records are kept per env slot step with :func:`step_episodes`. So they all
count steps, returns, wins, scores and bad actions the same way.

The vocabulary, one name each:

- ``inadmissible``: steps whose action the env refused (``info["action_valid"]`` False:
  ALFWorld's "Nothing happens.", a WebShop click on nothing, an unknown bandit option);
- ``format_errors``: steps whose reply broke the reply format (a language model's;
  scripted agents never do);
- ``truncated``: the episode ended by the step limit (or was cut), not by the task.

>>> record = EpisodeRecord.start({"task_id": "best-b", "task_type": "bandit", "state_key": 7, "won": False})
>>> record.record_step("z", 0.0, True, False, {"state_key": 8, "won": False, "action_valid": False})
>>> record.steps, record.inadmissible, record.done, record.won, record.state_keys
(1, 1, True, False, [7, 8])
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EpisodeRecord", "slot_info", "start_episodes", "step_episodes"]


def slot_info(info: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s own info from a batched ``GroupVectorEnv`` info (the keys its ``_key`` mask sets)."""
    return {key: value[i] for key, value in info.items() if not key.startswith("_") and info[f"_{key}"][i]}


@dataclass
class EpisodeRecord:
    """How one rollout went, step by step.

    Attributes:
        task_id: The task played (as the env reports it, unless the caller names it).
        task_type: The env's ``task_type``.
        group_id: The task group of the rollout (-1: not grouped).
        traj_id: The rollout's id in its collection (the trainer's; -1: none).
        rollout: Its index inside its group (``info["rollout_id"]``).
        initial_state_key: ``k(o_0)`` of the episode's task (a branch keeps its root's).
        state_keys: Keys of every observation the rollout saw, the first one included.
        actions: The actions taken, in order.
        steps: Env steps taken.
        env_return: Sum of the env's rewards (before any trainer shaping).
        won / score: The env's latest verdict (``score`` defaults to ``won`` when the env has none).
        inadmissible: Steps the env refused (``action_valid`` False).
        format_errors: Steps whose reply broke the reply format.
        truncated: Ended by the step limit or cut, not by the task.
        done: The episode ended (terminated or truncated).
    """

    task_id: Any
    task_type: str = ""
    group_id: int = -1
    traj_id: int = -1
    rollout: int = 0
    initial_state_key: int = 0
    state_keys: list[int] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    steps: int = 0
    env_return: float = 0.0
    won: bool = False
    score: float = 0.0
    inadmissible: int = 0
    format_errors: int = 0
    truncated: bool = False
    done: bool = False

    @classmethod
    def start(cls, info: Mapping[str, Any], **fields: Any) -> EpisodeRecord:
        """The record of an episode starting at one env's reset ``info``; ``fields`` override."""
        key = int(info["state_key"])
        won = bool(info.get("won", False))
        values: dict[str, Any] = {
            "task_id": info.get("task_id"),
            "task_type": str(info.get("task_type", "")),
            "initial_state_key": key,
            "state_keys": [key],
            "won": won,
            "score": float(info["score"]) if "score" in info else float(won),
        }
        values.update(fields)
        return cls(**values)

    @property
    def length(self) -> int:
        """Steps taken (the trainer's older name for :attr:`steps`)."""
        return self.steps

    def record_step(
        self,
        action: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: Mapping[str, Any],
        format_valid: bool | None = None,
    ) -> None:
        """Count one env step: ``info`` is the env's own info after it (see :func:`slot_info`).

        ``format_valid`` None means the actor has no reply format (a scripted agent).
        """
        self.actions.append(action)
        self.steps += 1
        self.env_return += float(reward)
        if "state_key" in info:  # absent when the env's worker died on this step
            self.state_keys.append(int(info["state_key"]))
        if "action_valid" in info and not info["action_valid"]:
            self.inadmissible += 1
        if format_valid is False:
            self.format_errors += 1
        if "won" in info:
            self.won = bool(info["won"])
            self.score = float(info["score"]) if "score" in info else float(self.won)
        self.done = bool(terminated or truncated)
        self.truncated = bool(truncated) and not bool(terminated)

    def to_json(self) -> dict[str, Any]:
        """The leaderboard's stored episode (``benchmarks/leaderboard/results.py``)."""
        return {
            "task_id": self.task_id,
            "task_type": self.task_type,
            "rollout": self.rollout,
            "won": self.won,
            "score": self.score,
            "steps": self.steps,
            "return": self.env_return,
            "truncated": self.truncated,
            "actions": list(self.actions),
            "state_keys": list(self.state_keys),
            "inadmissible": self.inadmissible,
            "format_errors": self.format_errors,
        }


def start_episodes(info: Mapping[str, Any]) -> dict[int, EpisodeRecord]:
    """One record per filled slot of a ``GroupVectorEnv`` reset (idle slots have ``group_id`` -1)."""
    records = {}
    for i in np.flatnonzero(np.asarray(info["group_id"]) >= 0):
        i = int(i)
        records[i] = EpisodeRecord.start(
            slot_info(info, i), group_id=int(info["group_id"][i]), rollout=int(info["rollout_id"][i])
        )
    return records


def step_episodes(
    envs: Any,
    actions: Sequence[str | None],
    records: MutableMapping[int, EpisodeRecord],
    format_valid: Sequence[bool | None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """Step a ``GroupVectorEnv`` with one action per slot and count the step in each slot's record.

    Args:
        envs: A ``GroupVectorEnv`` or alike (``active`` mask, batched infos with ``_key``
            masks); its active slots need a str action, the rest are ignored.
        actions: One action per slot (None for inactive slots).
        records: The slots' records (:func:`start_episodes`); slots that stepped are updated.
        format_valid: Per slot, whether the reply followed its format (None: no format).

    Returns:
        ``envs.step(actions)``'s five values.
    """
    stepping = [int(i) for i in np.flatnonzero(envs.active)]  # what GroupVectorEnv reports as "stepped"
    observations, rewards, terminated, truncated, info = envs.step(actions)
    for i in stepping:
        records[i].record_step(
            str(actions[i]),
            float(rewards[i]),
            bool(terminated[i]),
            bool(truncated[i]),
            slot_info(info, i),
            None if format_valid is None else format_valid[i],
        )
    return observations, rewards, terminated, truncated, info
