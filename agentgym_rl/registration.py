"""Registration of the package's environments with Gymnasium (run on ``import agentgym_rl``).

Registration is data: one ``gym.register`` table with string entry points (imported
lazily), a ``vector_entry_point`` for ``gym.make_vec`` and the step limit in the spec.
Variants are ``kwargs``, not subclasses.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

ENV_SPECS: list[dict] = [
    # ---------------------------------------------------------------- ALFWorld
    dict(
        id="AgentGymRL/ALFWorld-v0",
        entry_point="agentgym_rl.alfworld.env:ALFWorldEnv",
        vector_entry_point="agentgym_rl.vector:alfworld_vector_env",
        max_episode_steps=50,
        reward_threshold=1.0,
    ),
    # ---------------------------------------------------------------- WebShop
    dict(
        id="AgentGymRL/WebShop-v0",
        entry_point="agentgym_rl.webshop.env:WebShopEnv",
        vector_entry_point="agentgym_rl.vector:webshop_vector_env",
        max_episode_steps=15,
        reward_threshold=1.0,
    ),
    # ---------------------------------------------------------------- pipeline check
    dict(
        id="AgentGymRL/TextBandit-v0",
        entry_point="agentgym_rl.bandit:TextBanditEnv",
        vector_entry_point="agentgym_rl.vector:bandit_vector_env",
        max_episode_steps=1,
        reward_threshold=1.0,
    ),
]


#: Short names accepted by the command line.
ENV_ALIASES: dict[str, str] = {
    "alfworld": "AgentGymRL/ALFWorld-v0",
    "webshop": "AgentGymRL/WebShop-v0",
    "bandit": "AgentGymRL/TextBandit-v0",
}


def resolve_env_id(name: str) -> str:
    """The registered id for a short name (``alfworld``, ``webshop``) or an id itself."""
    if name in ENV_ALIASES:
        return ENV_ALIASES[name]
    if name in (spec["id"] for spec in ENV_SPECS):
        return name
    raise ValueError(
        f"unknown env {name!r}; choose one of {sorted(ENV_ALIASES)} or {[s['id'] for s in ENV_SPECS]}"
    )


def register_envs() -> None:
    """Register every env of :data:`ENV_SPECS` (idempotent)."""
    for spec in ENV_SPECS:
        if spec["id"] not in gym.registry:
            gym.register(**spec)


def env_class(env_id: str) -> Any:
    """The env class a registered id makes (its spec's entry point, a factory if it is one), imported, not built.

    ``module:Id`` names the module that registers ``Id`` (as ``gym.make`` accepts it).
    """
    import importlib

    from gymnasium.envs.registration import load_env_creator

    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    entry_point = gym.spec(name).entry_point
    return load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point


def prompt_kind(env_id: str) -> str:
    """The prompt template of a registered id: its env class's ``prompt_kind`` (``"generic"`` if it has none).

    >>> prompt_kind("AgentGymRL/WebShop-v0"), prompt_kind("AgentGymRL/TextBandit-v0")
    ('webshop', 'generic')
    """
    return str(getattr(env_class(env_id), "prompt_kind", "generic"))
