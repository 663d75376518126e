"""``AgentGymRL/WebShop-v0``: the WebShop text environment on our own engine or server."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from agentgym_rl.keys import DEFAULT_DEPTHS, EpisodeKeys, StepKeys
from agentgym_rl.spaces import TextSpace
from agentgym_rl.webshop.backends import HttpBackend, LocalBackend, Transition
from agentgym_rl.webshop.expert import GoalExpert

__all__ = ["WebShopEnv", "admissible_actions"]

#: The search action offered on the search page (verl-agent's template).
SEARCH_TEMPLATE = "search[<your query>]"


def admissible_actions(available: dict[str, Any]) -> list[str]:
    """The actions to offer an agent on a page, from the original's available actions.

    ``search[<your query>]`` where the page has a search bar, then ``click[x]`` for
    each clickable except ``search`` (clicking it does nothing in the original).

    >>> admissible_actions({"has_search_bar": True, "clickables": ["search"]})
    ['search[<your query>]']
    >>> admissible_actions({"has_search_bar": False, "clickables": ["back to search", "b0abc"]})
    ['click[back to search]', 'click[b0abc]']
    """
    actions = [SEARCH_TEMPLATE] if available.get("has_search_bar") else []
    return actions + [f"click[{c}]" for c in available.get("clickables", []) if c != "search"]


class WebShopEnv(gym.Env[str, str]):
    """WebShop: buy the product an instruction describes, in a text-mode online shop.

    ## Description
    The WebShop benchmark (Yao et al., 2022) on :mod:`webshop_server`, our
    reimplementation of its engine: a catalogue (the generated shop by default, or
    the original data files), BM25 search (k1 0.9, b 0.4, 10 results a page of the
    top 50), the original's pages in ``text`` mode (elements joined by ``[SEP]``,
    the instruction on every page) and its reward. Each task is a goal: an
    instruction naming a product type, attributes, options and a price cap.
    :meth:`expert` gives the episode's goal-seeking expert; :attr:`prompt_kind` names
    the prompt template agents use (``"webshop"``).

    ## Action Space
    Free text (:class:`~agentgym_rl.spaces.TextSpace`): ``search[query]`` (on any
    page) or ``click[label]`` for a label of the current page (an ASIN, ``next >``,
    ``< prev``, ``back to search``, an option value, ``description``, ``features``,
    ``reviews``, ``buy now``). Anything else changes nothing, and so does an action
    over 4,096 characters (``webshop_server.actions.MAX_ACTION_CHARS``): it is
    answered invalid without being read.

    ## Observation Space
    Free text (:class:`~agentgym_rl.spaces.TextSpace`): the current page, its text
    elements joined by ``[SEP]`` (``observation_mode="text_rich"``: one line per
    element with ``[button] ... [button_]`` marks, as the original's baseline models
    see it).

    | Page | Text (``text`` mode) | Clickables |
    |---|---|---|
    | search | ``WebShop [SEP] Instruction: [SEP] <ins> [SEP] Search`` | none (search only) |
    | results | ``Instruction: [SEP] <ins> [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] <ASIN> [SEP] <title> [SEP] <price> ...`` | ``back to search``, ``< prev`` (page > 1), ``next >``, ASINs |
    | item | ``... [SEP] < Prev [SEP] <option name> [SEP] <value> ... [SEP] <title> [SEP] Price: ... [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now`` | the buttons, option values |
    | sub-page | ``... [SEP] < Prev [SEP] <description / bullets>`` | ``back to search``, ``< prev`` |
    | done | ``Thank you for shopping with us! [SEP] ... [SEP] Your score (min 0.0, max 1.0) [SEP] <score> ...`` | none |

    ## Rewards
    0 on every step but the purchase, which earns the score in [0, 1]:
    (matched attributes + matched options + price ok) / (attributes + options + 1)
    × a product-type factor (1, 0.5, 0.1 or 0). With ``reward_type="won"`` the
    purchase earns 1 only when the score is 1 (verl-agent trains on 10 × won: set
    ``reward_scale=10``).

    ## Starting State
    The search page of a goal: ``options={"task": goal_index}``, else a goal drawn
    uniformly from ``split`` with the env's RNG (``reset(seed=...)``).

    ## Episode End
    - Termination: Buy Now.
    - Truncation: 15 steps (the registered ``TimeLimit``; ``step`` never truncates).

    ## Arguments
    >>> import gymnasium as gym, agentgym_rl
    >>> env = gym.make("AgentGymRL/WebShop-v0", split="test", num_products=60)
    >>> obs, info = env.reset(seed=0, options={"task": 3})
    >>> obs.startswith("WebShop [SEP] Instruction: [SEP] "), info["task_id"], info["admissible_actions"]
    (True, 3, ['search[<your query>]'])
    >>> obs, reward, terminated, truncated, info = env.step("click[nothing]")
    >>> reward, terminated, info["action_valid"]
    (0.0, False, False)

    | Parameter | Type | Default | Description |
    |---|---|---|---|
    | ``split`` | str | ``"train"`` | ``test`` (goals 0-499), ``eval`` (500-1499), ``train`` (the rest) or ``all`` |
    | ``catalog`` | str \\| Path | ``"generated"`` | the generated shop, or a directory of the original files |
    | ``seed`` | int | 0 | seed of the generated shop and of the price draws |
    | ``num_products`` | int \\| None | 500 | size of the generated shop (first N of a data dir; None: all) |
    | ``human_goals`` | bool | False | goals from human instructions (data dir with ``items_human_ins``) |
    | ``backend`` | str | ``"local"`` | ``local`` (in-process engine) or ``http`` (a running server) |
    | ``url`` | str \\| None | None | the server's base URL (``backend="http"``) |
    | ``reward_type`` | str | ``"score"`` | ``score`` or ``won`` (see Rewards) |
    | ``reward_scale`` | float | 1.0 | multiplies the purchase reward |
    | ``history_depths`` | tuple[int] | (0, 1, 2, 4) | depths of ``info["history_keys"]`` |
    | ``observation_mode`` | str | ``"text"`` | ``text`` or ``text_rich`` (the baseline models' view) |
    | ``render_mode`` | str \\| None | None | ``ansi`` (the page text) or ``human`` (printed) |

    ## Info
    | Key | Type | Meaning |
    |---|---|---|
    | ``state_key`` | int | key of the observation text (``agentgym_rl.keys.state_key``) |
    | ``history_keys`` | int64 array | history keys per depth, last = exact prefix |
    | ``prefix_key`` | int | the exact-prefix key (``history_keys[-1]``) |
    | ``first_visit`` | bool | the observation is new in this episode |
    | ``admissible_actions`` | list[str] | see :func:`admissible_actions` |
    | ``task_id`` | int | the goal index |
    | ``task_type`` | str | the goal product's category (``fashion``, ``beauty``, ...) |
    | ``won`` | bool | the purchase scored 1 |
    | ``score`` | float | the purchase score (0 before Buy Now) |
    | ``action_valid`` | bool | the action did something (always True on reset) |

    ## Vectorized environment
    ``gym.make_vec`` goes through ``agentgym_rl.vector:webshop_vector_env``.
    :meth:`snapshot` / :meth:`restore` save and restore an episode (a few hundred
    bytes) to branch rollouts.

    ## Notes (differences from the original, all deliberate)
    Price draws and price caps are seeded (the original's are not); ``<a>``
    searches find nothing instead of crashing; ``click[search]`` is invalid; the
    goal order is always the original's seed-233 shuffle (no per-worker reshuffle);
    actions over 4,096 characters are invalid, and the rest are split as the
    original's regex splits them but in linear time (its backtracking took 30 s on a
    64 kB action).

    ## Version History
    - v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    #: The prompt template of this env (``trainers.prompting.PromptConfig.env_kind``).
    prompt_kind: ClassVar[str] = "webshop"

    def __init__(
        self,
        split: str = "train",
        catalog: str | Path = "generated",
        seed: int = 0,
        num_products: int | None = 500,
        human_goals: bool = False,
        backend: str = "local",
        url: str | None = None,
        reward_type: str = "score",
        reward_scale: float = 1.0,
        history_depths: Sequence[int] = DEFAULT_DEPTHS,
        observation_mode: str = "text",
        render_mode: str | None = None,
    ) -> None:
        if backend not in ("local", "http"):
            raise ValueError(f"backend must be 'local' or 'http', got {backend!r}")
        if backend == "http" and not url:
            raise ValueError("backend='http' needs url=, e.g. url='http://127.0.0.1:3000'")
        if observation_mode not in ("text", "text_rich"):
            raise ValueError(f"observation_mode must be 'text' or 'text_rich', got {observation_mode!r}")
        if reward_type not in ("score", "won"):
            raise ValueError(f"reward_type must be 'score' or 'won', got {reward_type!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self._config = dict(
            split=split, catalog=str(catalog), seed=seed, num_products=num_products, human_goals=human_goals,
            backend=backend, url=url, reward_type=reward_type, reward_scale=reward_scale,
            history_depths=tuple(history_depths), observation_mode=observation_mode, render_mode=render_mode,
        )  # fmt: skip
        self.split = split
        self.reward_type = reward_type
        self.reward_scale = float(reward_scale)
        self.history_depths = tuple(history_depths)
        self.observation_mode = observation_mode
        self.render_mode = render_mode
        if backend == "local":
            self._backend: LocalBackend | HttpBackend = LocalBackend(catalog, num_products, seed, human_goals)
        else:
            self._backend = HttpBackend(url)  # type: ignore[arg-type]
        self.task_ids: list[int] = list(self._backend.split(split))
        if not self.task_ids:
            raise ValueError(
                f"split {split!r} has no goals in this catalogue ({self._backend.num_goals} goals); "
                "use a larger num_products or split='all'"
            )
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self.goal: dict[str, Any] | None = None
        self._goal_index = -1
        self._keys = EpisodeKeys("webshop:-1", self.history_depths)
        self._last: Transition | None = None
        self._last_keys: StepKeys | None = None
        self._score = 0.0

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            task = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        task = int(task)
        if not 0 <= task < self._backend.num_goals:
            raise ValueError(f"task {task} is not a goal index (0..{self._backend.num_goals - 1})")
        self._goal_index = task
        self.goal = self._backend.goal(task)
        self._keys = EpisodeKeys(f"webshop:{task}", self.history_depths)
        self._last = self._backend.reset(task, self.observation_mode)
        self._score = 0.0
        keys = self._last_keys = self._keys.reset(self._last.observation)
        return self._last.observation, self._info(keys, valid=True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._last is None:
            raise RuntimeError("call reset() before step()")
        action = action if isinstance(action, str) else str(action)
        transition = self._backend.step(action)
        reward = 0.0
        if transition.valid and transition.done:
            self._score = float(transition.reward)
            earned = self._score if self.reward_type == "score" else float(self._score == 1.0)
            reward = earned * self.reward_scale
        self._last = transition
        keys = self._last_keys = self._keys.step(action, transition.observation)
        # truncated is always False: the registered TimeLimit owns the step limit.
        return transition.observation, reward, transition.done, False, self._info(keys, transition.valid)

    def _info(self, keys: StepKeys, valid: bool) -> dict[str, Any]:
        assert self._last is not None and self.goal is not None
        return {
            "state_key": keys.state_key,
            "history_keys": keys.history_keys,
            "prefix_key": keys.prefix_key,
            "first_visit": keys.first_visit,
            "admissible_actions": admissible_actions(self._last.available_actions),
            "task_id": self._goal_index,
            "task_type": self.goal["category"],
            "won": self._score == 1.0,
            "score": self._score,
            "action_valid": valid,
        }

    def render(self) -> str | None:
        text = self._last.observation if self._last is not None else ""
        if self.render_mode == "human":
            print(text)
        return text if self.render_mode == "ansi" else None

    def close(self) -> None:
        self._backend.close()
        self._last = None

    def expert(self) -> GoalExpert:
        """The expert of the episode just reset: it knows the goal's product and options."""
        if self.goal is None:
            raise RuntimeError("no goal yet: call reset() before expert()")
        return GoalExpert(self.goal)

    # ------------------------------------------------------------------ snapshots
    @property
    def available_actions(self) -> dict[str, Any]:
        """The original's ``{"has_search_bar", "clickables"}`` of the current page."""
        return (
            self._last.available_actions
            if self._last is not None
            else {"has_search_bar": False, "clickables": []}
        )

    def snapshot(self) -> bytes:
        """The episode's state (page state, keys, score) as bytes, for :meth:`restore`."""
        if self._last is None:
            raise RuntimeError("call reset() before snapshot()")
        payload = {
            "goal": self._goal_index,
            "page": self._backend.get_state(),
            "keys": self._keys.get_state(),
            "step_keys": self._last_keys,
            "score": self._score,
        }
        return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, snapshot: bytes) -> tuple[str, dict[str, Any]]:
        """Return to a state saved by :meth:`snapshot`; gives its observation and info."""
        payload = pickle.loads(snapshot)
        self._goal_index = int(payload["goal"])
        self.goal = self._backend.goal(self._goal_index)
        self._keys = EpisodeKeys(f"webshop:{self._goal_index}", self.history_depths)
        self._keys.set_state(payload["keys"])
        self._score = float(payload["score"])
        self._last = self._backend.set_state(payload["page"])
        self._last_keys = payload["step_keys"]
        return self._last.observation, self._info(self._last_keys, valid=True)

    # Pickling carries the configuration and the episode, not the engine: the
    # unpickled env rebuilds (or reuses) its process's engine.
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self._config, "snapshot": self.snapshot() if self._last is not None else None,
                "np_random": self._np_random}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])  # type: ignore[misc]
        self._np_random = state["np_random"]
        if state["snapshot"] is not None:
            self.restore(state["snapshot"])
