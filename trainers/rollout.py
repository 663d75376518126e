"""The rollout collector: multi-turn episodes in a ``GroupVectorEnv``, one training row per env step.

The trainer's plain episodes (3SPO's branching and post-step collectors reuse its rows
and outcomes): at every step it writes the
prompt of each active env (:mod:`trainers.prompting`), asks a ``generate`` callable
for the replies, parses actions, steps the envs in lockstep
(:func:`agentgym_rl.episodes.step_episodes`, the step every env-policy loop shares,
which keeps each rollout's :class:`~agentgym_rl.episodes.EpisodeRecord`) and records, per env step,
the prompt and completion token ids and a :data:`trainers.step_batch.RECORD_FIELDS`
record (keys of ``o_t`` and ``o_{t+1}``, reward with the invalid-action penalty, and
the rollout's outcome once its episode ends). The trainer turns the records into a
``StepBatch``; nothing here knows TRL.

What a record carries for the estimators:

- loss side, scaled by ``reward_scale``: ``reward`` (``r_t`` as the env paid it, minus
  the invalid-action penalty, which ``penalty`` records unscaled) and ``outcome`` (``R_i``:
  the env's return of the episode, ``Σ_t r_t`` before penalties, i.e. ALFWorld's win,
  WebShop's score, or whatever the env's own reward shaping pays, e.g. ``10 × won``);
- success side, never scaled: ``score``, the env's ``info["score"]`` (else
  ``info["won"]``) in ``[0, 1]``, read by 3SPO's successes, ProGPO-R's potentials and
  ProGPO-C's score threshold;
- ``semantic_key`` of ``o_t`` (ProGPO-R's semantic expansion, on every row), and
  ``anchor_key`` when ``similarity_threshold`` is set (GiGPO's ``enable_similarity``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym_rl.episodes import EpisodeRecord, slot_info, step_episodes
from trainers.prompting import PromptConfig, build_messages, extract_task, parse_action
from trainers.semantic import semantic_state_key, similarity_anchor_keys

__all__ = ["EpisodeRecord", "GeneratedReply", "Rollout", "RolloutCollector", "StepRow", "slot_info"]


@dataclass
class GeneratedReply:
    """What a generate callable returns for one prompt."""

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str


@dataclass
class StepRow:
    """One env step: the model's input and output, and its step record.

    ``observation`` is ``o_t``'s text and ``env_reward`` the env's reward for the step
    (unscaled, no penalty), from which the episode's outcome is summed.
    """

    messages: list[dict[str, str]]
    prompt_ids: list[int]
    completion_ids: list[int]
    completion: str
    action: str
    format_valid: bool
    record: dict[str, Any]
    observation: str = ""
    env_reward: float = 0.0


@dataclass
class Rollout:
    """The rows and episodes of one collection, and where its time went (seconds)."""

    rows: list[StepRow]
    episodes: list[EpisodeRecord]
    timings: dict[str, float] = field(default_factory=dict)
    #: Records for the estimator's state-table update when they differ from the rows' (3SPO's
    #: post-step mode: whole episodes that ended, whose early rows were trained on before).
    table_records: list[dict[str, Any]] | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The step records, ready for ``StepBatch.from_records``."""
        return [row.record for row in self.rows]

    def metrics(self) -> dict[str, float]:
        """Success rate, score, episode length, bad-action rates and distinct states (slash names).

        ``env/invalid_format_rate`` and ``env/inadmissible_rate`` are the episodes'
        ``format_errors`` and ``inadmissible`` (:mod:`agentgym_rl.episodes`) per row.
        """
        if not self.episodes:
            return {}
        steps = max(1, len(self.rows))
        return {
            "env/success_rate": float(np.mean([e.won for e in self.episodes])),
            "env/score": float(np.mean([e.score for e in self.episodes])),
            "env/episode_length": float(np.mean([e.steps for e in self.episodes])),
            "env/invalid_format_rate": sum(e.format_errors for e in self.episodes) / steps,
            "env/inadmissible_rate": sum(e.inadmissible for e in self.episodes) / steps,
            "env/truncated_rate": float(np.mean([e.truncated for e in self.episodes])),
            "env/distinct_states": float(len({k for e in self.episodes for k in e.state_keys})),
            "env/rows": float(len(self.rows)),
            **{f"time/{name}": value for name, value in self.timings.items()},
        }


GenerateFn = Callable[[list[list[dict[str, str]]]], Sequence[GeneratedReply]]


class RolloutCollector:
    """Plays groups of episodes with a policy and records every step.

    Args:
        envs: The group vector env (its ``num_envs`` bounds the rollouts per collection).
        prompt_config: Prompt and action-parsing settings.
        invalid_action_penalty: Subtracted from ``r_t`` when the reply breaks the format.
        penalize_inadmissible: Also subtract it when the env refuses the action
            (``info["action_valid"]`` False; a WebShop search is valid whatever its query).
        reward_scale: Multiplies env rewards and the outcome (the loss side only: the
            ``score`` records stay the env's, in ``[0, 1]``).
        similarity_threshold: When set, every collection also gives each row an
            ``anchor_key`` merging observations of a task group whose text similarity
            ratio is at least this (GiGPO's ``enable_similarity``, verl-agent: 0.95);
            ``None`` skips that (quadratic) clustering.
    """

    def __init__(
        self,
        envs: Any,
        prompt_config: PromptConfig,
        invalid_action_penalty: float = 0.1,
        penalize_inadmissible: bool = False,
        reward_scale: float = 1.0,
        similarity_threshold: float | None = None,
    ) -> None:
        self.envs = envs
        self.prompt_config = prompt_config
        self.invalid_action_penalty = invalid_action_penalty
        self.penalize_inadmissible = penalize_inadmissible
        self.reward_scale = reward_scale
        self.similarity_threshold = similarity_threshold

    def collect(
        self,
        generate: GenerateFn,
        tasks: list[str],
        group_sizes: list[int] | None = None,
        seed: int | None = None,
        max_steps: int | None = None,
    ) -> Rollout:
        """Roll out ``group_sizes[g]`` episodes of each ``tasks[g]`` until every one ends.

        ``traj_id`` of a rollout is its env slot; ``group_id`` the index of its task.
        """
        envs, cfg = self.envs, self.prompt_config
        timings = {"generate": 0.0, "env": 0.0}
        clock = time.perf_counter()
        options: dict[str, Any] = {"tasks": tasks}
        if group_sizes is not None:
            options["group_sizes"] = group_sizes
        observations, info = envs.reset(seed=seed, options=options)
        timings["env"] += time.perf_counter() - clock
        slots = np.flatnonzero(info["group_id"] >= 0)
        task_text = {int(i): extract_task(str(observations[i]), cfg) for i in slots}
        history: dict[int, list[tuple[str, str]]] = {int(i): [] for i in slots}
        rows_of: dict[int, list[StepRow]] = {int(i): [] for i in slots}
        # traj_id is the slot; task ids as strings (the trainer keys its tables by them).
        episodes = {
            int(i): EpisodeRecord.start(
                slot_info(info, int(i)),
                group_id=int(info["group_id"][i]),
                traj_id=int(i),
                rollout=int(info["rollout_id"][i]),
                task_id=str(info["task_id"][i]),
            )
            for i in slots
        }
        step = 0
        while envs.active.any() and (max_steps is None or step < max_steps):
            active = [int(i) for i in np.flatnonzero(envs.active)]
            conversations = [
                build_messages(
                    task_text[i], str(observations[i]), list(info["admissible_actions"][i]), history[i], cfg
                )
                for i in active
            ]
            clock = time.perf_counter()
            replies = generate(conversations)
            timings["generate"] += time.perf_counter() - clock
            actions: list[str | None] = [None] * envs.num_envs
            format_valid: list[bool | None] = [None] * envs.num_envs
            parsed: dict[int, tuple[str, bool]] = {}
            for i, reply in zip(active, replies, strict=True):
                parsed[i] = parse_action(reply.text, cfg)
                actions[i], format_valid[i] = parsed[i]
            clock = time.perf_counter()
            next_observations, rewards, terminated, truncated, next_info = step_episodes(
                envs, actions, episodes, format_valid
            )
            timings["env"] += time.perf_counter() - clock
            for k, i in enumerate(active):
                rows_of[i].append(
                    self.make_row(
                        episodes[i].group_id,
                        i,
                        len(history[i]),
                        conversations[k],
                        replies[k],
                        parsed[i],
                        slot_info(info, i),
                        slot_info(next_info, i),
                        float(rewards[i]),
                        bool(terminated[i] or truncated[i]),
                        observation=str(observations[i]),
                    )  # fmt: skip
                )
                history[i].append((str(observations[i]), parsed[i][0]))
            observations, info = next_observations, next_info
            step += 1
        for i in np.flatnonzero(envs.active):  # cut by max_steps: the rollout ends unfinished
            i = int(i)
            if rows_of[i]:
                rows_of[i][-1].record["done"] = True
            episodes[i].truncated = True
        rows: list[StepRow] = []
        for i, episode_rows in rows_of.items():
            self.set_outcome(episode_rows, episodes[i].score)
            rows.extend(episode_rows)
        self.add_anchor_keys(rows)
        return Rollout(rows=rows, episodes=list(episodes.values()), timings=timings)

    def set_outcome(
        self, rows: list[StepRow], score: float, records: list[dict[str, Any]] | None = None
    ) -> None:
        """Put an episode's outcome on its records: ``R_i`` (loss side) and its env ``score``.

        ``R_i`` is the env's return over ``rows`` (the whole episode, root to end), times
        ``reward_scale``; ``score`` (in ``[0, 1]``) is never scaled, so the reward scale and
        the env's own shaping cannot turn a partial score into a success. ``records``:
        where to write (default: the rows' own records).
        """
        outcome = sum(row.env_reward for row in rows) * self.reward_scale
        for record in records if records is not None else [row.record for row in rows]:
            record["outcome"] = outcome
            record["score"] = score

    def add_anchor_keys(self, rows: list[StepRow]) -> None:
        """Give the rows GiGPO's similarity ``anchor_key`` (in row order, per task group), when enabled."""
        if self.similarity_threshold is None or not rows:
            return
        keys = similarity_anchor_keys(
            [row.observation for row in rows],
            [row.record["group_id"] for row in rows],
            self.similarity_threshold,
        )
        for row, key in zip(rows, keys, strict=True):
            row.record["anchor_key"] = key

    def make_row(
        self,
        group_id: int,
        traj_id: int,
        step: int,
        conversation: list[dict[str, str]],
        reply: GeneratedReply,
        parsed: tuple[str, bool],
        now: dict[str, Any],
        nxt: dict[str, Any],
        reward: float,
        done: bool,
        *,
        observation: str,
    ) -> StepRow:
        """One env step's row: its prompt and reply, and its step record (``outcome`` still 0).

        ``now`` / ``nxt`` are one env's infos of ``o_t`` / ``o_{t+1}`` (see :func:`slot_info`),
        ``observation`` the text of ``o_t`` (its semantic key goes on the record); shared
        with the branching and post-step collectors. :meth:`set_outcome` fills ``outcome``
        and ``score`` when the episode ends.
        """
        action, format_valid = parsed
        # The env's verdict (as ``EpisodeRecord.inadmissible``), not membership in the offered list:
        # WebShop's typed searches are never its offered template ``search[<your query>]``.
        admissible = (
            bool(nxt["action_valid"])
            if "action_valid" in nxt
            else action in now.get("admissible_actions", ())
        )
        penalty = self.invalid_action_penalty * (
            (not format_valid) or (self.penalize_inadmissible and not admissible)
        )
        has_next = "state_key" in nxt
        record = {
            "group_id": group_id,
            "traj_id": traj_id,
            "step": step,
            "state_key": int(now["state_key"]),
            "history_keys": [int(x) for x in now["history_keys"]],
            "first_visit": bool(now["first_visit"]),
            "next_state_key": int(nxt["state_key"]) if has_next else 0,
            "next_first_visit": bool(nxt["first_visit"]) if has_next else False,
            "reward": reward * self.reward_scale - penalty,
            "penalty": float(penalty),  # p_t, for verl-agent's placement of it (episode_signal)
            "refused": not admissible,  # o_{t+1} is the env's refusal, not a new state (3SPO)
            "outcome": 0.0,  # filled in when the episode ends (set_outcome)
            "score": 0.0,
            "done": done,
            "semantic_key": semantic_state_key(observation, str(now.get("task_id", ""))),
        }
        return StepRow(
            messages=conversation,
            prompt_ids=list(reply.prompt_ids),
            completion_ids=list(reply.completion_ids),
            completion=reply.text,
            action=action,
            format_valid=format_valid,
            record=record,
            observation=observation,
            env_reward=reward,
        )
