"""Scale-out overheads on one machine: GroupVectorEnv on Ray actors vs processes; WebShop on 1 vs 2 gunicorn workers.

Run: ``python -m benchmarks.bench_scaling``. Two parts, both on 127.0.0.1:

- envs: env steps/s of N*G = 64 ALFWorld envs (generated games) in a
  ``GroupVectorEnv`` with ``worker_backend="process"`` and ``worker_backend="ray"`` (a local Ray
  cluster started here, one worker per core each), the same tasks and seeded random
  admissible actions; resets are not timed. The ratio ray/process is Ray's overhead.
- webshop: requests/s of ``gunicorn -c python:webshop_server.gunicorn_conf`` with 1
  and 2 workers, 16 client threads (keep-alive ``http.client``, the scripted episodes
  of :mod:`benchmarks.bench_webshop`), a fixed request count; errors counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

import agentgym_rl
from benchmarks.bench_group_vector import policy
from benchmarks.bench_webshop import cpu_seconds, free_port, goal_list, run_clients
from benchmarks.report import run_cli, write_result

ENV_ID = "AgentGymRL/ALFWorld-v0"
PARTS = ("envs", "webshop")


@dataclass
class Args:
    parts: list[str] = field(
        default_factory=lambda: list(PARTS), metadata={"help": f"What to measure: {PARTS}."}
    )
    """What to measure."""
    num_tasks: int = field(default=16, metadata={"help": "Tasks (groups)."})
    """Tasks (groups)."""
    group_size: int = field(default=4, metadata={"help": "Rollouts per task (N*G envs in all)."})
    """Rollouts per task (N*G envs in all)."""
    workers: int = field(default=0, metadata={"help": "Env workers per backend (0: one per core)."})
    """Env workers (processes or actors) per backend; 0 for one per core."""
    steps: int = field(default=30, metadata={"help": "Timed steps per configuration."})
    """Timed steps per configuration (every active env acts each step)."""
    warmup: int = field(default=5, metadata={"help": "Untimed steps first."})
    """Untimed steps before timing (each worker warms its caches)."""
    rounds: int = field(default=3, metadata={"help": "Rounds over both backends (median reported)."})
    """Rounds over both backends, interleaved so that machine noise hits each alike; medians reported."""
    num_products: int = field(default=1000, metadata={"help": "Generated WebShop products."})
    """Generated WebShop products."""
    clients: int = field(default=16, metadata={"help": "Concurrent WebShop client threads."})
    """Concurrent WebShop client threads."""
    http_requests: int = field(default=4000, metadata={"help": "Requests per gunicorn configuration."})
    """Requests per gunicorn configuration (all clients together), after 300 warm-up requests."""
    gunicorn_workers: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "Worker counts."})
    """gunicorn worker counts to time."""
    memory_baseline: bool = field(
        default=True,
        metadata={"help": "Also time 1 worker with sessions in memory (the SQLite store's cost)."},
    )
    """Also time one worker with sessions in its memory instead of the shared SQLite file (the store's cost)."""
    seed: int = field(default=0, metadata={"help": "Seed of tasks, actions and the shop."})
    """Seed of the tasks, the random actions and the generated shop."""
    output: str = field(default="results/bench_scaling", metadata={"help": "Folder for JSON + Markdown."})
    """Folder for the JSON and Markdown results."""


# ---------------------------------------------------------------------------------------- envs
def time_backend(args: Args, backend: str, tasks: list[str]) -> float:
    from agentgym_rl import GroupVectorEnv

    envs = GroupVectorEnv(
        ENV_ID, num_tasks=args.num_tasks, group_size=args.group_size, workers=args.workers or os.cpu_count(),
        worker_backend=backend, split="valid_unseen", data_dir="generated",
    )  # fmt: skip
    try:
        _, info = envs.reset(seed=args.seed, options={"tasks": tasks})
        rng, count = np.random.default_rng(args.seed), 0
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                count, start = 0, time.perf_counter()
            _, _, _, _, info = envs.step(policy(rng, info["admissible_actions"]))
            count += int(info["stepped"].sum())
            if not envs.active.any():
                break
        return count / (time.perf_counter() - start)
    finally:
        envs.close()


def bench_envs(args: Args) -> dict:
    import gymnasium as gym

    from agentgym_rl.ray_workers import connect

    probe = gym.make(ENV_ID, split="valid_unseen", data_dir="generated")
    task_ids = probe.unwrapped.task_ids
    probe.close()
    rng = np.random.default_rng(args.seed)
    tasks = [
        task_ids[int(i)]
        for i in rng.choice(len(task_ids), args.num_tasks, replace=len(task_ids) < args.num_tasks)
    ]
    ray = connect("local")  # a new local Ray instance, listening on loopback only
    samples: dict[str, list[float]] = {"process": [], "ray": []}
    try:
        for _ in range(args.rounds):
            for backend in samples:
                samples[backend].append(time_backend(args, backend, tasks))
    finally:
        ray.shutdown()
    rates = {name: float(np.median(values)) for name, values in samples.items()}
    return {
        "steps_per_second": rates,
        "samples": samples,
        "ray_over_process": rates["ray"] / rates["process"],
    }


# ---------------------------------------------------------------------------------------- webshop
def start_gunicorn(args: Args, workers: int, shared_sessions: bool = True) -> tuple[subprocess.Popen, int]:
    import requests

    port = free_port()
    config = {"num_products": args.num_products, "seed": args.seed}
    if not shared_sessions:  # session_db None: the in-memory store (right for one worker only)
        config["session_db"] = None
    env = {**os.environ, "WEBSHOP_SERVER_CONFIG": json.dumps(config)}
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webshop_server.gunicorn_conf", "-w", str(workers),
               "-b", f"127.0.0.1:{port}", "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(process.stderr.read().decode())
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                return process, port
        except requests.RequestException:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("gunicorn did not answer /health in 120 s")


def bench_webshop(args: Args) -> dict:
    goals = goal_list(args.num_products, args.seed)
    results = {}
    configurations = [(f"gunicorn -w {w}", w, True) for w in args.gunicorn_workers]
    if args.memory_baseline:
        configurations.insert(0, ("gunicorn -w 1, sessions in memory", 1, False))
    for name, workers, shared in configurations:
        process, port = start_gunicorn(args, workers, shared)
        try:
            run_clients(port, goals, args.clients, 300)  # warm-up: every worker's caches
            cpu = cpu_seconds(process.pid)
            result = run_clients(port, goals, args.clients, args.http_requests)
            result["server_cpu_ms_per_request"] = 1000 * (cpu_seconds(process.pid) - cpu) / result["requests"]
            results[name] = result
        finally:
            process.terminate()
            process.wait(30)
    return results


def main(args: Args) -> dict:
    """Measure the parts asked for; returns their rates and the ratios (ray / process, workers / first)."""
    result: dict = {"args": asdict(args), "ratios": {}}
    lines = [f"# Scale-out overheads on one machine ({os.cpu_count()} cores)", ""]
    if "envs" in args.parts:
        envs = result["envs"] = bench_envs(args)
        n = args.num_tasks * args.group_size
        lines += [
            f"## {n} ALFWorld envs ({args.num_tasks} tasks x {args.group_size}), "
            f"{args.workers or os.cpu_count()} workers, random admissible actions",
            "",
            "| backend | env steps/s (median) | all rounds |",
            "|---|---:|---|",
            *[
                f"| {name} | {rate:.1f} | {', '.join(f'{v:.0f}' for v in envs['samples'][name])} |"
                for name, rate in envs["steps_per_second"].items()
            ],
            "",
            f"ray / process: {envs['ray_over_process']:.2f}x",
            "",
        ]
        result["ratios"]["env steps/s, ray / process"] = envs["ray_over_process"]
    if "webshop" in args.parts:
        shop = result["webshop"] = bench_webshop(args)
        base = next(iter(shop.values()))["requests_per_s"]
        lines += [
            f"## WebShop JSON API, {args.clients} clients, {args.http_requests} requests, "
            f"{args.num_products} products",
            "",
            "| server | requests/s | vs first | p50 ms | p99 ms | errors | server CPU ms/request |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *[
                f"| {name} | {r['requests_per_s']:.0f} | {r['requests_per_s'] / base:.2f}x | {r['p50_ms']:.1f} "
                f"| {r['p99_ms']:.1f} | {r['errors']} | {r['server_cpu_ms_per_request']:.2f} |"
                for name, r in shop.items()
            ],
            "",
        ]
        first = next(iter(shop))
        for name, r in list(shop.items())[1:]:
            result["ratios"][f"requests/s, {name} / {first}"] = r["requests_per_s"] / base
    lines.append(f"agentgym-rl {agentgym_rl.__version__}")
    report = "\n".join(lines)
    print(report)
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_scaling", __doc__)
