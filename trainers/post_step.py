"""3SPO's post-step optimization: episodes that stay alive across optimizer steps (``ALGORITHMS.md``).

3SPO's step reward ``R_t`` is known right after a transition (but for the success
term), so the trainer may update every ``K`` env steps on the rows gathered so far
instead of waiting for whole episodes. :class:`PostStepCollector` keeps the
``GroupVectorEnv``'s episodes (observations, prompt histories, rows) between calls:
each :meth:`PostStepCollector.collect` plays ``K`` lockstep env steps and returns the
rows of those steps only. A row's ``outcome`` is 0 until its episode ends; the
episode's last row (``done``) then carries the outcome, so 3SPO's ``0.5 r^succ`` is
credited in the update that sees the end. When every episode has ended, the next
step resets the env with fresh tasks (``choose_tasks``, 3SPO's adaptive sizes).

The table update needs each finished episode whole (its distinct states), so the
returned :class:`~trainers.rollout.Rollout` carries ``table_records``: every record of
the episodes that ended during the call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from agentgym_rl.episodes import EpisodeRecord, slot_info, step_episodes
from trainers.prompting import build_messages, extract_task, parse_action
from trainers.rollout import GenerateFn, Rollout, RolloutCollector, StepRow

__all__ = ["PostStepCollector"]

ChooseTasks = Callable[[], tuple[list[str], list[int] | None]]


class PostStepCollector:
    """Plays the env ``K`` steps at a time, keeping episodes alive between calls.

    Args:
        base: The episode collector whose env, prompts, penalties and row records are reused.
    """

    def __init__(self, base: RolloutCollector) -> None:
        self.base = base
        self._observations: np.ndarray | None = None
        self._info: dict[str, Any] = {}
        self._task_text: dict[int, str] = {}
        self._history: dict[int, list[tuple[str, str]]] = {}
        self._rows: dict[int, list[StepRow]] = {}
        self._episodes: dict[int, EpisodeRecord] = {}
        self._next_traj = 0  # traj ids stay unique across calls: a live episode spans several batches
        self._next_group = 0  # so do group ids: groups of different resets never mix
        self.resets = 0

    @property
    def live(self) -> int:
        """Episodes still running."""
        return int(np.sum(self.base.envs.active)) if self._observations is not None else 0

    def _reset(self, choose_tasks: ChooseTasks, seed: int | None) -> None:
        envs, cfg = self.base.envs, self.base.prompt_config
        tasks, sizes = choose_tasks()
        options: dict[str, Any] = {"tasks": tasks}
        if sizes is not None:
            options["group_sizes"] = sizes
        self._observations, self._info = envs.reset(seed=seed, options=options)
        self.resets += 1
        slots = [int(i) for i in np.flatnonzero(self._info["group_id"] >= 0)]
        base_group, self._next_group = self._next_group, self._next_group + len(tasks)
        self._task_text = {i: extract_task(str(self._observations[i]), cfg) for i in slots}
        self._history = {i: [] for i in slots}
        self._rows = {i: [] for i in slots}
        self._episodes = {}
        for i in slots:
            now = slot_info(self._info, i)
            self._episodes[i] = EpisodeRecord.start(
                now, group_id=base_group + int(now["group_id"]), traj_id=self._next_traj,
                rollout=int(now["rollout_id"]), task_id=str(now["task_id"]),
            )  # fmt: skip
            self._next_traj += 1

    def collect(
        self, generate: GenerateFn, choose_tasks: ChooseTasks, steps: int, seed: int | None = None
    ) -> Rollout:
        """Play ``steps`` lockstep env steps (resetting with ``choose_tasks()`` when all episodes ended).

        Returns:
            The rows of these steps, the episodes that ended in them, and
            ``table_records`` (those episodes' records, all of them).
        """
        envs, cfg = self.base.envs, self.base.prompt_config
        timings = {"generate": 0.0, "env": 0.0}
        rows: list[StepRow] = []
        ended: list[EpisodeRecord] = []
        table_records: list[dict[str, Any]] = []
        for step in range(steps):
            if self._observations is None or not envs.active.any():
                clock = time.perf_counter()
                self._reset(choose_tasks, None if seed is None else seed + step)
                timings["env"] += time.perf_counter() - clock
            observations, info = self._observations, self._info
            active = [int(i) for i in np.flatnonzero(envs.active)]
            conversations = [
                build_messages(
                    self._task_text[i],
                    str(observations[i]),
                    list(info["admissible_actions"][i]),
                    self._history[i],
                    cfg,
                )  # fmt: skip
                for i in active
            ]
            clock = time.perf_counter()
            replies = generate(conversations)
            timings["generate"] += time.perf_counter() - clock
            parsed = {i: parse_action(reply.text, cfg) for i, reply in zip(active, replies, strict=True)}
            actions: list[str | None] = [parsed[i][0] if i in parsed else None for i in range(envs.num_envs)]
            format_valid = [parsed[i][1] if i in parsed else None for i in range(envs.num_envs)]
            clock = time.perf_counter()
            next_observations, rewards, terminated, truncated, next_info = step_episodes(
                envs, actions, self._episodes, format_valid
            )
            timings["env"] += time.perf_counter() - clock
            for k, i in enumerate(active):
                episode = self._episodes[i]
                row = self.base.make_row(
                    episode.group_id, episode.traj_id, len(self._history[i]), conversations[k], replies[k],
                    parsed[i], slot_info(info, i), slot_info(next_info, i), float(rewards[i]), episode.done,
                    observation=str(observations[i]),
                )  # fmt: skip
                rows.append(row)
                self._rows[i].append(row)
                self._history[i].append((str(observations[i]), row.action))
                if episode.done:
                    # The success term arrives now: the outcome goes on the episode's rows (its
                    # earlier rows were trained on already; only the done row's r^succ counts here).
                    self.base.set_outcome(self._rows[i], episode.score)
                    table_records.extend(r.record for r in self._rows[i])
                    ended.append(episode)
            self._observations, self._info = next_observations, next_info
        self.base.add_anchor_keys(rows)
        return Rollout(rows=rows, episodes=ended, timings=timings, table_records=table_records)
