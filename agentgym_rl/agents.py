"""The agent protocol, and the scripted agents: uniform-random over admissible actions, and the env's expert.

One protocol, :class:`BatchPolicy`, serves ``agentgym-rl play``, the leaderboard (its
``hf:`` language-model agent too) and anything else that drives a ``GroupVectorEnv``:
``begin(envs, observations, info, seeds)`` after each reset (``seeds`` gives each slot's
episode seed, None for idle slots), then ``act(observations, info)`` returns one action
per slot (None where ``info["active"]`` is False). A policy whose replies can break a
format, as a language model's can, sets ``format_valid`` (one bool or None per slot, for
the last ``act``). The loop itself is :func:`agentgym_rl.episodes.step_episodes`.

The expert is the env's own: every env class has ``expert()``, which gives an
:class:`EpisodeExpert` for the episode just reset (ALFWorld and the bandit replay their
walkthrough, WebShop seeks the goal's product page by page). Nothing guesses the env
from its id.

>>> import numpy as np
>>> policy = RandomPolicy()
>>> info = {"active": np.array([True, False]), "admissible_actions": np.array([["look", "inventory"], None], dtype=object)}
>>> policy.begin(None, np.array(["obs", ""], dtype=object), info, [0, None])
>>> action, idle = policy.act(np.array(["obs", ""], dtype=object), info)
>>> action in ("look", "inventory"), idle
(True, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from agentgym_rl.episodes import slot_info

__all__ = [
    "AGENTS",
    "BatchPolicy",
    "EpisodeExpert",
    "ExpertPolicy",
    "PlanExpert",
    "RandomPolicy",
    "make_agent",
]

#: The scripted agents by name (``--agent`` / ``--agents`` values).
AGENTS = ("random", "expert")

#: WebShop's search box as its env offers it (``agentgym_rl.webshop.env.SEARCH_TEMPLATE``).
_SEARCH_TEMPLATE = "search[<your query>]"


class BatchPolicy(Protocol):
    """What a loop over a ``GroupVectorEnv`` needs of an agent (see the module docstring)."""

    name: str

    def begin(
        self, envs: Any, observations: np.ndarray, info: dict[str, Any], seeds: list[int | None]
    ) -> None:
        """Start the episodes of a reset (``envs`` is the GroupVectorEnv, for agents that ask its members)."""

    def act(self, observations: np.ndarray, info: dict[str, Any]) -> list[str | None]:
        """One action per slot; None for inactive slots."""


class EpisodeExpert(Protocol):
    """An env's expert for one episode, as its ``expert()`` returns it (picklable: it crosses to the caller)."""

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """The next action, given the env's latest observation and info."""


@dataclass
class PlanExpert:
    """Plays a fixed plan (a walkthrough), then ``look``.

    >>> expert = PlanExpert(["go to desk 1", "take mug 1 from desk 1"])
    >>> [expert.act("", {}) for _ in range(3)]
    ['go to desk 1', 'take mug 1 from desk 1', 'look']
    """

    plan: list[str] = field(default_factory=list)

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        return self.plan.pop(0) if self.plan else "look"


def _instruction(observation: str) -> str:
    """The WebShop instruction of a page (the text after ``Instruction:``).

    >>> _instruction("WebShop [SEP] Instruction: [SEP] i need a red mug [SEP] Search")
    'i need a red mug'
    """
    parts = [p.strip() for p in observation.split("[SEP]")]
    for i, part in enumerate(parts[:-1]):
        if part == "Instruction:":
            return parts[i + 1]
    return observation.strip()


def _active(info: Mapping[str, Any]) -> list[int]:
    return [int(i) for i in np.flatnonzero(info["active"])]


class RandomPolicy:
    """Uniform over each slot's admissible actions (``look`` when there are none), a generator per episode.

    Each episode's generator is seeded by its own seed, so an episode plays the same
    actions whatever else runs beside it (and when a run is resumed). WebShop offers its
    search box as the template ``search[<your query>]``, which finds nothing; when the
    draw picks it, the random agent types the instruction instead (the least a shopper
    does), so that its clicks reach products at all.
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
            if action == _SEARCH_TEMPLATE:
                action = f"search[{_instruction(str(observations[i]))}]"
            actions[i] = action
        return actions


class ExpertPolicy:
    """The env's expert in every slot: each member's ``expert()`` after the reset, then its ``act``."""

    name = "expert"

    def __init__(self) -> None:
        self._experts: dict[int, EpisodeExpert] = {}

    def begin(
        self, envs: Any, observations: np.ndarray, info: dict[str, Any], seeds: list[int | None]
    ) -> None:
        self._experts = {i: envs.call_member(i, "expert") for i in _active(info)}

    def act(self, observations: np.ndarray, info: dict[str, Any]) -> list[str | None]:
        actions: list[str | None] = [None] * len(observations)
        for i in _active(info):
            actions[i] = self._experts[i].act(str(observations[i]), slot_info(info, i))
        return actions


def make_agent(name: str) -> BatchPolicy:
    """A scripted agent by name: ``random`` or ``expert``."""
    if name == "random":
        return RandomPolicy()
    if name == "expert":
        return ExpertPolicy()
    raise ValueError(f"unknown agent {name!r}; choose one of {list(AGENTS)}")
