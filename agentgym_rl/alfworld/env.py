"""The ALFWorld text env: the real TextWorld/PDDL games behind a Gymnasium API."""

from __future__ import annotations

import difflib
import os
import pickle
import uuid
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from agentgym_rl.agents import PlanExpert
from agentgym_rl.alfworld.engine import EngineSnapshot, GameCache, default_cache, make_engine
from agentgym_rl.alfworld.tasks import game_path, list_tasks, task_type_of
from agentgym_rl.data import cache_root, find_alfworld_root
from agentgym_rl.keys import DEFAULT_DEPTHS, EpisodeKeys, StepKeys, normalize_text
from agentgym_rl.spaces import TextSpace

__all__ = ["ALFWorldEnv"]

_BANNER = "-= Welcome to TextWorld, ALFRED! =-"
_GENERATED_NOTICE_SHOWN = False
_SNAPSHOT_MEMORY = 256  # in-memory engine snapshots kept per env for fast restores


def _strip_banner(feedback: str) -> str:
    text = feedback.strip()
    if text.startswith(_BANNER):
        text = text[len(_BANNER) :].lstrip()
    return text


def _normalize_action(action: str) -> str:
    """The command the game is asked: whitespace collapsed, lower case (ALFWorld's commands are)."""
    return normalize_text(action).lower()


class ALFWorldEnv(gym.Env[str, str]):
    """ALFWorld (Shridhar et al., 2021): household tasks as text games, on TextWorld's PDDL engine.

    ## Description
    Each task is a real ALFWorld game (``game.tw-pddl``: PDDL domain, problem and text
    grammar) played by TextWorld's PDDL engine and Fast Downward, with alfworld's
    object names, as the official ``AlfredTWEnv`` plays it; loading and resets are
    cached (see :mod:`agentgym_rl.alfworld.engine`), the game logic is untouched.
    Six task types: ``pick_and_place_simple``, ``look_at_obj_in_light``,
    ``pick_clean_then_place_in_recep``, ``pick_heat_then_place_in_recep``,
    ``pick_cool_then_place_in_recep``, ``pick_two_obj_and_place``.
    :meth:`expert` replays the game's walkthrough; :attr:`prompt_kind` names the prompt
    template agents use (``"alfworld"``).

    ## Action Space
    Free text (:class:`~agentgym_rl.spaces.TextSpace`): a command such as
    ``"go to desk 1"``. Whitespace is collapsed and the text lower-cased; a command
    that is not admissible, or garbage, is answered ``"Nothing happens."`` and
    ``info["action_valid"]`` is ``False``. Nothing an agent sends raises.

    ## Observation Space
    Free text: the game's feedback. On reset, the room description and the task line
    (``"Your task is to: ..."``), without TextWorld's welcome banner.

    ## Rewards
    ``1.0`` on the step that wins the game, else ``0.0``.

    ## Starting State
    ``reset(options={"task": task_id})`` plays that task; without a task the seed
    picks one of the split uniformly. The game itself is deterministic.

    ## Episode End
    - Termination: the task is done (``info["won"]``).
    - Truncation: ``max_episode_steps`` steps (50, by the registered ``TimeLimit``).

    ## Arguments
    ```python
    import gymnasium as gym
    import agentgym_rl

    env = gym.make("AgentGymRL/ALFWorld-v0", split="valid_unseen")
    ```

    | parameter | type | default | meaning |
    |---|---|---|---|
    | ``split`` | str | ``"train"`` | ``train``, ``valid_seen``, ``valid_unseen`` or ``valid_train`` |
    | ``data_dir`` | str or None | None | folder with ``json_2.1.1/`` or its ``.tar.xz``; ``"generated"`` for the embedded games; None: ``ALFWORLD_DATA``, ``../shared/data/alfworld``, ``~/.cache/alfworld``, else the embedded games |
    | ``history_depths`` | tuple[int] | ``(0, 1, 2, 4)`` | depths of ``info["history_keys"]`` (the exact prefix is added last) |
    | ``translation_cache`` | str, bool or None | None | folder for PDDL translations on disk; ``True``: under ``$AGENTGYM_RL_CACHE``; None: ``AGENTGYM_RL_TRANSLATION_CACHE`` or memory only |
    | ``render_mode`` | str or None | None | ``"ansi"`` returns the last observation |

    ## Info
    | key | type | meaning |
    |---|---|---|
    | ``state_key`` | int | ``k(o_t)``, canonical key of the observation text |
    | ``history_keys`` | int64 array | ``K_t^(d)`` per depth, last column the exact-prefix key |
    | ``prefix_key`` | int | the exact-prefix key ``K_t^(∞)`` |
    | ``first_visit`` | bool | ``k(o_t)`` not seen earlier in the episode |
    | ``admissible_actions`` | list[str] | the commands the game accepts now |
    | ``task_id`` / ``task_type`` | str | the game played and its type |
    | ``won`` | bool | the task is done |
    | ``action_valid`` | bool | the last action was admissible (True on reset) |

    ## Vectorized environment
    ``gym.make_vec("AgentGymRL/ALFWorld-v0", num_envs=N)`` and
    :class:`agentgym_rl.GroupVectorEnv` (groups of rollouts of one task).

    ## Version History
    - v0: Initial version (ALFWorld 2.1.1 games, TextWorld 1.7, alfworld 0.4.2).

    Example (on the embedded generated games):

    >>> env = ALFWorldEnv(split="valid_unseen", data_dir="generated")
    >>> obs, info = env.reset(seed=0)
    >>> "Your task is to:" in obs
    True
    >>> for action in env.walkthrough:
    ...     obs, reward, terminated, truncated, info = env.step(action)
    >>> reward, terminated, info["won"]
    (1.0, True, True)
    >>> env.step("dance wildly")[4]["action_valid"]
    False
    >>> env.close()
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    #: The prompt template of this env (``trainers.prompting.PromptConfig.env_kind``).
    prompt_kind: ClassVar[str] = "alfworld"

    def __init__(
        self,
        split: str = "train",
        data_dir: str | os.PathLike | None = None,
        history_depths: tuple[int, ...] = DEFAULT_DEPTHS,
        translation_cache: str | os.PathLike | bool | None = None,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; use one of {self.metadata['render_modes']}"
            )
        self._init_kwargs = dict(
            split=split,
            data_dir=data_dir,
            history_depths=tuple(history_depths),
            translation_cache=translation_cache,
            render_mode=render_mode,
        )
        self.split = split
        self.render_mode = render_mode
        self.history_depths = tuple(history_depths)
        self.data_root, self.generated = self._locate_data(data_dir)
        self.task_ids: list[str] = list_tasks(self.data_root, split)
        if not self.task_ids:
            raise FileNotFoundError(f"no ALFWorld games in {self.data_root / split}")
        self._task_set = set(self.task_ids)

        self.observation_space = TextSpace()
        self.action_space = TextSpace(max_length=1_000_000)
        self._engine = make_engine(self._make_cache(translation_cache))

        self._task_id: str | None = None
        self._keys: EpisodeKeys | None = None
        self._actions: list[str] = []
        self._observation = ""
        self._admissible: list[str] = []
        self._won = False
        self._last_keys: StepKeys | None = None
        self._snapshots: OrderedDict[str, tuple[EngineSnapshot, Any]] = OrderedDict()

    # ------------------------------------------------------------------ set-up helpers
    @staticmethod
    def _locate_data(data_dir: str | os.PathLike | None) -> tuple[Path, bool]:
        if data_dir is None or str(data_dir) != "generated":
            root = find_alfworld_root(data_dir)
            if root is not None:
                return root, False
        from agentgym_rl.alfworld.generator import generated_games_root

        if data_dir is not None:  # "generated"
            return generated_games_root(), True
        global _GENERATED_NOTICE_SHOWN
        if not _GENERATED_NOTICE_SHOWN:
            _GENERATED_NOTICE_SHOWN = True
            warnings.warn(
                "No ALFWorld data found (data_dir, ALFWORLD_DATA, ../shared/data/alfworld, ~/.cache/alfworld): "
                "playing the embedded generated games. Run `agentgym-rl data download alfworld` for the real ones.",
                UserWarning,
                stacklevel=3,
            )
        return generated_games_root(), True

    @staticmethod
    def _make_cache(translation_cache: str | os.PathLike | bool | None) -> GameCache:
        if translation_cache is None or translation_cache is False:
            return default_cache()
        folder = cache_root() / "translations" if translation_cache is True else Path(translation_cache)
        return GameCache(folder)

    # ------------------------------------------------------------------ properties
    @property
    def task_id(self) -> str | None:
        """The task being played (None before the first reset)."""
        return self._task_id

    @property
    def walkthrough(self) -> list[str]:
        """The expert walkthrough of the current task, from its start (the planner's if the file has none)."""
        if self._task_id is None:
            raise RuntimeError("no task loaded: call reset() first")
        walkthrough = self._engine.record.walkthrough
        if walkthrough is None:  # ask the planner from the start, then come back
            here = self._engine.snapshot()
            self._engine.reset()
            walkthrough = self._engine.policy_commands()
            self._engine.restore(here)
        return list(walkthrough)

    @property
    def num_steps(self) -> int:
        """Steps taken in the current episode (restored with a snapshot)."""
        return len(self._actions)

    def expert(self) -> PlanExpert:
        """The expert of the episode just reset: it replays :attr:`walkthrough`."""
        return PlanExpert(self.walkthrough)

    def expert_plan(self) -> list[str]:
        """The planner's commands from the current state to the goal (Fast Downward)."""
        return list(self._engine.policy_commands())

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        task_id = options.get("task")
        if task_id is None:
            task_id = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        elif task_id not in self._task_set:
            close = difflib.get_close_matches(str(task_id), self.task_ids, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown task {task_id!r} for split {self.split!r} ({len(self.task_ids)} tasks in "
                f"env.unwrapped.task_ids).{hint}"
            )
        if task_id != self._task_id or self._keys is None:
            self._engine.load(game_path(self.data_root, self.split, task_id))
            self._keys = EpisodeKeys(task_id, self.history_depths)
            self._task_id = task_id
        state = self._engine.reset()
        self._actions = []
        self._observation = _strip_banner(state.feedback)
        self._admissible = list(state.admissible_commands)
        self._won = bool(state.won)
        self._last_keys = self._keys.reset(self._observation)
        return self._observation, self._info(self._last_keys, action_valid=True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._keys is None:
            raise RuntimeError("call reset() before step()")
        command = _normalize_action(str(action))
        action_valid = command in self._admissible
        state, _, _ = self._engine.step(command)
        self._actions.append(command)
        self._observation = state.feedback.strip()
        self._admissible = list(state.admissible_commands)
        won_now = bool(state.won) and not self._won
        self._won = bool(state.won)
        self._last_keys = self._keys.step(command, self._observation)
        info = self._info(self._last_keys, action_valid=action_valid)
        # truncated=False: the registered TimeLimit owns the step limit.
        return self._observation, 1.0 if won_now else 0.0, self._won, False, info

    def _info(self, keys: StepKeys, action_valid: bool) -> dict[str, Any]:
        return {
            "state_key": keys.state_key,
            "history_keys": keys.history_keys,
            "prefix_key": keys.prefix_key,
            "first_visit": keys.first_visit,
            "admissible_actions": list(self._admissible),
            "task_id": self._task_id,
            "task_type": task_type_of(self._task_id or ""),
            "won": self._won,
            "action_valid": action_valid,
        }

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._observation
        return None

    def close(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.close()
            self._engine = None
        super().close()

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> bytes:
        """The current episode as bytes: task, actions so far and key trackers.

        :meth:`restore` puts an env back to it, in this process by a state copy when
        it still holds one, anywhere else by replaying the actions (the game is
        deterministic).
        """
        if self._keys is None:
            raise RuntimeError("call reset() before snapshot()")
        token = uuid.uuid4().hex
        self._snapshots[token] = (self._engine.snapshot(), (self._observation, self._admissible, self._won))
        while len(self._snapshots) > _SNAPSHOT_MEMORY:
            self._snapshots.popitem(last=False)
        payload = {
            "version": 1,
            "split": self.split,
            "task_id": self._task_id,
            "actions": list(self._actions),
            "keys": self._keys.get_state(),
            "step_keys": self._last_keys,
            "token": token,
        }
        return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, snapshot: bytes) -> tuple[str, dict[str, Any]]:
        """Return to a state made by :meth:`snapshot`; gives its observation and info."""
        payload = pickle.loads(snapshot)
        if payload.get("split") != self.split:
            raise ValueError(f"snapshot of split {payload.get('split')!r} restored in a {self.split!r} env")
        cached = self._snapshots.get(payload["token"])
        if cached is not None and payload["task_id"] == self._task_id and self._engine.can_restore(cached[0]):
            self._engine.restore(cached[0])
            self._observation, admissible, self._won = cached[1]
            self._admissible = list(admissible)
            self._actions = list(payload["actions"])
        else:  # another process or an evicted copy: replay the deterministic game
            self.reset(options={"task": payload["task_id"]})
            for command in payload["actions"]:
                self.step(command)
        self._keys.set_state(payload["keys"])
        self._last_keys = payload["step_keys"]
        return self._observation, self._info(self._last_keys, action_valid=True)

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        return {"init_kwargs": self._init_kwargs, "snapshot": self.snapshot() if self._keys else None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["init_kwargs"])
        if state["snapshot"] is not None:
            self.restore(state["snapshot"])
