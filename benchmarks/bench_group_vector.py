"""Env steps per second for N*G ALFWorld envs: GroupVectorEnv (W workers) vs a loop vs AsyncVectorEnv.

Run: ``python -m benchmarks.bench_group_vector`` (real games from ``../shared/data`` or
``ALFWORLD_DATA``, else the generated ones). Every configuration plays the same
tasks with the same seeded random admissible actions; resets are not timed. Goal
(issue 4): GroupVectorEnv >= 1.8x the single-process loop on 2 cores.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import gymnasium as gym
import numpy as np

import agentgym_rl
from agentgym_rl import GroupVectorEnv
from benchmarks.report import run_cli, write_result

ENV_ID = "AgentGymRL/ALFWorld-v0"


@dataclass
class Args:
    num_tasks: int = field(default=8, metadata={"help": "Tasks (groups)."})
    """Tasks (groups)."""
    group_size: int = field(default=4, metadata={"help": "Rollouts per task."})
    """Rollouts per task (N*G envs in all)."""
    steps: int = field(default=30, metadata={"help": "Timed steps per configuration."})
    """Timed steps per configuration (every env acts each step)."""
    warmup: int = field(
        default=5, metadata={"help": "Untimed steps first (memo and cache warm-up in each process)."}
    )
    """Untimed steps before timing: each process warms its parse memo and caches."""
    split: str = field(default="valid_unseen", metadata={"help": "ALFWorld split."})
    """ALFWorld split."""
    data_dir: str | None = field(
        default=None, metadata={"help": "ALFWorld data ('generated' for the embedded games)."}
    )
    """ALFWorld data folder; 'generated' for the embedded games."""
    workers: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "Worker counts to time."})
    """Worker counts to time for GroupVectorEnv."""
    async_vector: bool = field(
        default=True, metadata={"help": "Also time gymnasium's AsyncVectorEnv (a process per env)."}
    )
    """Also time gymnasium's AsyncVectorEnv (one process per env)."""
    rounds: int = field(default=3, metadata={"help": "Rounds over all configurations (median reported)."})
    """Rounds over all configurations, interleaved, so that machine noise hits each alike; medians reported."""
    seed: int = field(default=0, metadata={"help": "Seed of tasks and actions."})
    """Seed of the tasks and of the random actions."""
    output: str = field(
        default="results/bench_group_vector", metadata={"help": "Folder for JSON + Markdown."}
    )
    """Folder for the JSON and Markdown results."""


def policy(rng: np.random.Generator, admissible: list[list[str]]) -> list[str]:
    return [str(rng.choice(actions)) if len(actions) else "look" for actions in admissible]


def time_loop(args: Args, kwargs: dict, tasks: list[str]) -> float:
    envs = [gym.make(ENV_ID, **kwargs) for _ in range(len(tasks))]
    infos = [
        env.reset(seed=args.seed, options={"task": task})[1] for env, task in zip(envs, tasks, strict=True)
    ]
    rng, count = np.random.default_rng(args.seed), 0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            count, start = 0, time.perf_counter()
        actions = policy(rng, [info["admissible_actions"] for info in infos])
        for i, env in enumerate(envs):
            infos[i] = env.step(actions[i])[4]
            count += 1
    elapsed = time.perf_counter() - start
    for env in envs:
        env.close()
    return count / elapsed


def time_group(args: Args, kwargs: dict, tasks: list[str], workers: int) -> float:
    envs = GroupVectorEnv(
        ENV_ID, num_tasks=args.num_tasks, group_size=args.group_size, workers=workers, **kwargs
    )
    _, info = envs.reset(seed=args.seed, options={"tasks": tasks[:: args.group_size]})
    rng, count = np.random.default_rng(args.seed), 0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            count, start = 0, time.perf_counter()
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
    rng, count = np.random.default_rng(args.seed), 0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            count, start = 0, time.perf_counter()
        _, _, _, _, info = envs.step(policy(rng, list(info["admissible_actions"])))
        count += len(tasks)
    elapsed = time.perf_counter() - start
    envs.close()
    return count / elapsed


def main(args: Args) -> dict:
    """Time every configuration in interleaved rounds; returns the steps/s and the ratios to the loop."""
    kwargs = {"split": args.split} | ({"data_dir": args.data_dir} if args.data_dir else {})
    probe = gym.make(ENV_ID, **kwargs)
    rng = np.random.default_rng(args.seed)
    task_ids = probe.unwrapped.task_ids
    group_tasks = [task_ids[int(i)] for i in rng.choice(len(task_ids), args.num_tasks, replace=False)]
    probe.close()
    tasks = [t for t in group_tasks for _ in range(args.group_size)]

    samples: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        samples.setdefault("loop (1 process)", []).append(time_loop(args, kwargs, tasks))
        for workers in args.workers:
            samples.setdefault(f"GroupVectorEnv W={workers}", []).append(
                time_group(args, kwargs, tasks, workers)
            )
        if args.async_vector:
            samples.setdefault(f"AsyncVectorEnv ({len(tasks)} processes)", []).append(
                time_async(args, kwargs, tasks)
            )
    rates = {name: float(np.median(values)) for name, values in samples.items()}
    base = rates["loop (1 process)"]
    lines = [
        f"# {len(tasks)} ALFWorld envs ({args.num_tasks} tasks x {args.group_size}), random admissible actions",
        "",
        "| configuration | env steps/s (median) | all rounds | vs loop |",
        "|---|---:|---|---:|",
        *[
            f"| {name} | {rate:.1f} | {', '.join(f'{v:.0f}' for v in samples[name])} | {rate / base:.2f}x |"
            for name, rate in rates.items()
        ],
        "",
        f"agentgym-rl {agentgym_rl.__version__}; data: {args.data_dir or 'default lookup'}",
    ]
    report = "\n".join(lines)
    print(report)
    result = {
        "args": asdict(args),
        "steps_per_second": rates,
        "samples": samples,
        "ratios": {
            f"{name} / loop": rate / base for name, rate in rates.items() if name != "loop (1 process)"
        },
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_group_vector", __doc__)
