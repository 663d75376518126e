"""Reset and step times of ``AgentGymRL/ALFWorld-v0`` vs the official ``AlfredTWEnv``, as ratios from one run.

Run: ``python -m benchmarks.bench_alfworld_env --games 12`` (reads ``../shared/data``
or ``ALFWORLD_DATA``). Goals (issue 3): warm reset > 1000x faster, cold >= 4x,
step >= 2.4x. The official env runs in a spawned process, so none of our caches
reach it; it is measured as ``AlfredTWEnv.init_env`` builds it (batch size 1).

- cold: first reset of a game in the process (memory cache only);
- cold+disk: first reset with the translation read from the on-disk cache;
- warm: reset of the game already loaded;
- seen: reset of a game seen before while the engine held another one;
- step: one walkthrough step.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.report import run_cli, write_result


@dataclass
class Args:
    games: int = field(default=12, metadata={"help": "Games to time (spread over the six task types)."})
    """Games to time (spread over the six task types)."""
    split: str = field(default="valid_unseen", metadata={"help": "ALFWorld split."})
    """ALFWorld split."""
    data_dir: str | None = field(
        default=None, metadata={"help": "ALFWorld data folder (default: env lookup)."}
    )
    """ALFWorld data folder (default: ALFWORLD_DATA, ../shared/data)."""
    warm_repeats: int = field(default=20, metadata={"help": "Warm resets per game."})
    """Warm resets per game."""
    output: str = field(
        default="results/bench_alfworld_env", metadata={"help": "Folder for JSON + Markdown."}
    )
    """Folder for the JSON and Markdown results."""


def pick_games(root: Path, split: str, count: int) -> list[str]:
    from agentgym_rl.alfworld.tasks import TASK_TYPES, list_tasks, task_type_of

    by_type = {t: [x for x in list_tasks(root, split) if task_type_of(x) == t] for t in TASK_TYPES}
    picked: list[str] = []
    while len(picked) < count and any(by_type.values()):
        for tasks in by_type.values():
            if tasks and len(picked) < count:
                picked.append(tasks.pop(0))
    return picked


def time_official(game_files: list[str], walkthroughs: list[list[str]]) -> dict[str, list[float]]:
    """Runs in a spawned interpreter: the unmodified official env, one env per game."""
    from benchmarks.official_alfworld import make_official_env

    times: dict[str, list[float]] = {"cold": [], "warm": [], "step": []}
    for game_file, walkthrough in zip(game_files, walkthroughs, strict=True):
        env = make_official_env([Path(game_file)])
        for key in ("cold", "warm"):  # the official env reloads the game on every reset
            start = time.perf_counter()
            env.reset()
            times[key].append(time.perf_counter() - start)
        for action in walkthrough:
            start = time.perf_counter()
            env.step([action])
            times["step"].append(time.perf_counter() - start)
        env.close()
    return times


def time_ours(
    root: Path, split: str, tasks: list[str], warm_repeats: int, disk_cache: Path
) -> dict[str, list[float]]:
    from agentgym_rl.alfworld.engine import GameCache
    from agentgym_rl.alfworld.env import ALFWorldEnv
    from agentgym_rl.alfworld.tasks import game_path

    times: dict[str, list[float]] = {"cold": [], "cold+disk": [], "warm": [], "seen": [], "step": []}
    env = ALFWorldEnv(split=split, data_dir=str(root))
    for task in tasks:
        start = time.perf_counter()
        env.reset(options={"task": task})
        times["cold"].append(time.perf_counter() - start)
        for _ in range(warm_repeats):
            start = time.perf_counter()
            env.reset(options={"task": task})
            times["warm"].append(time.perf_counter() - start)
        for action in env.walkthrough:
            start = time.perf_counter()
            env.step(action)
            times["step"].append(time.perf_counter() - start)
    for task in tasks:  # each reset now follows another game: the engine reloads a seen game
        start = time.perf_counter()
        env.reset(options={"task": task})
        times["seen"].append(time.perf_counter() - start)
    env.close()

    prefill = GameCache(disk_cache)
    for task in tasks:
        prefill.translation(prefill.game(game_path(root, split, task)))
    disk_env = ALFWorldEnv(split=split, data_dir=str(root), translation_cache=disk_cache)
    for task in tasks:
        start = time.perf_counter()
        disk_env.reset(options={"task": task})
        times["cold+disk"].append(time.perf_counter() - start)
    disk_env.close()
    return times


def main(args: Args) -> dict:
    """Time both envs on the same games; returns the medians and the speed-ups (official / ours)."""
    from agentgym_rl.alfworld.tasks import game_path
    from agentgym_rl.data import find_alfworld_root

    root = find_alfworld_root(args.data_dir)
    if root is None:
        raise SystemExit(
            "no ALFWorld data: set ALFWORLD_DATA or --data_dir (the official env needs real games)"
        )
    tasks = pick_games(root, args.split, args.games)
    files = [str(game_path(root, args.split, t)) for t in tasks]
    walkthroughs = [json.loads(Path(f).read_text())["walkthrough"] for f in files]

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        official = pool.apply(time_official, (files, walkthroughs))
    with tempfile.TemporaryDirectory() as disk_cache:
        ours = time_ours(root, args.split, tasks, args.warm_repeats, Path(disk_cache))

    def median_ms(values: list[float]) -> float:
        return 1000 * statistics.median(values)

    rows = []
    for kind, official_kind in [
        ("cold", "cold"),
        ("cold+disk", "cold"),
        ("seen", "cold"),
        ("warm", "warm"),
        ("step", "step"),
    ]:
        ours_ms, official_ms = median_ms(ours[kind]), median_ms(official[official_kind])
        rows.append(
            {
                "measure": kind,
                "official_ms": official_ms,
                "ours_ms": ours_ms,
                "speedup": official_ms / ours_ms,
            }
        )

    lines = [
        f"# ALFWorld env vs official AlfredTWEnv ({len(tasks)} {args.split} games, medians)",
        "",
        "| measure | official (ms) | ours (ms) | speedup |",
        "|---|---:|---:|---:|",
        *[
            f"| {r['measure']} | {r['official_ms']:.2f} | {r['ours_ms']:.3f} | {r['speedup']:.1f}x |"
            for r in rows
        ],
    ]
    report = "\n".join(lines)
    print(report)
    result = {
        "args": asdict(args),
        "tasks": tasks,
        "rows": rows,
        "official": official,
        "ours": ours,
        "ratios": {f"{r['measure']}, official / ours": r["speedup"] for r in rows},
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_alfworld_env", __doc__)
