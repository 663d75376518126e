"""Batched agents for the leaderboard: one object acts for every slot of a ``GroupVectorEnv``.

The protocol: ``begin(envs, observations, info, seeds)`` after each reset (``seeds``
gives each slot's episode seed, None for idle slots), then ``act(observations, info)``
returns one action per slot (None where ``info["active"]`` is False). A policy may set
``format_valid`` (one bool per slot for the last ``act``) when its replies can break a
format, as a language model's can.

The scripted agents follow :mod:`agentgym_rl.agents`: ``random`` is uniform over the
admissible actions, ``expert`` replays the ALFWorld walkthrough or plays the WebShop
expert (the goal's product and options).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

__all__ = ["BatchPolicy", "ExpertPolicy", "RandomPolicy", "env_kind", "make_policy"]


def env_kind(env_id: str) -> str:
    """``"webshop"`` or ``"alfworld"`` for a registered id."""
    return "webshop" if "webshop" in env_id.lower() else "alfworld"


class BatchPolicy(Protocol):
    """What the leaderboard runner needs of an agent."""

    name: str

    def begin(
        self, envs: Any, observations: np.ndarray, info: dict[str, Any], seeds: list[int | None]
    ) -> None:
        """Start the episodes of a reset (``envs`` is the GroupVectorEnv, for agents that read it)."""

    def act(self, observations: np.ndarray, info: dict[str, Any]) -> list[str | None]:
        """One action per slot; None for inactive slots."""


#: WebShop's search action as the env offers it (``agentgym_rl.webshop.env.SEARCH_TEMPLATE``).
SEARCH_TEMPLATE = "search[<your query>]"


def _instruction(observation: str) -> str:
    """The WebShop instruction of a page (the text after ``Instruction:``).

    >>> _instruction("WebShop [SEP] Instruction: [SEP] i need a red mug [SEP] Search")
    'i need a red mug'
    """
    from trainers.prompting import PromptConfig, extract_task

    return extract_task(observation, PromptConfig(env_kind="webshop"))


def _active(info: dict[str, Any]) -> list[int]:
    return [int(i) for i in np.flatnonzero(info["active"])]


class RandomPolicy:
    """Uniform over each slot's admissible actions, with a generator per episode.

    Each episode's generator is seeded by its own seed, so an episode plays the same
    actions whatever else runs beside it (and when a run is resumed). WebShop offers
    its search box as the template ``search[<your query>]``, which finds nothing; when
    the draw picks it, the random agent types the instruction instead (the least a
    shopper does), so that its clicks reach products at all.
    """

    name = "random"

    def __init__(self) -> None:
        self._rngs: dict[int, np.random.Generator] = {}

    def begin(
        self, envs: Any, observations: np.ndarray, info: dict[str, Any], seeds: list[int | None]
    ) -> None:
        self._rngs = {i: np.random.default_rng(seed) for i, seed in enumerate(seeds) if seed is not None}

    def act(self, observations: np.ndarray, info: dict[str, Any]) -> list[str | None]:
        actions: list[str | None] = [None] * len(observations)
        for i in _active(info):
            admissible = list(info["admissible_actions"][i] or [])
            action = str(admissible[int(self._rngs[i].integers(len(admissible)))]) if admissible else "look"
            if action == SEARCH_TEMPLATE:
                action = f"search[{_instruction(str(observations[i]))}]"
            actions[i] = action
        return actions


class ExpertPolicy:
    """The env's expert: ALFWorld walkthroughs, WebShop's goal-driven expert.

    ALFWorld: each slot replays ``walkthrough`` (read from its worker after reset).
    WebShop: each slot runs :class:`agentgym_rl.webshop.expert.ExpertAgent` on the
    goal of its env (``goal``), which reacts to the admissible actions of each page.
    """

    name = "expert"

    def __init__(self) -> None:
        self._plans: dict[int, list[str]] = {}
        self._experts: dict[int, Any] = {}

    def begin(
        self, envs: Any, observations: np.ndarray, info: dict[str, Any], seeds: list[int | None]
    ) -> None:
        self._plans, self._experts = {}, {}
        webshop = env_kind(envs.env_id) == "webshop"
        if webshop:
            from agentgym_rl.webshop.expert import ExpertAgent

        for i in _active(info):
            if webshop:
                self._experts[i] = ExpertAgent(envs.member_attr(i, "goal"))
            else:
                self._plans[i] = list(envs.member_attr(i, "walkthrough"))

    def act(self, observations: np.ndarray, info: dict[str, Any]) -> list[str | None]:
        actions: list[str | None] = [None] * len(observations)
        for i in _active(info):
            if i in self._experts:
                actions[i] = self._experts[i].act(
                    {"admissible_actions": list(info["admissible_actions"][i] or [])}
                )
            else:
                plan = self._plans.get(i) or []
                actions[i] = plan.pop(0) if plan else "look"
        return actions


def make_policy(agent: str, env_id: str, config: Any = None) -> BatchPolicy:
    """The batched agent named by an ``--agent`` spec.

    Args:
        agent: ``random``, ``expert``, ``hf:PATH_OR_ID`` or ``checkpoint:DIR``.
        env_id: The env it will play (the model's prompts depend on it).
        config: The :class:`~benchmarks.leaderboard.config.LeaderboardConfig` (model settings).
    """
    if agent == "random":
        return RandomPolicy()
    if agent == "expert":
        return ExpertPolicy()
    kind, _, location = agent.partition(":")
    if kind in ("hf", "checkpoint") and location:
        from benchmarks.leaderboard.hf_policy import HFPolicy, resolve_checkpoint

        path = str(resolve_checkpoint(location)) if kind == "checkpoint" else location
        return HFPolicy(
            path,
            env_kind=env_kind(env_id),
            temperature=getattr(config, "temperature", 0.0),
            max_new_tokens=getattr(config, "max_new_tokens", 512),
            batch_size=getattr(config, "batch_size", 16),
            seed=getattr(config, "seed", 0),
            device=getattr(config, "device", None),
            prompt_overrides={
                name: getattr(config, name)
                for name in ("history_window", "system_prompt", "action_format")
                if getattr(config, name, None) is not None
            },
        )
    raise ValueError(f"unknown agent {agent!r}; use random, expert, hf:PATH_OR_ID or checkpoint:DIR")
