"""ALFWorld task types and the tasks of a split.

A task id is the game's folder relative to its split folder, e.g.
``pick_and_place_simple-Pencil-None-Dresser-330/trial_T20190909_071128_012892``;
its task type is the prefix of the first part.

>>> task_type_of("pick_two_obj_and_place-Pen-None-Desk-308/trial_T1")
'pick_two_obj_and_place'
"""

from __future__ import annotations

import difflib
from pathlib import Path

from agentgym_rl.data import ALFWORLD_SPLITS

__all__ = ["GAME_FILE", "TASK_TYPES", "game_path", "list_tasks", "task_type_of"]

#: The six ALFWorld task types, in the official numbering (1-6).
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
GAME_FILE = "game.tw-pddl"


def task_type_of(task_id: str) -> str:
    """The task type named by the prefix of a task id (``"unknown"`` if none matches)."""
    head = task_id.split("/", 1)[0]
    for task_type in TASK_TYPES:
        if head == task_type or head.startswith(task_type + "-"):
            return task_type
    return "unknown"


def list_tasks(root: Path, split: str) -> list[str]:
    """The sorted task ids of ``split`` under the ``json_2.1.1`` folder ``root``.

    As the official loader does, games of "movable" and "Sliced" tasks are left out.
    """
    if split not in ALFWORLD_SPLITS:
        close = difflib.get_close_matches(split, ALFWORLD_SPLITS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown ALFWorld split {split!r}; choose one of {ALFWORLD_SPLITS}.{hint}")
    split_dir = root / split
    if not split_dir.is_dir():
        raise FileNotFoundError(f"{root} has no {split!r} split (no folder {split_dir})")
    return sorted(
        path.parent.relative_to(split_dir).as_posix()
        for path in split_dir.glob(f"*/*/{GAME_FILE}")
        if "movable" not in path.parent.parent.name and "Sliced" not in path.parent.parent.name
    )


def game_path(root: Path, split: str, task_id: str) -> Path:
    """The ``game.tw-pddl`` file of a task."""
    return root / split / task_id / GAME_FILE
