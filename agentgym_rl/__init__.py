"""agentgym-rl: LLM-agent environments (ALFWorld, WebShop) with a Gymnasium API for step-level group RL.

Importing the package registers ``AgentGymRL/ALFWorld-v0`` and ``AgentGymRL/WebShop-v0``.
"""

from agentgym_rl.registration import register_envs

__version__ = "0.1.0"

register_envs()

__all__ = ["GroupParallelEnv", "GroupVectorEnv", "__version__", "register_envs"]


def __getattr__(name: str):
    # Lazy exports: `import agentgym_rl` stays light (no PettingZoo, no worker machinery).
    if name == "GroupVectorEnv":
        from agentgym_rl.vector import GroupVectorEnv

        return GroupVectorEnv
    if name == "GroupParallelEnv":
        from agentgym_rl.parallel import GroupParallelEnv

        return GroupParallelEnv
    raise AttributeError(f"module 'agentgym_rl' has no attribute {name!r}")
