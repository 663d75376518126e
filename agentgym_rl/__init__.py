"""agentgym-rl: LLM-agent environments (ALFWorld, WebShop) with a Gymnasium API for step-level group RL.

Importing the package registers ``AgentGymRL/ALFWorld-v0`` and ``AgentGymRL/WebShop-v0``.
"""

from agentgym_rl.registration import register_envs

__version__ = "0.1.0"

register_envs()

__all__ = ["__version__", "register_envs"]
