"""The WebShop engine: catalogue, goals and search behind a small session state machine.

One engine serves the Flask app and the env's in-process backend, so both see the
same pages. A session's state is a few fields (:class:`SessionState`), so snapshots
are tiny dicts; the page is re-rendered from the state.

Actions follow the original text env: ``search[query]`` (on every page) and
``click[label]`` for a current clickable label. An action is split as the original's
``(.+)\\[(.+)\\]`` (anchored at the start, greedy) splits it, in linear time
(:func:`~webshop_server.actions.parse_action`); the name is case-sensitive and the
argument lower-cased. An action longer than
:data:`~webshop_server.actions.MAX_ACTION_CHARS` (4,096 characters) is invalid, unread.
An invalid action changes nothing and earns 0.

>>> engine = WebShopEngine.generated(num_products=40, seed=0)
>>> session = engine.new_session(0)
>>> session.page.text.startswith("WebShop [SEP] Instruction: [SEP] ")
True
>>> result = engine.step(session, "search[shoes]")
>>> result.valid, result.done, session.state.page
(True, False, 'results')
>>> engine.step(session, "click[nothing here]").valid
False
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from webshop_server import pages
from webshop_server.actions import MAX_ACTION_CHARS, parse_action
from webshop_server.catalog import Catalog, load_catalog_files, load_products
from webshop_server.generator import generate_records
from webshop_server.goals import GoalSet
from webshop_server.search import SearchIndex

__all__ = [
    "DEFAULT_NUM_PRODUCTS",
    "MAX_ACTION_CHARS",
    "OBSERVATION_MODES",
    "Session",
    "SessionState",
    "StepResult",
    "WebShopEngine",
    "parse_action",
]

#: Products in the generated default catalogue.
DEFAULT_NUM_PRODUCTS = 500
#: Search hits kept (the original's Pyserini ``k``).
TOP_K = 50
_SUB_PAGES = ("description", "features", "reviews", "attributes")
#: Observation modes: the original text env's ``text`` and ``text_rich``.
OBSERVATION_MODES = ("text", "text_rich")


@dataclass
class SessionState:
    """Everything that defines a session's page (JSON-serializable)."""

    goal_index: int
    page: str = "search"
    """``search``, ``results``, ``item``, a sub-page name, or ``done``."""
    keywords: str | None = None
    page_num: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    observation_mode: str = "text"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable copy."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        """Rebuild a state from :meth:`to_dict` output."""
        return cls(
            **{**data, "options": dict(data.get("options", {})), "visited": list(data.get("visited", []))}
        )


@dataclass
class Session:
    """A live session: its state, its goal and the rendered current page."""

    state: SessionState
    goal: dict[str, Any]
    page: pages.Page

    @property
    def observation(self) -> str:
        """The current page in the session's observation mode."""
        state = self.state
        return self.page.observation(state.observation_mode, state.options, state.visited)


@dataclass
class StepResult:
    """What one action did."""

    observation: str
    reward: float
    done: bool
    valid: bool
    available_actions: dict[str, Any]


class WebShopEngine:
    """Catalogue + goals + search index, and the page/action logic.

    Args:
        catalog: The products.
        goals: The goal list (default: synthetic goals of ``catalog``).
        index: The search index (default: BM25 over ``catalog``).
        show_attrs: Show the ``Attributes`` button on item pages.
        seed: Seed of the catalogue's price draws (also used for ``<r>`` searches).
    """

    def __init__(
        self,
        catalog: Catalog,
        goals: GoalSet | None = None,
        index: SearchIndex | None = None,
        *,
        show_attrs: bool = False,
        seed: int = 0,
    ) -> None:
        self.catalog = catalog
        self.goals = goals if goals is not None else GoalSet(catalog, seed=seed)
        self.index = index if index is not None else SearchIndex.from_products(catalog.products)
        self.show_attrs = show_attrs
        self.seed = seed

    # ------------------------------------------------------------------ construction
    @classmethod
    def generated(
        cls, num_products: int = DEFAULT_NUM_PRODUCTS, seed: int = 0, **kwargs: Any
    ) -> WebShopEngine:
        """An engine over the generated shop of ``num_products`` products."""
        records, attributes = generate_records(num_products, seed=seed)
        products, prices = load_products(records, attributes, seed=seed)
        return cls(Catalog(products, prices), seed=seed, **kwargs)

    @classmethod
    def from_data_dir(
        cls,
        data_dir: str | Path,
        *,
        num_products: int | None = None,
        human_goals: bool = False,
        seed: int = 0,
        **kwargs: Any,
    ) -> WebShopEngine:
        """An engine over the original files in ``data_dir`` (see :func:`~webshop_server.catalog.find_data_files`)."""
        catalog, has_human = load_catalog_files(data_dir, num_products=num_products, seed=seed)
        if human_goals and not has_human:
            raise FileNotFoundError(f"human goals need items_human_ins*.json in {data_dir}")
        return cls(catalog, GoalSet(catalog, human=human_goals, seed=seed), seed=seed, **kwargs)

    @classmethod
    def build(cls, catalog: str | Path = "generated", **kwargs: Any) -> WebShopEngine:
        """``"generated"`` (kwargs ``num_products``, ``seed``) or a data directory."""
        if str(catalog) == "generated":
            return cls.generated(**kwargs)
        return cls.from_data_dir(catalog, **kwargs)

    # ------------------------------------------------------------------ sessions
    def new_session(self, goal_index: int, observation_mode: str = "text") -> Session:
        """Start a session on goal ``goal_index`` at the search page.

        Args:
            goal_index: The goal.
            observation_mode: ``text`` (default) or ``text_rich``.

        Raises:
            IndexError: if the goal index is out of range.
            ValueError: for an unknown observation mode.
        """
        return self.restore(SessionState(goal_index=int(goal_index), observation_mode=observation_mode))

    def restore(self, state: SessionState | dict[str, Any]) -> Session:
        """A session in ``state`` (a :class:`SessionState` or its dict)."""
        if not isinstance(state, SessionState):
            state = SessionState.from_dict(state)
        if state.observation_mode not in OBSERVATION_MODES:
            raise ValueError(
                f"observation_mode must be one of {OBSERVATION_MODES}, got {state.observation_mode!r}"
            )
        goal = self.goals[state.goal_index]
        session = Session(state, goal, pages.Page([]))
        session.page = self.render(session)
        return session

    def random_goal(self, split: str, rng: random.Random) -> int:
        """A uniformly drawn goal index of ``split``.

        Raises:
            ValueError: if the split is unknown or empty.
        """
        indices = self.goals.split(split)
        if not len(indices):
            raise ValueError(f"split {split!r} has no goals in this catalogue ({len(self.goals)} goals)")
        return indices[rng.randrange(len(indices))]

    # ------------------------------------------------------------------ search
    def search(self, keywords: str, goal_index: int = 0) -> list[int]:
        """Product indices for a search, the original's special keywords included."""
        words = keywords.split(" ")
        head, rest = words[0], " ".join(words[1:])
        products = self.catalog.products
        if head == "<r>":
            rng = random.Random(f"{self.seed}:{goal_index}:{keywords}")
            return rng.sample(range(len(products)), min(TOP_K, len(products)))
        if head == "<c>":
            return [i for i, p in enumerate(products) if p["category"] == rest][:TOP_K]
        if head == "<q>":
            return [i for i, p in enumerate(products) if p["query"] == rest][:TOP_K]
        if head == "<a>":  # crashes the original text env; here it finds nothing
            return []
        return list(self.index.search(keywords, TOP_K))

    # ------------------------------------------------------------------ pages
    def render(self, session: Session) -> pages.Page:
        """The current page of a session."""
        state, instruction = session.state, session.goal["instruction_text"]
        products = self.catalog.by_asin
        if state.page == "search":
            return pages.search_page(instruction)
        if state.page == "results":
            hits = self.search(state.keywords or "", state.goal_index)
            start = (state.page_num - 1) * pages.RESULTS_PER_PAGE
            shown = [self.catalog.products[i] for i in hits[start : start + pages.RESULTS_PER_PAGE]]
            return pages.results_page(instruction, shown, len(hits), state.page_num)
        if state.page == "done":
            return pages.done_page(state.asin or "", state.options, state.reward)
        product = products[state.asin]  # type: ignore[index]
        if state.page == "item":
            return pages.item_page(instruction, product, show_attrs=self.show_attrs)
        return getattr(pages, f"{state.page}_page")(instruction, product)

    # ------------------------------------------------------------------ actions
    def step(self, session: Session, action: str) -> StepResult:
        """Apply one action to ``session`` (in place). Never raises on bad input."""
        valid = False if session.state.done else self._apply(session, action)
        if valid:
            session.page = self.render(session)
        page = session.page
        reward = session.state.reward if (valid and session.state.done) else 0.0
        return StepResult(session.observation, reward, session.state.done, valid, page.available_actions())

    def _apply(self, session: Session, action: str) -> bool:
        if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
            return False
        parts = parse_action(action)
        if parts is None:
            return False
        name, argument = parts[0], parts[1].lower()
        state = session.state
        if name == "search":
            state.page, state.keywords, state.page_num = "results", argument, 1
            state.asin, state.options = None, {}
            return True
        if name != "click" or argument == "search" or argument not in session.page.clickables:
            return False
        kind, group = session.page.clickables[argument]
        if kind == "product":
            state.page, state.asin, state.options = "item", argument.upper(), {}
            if state.asin not in state.visited:
                state.visited.append(state.asin)
        elif kind == "option":
            state.options[group] = argument  # type: ignore[index]
        elif argument == "back to search":
            state.page, state.keywords, state.page_num, state.asin = "search", None, 1, None
            state.options, state.visited = {}, []
        elif argument == "next >":
            state.page_num += 1
        elif argument == "< prev":
            if state.page == "results":
                state.page_num = max(1, state.page_num - 1)
            elif state.page == "item":
                state.page, state.asin, state.options = "results", None, {}
            else:
                state.page = "item"
        elif argument in _SUB_PAGES:
            state.page = argument
        elif argument == "buy now":
            state.reward = self.score(session)
            state.page, state.done = "done", True
        else:  # a label without behaviour (cannot happen with the pages above)
            return False
        return True

    def score(self, session: Session, verbose: bool = False) -> Any:
        """The reward of buying the session's product with its chosen options."""
        from webshop_server.reward import get_reward  # spaCy loads on the first purchase

        asin = session.state.asin
        product = self.catalog.by_asin[asin]  # type: ignore[index]
        return get_reward(
            product, session.goal, self.catalog.prices[asin], session.state.options, verbose=verbose
        )
