"""A scripted text game and an in-process group vector env for tests that need chosen trees.

:class:`ScriptedGame` is a deterministic game given as a table: nodes, their text, and
per node the actions with the node they lead to and how the episode ends there.
:class:`ScriptedGroupEnv` plays ``num_tasks × group_size`` of them in this process with
the interface the rollout collectors use (``GroupVectorEnv``'s ``reset``/``step``,
batched infos with ``_key`` masks, ``active``, ``snapshot``/``restore``), so a test
can build exactly the rollouts, branches, scores and rewards it needs.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym_rl.keys import EpisodeKeys

NOTHING = "Nothing happens."


@dataclass(frozen=True)
class End:
    """How an episode ends on reaching a node: the env's ``won`` / ``score`` and its reward."""

    won: bool
    score: float
    reward: float


@dataclass
class ScriptedGame:
    """A deterministic text game.

    Attributes:
        start: the first node.
        text: node -> observation text; ``{r}`` is replaced by the rollout's number
            (1, 2, ...), so rollouts of one task can see near-identical observations.
        moves: node -> {action: next node}; any other action answers ``NOTHING`` and stays.
        ends: node -> :class:`End` for the nodes where the episode terminates.
        fallback: where any other action leads (``None``: it answers ``NOTHING`` and stays).
    """

    start: str
    text: dict[str, str]
    moves: dict[str, dict[str, str]]
    ends: dict[str, End] = field(default_factory=dict)
    fallback: str | None = None


@dataclass
class _Slot:
    task: str = ""
    node: str = ""
    observation: str = ""
    keys: EpisodeKeys | None = None
    won: bool = False
    score: float = 0.0
    steps: int = 0


class ScriptedGroupEnv:
    """``num_tasks × group_size`` scripted games in this process, batched like ``GroupVectorEnv``.

    Args:
        games: task id -> game.
        num_tasks: groups per reset.
        group_size: rollouts per task.
        max_steps: truncation after this many steps.
        depths: history depths of ``info["history_keys"]``.
    """

    def __init__(
        self,
        games: dict[str, ScriptedGame],
        num_tasks: int,
        group_size: int,
        max_steps: int = 10,
        depths: tuple[int, ...] = (0, 1),
    ) -> None:
        self.games = games
        self.task_ids = list(games)
        self.num_tasks, self.group_size = num_tasks, group_size
        self.num_envs = num_tasks * group_size
        self.max_steps, self.depths = max_steps, depths
        self.active = np.zeros(self.num_envs, dtype=bool)
        self.group_id = np.full(self.num_envs, -1, dtype=np.int64)
        self.rollout_id = np.full(self.num_envs, -1, dtype=np.int64)
        self.slots = [_Slot() for _ in range(self.num_envs)]
        self.snapshots = 0

    # ------------------------------------------------------------------ one slot
    def _text(self, i: int, node: str) -> str:
        return self.games[self.slots[i].task].text[node].format(r=int(self.rollout_id[i]) + 1)

    def _info(self, i: int, keys: Any) -> dict[str, Any]:
        slot = self.slots[i]
        game = self.games[slot.task]
        return {
            "state_key": keys.state_key,
            "history_keys": keys.history_keys,
            "first_visit": keys.first_visit,
            "admissible_actions": list(game.moves.get(slot.node, {})),
            "task_type": "scripted",
            "won": slot.won,
            "score": slot.score,
        }

    def _step_one(self, i: int, action: str) -> tuple[float, bool, bool, dict[str, Any]]:
        slot = self.slots[i]
        game = self.games[slot.task]
        slot.steps += 1
        target = game.moves.get(slot.node, {}).get(action, game.fallback)
        reward, terminated = 0.0, False
        if target is None:
            slot.observation = NOTHING
        else:
            slot.node, slot.observation = target, self._text(i, target)
            if target in game.ends:
                end = game.ends[target]
                slot.won, slot.score, reward, terminated = end.won, end.score, end.reward, True
        keys = slot.keys.step(action, slot.observation)
        truncated = not terminated and slot.steps >= self.max_steps
        return reward, terminated, truncated, self._info(i, keys)

    # ------------------------------------------------------------------ vector API
    def _batch(self, infos: list[dict[str, Any] | None]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        names = [name for info in infos if info for name in info]
        for name in dict.fromkeys(names):
            present = np.array([info is not None and name in info for info in infos])
            values = [info[name] if info is not None and name in info else None for info in infos]
            if name == "history_keys":
                array = np.zeros((self.num_envs, len(self.depths) + 1), dtype=np.int64)
                for i, value in enumerate(values):
                    if value is not None:
                        array[i] = value
            elif name in ("state_key",):
                array = np.array([v or 0 for v in values], dtype=np.int64)
            elif name in ("first_visit", "won"):
                array = np.array([bool(v) for v in values])
            elif name == "score":
                array = np.array([v or 0.0 for v in values], dtype=np.float64)
            else:
                array = np.empty(self.num_envs, dtype=object)
                array[:] = values
            out[name], out[f"_{name}"] = array, present
        everyone = np.ones(self.num_envs, dtype=bool)
        out["group_id"], out["_group_id"] = self.group_id.copy(), everyone
        out["rollout_id"], out["_rollout_id"] = self.rollout_id.copy(), everyone
        tasks = np.array([slot.task for slot in self.slots], dtype=object)
        out["task_id"], out["_task_id"] = tasks, self.group_id >= 0
        out["active"], out["_active"] = self.active.copy(), everyone
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        tasks = list(options.get("tasks") or self.task_ids[: self.num_tasks])
        sizes = list(options.get("group_sizes") or [self.group_size] * len(tasks))
        self.group_id[:], self.rollout_id[:], self.active[:] = -1, -1, False
        self.slots = [_Slot() for _ in range(self.num_envs)]
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        observations = np.full(self.num_envs, "", dtype=object)
        i = 0
        for group, (task, size) in enumerate(zip(tasks, sizes, strict=True)):
            for rollout in range(size):
                self.group_id[i], self.rollout_id[i] = group, rollout
                game = self.games[task]
                slot = self.slots[i] = _Slot(task=task, node=game.start, keys=EpisodeKeys(task, self.depths))
                slot.observation = self._text(i, game.start)
                infos[i] = self._info(i, slot.keys.reset(slot.observation))
                observations[i] = slot.observation
                self.active[i] = True
                i += 1
        return observations, self._batch(infos)

    def step(self, actions: list[str | None]):
        observations = np.array([slot.observation for slot in self.slots], dtype=object)
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        for i in np.flatnonzero(self.active):
            i = int(i)
            rewards[i], terminated[i], truncated[i], infos[i] = self._step_one(i, str(actions[i]))
            observations[i] = self.slots[i].observation
            self.active[i] = not (terminated[i] or truncated[i])
        return observations, rewards, terminated, truncated, self._batch(infos)

    def snapshot(self, i: int) -> bytes:
        self.snapshots += 1
        slot = self.slots[i]
        return pickle.dumps((slot.task, slot.node, slot.observation, slot.keys.get_state(), slot.won,
                             slot.score, slot.steps, int(self.rollout_id[i])))  # fmt: skip

    def restore(self, i: int, snapshot: bytes) -> tuple[str, dict[str, Any]]:
        task, node, observation, keys, won, score, steps, _ = pickle.loads(snapshot)
        slot = self.slots[i] = _Slot(
            task, node, observation, EpisodeKeys(task, self.depths), won, score, steps
        )
        slot.keys.set_state(keys)
        self.active[i] = not won
        return observation, {}

    def close(self) -> None:
        pass


def reply(action: str, prompt_ids: tuple[int, ...] = (1, 2)) -> Any:
    """A well-formed reply naming ``action``."""
    from trainers.rollout import GeneratedReply

    return GeneratedReply(
        prompt_ids=list(prompt_ids), completion_ids=[3], text=f"<think>go</think><action>{action}</action>"
    )


def admissible(conversation: list[dict[str, str]]) -> list[str]:
    """The admissible actions listed in a prompt (ALFWorld-style prompt text)."""
    text = conversation[-1]["content"]
    actions = text.split("admissible actions of the current situation are: [", 1)[1].split("]", 1)[0]
    return [a.strip().strip("'") for a in actions.split(",\n")]


def kth_policy(conversations: list[list[dict[str, str]]]) -> list[Any]:
    """The k-th copy of a prompt in one call answers the k-th admissible action (cycling)."""
    seen: dict[str, int] = {}
    out = []
    for conversation in conversations:
        text = conversation[-1]["content"]
        k = seen[text] = seen.get(text, -1) + 1
        actions = admissible(conversation)
        out.append(reply(actions[k % len(actions)]))
    return out


def first_policy(conversations: list[list[dict[str, str]]]) -> list[Any]:
    """Always the first admissible action."""
    return [reply(admissible(c)[0]) for c in conversations]
