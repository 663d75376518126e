"""WebShop's expert: it knows the goal's product and options (``WebShopEnv.expert()`` gives it).

It searches for the goal product's name, pages through the results until the
product's ASIN shows (at most 5 pages), opens it, clicks each goal option and buys.
On generated goals this scores 1 (the product and options are the goal's by
construction, and its price is under the cap). The leaderboard and ``agentgym-rl play``
run it through :class:`agentgym_rl.agents.ExpertPolicy`; tests replay it with
:func:`play_expert` as a walkthrough.

>>> import gymnasium as gym, agentgym_rl
>>> env = gym.make("AgentGymRL/WebShop-v0", split="test", num_products=60)
>>> _ = env.reset(seed=0, options={"task": 5})
>>> actions, info = play_expert(env)
>>> actions[0].startswith("search["), actions[-1], info["won"]
(True, 'click[buy now]', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["GoalExpert", "expert_actions", "play_expert"]

#: Result pages the expert looks through before giving up.
MAX_RESULT_PAGES = 5


def _goal_option_values(goal: Mapping[str, Any]) -> list[str]:
    options = goal["goal_options"]
    values = list(options.values()) if isinstance(options, Mapping) else list(options)
    return [str(v).lower() for v in values]


class GoalExpert:
    """The expert of one episode (an :class:`agentgym_rl.agents.EpisodeExpert`); it reads only ``info``.

    Args:
        goal: The goal dict (``env.unwrapped.goal``): ``asin``, ``name``, ``goal_options``.
    """

    def __init__(self, goal: Mapping[str, Any]) -> None:
        self.goal = goal
        self._asin = f"click[{goal['asin'].lower()}]"
        self._pending = [f"click[{v}]" for v in _goal_option_values(goal)]
        self._pages_seen = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """The next action, given the env's latest ``info`` (its ``admissible_actions``)."""
        admissible = info["admissible_actions"]
        if "search[<your query>]" in admissible:
            return f"search[{self.goal['name']}]"
        if self._asin in admissible:
            return self._asin
        if "click[buy now]" in admissible:  # on the goal's item page
            while self._pending:
                action = self._pending.pop(0)
                if action in admissible:
                    return action
            return "click[buy now]"
        if "click[next >]" in admissible and self._pages_seen < MAX_RESULT_PAGES - 1:
            self._pages_seen += 1
            return "click[next >]"
        # Not found: open the first product shown, else start over.
        products = [a for a in admissible if a.startswith("click[b")]
        return products[0] if products else "click[back to search]"


def play_expert(env: Any, max_steps: int = 15) -> tuple[list[str], dict[str, Any]]:
    """Play the episode ``env`` was just reset into, to the end, with the env's expert.

    A replay helper for one plain env (tests, scripts); batched play goes through
    :func:`agentgym_rl.episodes.step_episodes`.

    Args:
        env: A reset ``AgentGymRL/WebShop-v0`` env (wrapped or not).
        max_steps: Stop after this many actions.

    Returns:
        ``(actions, last_info)``.
    """
    from agentgym_rl.webshop.env import admissible_actions

    base = env.unwrapped
    expert = base.expert()
    info: dict[str, Any] = {"admissible_actions": admissible_actions(base.available_actions)}
    observation, actions = "", []
    for _ in range(max_steps):
        action = expert.act(observation, info)
        actions.append(action)
        observation, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return actions, info


def expert_actions(env: Any, max_steps: int = 15) -> list[str]:
    """The expert's actions for the episode ``env`` was just reset into (it plays them).

    Args:
        env: A reset ``AgentGymRL/WebShop-v0`` env.
        max_steps: Stop after this many actions.

    Returns:
        The actions taken, ending with ``click[buy now]`` when the product was found.
    """
    return play_expert(env, max_steps)[0]
