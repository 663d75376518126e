"""Prompts and action parsing of the papers' agent protocol (verl-agent / GiGPO / 3SPO conventions).

One module serves the trainer and the leaderboard's ``hf:`` agent, so that a model is
evaluated with exactly the prompt it was trained on (``WEBSHOP.md``, section 6):

- the task is taken from the first observation (ALFWorld: the text after
  ``Your task is to: ``; WebShop: the instruction segment);
- a prompt is one user turn: a role line, the task, the last ``history_window``
  (observation, action) pairs, the current observation, the admissible actions (each
  single-quoted) and the reply rule: reason inside ``<think> </think>``, then one action
  inside ``<action> </action>``; past ``max_prompt_chars`` the history is dropped;
- a reply is lower-cased and the text between the first ``<action>`` and the first
  ``</action>`` is the action; a reply without both tags, without ``<think>`` /
  ``</think>``, or with CJK characters is *invalid* (the action is then the reply's
  last 30 characters, 20 for WebShop) and earns the invalid-action penalty.

>>> cfg = PromptConfig(env_kind="alfworld")
>>> parse_action("<think>the mug is here</think><action> Take mug 1 from desk 1 </action>", cfg)
('take mug 1 from desk 1', True)
>>> parse_action("take mug 1 from desk 1", cfg)
('take mug 1 from desk 1', False)
>>> extract_task("You are in a room. Your task is to: put a mug in desk.", cfg)
'put a mug in desk.'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "ACTION_FORMATS",
    "PromptConfig",
    "build_messages",
    "env_kind_of",
    "extract_task",
    "format_observation",
    "parse_action",
]

_CJK = re.compile(r"[\u4e00-\u9fff]")
_TASK_MARK = "Your task is to: "


@dataclass
class PromptConfig:
    """How prompts are written and replies read.

    Parameters that control the prompt:
        env_kind: ``"alfworld"`` or ``"webshop"`` (role line, task and observation format).
        history_window: (observation, action) pairs shown before the current observation (H).
        max_prompt_chars: Past this length the prompt falls back to no history.
        system_prompt: Optional system message put before the user turn.

    Parameters that control action parsing:
        action_format: ``"think_action"`` (the papers': ``<think>`` and ``<action>`` tags
            required), ``"action_tag"`` (only ``<action>`` tags) or ``"plain"`` (the whole
            reply is the action; for pipeline checks with tiny models).
        fallback_chars: Characters of the reply's end taken as the action when the tags are
            missing (None: 30 for ALFWorld, 20 for WebShop, as verl-agent).
    """

    env_kind: str = field(default="alfworld", metadata={"help": "alfworld, webshop or generic."})
    history_window: int = field(
        default=2, metadata={"help": "Past (observation, action) pairs in the prompt."}
    )
    max_prompt_chars: int = field(default=13_000, metadata={"help": "Longer prompts drop the history."})
    system_prompt: str | None = field(default=None, metadata={"help": "Optional system message."})
    action_format: str = field(
        default="think_action", metadata={"help": "think_action, action_tag or plain (whole reply = action)."}
    )
    fallback_chars: int | None = field(
        default=None, metadata={"help": "Reply tail used when tags are missing."}
    )

    def __post_init__(self) -> None:
        if self.env_kind not in _ROLE:
            raise ValueError(f"env_kind must be one of {sorted(_ROLE)}, got {self.env_kind!r}")
        if self.action_format not in ACTION_FORMATS:
            raise ValueError(f"action_format must be one of {ACTION_FORMATS}, got {self.action_format!r}")
        if self.history_window < 0:
            raise ValueError(f"history_window must be >= 0, got {self.history_window}")
        if self.fallback_chars is None:
            self.fallback_chars = 20 if self.env_kind == "webshop" else 30


def env_kind_of(env_id: str) -> str:
    """The prompt kind of a registered env id: its env class's ``prompt_kind`` (``"generic"`` if none).

    >>> env_kind_of("AgentGymRL/WebShop-v0"), env_kind_of("AgentGymRL/TextBandit-v0")
    ('webshop', 'generic')
    """
    import agentgym_rl  # noqa: F401 - registers the envs
    from agentgym_rl.registration import prompt_kind

    return prompt_kind(env_id)


def extract_task(first_observation: str, config: PromptConfig) -> str:
    """The task sentence of an episode, read from its first observation."""
    if config.env_kind != "webshop":
        head, mark, task = first_observation.partition(_TASK_MARK)
        return task.strip() if mark else first_observation.strip()
    segments = [s.strip() for s in first_observation.split("[SEP]")]
    for i, segment in enumerate(segments[:-1]):
        if segment == "Instruction:":
            return segments[i + 1]
    return first_observation.strip()


def format_observation(observation: str, task: str, config: PromptConfig) -> str:
    """The observation as the prompt shows it (WebShop: the segments after the task, quoted)."""
    if config.env_kind != "webshop":
        return observation.strip()
    segments = [s.strip() for s in observation.split("[SEP]")]
    if task in segments:
        rest = segments[segments.index(task) + 1 :]
        return " [SEP] ".join(f"'{s}'" for s in rest)
    return observation.strip()


def _format_actions(actions: list[str], config: PromptConfig) -> str:
    if config.env_kind == "alfworld":
        actions = [a for a in actions if a != "help"]
    return "[\n " + ",\n ".join(f"'{a}'" for a in actions) + "\n]"


_ROLE = {
    "alfworld": "You are an expert agent acting in a household (the ALFRED embodied environment).",
    "webshop": "You are an expert autonomous agent shopping on the WebShop website.",
    "generic": "You are an agent acting in a text environment.",
}
ACTION_FORMATS = ("think_action", "action_tag", "plain")
_REPLY_RULE = (
    "Think step by step about the current situation inside <think> </think> tags. "
    "Then choose exactly one admissible action and write it inside <action> </action> tags."
)


def build_messages(
    task: str,
    observation: str,
    admissible_actions: list[str],
    history: list[tuple[str, str]],
    config: PromptConfig,
) -> list[dict[str, str]]:
    """The chat messages for one step.

    Args:
        task: The episode's task (:func:`extract_task`).
        observation: The current observation (raw env text).
        admissible_actions: The env's admissible actions now.
        history: Every (observation before the action, action) pair so far, oldest first;
            the last ``history_window`` are shown, numbered from the episode's start.
        config: The prompt settings.
    """
    current = format_observation(observation, task, config)
    actions = _format_actions(admissible_actions, config)
    shown = history[-config.history_window :] if config.history_window else []
    first = len(history) - len(shown) + 1

    def no_history() -> str:
        return (
            f"{_ROLE[config.env_kind]}\nYour task is to: {task}\n"
            f"Your current observation is: {current}\n"
            f"Your admissible actions of the current situation are: {actions}.\n\n{_REPLY_RULE}"
        )

    if not shown:
        text = no_history()
    else:
        lines = "\n".join(
            f"[Observation {first + k}: '{format_observation(o, task, config)}', Action {first + k}: '{a}']"
            for k, (o, a) in enumerate(shown)
        )
        text = (
            f"{_ROLE[config.env_kind]}\nYour task is to: {task}\n"
            f"Prior to this step, you have already taken {len(history)} step(s). "
            f"Below are the most recent {len(shown)} observations and the corresponding actions you took:\n"
            f"{lines}\nYou are now at step {len(history) + 1} and your current observation is: {current}\n"
            f"Your admissible actions of the current situation are: {actions}.\n\n{_REPLY_RULE}"
        )
        if len(text) > config.max_prompt_chars:
            text = no_history()
    messages = [{"role": "system", "content": config.system_prompt}] if config.system_prompt else []
    return [*messages, {"role": "user", "content": text}]


def parse_action(reply: str, config: PromptConfig) -> tuple[str, bool]:
    """The action in a model reply, and whether the reply followed the format."""
    text = reply.lower()
    if config.action_format == "plain":
        return text.strip(), True
    start, end = text.find("<action>"), text.find("</action>")
    if start == -1 or end == -1 or end < start:
        return text[-config.fallback_chars :].strip(), False
    action = text[start + len("<action>") : end].strip()
    valid = True
    if config.action_format == "think_action" and ("<think>" not in text or "</think>" not in text):
        valid = False
    if _CJK.search(text):
        valid = False
    return action, valid
