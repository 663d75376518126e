"""Scores of a run (mean@G, pass@G, per ALFWorld task type) and the papers' Markdown tables.

>>> episodes = [
...     {"task_id": "a", "task_type": "pick_and_place_simple", "won": True, "score": 1.0},
...     {"task_id": "b", "task_type": "look_at_obj_in_light", "won": False, "score": 0.0},
... ]
>>> summary = summarize(episodes, group_size=1)
>>> summary["mean_success"], summary["by_type"]["pick_and_place_simple"]["mean_success"]
(0.5, 1.0)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agentgym_rl.alfworld.tasks import TASK_TYPES
from benchmarks.leaderboard.references import REFERENCES

__all__ = ["TYPE_COLUMNS", "alfworld_table", "summarize", "webshop_table"]

#: ALFWorld task types as the papers' column headers.
TYPE_COLUMNS: dict[str, str] = dict(
    zip(TASK_TYPES, ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2"), strict=True)
)
_EMPTY = "—"


def _measures(groups: list[list[dict[str, Any]]]) -> dict[str, Any]:
    episodes = [e for group in groups for e in group]
    if not episodes:
        return {"tasks": 0, "episodes": 0}
    return {
        "tasks": len(groups),
        "episodes": len(episodes),
        # mean@G: every rollout counts; pass@G: a task counts once if any rollout did it.
        "mean_success": sum(bool(e["won"]) for e in episodes) / len(episodes),
        "pass_success": sum(any(bool(e["won"]) for e in group) for group in groups) / len(groups),
        "mean_score": sum(float(e.get("score", float(e["won"]))) for e in episodes) / len(episodes),
        "pass_score": sum(max(float(e.get("score", float(e["won"]))) for e in group) for group in groups)
        / len(groups),
        "mean_steps": sum(int(e.get("steps", 0)) for e in episodes) / len(episodes),
    }


def summarize(episodes: list[dict[str, Any]], group_size: int) -> dict[str, Any]:
    """The run's measures overall and per task type (fractions in [0, 1], not %).

    Args:
        episodes: Episode records (``task_id``, ``task_type``, ``won``, ``score``, ``steps``).
        group_size: Rollouts per task (G), recorded with the measures.

    Returns:
        ``tasks``, ``episodes``, ``group_size``, ``mean_success`` (mean@G), ``pass_success``
        (pass@G), ``mean_score``, ``pass_score`` (best score of a task, averaged),
        ``mean_steps``, and ``by_type``: the same per ``task_type``.
    """
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for episode in episodes:
        groups[repr(episode["task_id"])].append(episode)
    by_type: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for group in groups.values():
        by_type[str(group[0].get("task_type", "unknown"))].append(group)
    summary = _measures(list(groups.values()))
    summary["group_size"] = group_size
    summary["by_type"] = {task_type: _measures(g) for task_type, g in sorted(by_type.items())}
    return summary


def _pct(value: float | None) -> str:
    return _EMPTY if value is None else f"{100 * value:.1f}"


def _kinds(group_size: int) -> list[tuple[str, str]]:
    """(label, measure prefix) of our rows: mean@G, plus pass@G when G > 1."""
    rows = [(f"mean@{group_size}", "mean")]
    return rows + ([(f"pass@{group_size}", "pass")] if group_size > 1 else [])


def _table(header: list[str], rows: list[list[str]]) -> str:
    align = ["---" if i < 3 else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def alfworld_table(summary: dict[str, Any], agent: str, split: str) -> str:
    """The ALFWorld table: success % per task type and overall, papers first, then this run."""
    header = ["Source", "Model", "Method", *TYPE_COLUMNS.values(), "All"]
    rows = [
        ["paper", ref.model, ref.method, *[_EMPTY] * len(TYPE_COLUMNS), ref.alfworld_all or _EMPTY]
        for ref in REFERENCES
        if ref.alfworld_all
    ]
    for label, prefix in _kinds(summary["group_size"]):
        by_type = summary["by_type"]
        cells = [
            _pct(by_type[t][f"{prefix}_success"]) if by_type.get(t, {}).get("tasks") else _EMPTY
            for t in TYPE_COLUMNS
        ]
        rows.append(["this run", agent, label, *cells, _pct(summary.get(f"{prefix}_success"))])
    counts = ", ".join(
        f"{name} {summary['by_type'].get(t, {}).get('tasks', 0)}" for t, name in TYPE_COLUMNS.items()
    )
    note = (
        f"Success rate (%). This run: {summary['tasks']} games of ALFWorld `{split}` ({counts}), "
        f"G = {summary['group_size']}, {summary['episodes']} episodes. Papers: `valid_unseen`."
    )
    return _table(header, rows) + "\n\n" + note


def webshop_table(summary: dict[str, Any], agent: str, split: str) -> str:
    """The WebShop table: score (0-100) and success %, papers first, then this run."""
    header = ["Source", "Model", "Method", "Score", "Succ."]
    rows = [
        ["paper", ref.model, ref.method, ref.webshop_score or _EMPTY, ref.webshop_success or _EMPTY]
        for ref in REFERENCES
        if ref.webshop_score or ref.webshop_success
    ]
    for label, prefix in _kinds(summary["group_size"]):
        rows.append(
            [
                "this run",
                agent,
                label,
                _pct(summary.get(f"{prefix}_score")),
                _pct(summary.get(f"{prefix}_success")),
            ]
        )
    note = (
        f"Score = mean purchase score x 100; Succ. = score 1 (%). This run: {summary['tasks']} goals of WebShop "
        f"`{split}`, G = {summary['group_size']}, {summary['episodes']} episodes. Papers: the original catalogue's test goals."
    )
    return _table(header, rows) + "\n\n" + note
