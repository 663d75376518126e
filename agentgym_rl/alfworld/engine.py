"""TextWorld's PDDL engine for ALFWorld games, with the caches that make resets cheap.

The game logic is TextWorld's own: :class:`textworld.envs.pddl.PddlEnv` steps the
game (Fast Downward's ``libdownward`` applies the PDDL operators, TextWorld's grammar
writes the text) and alfworld's :class:`Demangler` names the objects, exactly as the
official ``AlfredTWEnv`` path (``AlfredDemangler`` wrapper) does. What this module
changes is only *when* the deterministic, expensive parts run (``DESIGN.md``, "Notes
on ALFWorld / TextWorld internals"):

- The PDDL-to-SAS translation (Fast Downward's Python translator, ~0.12 s) runs once
  per game per process, instead of four times per reset; the planner's optimized
  translation is only made when a plan is asked for. An optional on-disk cache keeps
  translations across processes (~30 KB a game, pickled and zlib-compressed).
- The grammar (TatSu, ~60 ms) is parsed once per distinct grammar; ALFWorld grammars
  differ only in their ``task`` rule, which is parsed per game and swapped in.
- A reset of the game already loaded in this engine sets the planner's state back to
  its initial id and restores the cached initial facts and game state (~0.1 ms).
- TatSu parses of command templates are memoized (:mod:`.parse_cache`).

Observations, admissible commands and wins equal the stock path's on every step
(``tests/test_alfworld_engine.py`` replays walkthroughs through both).
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import json
import os
import pickle
import re
import sys
import threading
import zlib
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "EngineSnapshot",
    "GameCache",
    "GameRecord",
    "default_cache",
    "engine_class",
    "load_game_data",
    "make_engine",
]

# The task rule of an ALFWorld grammar: `"task": [ { "rhs": "<json string>" } ]`.
_TASK_RULE = re.compile(r'("task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*)("(?:[^"\\]|\\.)*")')
_TRANSLATION_FORMAT = 1  # bump when the pickled translation layout changes


def load_game_data(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ``game.tw-pddl`` file (JSON with ``pddl_domain``, ``grammar``, ``pddl_problem``)."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    missing = {"pddl_domain", "grammar", "pddl_problem"} - set(data)
    if missing:
        raise ValueError(f"{path} is not a TextWorld PDDL game: it lacks {sorted(missing)}")
    return data


def _digest(*parts: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        encoded = part.encode("utf-8")
        h.update(len(encoded).to_bytes(8, "little"))
        h.update(encoded)
    return h.hexdigest()


def _translate(domain: str, problem: str, optimize: bool) -> tuple[Any, str]:
    """Fast Downward's PDDL-to-SAS translation, as TextWorld runs it.

    ``fast_downward.pddl2sas`` overwrites ``sys.argv`` (its option parser reads it);
    we put the caller's back.
    """
    import fast_downward

    argv = list(sys.argv)
    try:
        return fast_downward.pddl2sas(domain, problem, optimize=optimize)
    finally:
        sys.argv[:] = argv


@dataclass
class GameRecord:
    """Everything about one game that does not change while it is played.

    Built lazily and shared by every engine of the process.
    """

    path: str
    data: dict[str, Any]
    logic: Any  # textworld.envs.pddl.logic.GameLogic, shared grammar + this game's task rule
    translation: tuple[Any, str] | None = None  # (fast_downward Task, SAS text)
    replan_sas: str | None = None
    initial_facts: tuple | None = None  # copy of the initial fact tables (see _copy_facts)
    entity_infos: dict[str, Any] | None = None  # demangled, shared read-only
    initial_game_state: dict[str, Any] | None = None
    initial_operators: dict[int, Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def walkthrough(self) -> list[str] | None:
        """The expert walkthrough stored in the game file, if any."""
        return self.data.get("walkthrough")


class GameCache:
    """Process-wide cache of game records, parsed grammars and translations.

    Args:
        translation_dir: Optional folder for translations on disk (shared across
            processes and runs; safe to delete). ``None`` keeps them in memory only.
        max_games: How many game records to keep in memory (least recently used
            are dropped).
    """

    def __init__(self, translation_dir: str | os.PathLike | None = None, max_games: int = 4096) -> None:
        self.translation_dir = Path(translation_dir) if translation_dir else None
        self.max_games = max_games
        self._records: OrderedDict[str, GameRecord] = OrderedDict()
        self._logics: dict[str, Any] = {}
        self._lock = threading.Lock()

    def game(self, path: str | os.PathLike) -> GameRecord:
        """The record of the game file at ``path`` (loaded on first use)."""
        key = os.path.abspath(path)
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                self._records.move_to_end(key)
                return record
        data = load_game_data(key)
        record = GameRecord(path=key, data=data, logic=self._logic_for(data))
        with self._lock:
            record = self._records.setdefault(key, record)
            while len(self._records) > self.max_games:
                self._records.popitem(last=False)
        return record

    # -- grammar -----------------------------------------------------------------------
    def _logic_for(self, data: dict[str, Any]) -> Any:
        """A GameLogic sharing the parsed grammar of every game with the same rules but ``task``."""
        from textworld.envs.pddl import logic as pddl_logic
        from textworld.envs.pddl.textgen import ContextSensitiveGrammar

        grammar = data["grammar"]
        match = _TASK_RULE.search(grammar)
        template = grammar if match is None else grammar[: match.start(2)] + '""' + grammar[match.end(2) :]
        key = _digest(data["pddl_domain"], template)
        with self._lock:
            base = self._logics.get(key)
        if base is None:
            base = pddl_logic.GameLogic(domain=data["pddl_domain"], grammar=template)
            with self._lock:
                base = self._logics.setdefault(key, base)
        if match is None:
            return base
        task_text = json.loads(match.group(2))
        task_rules = ContextSensitiveGrammar.parse(json.dumps({"task": [{"rhs": task_text}]}))
        logic = copy.copy(base)
        logic.grammar = ContextSensitiveGrammar()
        logic.grammar._rules = defaultdict(list, base.grammar._rules)
        logic.grammar._rules["task"] = task_rules._rules["task"]
        return logic

    # -- translations --------------------------------------------------------------------
    def _disk_path(self, data: dict[str, Any], optimize: bool) -> Path | None:
        if self.translation_dir is None:
            return None
        key = _digest(str(_TRANSLATION_FORMAT), str(optimize), data["pddl_domain"], data["pddl_problem"])
        return self.translation_dir / key[:2] / f"{key}.pkl.z"

    def _cached_translation(self, data: dict[str, Any], optimize: bool) -> tuple[Any, str]:
        path = self._disk_path(data, optimize)
        if path is not None and path.exists():
            try:
                return pickle.loads(zlib.decompress(path.read_bytes()))
            except Exception:  # a torn or stale file: translate again and overwrite it
                pass
        result = _translate(data["pddl_domain"], data["pddl_problem"], optimize)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(zlib.compress(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)))
            os.replace(tmp, path)  # atomic: concurrent writers never leave a torn file
        return result

    def translation(self, record: GameRecord) -> tuple[Any, str]:
        """The (Task, SAS) translation used to play ``record``."""
        with record.lock:
            if record.translation is None:
                record.translation = self._cached_translation(record.data, optimize=False)
            return record.translation

    def replan_sas(self, record: GameRecord) -> str:
        """The optimized SAS translation that the planner uses (made on first request)."""
        with record.lock:
            if record.replan_sas is None:
                record.replan_sas = self._cached_translation(record.data, optimize=True)[1]
            return record.replan_sas


_DEFAULT_CACHE: GameCache | None = None


def default_cache() -> GameCache:
    """The process-wide cache (translations on disk when ``AGENTGYM_RL_TRANSLATION_CACHE`` is set)."""
    global _DEFAULT_CACHE
    if _DEFAULT_CACHE is None:
        _DEFAULT_CACHE = GameCache(os.environ.get("AGENTGYM_RL_TRANSLATION_CACHE") or None)
    return _DEFAULT_CACHE


@dataclass(frozen=True)
class EngineSnapshot:
    """An in-memory copy of an engine's game state (valid in the engine that made it)."""

    record: GameRecord
    load_generation: int
    state_id: int
    facts: tuple
    game_state: dict[str, Any]
    operators: dict[int, Any]
    moves: int


def _make_engine_class() -> type:
    """Define the engine lazily so that importing this module does not import TextWorld."""
    import fast_downward
    import textworld
    import textworld.logic

    previous = os.environ.get("ALFWORLD_DATA")
    from alfworld.agents.utils.misc import Demangler

    # alfworld's import sets ALFWORLD_DATA (to ~/.cache/alfworld) as a side effect; undo it so that
    # it does not leak into our data lookup or into child processes.
    if previous is None:
        os.environ.pop("ALFWORLD_DATA", None)
    else:
        os.environ["ALFWORLD_DATA"] = previous
    from textworld.core import GameState
    from textworld.envs.pddl import PddlEnv
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.generator.game import EntityInfo

    from agentgym_rl.alfworld.parse_cache import install_parse_cache

    install_parse_cache()

    def _copy_facts(state: Any) -> tuple:
        """A copy of the fact tables of a TextWorld ``State`` (what ``State.copy`` copies)."""
        return (
            {k: v.copy() for k, v in state._facts.items()},
            state._vars_by_name.copy(),
            {k: v.copy() for k, v in state._vars_by_type.items()},
            state._var_counts.copy(),
        )

    def _restore_facts(state: Any, facts: tuple) -> None:
        """Put the fact tables copied by :func:`_copy_facts` back into ``state`` (copying again)."""
        by_predicate, vars_by_name, vars_by_type, var_counts = facts
        state._facts = defaultdict(set, {k: v.copy() for k, v in by_predicate.items()})
        state._vars_by_name = vars_by_name.copy()
        state._vars_by_type = defaultdict(set, {k: v.copy() for k, v in vars_by_type.items()})
        state._var_counts = var_counts.copy()

    class _SharedEntityInfo(EntityInfo):
        """An ``EntityInfo`` that deep-copies to itself.

        TextWorld's grammar deep-copies the entity infos of every context it derives
        (most of a step's time) but only reads them; ours are never mutated after the
        demangling, so sharing them is safe and gives the same text.
        """

        __slots__ = ()

        @classmethod
        def of(cls, info: Any) -> Any:
            shared = cls(info.id, info.type)
            for slot in EntityInfo.__slots__:
                setattr(shared, slot, getattr(info, slot))
            return shared

        def __deepcopy__(self, memo: dict) -> Any:
            return self

    class CachedPddlState(pddl_logic.PddlState):
        """TextWorld's ``PddlState`` built from a cached translation; replanning loads lazily."""

        def __init__(self, cache: GameCache, record: GameRecord, downward_lib: Any) -> None:
            # The parent's __init__ translates twice; this one takes the cached translation.
            # (Like the parent, it skips State.__init__, which only accepts textworld's own GameLogic.)
            self._logic = record.logic
            self._cache, self._record = cache, record
            self.downward_lib = downward_lib
            self.pddl_problem = record.data["pddl_problem"]
            self.task, self.sas = cache.translation(record)
            self._replan_loaded = False
            self._actions = {action.name: action for action in self.task.actions}
            self.name2type = {obj.name: obj.type_name for obj in self.task.objects}
            for type_ in self.task.types:
                try:
                    self._logic.types.add(textworld.logic.Type(type_.name, type_.supertype_names))
                except ValueError:  # already known: all games share the domain
                    pass
            downward_lib.load_sas(self.sas.encode("utf-8"))
            with record.lock:
                if record.initial_facts is None:
                    record.initial_facts = self._initial_facts()
            _restore_facts(self, record.initial_facts)

        def _initial_facts(self) -> Any:
            """The initial facts, as the parent derives them: PDDL init facts plus the SAS state."""
            self._facts, self._vars_by_name = defaultdict(set), {}
            self._vars_by_type, self._var_counts = defaultdict(set), Counter()
            facts = []
            for atom in self.task.init:
                if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
                    if atom.predicate != "=":
                        args = [textworld.logic.Variable(a, self.name2type[a]) for a in atom.args]
                        facts.append(textworld.logic.Proposition(atom.predicate, args))
                elif isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
                    name = f"{atom.expression.value}"
                    if atom.fluent.symbol != "total-cost" and not name.isdigit():
                        args = [textworld.logic.Variable(a, self.name2type[a]) for a in atom.fluent.args]
                        facts.append(textworld.logic.Proposition(name, args))
            self.add_facts(facts)
            atoms = (pddl_logic.Atom * self.downward_lib.get_state_size())()
            self.downward_lib.get_state(atoms)
            sas_facts = [atom.get_fact(self.name2type) for atom in atoms]
            self.add_facts([fact for fact in sas_facts if not fact.is_negation])
            return _copy_facts(self)

        def replan(self, infos: Any) -> list[str]:
            if not self._replan_loaded:
                self.downward_lib.load_sas_replan(self._cache.replan_sas(self._record).encode("utf-8"))
                self._replan_loaded = True
            return super().replan(infos)

    class PddlGameEngine(PddlEnv):
        """TextWorld's ``PddlEnv`` + alfworld's demangled names, with cached loads and resets.

        ``load(path)`` selects a game; ``reset()`` and ``step(command)`` behave as the
        stock ``PddlEnv`` wrapped in ``AlfredDemangler(shuffle=False)``.
        """

        def __init__(self, cache: GameCache | None = None, infos: Any = None) -> None:
            infos = infos or textworld.EnvInfos(won=True, admissible_commands=True)
            super().__init__(infos)
            # libdownward exports these two, but fast_downward's interface does not declare them.
            self.downward_lib.get_state_id.argtypes = []
            self.downward_lib.get_state_id.restype = ctypes.c_int
            self.downward_lib.set_state_id.argtypes = [ctypes.c_int]
            self.downward_lib.set_state_id.restype = None
            self._cache = cache or default_cache()
            self._record: GameRecord | None = None
            self._lib_record: GameRecord | None = None  # the game whose SAS is in our library
            self._load_generation = 0

        @property
        def record(self) -> GameRecord:
            """The loaded game's record."""
            if self._record is None:
                raise RuntimeError("no game loaded: call load(path) first")
            return self._record

        def load(self, filename_or_data: str | os.PathLike) -> None:
            record = self._cache.game(filename_or_data)
            self._record = record
            self._game_file = record.path
            self._game_data = record.data
            self.walkthrough = record.walkthrough
            self._logic = record.logic

        def _load_into_library(self, record: GameRecord) -> None:
            self._pddl_state = CachedPddlState(self._cache, record, self.downward_lib)
            self._lib_record = record
            self._load_generation += 1
            with record.lock:
                if record.entity_infos is None:
                    infos = self._get_entity_infos()
                    demangler = Demangler(game_infos=infos, shuffle=False)
                    for info in infos.values():
                        info.name = demangler.demangle_alfred_name(info.id)
                    record.entity_infos = {key: _SharedEntityInfo.of(info) for key, info in infos.items()}
            self._entity_infos = record.entity_infos

        def reset(self) -> Any:
            record = self.record
            self.prev_state = None
            self._last_action = None
            self._moves = 0
            if self._lib_record is not record:
                self._load_into_library(record)
            elif record.initial_game_state is not None:
                self.downward_lib.set_state_id(0)  # the initial state's id in the registry
                _restore_facts(self._pddl_state, record.initial_facts)
            if record.initial_game_state is not None:
                self._pddl_state._operators = record.initial_operators
                self.state = GameState(record.initial_game_state)
                return self.state
            self.state = GameState()
            context = {
                "state": self._pddl_state,
                "facts": list(self._pddl_state.facts),
                "variables": {},
                "mapping": {},
                "entity_infos": self._entity_infos,
            }
            self.state.feedback = self._logic.grammar.derive("#intro#", context)
            self.state.raw = self.state.feedback
            self._gather_infos()
            with record.lock:
                if record.initial_game_state is None:
                    record.initial_game_state = dict(self.state)
                    record.initial_operators = self._pddl_state._operators
            return self.state

        def policy_commands(self) -> list[str]:
            """The planner's plan from the current state (Fast Downward, optimized translation)."""
            return self._pddl_state.replan(self._entity_infos)

        def snapshot(self) -> EngineSnapshot:
            """A copy of the current game state, restorable in this engine."""
            return EngineSnapshot(
                record=self.record,
                load_generation=self._load_generation,
                state_id=int(self.downward_lib.get_state_id()),
                facts=_copy_facts(self._pddl_state),
                game_state=dict(self.state),
                operators=self._pddl_state._operators,
                moves=self._moves,
            )

        def can_restore(self, snapshot: EngineSnapshot) -> bool:
            """Whether ``snapshot`` was made in this engine with its current game loaded."""
            return snapshot.record is self._lib_record and snapshot.load_generation == self._load_generation

        def restore(self, snapshot: EngineSnapshot) -> Any:
            """Put the game back to ``snapshot`` (see :meth:`can_restore`)."""
            if not self.can_restore(snapshot):
                raise ValueError("this snapshot was made in another engine or before another game was loaded")
            self._record = snapshot.record
            self.downward_lib.set_state_id(snapshot.state_id)
            _restore_facts(self._pddl_state, snapshot.facts)
            self._pddl_state._operators = snapshot.operators
            self._moves = snapshot.moves
            self.prev_state = None
            self.state = GameState(snapshot.game_state)
            return self.state

        def close(self) -> None:
            if getattr(self, "downward_lib", None) is not None:
                # Free the planner's task but keep the library loaded: unloading a copy of libdownward
                # (fast_downward.close_lib) while another is loaded crashes at interpreter exit, in a
                # static destructor of the library.
                self.downward_lib.cleanup()
                self.downward_lib = None

    return PddlGameEngine


_ENGINE_CLASS: type | None = None


def engine_class() -> type:
    """The :class:`PddlGameEngine` class (importing TextWorld on first use)."""
    global _ENGINE_CLASS
    if _ENGINE_CLASS is None:
        _ENGINE_CLASS = _make_engine_class()
    return _ENGINE_CLASS


def make_engine(cache: GameCache | None = None) -> Any:
    """Create a :class:`PddlGameEngine` (one Fast Downward library copy of its own)."""
    return engine_class()(cache)
