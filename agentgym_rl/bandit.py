"""A one-step text bandit for checking a training pipeline end to end."""

from __future__ import annotations

import string
from typing import Any, ClassVar

import gymnasium as gym

from agentgym_rl.agents import PlanExpert
from agentgym_rl.keys import DEFAULT_DEPTHS, EpisodeKeys, normalize_text
from agentgym_rl.spaces import TextSpace

__all__ = ["TextBanditEnv"]


class TextBanditEnv(gym.Env[str, str]):
    """Pick the best of a few one-letter actions: a one-step task with a known best action.

    ## Description
    The CartPole of LLM-agent pipelines: every task shows the same options
    (``a``, ``b``, ...); task ``best-x`` pays 1.0 for ``x`` and 0.0 for anything else. A
    policy that learns must raise its success rate on a task from chance (1/options for
    a uniform chooser) to near 1. It speaks the package's env contract (state keys,
    first-visit flags, admissible actions), so it runs in ``GroupVectorEnv`` and the
    trainer like the real envs. :meth:`expert` plays the best option; the prompt
    template is the generic one (:attr:`prompt_kind` ``"generic"``).

    ## Action Space
    Free text; whitespace collapsed and lower-cased, then compared with the options.

    ## Observation Space
    Free text: ``"Options: a, b. Your task is to: pick the best option."`` (the best
    option is not named).

    ## Rewards
    1.0 for the task's best option, else 0.0.

    ## Starting State
    ``reset(options={"task": "best-a"})``; without a task the seed picks one.

    ## Episode End
    - Termination: after the first action.

    ## Arguments
    | parameter | type | default | meaning |
    |---|---|---|---|
    | ``num_options`` | int | 2 | options ``a``, ``b``, ... (2 to 26) |
    | ``best`` | str or None | None | only the task ``best-<best>`` (one known best action) |
    | ``split`` | str | ``"train"`` | accepted for the common interface; all splits hold the same tasks |

    ## Info
    ``state_key``, ``history_keys``, ``prefix_key``, ``first_visit``,
    ``admissible_actions``, ``task_id``, ``task_type`` (``"bandit"``), ``won``,
    ``action_valid`` (as ``AgentGymRL/ALFWorld-v0``).

    ## Version History
    - v0: Initial version.

    >>> env = TextBanditEnv()
    >>> obs, info = env.reset(options={"task": "best-b"})
    >>> env.step(" B ")[1:3]
    (1.0, True)
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    #: The prompt template of this env (``trainers.prompting.PromptConfig.env_kind``).
    prompt_kind: ClassVar[str] = "generic"

    def __init__(
        self,
        num_options: int = 2,
        best: str | None = None,
        split: str = "train",
        history_depths: tuple[int, ...] = DEFAULT_DEPTHS,
        render_mode: str | None = None,
    ) -> None:
        if not 2 <= num_options <= 26:
            raise ValueError(f"num_options must be in 2..26, got {num_options}")
        self.options = list(string.ascii_lowercase[:num_options])
        if best is not None and best not in self.options:
            raise ValueError(f"best={best!r} is not one of the options {self.options}")
        self.task_ids = [f"best-{option}" for option in self.options if best is None or option == best]
        self.split, self.render_mode, self.history_depths = split, render_mode, tuple(history_depths)
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self._task_id = self.task_ids[0]
        self._keys = EpisodeKeys(self._task_id, self.history_depths)
        self._observation = ""
        self._won = False
        self._steps = 0

    @property
    def num_steps(self) -> int:
        """Steps taken in the episode."""
        return self._steps

    @property
    def walkthrough(self) -> list[str]:
        """The winning action of the current task."""
        return [self._task_id.removeprefix("best-")]

    def expert(self) -> PlanExpert:
        """The expert of the episode just reset: it plays the task's best option."""
        return PlanExpert(self.walkthrough)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            task = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        elif task not in self.task_ids:
            raise ValueError(f"unknown task {task!r}; tasks: {self.task_ids}")
        self._task_id, self._won, self._steps = task, False, 0
        self._keys = EpisodeKeys(task, self.history_depths)
        self._observation = f"Options: {', '.join(self.options)}. Your task is to: pick the best option."
        return self._observation, self._info(self._keys.reset(self._observation), True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        choice = normalize_text(str(action)).lower()
        self._won = choice == self._task_id.removeprefix("best-")
        self._steps += 1
        self._observation = "You won." if self._won else "You lost."
        info = self._info(self._keys.step(choice, self._observation), choice in self.options)
        return self._observation, float(self._won), True, False, info

    def _info(self, keys: Any, action_valid: bool) -> dict[str, Any]:
        return {
            "state_key": keys.state_key,
            "history_keys": keys.history_keys,
            "prefix_key": keys.prefix_key,
            "first_visit": keys.first_visit,
            "admissible_actions": list(self.options) if self._steps == 0 else [],
            "task_id": self._task_id,
            "task_type": "bandit",
            "won": self._won,
            "action_valid": action_valid,
        }

    def render(self) -> str | None:
        return self._observation if self.render_mode == "ansi" else None
