"""Env steps per second for N*G ALFWorld envs: GroupVectorEnv (W workers) vs a loop vs AsyncVectorEnv.

Run: ``python -m benchmarks.bench_group_vector`` (real games from ``../shared/data`` or
``ALFWORLD_DATA``, else the generated ones). Every configuration plays the same
tasks with the same seeded random admissible actions; resets are not timed. Goal
(issue 4): GroupVectorEnv >= 1.8x the single-process loop on 2 cores.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np

import agentgym_rl
from agentgym_rl import GroupVectorEnv

ENV_ID = "AgentGymRL/ALFWorld-v0"


@dataclass
class Args:
    num_tasks: int = field(default=8, metadata={"help": "Tasks (groups)."})
    """Tasks (groups)."""
    group_size: int = field(default=4, metadata={"help": "Rollouts per task."})
    """Rollouts per task (N*G envs in all)."""
    steps: int = field(default=20, metadata={"help": "Timed steps per configuration."})
    """Timed steps per configuration (every env acts each step)."""
    split: str = field(default="valid_unseen", metadata={"help": "ALFWorld split."})
    """ALFWorld split."""
    data_dir: str | None = field(default=None, metadata={"help": "ALFWorld data ('generated' for the embedded games)."})
    """ALFWorld data folder; 'generated' for the embedded games."""
    workers: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "Worker counts to time."})
    """Worker counts to time for GroupVectorEnv."""
    async_vector: bool = field(default=True, metadata={"help": "Also time gymnasium's AsyncVectorEnv (a process per env)."})
    """Also time gymnasium's AsyncVectorEnv (one process per env)."""
    seed: int = field(default=0, metadata={"help": "Seed of tasks and actions."})
    """Seed of the tasks and of the random actions."""
    output: str = field(default="results/bench_group_vector", metadata={"help": "Folder for JSON + Markdown."})
    """Folder for the JSON and Markdown results."""


def policy(rng: np.random.Generator, admissible: list[list[str]]) -> list[str]:
    return [str(rng.choice(actions)) if len(actions) else "look" for actions in admissible]


def time_loop(args: Args, kwargs: dict, tasks: list[str]) -> float:
    envs = [gym.make(ENV_ID, **kwargs) for _ in range(len(tasks))]
    infos = [env.reset(seed=args.seed, options={"task": task})[1] for env, task in zip(envs, tasks)]
    rng, count, start = np.random.default_rng(args.seed), 0, time.perf_counter()
    for _ in range(args.steps):
        actions = policy(rng, [info["admissible_actions"] for info in infos])
        for i, env in enumerate(envs):
            infos[i] = env.step(actions[i])[4]
            count += 1
    elapsed = time.perf_counter() - start
    for env in envs:
        env.close()
    return count / elapsed


def time_group(args: Args, kwargs: dict, tasks: list[str], workers: int) -> float:
    envs = GroupVectorEnv(ENV_ID, num_tasks=args.num_tasks, group_size=args.group_size, workers=workers, **kwargs)
    _, info = envs.reset(seed=args.seed, options={"tasks": tasks[:: args.group_size]})
    rng, count, start = np.random.default_rng(args.seed), 0, time.perf_counter()
    for _ in range(args.steps):
        _, _, terminated, truncated, info = envs.step(policy(rng, info["admissible_actions"]))
        count += int(info["stepped"].sum())
        if not envs.active.all():  # keep every env busy: the loop has no finished envs either
            break
    elapsed = time.perf_counter() - start
    envs.close()
    return count / elapsed


def time_async(args: Args, kwargs: dict, tasks: list[str]) -> float:
    def make(task: str):
        def thunk():
            import agentgym_rl  # noqa: F401 - registers the env in the subprocess

            return gym.make(ENV_ID, **kwargs)

        return thunk

    envs = gym.vector.AsyncVectorEnv([make(t) for t in tasks], context="spawn", shared_memory=False)
    _, info = envs.reset(seed=[args.seed] * len(tasks), options={"task": tasks[0]})
    # AsyncVectorEnv passes one options dict to all envs: play task by task is not possible here, so
    # every env plays tasks[0]; the per-step work is of the same kind.
    rng, count, start = np.random.default_rng(args.seed), 0, time.perf_counter()
    for _ in range(args.steps):
        _, _, _, _, info = envs.step(policy(rng, list(info["admissible_actions"])))
        count += len(tasks)
    elapsed = time.perf_counter() - start
    envs.close()
    return count / elapsed


def main(args: Args) -> dict:
    kwargs = {"split": args.split} | ({"data_dir": args.data_dir} if args.data_dir else {})
    probe = gym.make(ENV_ID, **kwargs)
    rng = np.random.default_rng(args.seed)
    task_ids = probe.unwrapped.task_ids
    group_tasks = [task_ids[int(i)] for i in rng.choice(len(task_ids), args.num_tasks, replace=False)]
    probe.close()
    tasks = [t for t in group_tasks for _ in range(args.group_size)]

    rates = {"loop (1 process)": time_loop(args, kwargs, tasks)}
    for workers in args.workers:
        rates[f"GroupVectorEnv W={workers}"] = time_group(args, kwargs, tasks, workers)
    if args.async_vector:
        rates[f"AsyncVectorEnv ({len(tasks)} processes)"] = time_async(args, kwargs, tasks)
    base = rates["loop (1 process)"]
    lines = [
        f"# {len(tasks)} ALFWorld envs ({args.num_tasks} tasks x {args.group_size}), random admissible actions",
        "",
        "| configuration | env steps/s | vs loop |",
        "|---|---:|---:|",
        *[f"| {name} | {rate:.1f} | {rate / base:.2f}x |" for name, rate in rates.items()],
        "",
        f"{os.cpu_count()} cores; agentgym-rl {agentgym_rl.__version__}; data: {args.data_dir or 'default lookup'}",
    ]
    report = "\n".join(lines)
    print(report)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps({"args": asdict(args), "steps_per_second": rates}, indent=1))
    (out / "result.md").write_text(report + "\n")
    return rates


if __name__ == "__main__":
    from agentgym_rl.cli_args import make_command_parser, parse_command_args

    parser = make_command_parser(Args, name="bench_group_vector", description=__doc__.splitlines()[0])
    main(parse_command_args(parser, Args, None))
