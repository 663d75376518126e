"""``AgentGymRL/WebShop-v0``: WebShop on our own engine (:mod:`webshop_server`), in-process or over HTTP."""

from agentgym_rl.webshop.env import WebShopEnv, admissible_actions
from agentgym_rl.webshop.expert import GoalExpert, expert_actions, play_expert

__all__ = ["GoalExpert", "WebShopEnv", "admissible_actions", "expert_actions", "play_expert"]
