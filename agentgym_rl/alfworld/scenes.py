"""Rooms for the generated ALFWorld games: which furniture and objects a room holds, and its layout.

Four room styles follow ALFRED's scene families and numbering (kitchens 1-30, living
rooms 201-230, bedrooms 301-330, bathrooms 401-430). Which receptacle may hold which
object, and which objects can be cleaned, heated, cooled or sliced, come from the
tables the ``alfworld`` wheel ships (``alfworld.gen.constants``), so the generated
problems carry the same ``canContain`` and property facts as the official ones.
"""

from __future__ import annotations

import importlib
import os
import random
from dataclasses import dataclass
from functools import cache
from types import ModuleType

__all__ = [
    "LAMP_HOLDERS",
    "OPENABLE",
    "ROOM_SIZES",
    "ROOM_STYLES",
    "TASK_APPLIANCE",
    "Layout",
    "Receptacle",
    "RoomStyle",
    "can_contain",
    "check_room_size",
    "entity_id",
    "import_alfworld",
    "location_id",
    "object_properties",
    "scene_layout",
    "styles_for",
]

#: Receptacle types that open and close (objects inside are hidden until opened).
OPENABLE = frozenset({"Cabinet", "Drawer", "Fridge", "Microwave", "Safe"})
#: Room sizes of the generated games (see :func:`scene_layout`).
ROOM_SIZES = ("full", "small")
#: Receptacles a desk lamp stands on (as in the official look_at_obj_in_light games).
LAMP_HOLDERS = ("Desk", "SideTable", "Dresser")
#: The appliance each transforming task needs, and so may not be that task's target.
TASK_APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}


@dataclass(frozen=True)
class RoomStyle:
    """A family of rooms.

    Attributes:
        name: ``"kitchen"``, ``"livingroom"``, ``"bedroom"`` or ``"bathroom"``.
        scene_base: ALFRED's scene numbering offset (scene numbers are ``base + 1 .. base + 30``).
        fixtures: ``(receptacle type, fewest, most)`` per receptacle type of the room.
        objects: Pickupable object types found in the room.
        task_types: The task types this room can pose.
    """

    name: str
    scene_base: int
    fixtures: tuple[tuple[str, int, int], ...]
    objects: tuple[str, ...]
    task_types: tuple[str, ...]


_PLACE = ("pick_and_place_simple", "pick_two_obj_and_place")


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


ROOM_STYLES: tuple[RoomStyle, ...] = (
    RoomStyle(
        name="kitchen",
        scene_base=0,
        fixtures=(
            ("CounterTop", 1, 2),
            ("Cabinet", 1, 3),
            ("Drawer", 1, 2),
            ("Fridge", 1, 1),
            ("Microwave", 1, 1),
            ("SinkBasin", 1, 1),
            ("StoveBurner", 1, 2),
            ("CoffeeMachine", 0, 1),
            ("DiningTable", 0, 1),
            ("Shelf", 0, 1),
            ("GarbageCan", 1, 1),
        ),
        objects=_names(
            "Apple Bread Egg Lettuce Potato Tomato Mug Cup Bowl Plate Pan Pot Knife "
            "ButterKnife Fork Spoon Spatula Ladle DishSponge SaltShaker PepperShaker Kettle "
            "WineBottle"
        ),
        task_types=(
            *_PLACE,
            "pick_clean_then_place_in_recep",
            "pick_heat_then_place_in_recep",
            "pick_cool_then_place_in_recep",
        ),
    ),
    RoomStyle(
        name="livingroom",
        scene_base=200,
        fixtures=(
            ("Sofa", 1, 1),
            ("ArmChair", 0, 1),
            ("CoffeeTable", 1, 1),
            ("SideTable", 1, 2),
            ("DiningTable", 0, 1),
            ("TVStand", 0, 1),
            ("Shelf", 0, 2),
            ("Drawer", 1, 2),
            ("Cabinet", 0, 2),
            ("Dresser", 0, 1),
            ("Ottoman", 0, 1),
            ("Safe", 0, 1),
            ("GarbageCan", 1, 1),
        ),
        objects=_names(
            "RemoteControl KeyChain CreditCard Box Laptop Newspaper Pillow Statue Vase Watch "
            "CellPhone Book Candle Plate TissueBox WateringCan"
        ),
        task_types=(*_PLACE, "look_at_obj_in_light"),
    ),
    RoomStyle(
        name="bedroom",
        scene_base=300,
        fixtures=(
            ("Bed", 1, 1),
            ("Desk", 0, 1),
            ("SideTable", 1, 2),
            ("Dresser", 0, 1),
            ("Drawer", 1, 3),
            ("Shelf", 1, 2),
            ("ArmChair", 0, 1),
            ("LaundryHamper", 0, 1),
            ("Safe", 0, 1),
            ("GarbageCan", 1, 1),
        ),
        objects=_names(
            "AlarmClock Book CD CellPhone CreditCard KeyChain Laptop Pen Pencil Pillow Mug "
            "Bowl BaseballBat TennisRacket BasketBall Statue Vase Watch Box TissueBox Cloth"
        ),
        task_types=(*_PLACE, "look_at_obj_in_light"),
    ),
    RoomStyle(
        name="bathroom",
        scene_base=400,
        fixtures=(
            ("Toilet", 1, 1),
            ("SinkBasin", 1, 2),
            ("BathtubBasin", 0, 1),
            ("CounterTop", 1, 1),
            ("Cabinet", 1, 3),
            ("Drawer", 0, 2),
            ("Shelf", 0, 1),
            ("TowelHolder", 0, 1),
            ("HandTowelHolder", 0, 1),
            ("ToiletPaperHanger", 1, 1),
            ("Cart", 0, 1),
            ("GarbageCan", 1, 1),
        ),
        objects=_names(
            "SoapBar SoapBottle SprayBottle ToiletPaper Candle Cloth DishSponge HandTowel "
            "Towel TissueBox PaperTowel"
        ),
        task_types=(*_PLACE, "pick_clean_then_place_in_recep"),
    ),
)


def styles_for(task_type: str) -> tuple[RoomStyle, ...]:
    """The room styles that can pose ``task_type``."""
    return tuple(style for style in ROOM_STYLES if task_type in style.task_types)


def import_alfworld(name: str) -> ModuleType:
    """Import an ``alfworld`` module without its side effect on the environment.

    ``alfworld.info`` sets ``ALFWORLD_DATA`` (to ``~/.cache/alfworld``) when imported,
    which would then pass for a user's choice in our data lookup and in child processes.
    """
    previous = os.environ.get("ALFWORLD_DATA")
    try:
        return importlib.import_module(name)
    finally:
        if previous is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = previous


@cache
def _constants() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], frozenset[str]]:
    constants = import_alfworld("alfworld.gen.constants")
    containers = {r: frozenset(objs) for r, objs in constants.VAL_RECEPTACLE_OBJECTS.items()}
    actions = {k: frozenset(objs) for k, objs in constants.VAL_ACTION_OBJECTS.items()}
    return containers, actions, frozenset(constants.MOVABLE_RECEPTACLES_SET)


def can_contain(receptacle_type: str, object_type: str) -> bool:
    """Whether ALFRED lets an object of ``object_type`` be put in a ``receptacle_type``."""
    return object_type in _constants()[0].get(receptacle_type, frozenset())


def object_properties(object_type: str) -> tuple[str, ...]:
    """The PDDL property predicates of an object type, in a fixed order.

    ``pickupable`` for all but lamps, ``isReceptacleObject`` for movable containers,
    then ``cleanable`` / ``heatable`` / ``coolable`` / ``sliceable`` / ``toggleable``.
    """
    _, actions, movable = _constants()
    props = [] if object_type in actions["Toggleable"] else ["pickupable"]
    if object_type in movable:
        props.append("isReceptacleObject")
    for action, predicate in (
        ("Cleanable", "cleanable"),
        ("Heatable", "heatable"),
        ("Coolable", "coolable"),
        ("Sliceable", "sliceable"),
        ("Toggleable", "toggleable"),
    ):
        if object_type in actions[action]:
            props.append(predicate)
    return tuple(props)


# --------------------------------------------------------------------------- ALFRED-style names
def _coordinate(hundredths: int) -> str:
    """ALFRED's mangled coordinate, e.g. ``-150`` -> ``_minus_01_dot_50``."""
    sign = "minus" if hundredths < 0 else "plus"
    value = abs(hundredths)
    return f"_{sign}_{value // 100:02d}_dot_{value % 100:02d}"


def entity_id(kind: str, rng: random.Random, used: set[str]) -> str:
    """A fresh ALFRED-style id such as ``Mug_bar__plus_01_dot_23_bar__plus_00_dot_90_bar__minus_01_dot_50``.

    Basins are named like the official ones (``Sink_bar_..._bar_SinkBasin``): alfworld's
    demangler then calls them "sinkbasin" / "bathtubbasin".
    """
    prefix = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}.get(kind, kind)
    while True:
        name = prefix + "".join("_bar_" + _coordinate(rng.randint(-300, 300)) for _ in range(3))
        if kind != prefix:
            name += f"_bar_{kind}"
        if name not in used:
            used.add(name)
            return name


def location_id(rng: random.Random, used: set[str]) -> str:
    """A fresh ALFRED-style location such as ``loc_bar__minus_5_bar_6_bar_3_bar_45``."""

    def part(n: int) -> str:
        return f"_minus_{-n}" if n < 0 else str(n)

    while True:
        x, z = rng.randint(-10, 10), rng.randint(-10, 10)
        name = (
            f"loc_bar_{part(x)}_bar_{part(z)}_bar_{rng.randint(0, 3)}_bar_{rng.choice((0, 15, 30, 45, 60))}"
        )
        if name not in used:
            used.add(name)
            return name


# --------------------------------------------------------------------------- layouts
@dataclass(frozen=True)
class Receptacle:
    """A piece of furniture: its PDDL id, ALFRED type and the location in front of it."""

    id: str
    type: str
    location: str


@dataclass(frozen=True)
class Layout:
    """The furniture of one scene (the same in every trial of the scene).

    Attributes:
        style: The room style.
        scene: ALFRED's scene number (the style's base plus 1-30).
        receptacles: The furniture, each at a location of its own.
        start: Where the agent starts, beside no receptacle.
        used: Every id taken by the layout (objects must get other ones).
    """

    style: RoomStyle
    scene: int
    receptacles: tuple[Receptacle, ...]
    start: str
    used: frozenset[str]

    def holders(self, object_type: str, exclude: frozenset[str] | set[str] = frozenset()) -> list[Receptacle]:
        """Receptacles that may hold ``object_type``, but none of the types in ``exclude``."""
        return [r for r in self.receptacles if r.type not in exclude and can_contain(r.type, object_type)]

    @property
    def types(self) -> list[str]:
        """The receptacle types of the room, sorted."""
        return sorted({r.type for r in self.receptacles})


def check_room_size(room_size: str) -> None:
    """Raise ``ValueError`` unless ``room_size`` is one of :data:`ROOM_SIZES`."""
    if room_size not in ROOM_SIZES:
        raise ValueError(f"room_size must be one of {ROOM_SIZES}, got {room_size!r}")


@cache
def scene_layout(style: RoomStyle, scene: int, seed: int, room_size: str = "full") -> Layout:
    """The furniture of scene ``scene`` (1-30) of ``style``.

    Drawn from its own seed, so that every trial of a scene shares it (as ALFRED's
    trials share their scene).

    Args:
        style: The room style.
        scene: Scene number, 1-30 (before the style's offset).
        seed: Seed of the furniture.
        room_size: ``"full"``: each fixture type appears between its fewest and most times (10-17
            receptacles a room). ``"small"``: each its fewest times, so optional furniture is absent
            (5-8 receptacles): shorter searches, for CPU-sized demos and curricula.

    Raises:
        ValueError: Unknown ``room_size``.
    """
    check_room_size(room_size)
    rng = random.Random(f"agentgym-rl/alfworld/layout/{seed}/{style.name}/{scene}")
    used: set[str] = set()
    receptacles = []
    for kind, fewest, most in style.fixtures:
        for _ in range(fewest if room_size == "small" else rng.randint(fewest, most)):
            receptacles.append(Receptacle(entity_id(kind, rng, used), kind, location_id(rng, used)))
    start = location_id(rng, used)
    return Layout(style, style.scene_base + scene, tuple(receptacles), start, frozenset(used))
