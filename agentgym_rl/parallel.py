"""A PettingZoo ``ParallelEnv`` view of one group: G rollouts of the same task as G agents.

Each agent (``rollout_0`` … ``rollout_{G-1}``) acts in its own copy of the task; the
copies share nothing, so the group is a set of independent rollouts that start from
the same state, which is what group RL compares. An agent leaves when its episode
ends (won or out of steps).

>>> import agentgym_rl
>>> group = GroupParallelEnv("AgentGymRL/ALFWorld-v0", group_size=2, split="valid_unseen", data_dir="generated")
>>> observations, infos = group.reset(seed=0)
>>> group.agents
['rollout_0', 'rollout_1']
>>> observations["rollout_0"] == observations["rollout_1"]
True
>>> _ = group.step({"rollout_0": "look", "rollout_1": "look"})
>>> group.close()
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
from pettingzoo import ParallelEnv

from agentgym_rl.spaces import TextSpace

__all__ = ["GroupParallelEnv"]


class GroupParallelEnv(ParallelEnv):
    """One group of ``group_size`` rollouts of a task, as PettingZoo agents.

    Args:
        env_id: A registered env id.
        group_size: Number of rollouts (agents).
        render_mode: Passed to each env (``"ansi"`` or None).
        **env_kwargs: Passed to ``gym.make`` for every rollout.

    ``reset(seed, options={"task": task_id})`` gives every agent that task (without
    one, the seed picks it); ``step`` takes a dict of actions for the live agents.
    """

    metadata = {"name": "agentgym_rl_group_v0", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(
        self, env_id: str, group_size: int = 2, render_mode: str | None = None, **env_kwargs: Any
    ) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.env_id = env_id
        self.render_mode = render_mode
        self.possible_agents = [f"rollout_{i}" for i in range(group_size)]
        self.agents: list[str] = []
        self._envs = {
            agent: gym.make(env_id, render_mode=render_mode, **env_kwargs) for agent in self.possible_agents
        }
        self.task_id: str | None = None

    @functools.cache  # noqa: B019 - PettingZoo's contract: the same space object every call
    def observation_space(self, agent: str) -> TextSpace:
        return TextSpace()

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> TextSpace:
        return TextSpace()

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        options = dict(options or {})
        first = self.possible_agents[0]
        observation, info = self._envs[first].reset(seed=seed, options=options)
        self.task_id = info["task_id"]
        observations, infos = {first: observation}, {first: info}
        for agent in self.possible_agents[1:]:  # the same task and seed for every rollout
            observations[agent], infos[agent] = self._envs[agent].reset(
                seed=seed, options={**options, "task": self.task_id}
            )
        self.agents = list(self.possible_agents)
        return observations, infos

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            if agent not in actions:
                raise KeyError(f"no action for live agent {agent!r}; live agents: {self.agents}")
            result = self._envs[agent].step(actions[agent])
            observations[agent], rewards[agent], terminations[agent], truncations[agent], infos[agent] = (
                result
            )
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{agent}] {self._envs[agent].render()}" for agent in self.possible_agents)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()

    def snapshot(self, agent: str) -> bytes:
        """That rollout's episode as bytes (its env's ``snapshot()``)."""
        return self._envs[agent].unwrapped.snapshot()
