"""The leaderboard's agents by ``--agent`` spec, all speaking :class:`agentgym_rl.agents.BatchPolicy`.

``random`` and ``expert`` are the scripted agents of :mod:`agentgym_rl.agents` (the
expert is each env's own ``expert()``); ``hf:PATH_OR_ID`` and ``checkpoint:DIR`` are a
causal LM (:class:`benchmarks.leaderboard.hf_policy.HFPolicy`) prompted with the
env's prompt kind, which the env class names (``prompt_kind``).

>>> env_kind("AgentGymRL/WebShop-v0"), env_kind("AgentGymRL/ALFWorld-v0"), env_kind("AgentGymRL/TextBandit-v0")
('webshop', 'alfworld', 'generic')
>>> make_policy("expert", "AgentGymRL/ALFWorld-v0").name
'expert'
"""

from __future__ import annotations

from typing import Any

from agentgym_rl.agents import AGENTS, BatchPolicy, ExpertPolicy, RandomPolicy, make_agent

__all__ = ["BatchPolicy", "ExpertPolicy", "RandomPolicy", "env_kind", "make_policy"]


def env_kind(env_id: str) -> str:
    """The prompt kind of a registered id (``"alfworld"``, ``"webshop"``, ``"generic"``): its env class's ``prompt_kind``."""
    import agentgym_rl  # noqa: F401 - registers the envs
    from agentgym_rl.registration import prompt_kind

    return prompt_kind(env_id)


def make_policy(agent: str, env_id: str, config: Any = None) -> BatchPolicy:
    """The batched agent named by an ``--agent`` spec.

    Args:
        agent: ``random``, ``expert``, ``hf:PATH_OR_ID`` or ``checkpoint:DIR``.
        env_id: The env it will play (the model's prompts depend on it).
        config: The :class:`~benchmarks.leaderboard.config.LeaderboardConfig` (model settings).
    """
    if agent in AGENTS:
        return make_agent(agent)
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
