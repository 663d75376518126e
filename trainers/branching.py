"""3SPO's adaptive branching rollouts: the ranked backtracking DFS over env snapshots (``ALGORITHMS.md``).

At a state ``s`` with score ``S(s)`` (:class:`~trainers.estimators.spo3.SPO3State`),
:class:`BranchingCollector` samples ``n(s) = ⌈G_max · S(s)⌉`` replies (``n = 0`` cuts
the path there, ``n = 1`` goes on without a peer), steps each distinct action from a
copy of ``s`` (``GroupVectorEnv.restore`` into the task's slots), scores every
transition with 3SPO's step reward ``R_t`` under the current table, moves on with the
best action not yet explored at ``s`` (marked explored in the table) and pushes the
other ranked children on a stack. When a path ends it backtracks to the latest, best
ranked stack entry; once the stack is empty, a fresh pass starts from ``s_0`` (whose
explored actions steer it to new ones). Each task gets a share of the batch's env-step budget in
proportion to ``n(s_0)`` (task-level group sizing; ``n(s_0) = 0`` skips the task).

Rows are the collector's (:meth:`trainers.rollout.RolloutCollector.make_row`): every
env step is one row, counted in its branch's :class:`~agentgym_rl.episodes.EpisodeRecord`
by ``record_step`` (the step bookkeeping every env-policy loop shares). A *branch* is one ``traj_id``: the rows from where it left its
parent's path to where it ended; the rows before belong to the parent (the tree's
edges are each trained once). A branch that reached an end (won, lost, step limit)
has ``done`` on its last row and its outcome on every row; a branch cut by ``n = 0``
or by the budget keeps ``done=False`` (3SPO's table counts finished rollouts only).
Rows of one state's children share ``(group, k(s))``: 3SPO's anchor group.

A finished *path* runs from ``s_0`` through the rows its branch inherits from its
ancestors (up to each fork) to its end; the table counts paths, not branches: every
row carries ``path_count`` (finished paths through it) and ``path_successes``, so a
state before a fork counts once for each finished path below it. An ended branch's
outcome is its path's (the env's return along the path, scaled; the env score), and
the working table learns the whole path at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agentgym_rl.episodes import EpisodeRecord, slot_info
from agentgym_rl.keys import hash_fields
from trainers.estimators.spo3 import SPO3State, adaptive_group_sizes
from trainers.prompting import build_messages, extract_task, parse_action
from trainers.rollout import GenerateFn, Rollout, RolloutCollector, StepRow
from trainers.step_batch import StepBatch

__all__ = ["BranchRollout", "BranchingCollector", "split_budget", "transition_rewards"]


def action_key(action: str) -> int:
    """The int64 key of an action (for the table's explored sets)."""
    return hash_fields(b"action", [action])


def split_budget(budget: int, widths: list[int]) -> list[int]:
    """Shares of ``budget`` env steps in proportion to the tasks' ``n(s_0)`` (largest remainders).

    >>> split_budget(10, [8, 0, 2])
    [8, 0, 2]
    >>> split_budget(5, [1, 1])
    [3, 2]
    """
    total = sum(widths)
    if total == 0 or budget <= 0:
        return [0] * len(widths)
    exact = [budget * w / total for w in widths]
    shares = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(widths)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder[: budget - sum(shares)]:
        shares[i] += 1
    return shares


def transition_rewards(state: SPO3State, key: int, next_keys: list[int], won: list[bool]) -> list[float]:
    """3SPO's ``R_t`` of transitions from table key ``key`` to each of ``next_keys`` (current table).

    ``R = ω(N(s)) 1[k ≠ k'] + (0.5 - ω(N(s))) (S(s) - S(s')) + 0.5 won``, ``ω = 0.5 exp(-ω_k N)``;
    an unknown next key (``0``) adds neither transition term (as ``spo3_step_rewards``).
    """
    config = state.config
    keys = torch.tensor([key, *next_keys], dtype=torch.long)
    score = state.score(keys)
    total, _ = state.counts(keys[:1])
    omega = 0.5 * math.exp(-config.omega_k * float(total[0]))
    out = []
    for j, (nxt, win) in enumerate(zip(next_keys, won, strict=True)):
        known = nxt != 0
        progress = float(score[0] - score[j + 1]) if known else 0.0
        out.append(omega * float(known and nxt != key) + (0.5 - omega) * progress + 0.5 * float(win))
    return out


_Candidate = tuple[int, int, tuple[str, bool]]  # (slot, reply index, parsed action)


@dataclass
class _Branch:
    """One ``traj_id``: its rows and how it went."""

    episode: EpisodeRecord
    rows: list[StepRow] = field(default_factory=list)
    parent: tuple[int, int] | None = None  # (parent traj_id, parent rows before the fork)
    finished: bool = False  # reached an end (won, lost, step limit): its path is recorded


@dataclass
class _Node:
    """A state of the search: what the prompt needs, where the env holds it, and its branch."""

    node_id: int
    observation: str
    info: dict[str, Any]
    history: list[tuple[str, str]]
    branch: _Branch
    snapshot: bytes | None = None
    slot: int | None = None  # a slot that held this state when it was reached


@dataclass
class _Search:
    """One task's DFS: its slots, budget, stack and the node being expanded."""

    group_id: int
    task_text: str
    slots: list[int]
    budget: int
    current: _Node | None
    root: _Node | None = None
    stack: list[_Node] = field(default_factory=list)


@dataclass
class BranchRollout(Rollout):
    """A :class:`~trainers.rollout.Rollout` of branches, with the search's trace.

    Attributes:
        parents: ``traj_id -> (parent traj_id, parent rows before the fork)`` of every
            branch that left another (absent for a task's first branch).
        trace: one entry per expansion, in order: ``(group_id, traj_id, step, state_key,
            [(action, R_t, child traj_id), ...] ranked, chosen action)``; ``n = 0``
            cuts appear with an empty list.
        table: the search's working copy of the table after the search (it learned every
            finished path as it ended); the trainer's own table learns from the rows.
    """

    parents: dict[int, tuple[int, int]] = field(default_factory=dict)
    trace: list[tuple[int, int, int, int, list[tuple[str, float, int]], str | None]] = field(
        default_factory=list
    )
    table: SPO3State | None = None


class BranchingCollector:
    """Ranked backtracking DFS rollouts from env snapshots (3SPO's adaptive rollout).

    Args:
        base: The episode collector whose prompts, penalties and row records are reused.
        state: 3SPO's table (read for scores; its explored sets are written). The
            trainer updates its counts from the returned rows, as for plain rollouts.
    """

    def __init__(self, base: RolloutCollector, state: SPO3State) -> None:
        self.base = base
        self.state = state

    @property
    def envs(self) -> Any:
        return self.base.envs

    def _table_key(self, info: dict[str, Any]) -> int:
        config = self.state.config
        if config.per_task:
            return int(info["history_keys"][config.task_state_column])
        return int(info["state_key"])

    def collect(
        self, generate: GenerateFn, tasks: list[str], budget: int, seed: int | None = None
    ) -> BranchRollout:
        """Search every ``tasks[g]`` (task group ``g``) with ``budget`` env steps in all.

        Every task gets ``envs.group_size`` slots, so ``n(s)`` is also capped by that.
        """
        envs, cfg = self.envs, self.base.prompt_config
        if len(tasks) > envs.num_tasks:
            raise ValueError(
                f"{len(tasks)} tasks but the env has slots for {envs.num_tasks}; pass fewer tasks"
            )
        # A working copy of the table, updated as branches end (the paper scores with the table
        # after every finished rollout); it shares the explored sets with the real one.
        work = SPO3State(self.state.config)
        work.load_state_dict(self.state.state_dict())
        work.explored = self.state.explored
        timings = {"generate": 0.0, "env": 0.0}
        clock = time.perf_counter()
        observations, info = envs.reset(
            seed=seed, options={"tasks": tasks, "group_sizes": [envs.group_size] * len(tasks)}
        )
        timings["env"] += time.perf_counter() - clock
        holder: dict[int, int] = {}  # slot -> node_id it holds now
        branches: list[_Branch] = []
        rollout = BranchRollout(rows=[], episodes=[], timings=timings)
        next_id = iter(range(1 << 62))
        searches: list[_Search] = []
        roots: list[_Node] = []
        for g in range(len(tasks)):
            slots = [int(i) for i in np.flatnonzero(info["group_id"] == g)]
            now = slot_info(info, slots[0])
            branch = self._new_branch(branches, g, now, None)
            root = _Node(next(next_id), str(observations[slots[0]]), now, [], branch, slot=slots[0])
            for i in slots:
                holder[i] = root.node_id
            roots.append(root)
            searches.append(_Search(g, extract_task(root.observation, cfg), slots, 0, root, root))
        # Task-level group sizing: n(s_0) sets the task's share of the budget.
        widths = [self._width(work, root.info, len(s.slots)) for root, s in zip(roots, searches, strict=True)]
        if not any(widths):  # every task is solved or hopeless: keep training on them alike
            widths = [1] * len(widths)
        for search, share in zip(searches, split_budget(budget, widths), strict=True):
            search.budget = share
            if share == 0:
                search.current = None
            else:  # s_0's snapshot, for fresh passes once the stack runs dry
                search.root.snapshot = envs.snapshot(search.slots[0])

        while any(s.current is not None and s.budget > 0 for s in searches):
            plans: list[tuple[_Search, int, list[dict[str, str]]]] = []
            conversations: list[list[dict[str, str]]] = []
            for search in searches:
                node = search.current
                if node is None or search.budget <= 0:
                    continue
                width = min(self._width(work, node.info, len(search.slots)), search.budget)
                if width == 0 and not node.history:  # n(s_0) = 0 now: this task is done
                    search.current = None
                    continue
                if width == 0:  # n = 0: the path is cut here; backtrack
                    rollout.trace.append((search.group_id, node.branch.episode.traj_id, len(node.history),
                                          int(node.info["state_key"]), [], None))  # fmt: skip
                    node.branch.episode.truncated = True
                    search.current = self._backtrack(search, branches, next_id)
                    continue
                messages = build_messages(
                    search.task_text,
                    node.observation,
                    list(node.info["admissible_actions"]),
                    node.history,
                    cfg,
                )
                plans.append((search, width, messages))
                conversations.extend([messages] * width)
            if not plans:
                continue
            clock = time.perf_counter()
            replies = list(generate(conversations))
            timings["generate"] += time.perf_counter() - clock

            # Distinct actions only: a repeated action would step the same transition twice.
            envs.active[:] = False  # only the candidates' slots step this round
            actions: list[str | None] = [None] * envs.num_envs
            cursor = 0
            candidates: dict[int, list[_Candidate]] = {}  # group -> (slot, reply index, parsed action)
            for search, width, _ in plans:
                node = search.current
                seen: set[str] = set()
                chosen: list[tuple[int, tuple[str, bool]]] = []
                for r in range(cursor, cursor + width):
                    parsed = parse_action(replies[r].text, cfg)
                    if parsed[0] not in seen:
                        seen.add(parsed[0])
                        chosen.append((r, parsed))
                cursor += width
                # The slot already holding s goes first; the others get a copy of s.
                slots = sorted(search.slots, key=lambda i: holder.get(i) != node.node_id)[: len(chosen)]
                clock = time.perf_counter()
                for i in slots:
                    if holder.get(i) != node.node_id:
                        if node.snapshot is None:
                            node.snapshot = envs.snapshot(node.slot)
                        envs.restore(i, node.snapshot)
                        holder[i] = node.node_id
                    envs.active[i] = True
                timings["env"] += time.perf_counter() - clock
                candidates[search.group_id] = [
                    (i, r, parsed) for i, (r, parsed) in zip(slots, chosen, strict=True)
                ]
                for i, _, parsed in candidates[search.group_id]:
                    actions[i] = parsed[0]
                search.budget -= len(slots)
            clock = time.perf_counter()
            next_observations, rewards, terminated, truncated, next_info = envs.step(actions)
            timings["env"] += time.perf_counter() - clock

            for search, _, messages in plans:
                node = search.current
                key = self._table_key(node.info)
                children = []
                for i, r, parsed in candidates[search.group_id]:
                    nxt = slot_info(next_info, i)
                    done = bool(terminated[i] or truncated[i])
                    row = self.base.make_row(
                        search.group_id, -1, len(node.history), messages, replies[r], parsed, node.info, nxt,
                        float(rewards[i]), done, observation=node.observation,
                    )  # fmt: skip
                    won = bool(nxt.get("won", False))
                    next_key = self._table_key(nxt) if "state_key" in nxt else 0
                    transition = (float(rewards[i]), bool(terminated[i]), bool(truncated[i]))
                    children.append((i, row, nxt, done, transition, won, next_key))
                scores = transition_rewards(
                    work, key, [c[6] for c in children], [c[5] and c[3] for c in children]
                )
                order = sorted(range(len(children)), key=lambda j: -scores[j])  # ties keep reply order
                explored = work.explored_actions(key)
                best = next((j for j in order if action_key(children[j][1].action) not in explored), order[0])
                work.mark_explored(key, action_key(children[best][1].action))
                ranked = [best] + [j for j in order if j != best]
                fork = len(node.branch.rows)  # the parent's rows before this state's children
                pushed: list[_Node] = []
                trace_children = []
                for j in ranked:
                    i, row, nxt, done, transition, _, _ = children[j]
                    if j == best:
                        branch = node.branch
                    else:
                        branch = self._new_branch(
                            branches, search.group_id, node.info, roots[search.group_id]
                        )
                        branch.parent = (node.branch.episode.traj_id, fork)
                        rollout.parents[branch.episode.traj_id] = branch.parent
                    row.record["traj_id"] = branch.episode.traj_id
                    branch.episode.record_step(row.action, *transition, nxt, row.format_valid)
                    branch.rows.append(row)
                    trace_children.append((row.action, scores[j], branch.episode.traj_id))
                    child = _Node(next(next_id), str(next_observations[i]), nxt,
                                  [*node.history, (node.observation, row.action)], branch, slot=i)  # fmt: skip
                    holder[i] = child.node_id
                    if done:
                        self._end(branch, branches, work)
                    elif j != best:
                        pushed.append(child)
                    else:
                        search.current = child
                rollout.trace.append((search.group_id, node.branch.episode.traj_id, len(node.history), int(node.info["state_key"]),
                                      trace_children, children[best][1].action))  # fmt: skip
                # Snapshots of the stacked children now, while their slots still hold them.
                clock = time.perf_counter()
                for child in pushed:
                    child.snapshot = envs.snapshot(child.slot)
                timings["env"] += time.perf_counter() - clock
                search.stack.extend(reversed(pushed))  # the best-ranked ends on top
                if children[best][3]:  # the path ended: backtrack to the latest, best-ranked entry
                    search.current = self._backtrack(search, branches, next_id)

        for search in searches:  # cut by the budget: the open paths and stacked branches stay unfinished
            for node in ([search.current] if search.current is not None else []) + search.stack:
                node.branch.episode.truncated = True
        for branch in branches:
            for row in branch.rows:
                row.record["path_count"] = row.record["path_successes"] = 0
        threshold = self.state.config.success_threshold
        for branch in branches:
            if not branch.rows:
                continue
            path = self._path(branch, branches)
            self.base.set_outcome(path, branch.episode.score, [row.record for row in branch.rows])
            if branch.finished:  # its path, shared rows before the forks included, counts once
                success = int(branch.episode.score >= threshold)
                for row in path:
                    row.record["path_count"] += 1
                    row.record["path_successes"] += success
            rollout.rows.extend(branch.rows)
            rollout.episodes.append(branch.episode)
        rollout.table = work
        return rollout

    # ------------------------------------------------------------------ helpers
    def _backtrack(self, search: _Search, branches: list[_Branch], next_id: Any) -> _Node | None:
        """The latest stack entry; with an empty stack (and budget left) a fresh rollout from ``s_0``.

        The restart's first expansion skips the actions already explored at ``s_0``
        first, so a new pass takes new paths where the policy offers them.
        """
        if search.stack:
            return search.stack.pop()
        root = search.root
        if root.snapshot is None or search.budget <= 0:
            return None
        branch = self._new_branch(branches, search.group_id, root.info, None)
        return _Node(next(next_id), root.observation, root.info, [], branch, snapshot=root.snapshot)

    def _width(self, state: SPO3State, info: dict[str, Any], slots: int) -> int:
        """``n(s) = ⌈G_max · S(s)⌉`` (as :func:`adaptive_group_sizes`: ``≥ 1`` for ``S > 0``), at most ``slots``."""
        return min(adaptive_group_sizes([self._table_key(info)], state)[0], slots)

    @staticmethod
    def _path(branch: _Branch, branches: list[_Branch]) -> list[StepRow]:
        """The rows from the task's first state to the end of ``branch``: its ancestors' up to each fork."""
        segments = [branch.rows]
        while branch.parent is not None:
            parent_id, fork = branch.parent
            branch = branches[parent_id]  # traj_id is the index in branches
            segments.append(branch.rows[:fork])
        return [row for segment in reversed(segments) for row in segment]

    @staticmethod
    def _new_branch(branches: list[_Branch], group: int, info: dict[str, Any], root: _Node | None) -> _Branch:
        """A branch that starts at the state of ``info`` (``root``: its task's first state, or None: itself)."""
        episode = EpisodeRecord.start(
            info, group_id=group, traj_id=len(branches), task_id=str(info.get("task_id", ""))
        )
        if root is not None:
            episode.initial_state_key = int(root.info["state_key"])
        branch = _Branch(episode)
        branches.append(branch)
        return branch

    def _end(self, branch: _Branch, branches: list[_Branch], work: SPO3State) -> None:
        """A branch reached an end (its record has the outcome): the working table learns its whole path."""
        episode = branch.episode
        branch.finished = True
        path = self._path(branch, branches)
        # One rollout from s_0 to here: copies of the path's records under one traj id (the
        # rows before the fork keep their own records, which belong to other paths too).
        records = [{**row.record, "traj_id": 0} for row in path]
        self.base.set_outcome(path, episode.score, records)
        work.update(StepBatch.from_records(records))
