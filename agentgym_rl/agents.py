"""Scripted agents: uniform-random over admissible actions, and the expert.

Both follow one small protocol, ``reset(observation, info, env)`` then
``act(observation, info) -> str``, so that ``agentgym-rl play`` and the leaderboard
drive them like any policy.

>>> agent = RandomAgent(seed=0)
>>> agent.reset("obs", {"admissible_actions": ["look", "inventory"]}, env=None)
>>> agent.act("obs", {"admissible_actions": ["look", "inventory"]}) in ("look", "inventory")
True
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

__all__ = ["Agent", "ExpertAgent", "RandomAgent", "make_agent"]


class Agent(Protocol):
    """What the play loop and the leaderboard need of an agent."""

    name: str

    def reset(self, observation: str, info: dict[str, Any], env: Any) -> None:
        """Start an episode (``env`` is the unwrapped env, for agents that read it)."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next action text."""


def _instruction(observation: str) -> str:
    """The WebShop instruction shown on every page (``Instruction: [SEP] <text> [SEP] ...``)."""
    parts = [p.strip() for p in observation.split("[SEP]")]
    for i, part in enumerate(parts[:-1]):
        if part == "Instruction:":
            return parts[i + 1]
    return observation.strip()


class RandomAgent:
    """Uniform over ``info["admissible_actions"]`` (``"look"`` when the list is empty).

    A search template such as WebShop's ``search[<your query>]`` is filled with the
    instruction, so that random search still finds products.
    """

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def reset(self, observation: str, info: dict[str, Any], env: Any) -> None:
        pass

    def act(self, observation: str, info: dict[str, Any]) -> str:
        actions = info.get("admissible_actions") or ["look"]
        action = str(actions[int(self._rng.integers(len(actions)))])
        if action.startswith("search[<") and action.endswith(">]"):
            action = f"search[{_instruction(observation)}]"
        return action


class ExpertAgent:
    """Replays the env's expert plan: ``env.expert_actions()`` if it has one, else ``env.walkthrough``.

    ALFWorld's plan is the game's walkthrough; on WebShop it is the goal-seeking expert
    (:class:`agentgym_rl.webshop.expert.ExpertAgent`), which acts on each page.
    """

    name = "expert"

    def __init__(self) -> None:
        self._plan: list[str] = []
        self._stepwise: Any = None

    def reset(self, observation: str, info: dict[str, Any], env: Any) -> None:
        self._stepwise = None
        if getattr(env, "goal", None) is not None:  # WebShop: the goal-seeking expert, page by page
            from agentgym_rl.webshop.expert import ExpertAgent as WebShopExpert

            self._stepwise, self._plan = WebShopExpert(env.goal), []
            return
        expert_actions = getattr(env, "expert_actions", None)
        plan = expert_actions() if callable(expert_actions) else env.walkthrough
        self._plan = list(plan)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._stepwise is not None:
            return self._stepwise.act(info)
        return self._plan.pop(0) if self._plan else "look"


def make_agent(name: str, seed: int | None = None) -> Agent:
    """An agent by name: ``random`` or ``expert``."""
    if name == "random":
        return RandomAgent(seed)
    if name == "expert":
        return ExpertAgent()
    raise ValueError(f"unknown agent {name!r}; choose 'random' or 'expert'")
