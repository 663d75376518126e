"""Step-for-step equality of our ALFWorld engine with stock TextWorld on whole splits (opt-in check).

Run: ``python -m benchmarks.bench_engine_equality`` (all 134 ``valid_unseen`` and all
140 ``valid_seen`` games; ``--max_games 3`` for a quick run; reads ``../shared/data`` or
``ALFWORLD_DATA``). Issue 14, item 3.

Every game is played twice, by our engine and by stock TextWorld side by side:

- walkthrough: the game's expert walkthrough;
- random: a uniformly random admissible-command rollout of ``--random_steps`` (30) steps,
  seeded with the game's index in its split; a rollout stops early when the game is won
  (the episode ends there in the gym env).

After reset and after every step, four things are compared: the observation (the
engine's raw feedback), the sorted admissible commands, the step reward and ``won``.
A step mismatches when any of them differs; a game mismatches when any of its steps does.

What is compared is the engine (``agentgym_rl.alfworld.engine.make_engine``), the layer
that replaces TextWorld's ``PddlEnv`` + ``AlfredDemangler``; its ``step`` returns
TextWorld's ``(state, reward, done)``, where the reward is the score (1 once won). The
Gymnasium env on top only strips the feedback, strips the banner on reset, and pays
reward 1.0 on the step that wins (``won`` going from false to true).

The reference is ``benchmarks.alfworld_stock``: ``textworld.start`` with
``AlfredDemangler(shuffle=False)``, as ``AlfredTWEnv`` plays, run in spawned worker
processes that never import our engine (so none of our caches reach it). The random
commands are drawn from our engine's admissible commands; stock TextWorld is given the
same commands (a command it does not admit would show as a mismatch of the step before).

The smoke test (tests/test_alfworld_engine.py) runs 2 games and expects no mismatch.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.alfworld_stock import trace_entry
from benchmarks.report import run_cli, write_result

KINDS = ("walkthrough", "random")


@dataclass
class Args:
    splits: list[str] = field(
        default_factory=lambda: ["valid_unseen", "valid_seen"], metadata={"help": "ALFWorld splits."}
    )
    """ALFWorld splits."""
    max_games: int | None = field(default=None, metadata={"help": "Games per split (default: all)."})
    """Games per split (default: all)."""
    random_steps: int = field(default=30, metadata={"help": "Steps of the random rollout."})
    """Steps of the random rollout."""
    workers: int = field(default=2, metadata={"help": "Processes playing stock TextWorld."})
    """Processes playing stock TextWorld (at most 2)."""
    max_details: int = field(default=10, metadata={"help": "Mismatches recorded in detail."})
    """Mismatches recorded in detail."""
    data_dir: str | None = field(
        default=None, metadata={"help": "ALFWorld data folder (default: env lookup)."}
    )
    """ALFWorld data folder (default: ALFWORLD_DATA, ../shared/data)."""
    output: str = field(
        default="results/bench_engine_equality", metadata={"help": "Folder for JSON + Markdown."}
    )
    """Folder for the JSON and Markdown results."""


def play_ours(engine: Any, game_file: str, walkthrough: list[str], seed: int, random_steps: int) -> dict:
    """Our engine's traces of the walkthrough and of the seeded random rollout, with the commands."""
    engine.load(game_file)
    played: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
    state = engine.reset()
    trace = [trace_entry(state)]
    for command in walkthrough:
        state, reward, _ = engine.step(command)
        trace.append(trace_entry(state, reward))
    played["walkthrough"] = (list(walkthrough), trace)

    rng = random.Random(seed)
    state = engine.reset()
    trace, commands = [trace_entry(state)], []
    for _ in range(random_steps):
        if state.won:
            break
        command = rng.choice(list(state.admissible_commands))
        commands.append(command)
        state, reward, _ = engine.step(command)
        trace.append(trace_entry(state, reward))
    played["random"] = (commands, trace)
    return played


def compare(ours: list[dict[str, Any]], stock: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The differing steps: index and the fields that differ (both values)."""
    diffs = []
    for step, (a, b) in enumerate(zip(ours, stock, strict=True)):
        fields = {}
        for key in ("feedback", "reward", "won"):
            if a[key] != b[key]:
                fields[key] = {"ours": a[key], "stock": b[key]}
        if sorted(a["admissible"]) != sorted(b["admissible"]):
            fields["admissible"] = {
                "only_ours": sorted(set(a["admissible"]) - set(b["admissible"])),
                "only_stock": sorted(set(b["admissible"]) - set(a["admissible"])),
            }
        if fields:
            diffs.append({"step": step, **fields})
    return diffs


def main(args: Args) -> dict:
    """Play every game on both engines; returns the counts per split and kind, and the first mismatches."""
    from agentgym_rl.alfworld.engine import GameCache, make_engine
    from agentgym_rl.alfworld.tasks import game_path, list_tasks
    from agentgym_rl.data import find_alfworld_root
    from benchmarks.alfworld_stock import stock_traces

    root = find_alfworld_root(args.data_dir)
    if root is None:
        raise SystemExit(
            "no ALFWorld data: set ALFWORLD_DATA or --data_dir (stock TextWorld needs real games)"
        )
    games = []  # (split, index, task)
    for split in args.splits:
        tasks = list_tasks(root, split)
        if args.max_games is not None:
            tasks = tasks[: args.max_games]
        games += [(split, index, task) for index, task in enumerate(tasks)]

    start = time.perf_counter()
    engine = make_engine(GameCache())
    stats = {
        (split, kind): {
            "games": 0,
            "steps": 0,
            "mismatch_steps": 0,
            "mismatch_games": 0,
            "won_ours": 0,
            "won_stock": 0,
        }
        for split in args.splits
        for kind in KINDS
    }
    details: list[dict[str, Any]] = []
    workers = max(1, min(2, args.workers))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending = []
        for split, index, task in tqdm(games, desc="ours", unit="game"):
            game_file = str(game_path(root, split, task))
            walkthrough = json.loads(Path(game_file).read_text())["walkthrough"]
            played = play_ours(engine, game_file, walkthrough, seed=index, random_steps=args.random_steps)
            jobs = [(game_file, played[kind][0]) for kind in KINDS]
            pending.append(((split, index, task), played, pool.submit(stock_traces, jobs, True)))
        for (split, index, task), played, future in tqdm(pending, desc="stock", unit="game"):
            for kind, stock in zip(KINDS, future.result(), strict=True):
                commands, ours = played[kind]
                diffs = compare(ours, stock)
                row = stats[(split, kind)]
                row["games"] += 1
                row["steps"] += len(ours)
                row["mismatch_steps"] += len(diffs)
                row["mismatch_games"] += bool(diffs)
                row["won_ours"] += ours[-1]["won"]
                row["won_stock"] += stock[-1]["won"]
                for diff in diffs:
                    if len(details) < args.max_details:
                        step = diff["step"]
                        details.append(
                            {
                                "split": split,
                                "index": index,
                                "task": task,
                                "kind": kind,
                                "command": commands[step - 1] if step else None,
                                **diff,
                            }
                        )
    engine.close()
    wall_s = time.perf_counter() - start

    rows = [{"split": split, "kind": kind, **row} for (split, kind), row in stats.items()]
    total_steps = sum(r["steps"] for r in rows)
    total_mismatch = sum(r["mismatch_steps"] for r in rows)
    lines = [
        f"# Engine vs stock TextWorld, step for step ({len(games)} games, {wall_s:.0f} s)",
        "",
        "| split | kind | games | steps compared | mismatching steps | mismatching games | won (ours / stock) |",
        "|---|---|---:|---:|---:|---:|---:|",
        *[
            f"| {r['split']} | {r['kind']} | {r['games']} | {r['steps']} | {r['mismatch_steps']} | "
            f"{r['mismatch_games']} | {r['won_ours']} / {r['won_stock']} |"
            for r in rows
        ],
        f"| all | all | {len(games)} | {total_steps} | {total_mismatch} | "
        f"{sum(r['mismatch_games'] for r in rows)} | |",
        "",
        "Compared after reset and each step: observation, sorted admissible commands, reward, won.",
    ]
    if details:
        lines += ["", "First mismatches:", ""]
        lines += [f"- {json.dumps(d)[:500]}" for d in details]
    report = "\n".join(lines)
    print(report)
    result = {
        "args": asdict(args),
        "games": len(games),
        "steps": total_steps,
        "mismatch_steps": total_mismatch,
        "rows": rows,
        "mismatches": details,
        "wall_s": wall_s,
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_engine_equality", __doc__)
