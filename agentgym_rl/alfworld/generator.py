"""Procedurally generated ALFWorld-style games: the package's embedded default data.

When no ALFWorld data is around, the env plays small games made here. Each game is a
real TextWorld PDDL game (``game.tw-pddl``): the ``alfworld`` wheel's own domain
(``alfred.pddl``) and text grammar (``alfred.twl2``, its ``"UNKNOWN GOAL"`` replaced
by the task sentence), and a problem shaped like the official ones (typed objects,
``inReceptacle`` / ``canContain`` / property facts, the official goal per task type).
Rooms follow ALFRED's four scene families (:mod:`.scenes`); the walkthrough is the
engine's own planner's (Fast Downward), and every game is replayed before it is kept.

>>> import random
>>> game = generate_game("pick_and_place_simple", random.Random(0))
>>> sorted(game), game["solvable"], len(game["walkthrough"]) >= 2
(['grammar', 'pddl_domain', 'pddl_problem', 'solvable', 'walkthrough'], True, True)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from agentgym_rl.alfworld.scenes import (
    LAMP_HOLDERS,
    OPENABLE,
    TASK_APPLIANCE,
    Layout,
    Receptacle,
    can_contain,
    check_room_size,
    entity_id,
    import_alfworld,
    object_properties,
    scene_layout,
    styles_for,
)
from agentgym_rl.alfworld.tasks import GAME_FILE, TASK_TYPES
from agentgym_rl.data import ALFWORLD_SPLITS, build_once, cache_root

__all__ = ["DEFAULT_COUNTS", "generate_game", "generate_games", "generated_games_root", "version_tag"]

#: Games per split written by default (every task type in every split).
DEFAULT_COUNTS: dict[str, int] = {"train": 24, "valid_seen": 12, "valid_unseen": 12, "valid_train": 12}
#: Scene numbers (offset by the room style's base) seen in training; the rest are held out.
SEEN_SCENES = tuple(range(1, 26))
UNSEEN_SCENES = tuple(range(26, 31))
_MAX_ATTEMPTS = 50
_MAX_WORKERS = 2  # planner processes for generate_games (one per core, at most this many)
_GAMES_PER_WORKER = 16
_FORMAT = 1  # bump when the game layout changes in a way the source hash would not show

# Official task sentences, two phrasings per type ({o}: object, {r}: receptacle or lamp).
_SENTENCES: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("put a {o} in {r}", "put some {o} on {r}"),
    "look_at_obj_in_light": ("examine the {o} with the {r}", "look at {o} under the {r}"),
    "pick_clean_then_place_in_recep": ("clean some {o} and put it in {r}", "put a clean {o} in {r}"),
    "pick_heat_then_place_in_recep": ("heat some {o} and put it in {r}", "put a hot {o} in {r}"),
    "pick_cool_then_place_in_recep": ("cool some {o} and put it in {r}", "put a cool {o} in {r}"),
    "pick_two_obj_and_place": ("find two {o} and put them in {r}", "put two {o} in {r}"),
}
# Goal conditions on the moved object beyond its type, per transforming task type.
_STATE_GOAL = {
    "pick_clean_then_place_in_recep": ("cleanable", "isClean"),
    "pick_heat_then_place_in_recep": ("heatable", "isHot"),
    "pick_cool_then_place_in_recep": ("coolable", "isCool"),
}
_LAMP = "DeskLamp"
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding agentgym_rl/


# --------------------------------------------------------------------------- tasks
@dataclass
class _Task:
    """One trial: the task, its sentence and where every object starts."""

    task_type: str
    layout: Layout
    object_type: str
    target: str  # receptacle type, or the lamp for look_at_obj_in_light
    sentence: str
    trial: str
    objects: list[tuple[str, str, Receptacle]] = field(default_factory=list)  # (id, type, holder)

    @property
    def name(self) -> str:
        """The official task folder name, e.g. ``pick_and_place_simple-Mug-None-Desk-308``."""
        return f"{self.task_type}-{self.object_type}-None-{self.target}-{self.layout.scene}"


def _trial_id(rng: random.Random) -> str:
    """An official-looking trial id, ``trial_T<date>_<time>_<microseconds>``."""
    return (
        f"trial_T2019{rng.randint(6, 9):02d}{rng.randint(1, 28):02d}_"
        f"{rng.randint(0, 23):02d}{rng.randint(0, 59):02d}{rng.randint(0, 59):02d}_{rng.randint(0, 999999):06d}"
    )


def _draw_task(task_type: str, layout: Layout, rng: random.Random) -> _Task | None:
    """Pick the task's object and target in ``layout`` and place the objects; None if none fits."""
    style = layout.style
    appliance = TASK_APPLIANCE.get(task_type)
    needed = _STATE_GOAL.get(task_type, (None,))[0]
    candidates = []
    for otype in style.objects:
        if needed and needed not in object_properties(otype):
            continue
        if task_type == "look_at_obj_in_light":
            if layout.holders(otype) and any(r.type in LAMP_HOLDERS for r in layout.receptacles):
                candidates.append((otype, _LAMP))
            continue
        for rtype in layout.types:
            if rtype in (appliance, "SinkBasin", "BathtubBasin") or not can_contain(rtype, otype):
                continue
            # Pick-and-place goals must not hold at the start: the objects start elsewhere.
            if appliance or layout.holders(otype, exclude={rtype}):
                candidates.append((otype, rtype))
    if not candidates:
        return None
    otype, target = rng.choice(candidates)
    sentence = rng.choice(_SENTENCES[task_type]).format(o=otype.lower(), r=target.lower())
    task = _Task(task_type, layout, otype, target, sentence, _trial_id(rng))

    used = set(layout.used)
    spots = layout.holders(otype, exclude=set() if appliance else {target})
    count = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for _ in range(count):
        task.objects.append((entity_id(otype, rng, used), otype, rng.choice(spots)))
    lamp_spots = [r for r in layout.receptacles if r.type in LAMP_HOLDERS]
    if lamp_spots and (task_type == "look_at_obj_in_light" or rng.random() < 0.6):
        task.objects.append((entity_id(_LAMP, rng, used), _LAMP, rng.choice(lamp_spots)))
    # Distractors never share the task object's type, so the goal's object is unambiguous.
    others = [o for o in style.objects if o != otype and layout.holders(o)]
    for _ in range(rng.randint(3, 6)):
        kind = rng.choice(others)
        task.objects.append((entity_id(kind, rng, used), kind, rng.choice(layout.holders(kind))))
    return task


# --------------------------------------------------------------------------- PDDL text
def _goal(task: _Task) -> str:
    """The goal, in the official problems' shape for the task type."""
    o, r = f"{task.object_type}Type", f"{task.target}Type"
    if task.task_type == "look_at_obj_in_light":
        return f"""(and
        (exists (?ot - object ?r - receptacle ?a - agent ?l - location)
            (and
                (objectType ?ot {r})
                (toggleable ?ot)
                (isToggled ?ot)
                (receptacleAtLocation ?r ?l)
                (atLocation ?a ?l)
                (inReceptacle ?ot ?r)
            )
        )
        (exists (?o - object ?a - agent)
            (and
                (objectType ?o {o})
                (holds ?a ?o)
            )
        )
    )"""
    if task.task_type == "pick_two_obj_and_place":
        return f"""(and
        (exists (?r - receptacle)
            (exists (?o1 - object)
                (and
                    (objectType ?o1 {o})
                    (receptacleType ?r {r})
                    (inReceptacle ?o1 ?r)
                    (exists (?o2 - object)
                        (and
                            (not (= ?o1 ?o2))
                            (objectType ?o2 {o})
                            (receptacleType ?r {r})
                            (inReceptacle ?o2 ?r)
                        )
                    )
                )
            )
        )
    )"""
    ability, state = _STATE_GOAL.get(task.task_type, (None, None))
    extra = f"\n                    ({ability} ?o)" if ability else ""
    done = f"\n                    ({state} ?o)" if state else ""
    return f"""(and
        (exists (?r - receptacle)
            (exists (?o - object)
                (and{extra}
                    (objectType ?o {o})
                    (receptacleType ?r {r}){done}
                    (inReceptacle ?o ?r)
                )
            )
        )
    )"""


def _problem(task: _Task) -> str:
    """The PDDL problem of ``task``: typed objects, initial facts and goal."""
    layout = task.layout
    otypes = sorted({kind for _, kind, _ in task.objects})
    rtypes = layout.types
    locations = sorted({r.location for r in layout.receptacles} | {layout.start})
    declared = (
        ["agent1 - agent"]
        + [f"{t}Type - otype" for t in otypes]
        + [f"{t}Type - rtype" for t in rtypes]
        + [f"{oid} - object" for oid, _, _ in task.objects]
        + [f"{r.id} - receptacle" for r in layout.receptacles]
        + [f"{loc} - location" for loc in locations]
    )
    facts = [f"(atLocation agent1 {layout.start})"]
    for r in layout.receptacles:
        facts.append(f"(receptacleType {r.id} {r.type}Type)")
        facts.append(f"(receptacleAtLocation {r.id} {r.location})")
        if r.type in OPENABLE:
            facts.append(f"(openable {r.id})")
    for oid, kind, holder in task.objects:
        facts.append(f"(objectType {oid} {kind}Type)")
        facts.append(f"(inReceptacle {oid} {holder.id})")
        facts.append(f"(objectAtLocation {oid} {holder.location})")
        facts += [f"({prop} {oid})" for prop in object_properties(kind)]
    facts += [f"(canContain {rt}Type {ot}Type)" for rt in rtypes for ot in otypes if can_contain(rt, ot)]
    newline = "\n        "
    return (
        f"(define (problem plan_{task.trial})\n(:domain alfred)\n"
        f"(:objects\n        {newline.join(declared)}\n)\n"
        f"(:init\n        {newline.join(facts)}\n)\n"
        f"(:goal\n    {_goal(task)}\n)\n)\n"
    )


@cache
def _wheel_files() -> tuple[str, str]:
    """The ``alfworld`` wheel's PDDL domain and text grammar."""
    info = import_alfworld("alfworld.info")
    with open(info.ALFRED_PDDL_PATH, encoding="utf-8") as domain:
        with open(info.ALFRED_TWL2_PATH, encoding="utf-8") as grammar:
            return domain.read(), grammar.read()


def _game_data(task: _Task) -> dict[str, Any]:
    domain, grammar = _wheel_files()
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", task.sentence),
        "pddl_problem": _problem(task),
        "solvable": True,
    }


# --------------------------------------------------------------------------- planning
def _verified_walkthrough(engine: Any, path: str) -> list[str] | None:
    """The planner's walkthrough of the game at ``path`` if replaying it wins, else None.

    Rejects games won at the start and plans shorter than two commands; the replay must
    win on its last command and not before.
    """
    try:
        engine.load(path)
        if engine.reset().won:
            return None
        plan = list(engine.policy_commands())
        if len(plan) < 2:
            return None
        engine.reset()
        for i, command in enumerate(plan):
            state, _, _ = engine.step(command)
            if bool(state.won) != (i == len(plan) - 1):
                return None
        return plan
    except Exception:  # an unsolvable or malformed candidate: the caller draws another
        return None


def _plan_worker() -> None:
    """The planner process: reads game paths on stdin, writes JSON walkthroughs (or null) on stdout."""
    from agentgym_rl.alfworld.engine import GameCache, make_engine

    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever the libraries print goes to stderr, never into the replies
    engine = make_engine(GameCache(max_games=8))
    for line in sys.stdin:
        replies.write(json.dumps(_verified_walkthrough(engine, line.rstrip("\n"))) + "\n")
        replies.flush()
    engine.close()


class _Planner:
    """Plans and replays candidate games in a child process.

    Keeps Fast Downward out of the caller's process, which usually goes on to play the
    games: a process that ``dlclose``s one ``libdownward`` copy (``engine.close()``) and
    holds another crashes at exit (a static destructor of the closed copy). Two planners
    also use two cores.
    """

    def __init__(self, scratch_dir: Path, name: str = "planner") -> None:
        self.scratch_dir = scratch_dir
        self.name = name
        self._count = 0
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_PARENT), env.get("PYTHONPATH")) if p)
        self._log = open(scratch_dir / f"{name}.log", "w+b")  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from agentgym_rl.alfworld.generator import _plan_worker; _plan_worker()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            text=True,
            encoding="utf-8",
        )

    def walkthrough(self, data: dict[str, Any]) -> list[str] | None:
        """The verified walkthrough of the game ``data`` (None if it is not a fair, solvable game)."""
        self._count += 1
        path = self.scratch_dir / f"{self.name}-{self._count}.tw-pddl"  # a fresh path: engines cache by path
        path.write_text(json.dumps(data), encoding="utf-8")
        try:
            self._process.stdin.write(f"{path}\n")
            self._process.stdin.flush()
            reply = self._process.stdout.readline()
        except BrokenPipeError:
            reply = ""
        finally:
            path.unlink(missing_ok=True)
        if not reply:
            self._log.seek(0)
            tail = self._log.read().decode("utf-8", "replace")[-2000:]
            raise RuntimeError(f"the ALFWorld planner process stopped:\n{tail}")
        return json.loads(reply)

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process.stdout.close()
        self._log.close()

    def __enter__(self) -> _Planner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _generate(
    task_type: str,
    rng: random.Random,
    scenes: tuple[int, ...],
    layout_seed: int,
    planner: _Planner,
    room_size: str = "full",
) -> tuple[_Task, dict[str, Any]]:
    styles = styles_for(task_type)
    for _ in range(_MAX_ATTEMPTS):
        layout = scene_layout(rng.choice(styles), rng.choice(scenes), layout_seed, room_size)
        task = _draw_task(task_type, layout, rng)
        if task is None:
            continue
        data = _game_data(task)
        walkthrough = planner.walkthrough(data)
        if walkthrough is not None:
            data["walkthrough"] = walkthrough
            return task, data
    raise RuntimeError(f"no solvable {task_type} game in {_MAX_ATTEMPTS} attempts")


def generate_game(
    task_type: str,
    rng: random.Random,
    *,
    scenes: tuple[int, ...] = SEEN_SCENES,
    layout_seed: int = 0,
    room_size: str = "full",
) -> dict[str, Any]:
    """Generate one solvable game of ``task_type``.

    Args:
        task_type: One of :data:`agentgym_rl.alfworld.tasks.TASK_TYPES`.
        rng: Draws the room style, scene, task and object placement.
        scenes: Scene numbers (1-30, before the room style's offset) to draw from.
        layout_seed: Seed of the scenes' furniture (a scene has the same furniture in every trial).
        room_size: ``"full"`` or ``"small"`` rooms (see :func:`~agentgym_rl.alfworld.scenes.scene_layout`).

    Returns:
        The game JSON: ``pddl_domain``, ``grammar``, ``pddl_problem``, ``solvable`` and the
        planner's ``walkthrough``, verified to win.

    Raises:
        ValueError: ``task_type`` is not an ALFWorld task type, or an unknown ``room_size``.
    """
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; choose one of {TASK_TYPES}")
    check_room_size(room_size)
    with (
        tempfile.TemporaryDirectory(prefix="agentgym-rl-alfworld-") as scratch,
        _Planner(Path(scratch)) as planner,
    ):
        return _generate(task_type, rng, scenes, layout_seed, planner, room_size)[1]


def generate_games(
    out_dir: Path,
    counts: dict[str, int] | None = None,
    seed: int = 0,
    task_types: tuple[str, ...] | list[str] = TASK_TYPES,
    room_size: str = "full",
) -> Path:
    """Write generated games in the official layout, deterministically from ``seed``.

    Files go to ``out_dir/<split>/<task_type>-<Object>-None-<Receptacle>-<scene>/<trial>/game.tw-pddl``.
    Game ``i`` of a split has task type ``task_types[i % len(task_types)]`` (all six by default);
    ``valid_unseen`` uses held-out scenes (26-30 of each room style), the other splits the seen
    ones (1-25).

    Args:
        out_dir: Folder to write into (the splits become its subfolders).
        counts: Games per split (default :data:`DEFAULT_COUNTS`); splits not named get none.
        seed: Same seed, byte-identical files.
        task_types: The task types to cycle through (a subset of :data:`TASK_TYPES`, e.g. only
            ``pick_and_place_simple`` for an easier set).
        room_size: ``"full"`` rooms (10-17 receptacles) or ``"small"`` ones (5-8: each fixture type
            its fewest times), an easier set whose searches are about half as long.

    Returns:
        ``out_dir``.

    Raises:
        ValueError: An unknown split, task type or room size, or no task type.
    """
    check_room_size(room_size)
    counts = dict(DEFAULT_COUNTS if counts is None else counts)
    unknown = set(counts) - set(ALFWORLD_SPLITS)
    if unknown:
        raise ValueError(f"unknown splits {sorted(unknown)}; choose from {ALFWORLD_SPLITS}")
    task_types = tuple(task_types)
    bad = [t for t in task_types if t not in TASK_TYPES]
    if bad or not task_types:
        raise ValueError(f"unknown task types {bad} (or none given); choose from {TASK_TYPES}")
    out_dir = Path(out_dir)
    jobs = [(split, i) for split in ALFWORLD_SPLITS for i in range(counts.get(split, 0))]

    def job_rng(split: str, i: int, retry: int = 0) -> random.Random:
        return random.Random(f"agentgym-rl/alfworld/game/{seed}/{split}/{i}" + (f"/{retry}" if retry else ""))

    # Games are independent (each has its own rng), so planners in parallel give the same files;
    # a second planner (~1 s to start) only pays off for a few dozen games.
    workers = max(1, min(_MAX_WORKERS, os.cpu_count() or 1, len(jobs) // _GAMES_PER_WORKER))
    with tempfile.TemporaryDirectory(prefix="agentgym-rl-alfworld-") as scratch, ExitStack() as stack:
        idle: queue.SimpleQueue[_Planner] = queue.SimpleQueue()
        for k in range(workers):
            idle.put(stack.enter_context(_Planner(Path(scratch), name=f"p{k}")))

        def make(job: tuple[str, int], retry: int = 0) -> tuple[_Task, dict[str, Any]]:
            split, i = job
            scenes = UNSEEN_SCENES if split == "valid_unseen" else SEEN_SCENES
            planner = idle.get()
            try:
                return _generate(
                    task_types[i % len(task_types)],
                    job_rng(split, i, retry),
                    scenes,
                    seed,
                    planner,
                    room_size,
                )
            finally:
                idle.put(planner)

        with ThreadPoolExecutor(workers) as pool:
            games = list(pool.map(make, jobs))
        taken: set[str] = set()
        for job, (task, data) in zip(jobs, games, strict=True):
            retry = 0
            while f"{job[0]}/{task.name}/{task.trial}" in taken:  # a repeated trial id: (practically) never
                retry += 1
                task, data = make(job, retry)
            taken.add(f"{job[0]}/{task.name}/{task.trial}")
            folder = out_dir / job[0] / task.name / task.trial
            folder.mkdir(parents=True, exist_ok=True)
            (folder / GAME_FILE).write_text(json.dumps(data), encoding="utf-8")
    return out_dir


# --------------------------------------------------------------------------- embedded data
@cache
def version_tag() -> str:
    """Names the generated data: changes with this generator's source, alfworld or TextWorld."""
    h = hashlib.blake2b(digest_size=8)
    here = Path(__file__).resolve().parent
    for source in ("generator.py", "scenes.py"):
        h.update((here / source).read_bytes())
    for dist in ("alfworld", "textworld"):
        try:
            h.update(f"{dist}={importlib.metadata.version(dist)};".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{dist}=?;".encode())
    return f"v{_FORMAT}-{h.hexdigest()}"


def generated_games_root() -> Path:
    """The embedded games' ``json_2.1.1``-like folder, generated on first use.

    Lives in ``cache_root() / "alfworld-generated" / <version tag>``. Concurrent processes
    wait on a file lock; the games are written to a temporary folder renamed into place,
    so a crash never leaves a partial set. Later calls return at once.
    """
    return build_once(
        cache_root() / "alfworld-generated" / version_tag(),
        Path.is_dir,
        lambda scratch: generate_games(scratch, seed=0),
    )
