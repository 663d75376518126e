"""WebShop performance: in-process env steps/s, HTTP latency under 16 clients, start-up, soak, long actions.

Run: ``python -m benchmarks.bench_webshop`` (all parts) or ``--parts soak
--soak-requests 100000``. Goals (issue 5): >= 1,000 env steps/s in-process, HTTP
p99 < 20 ms with 16 concurrent clients, start-up <= 2 s for 1,000 generated
products, and a soak of 100k requests from 16 clients with 0 errors and server
resident memory growing < 10%. Long actions: the step time grows at most linearly
in the action's length n = 10^3 ... 10^6 (the original's regex split is quadratic:
30 s at 64 kB).

- steps/s: ``AgentGymRL/WebShop-v0`` (local backend) playing scripted episodes
  (search, paging, a wrong product, sub-pages, the goal product, options, buy),
  resets included; the reward's spaCy parses are warmed first (cached per name).
- HTTP: a ``python -m webshop_server --server S`` subprocess on 127.0.0.1 (granian
  and werkzeug, when installed); each client thread
  (keep-alive ``http.client``) creates a session, plays an episode, deletes it.
  Latency = request sent to response read, per request.
- start-up: wall time from launching ``python -m webshop_server`` to the first
  ``/health`` answer (interpreter, imports, catalogue generation, index, goals).
- soak: the HTTP loop for N requests; server RSS after warm-up vs at the end.
- long actions: ``env.step`` on ``"search" + "[" * n``, ``"[" * n`` and
  ``"click[" + "[" * n + "\\n]"`` (the regex's worst cases), and the action split
  (:func:`webshop_server.actions.parse_action`, which the length cap skips past 4,096
  characters) on the same strings; best of ``long_action_repeats`` each. Growth =
  time at the largest n / time at the smallest; linear is at most the ratio of the n.
"""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.report import run_cli, write_result

PARTS = ("steps", "http", "startup", "soak", "long_actions")
#: The pathological actions of the long-actions part, by label.
LONG_ACTIONS = {
    '"search" + "[" * n': lambda n: "search" + "[" * n,
    '"[" * n': lambda n: "[" * n,
    '"click[" + "[" * n + "\\n]"': lambda n: "click[" + "[" * n + "\n]",
}


@dataclass
class Args:
    parts: list[str] = field(
        default_factory=lambda: list(PARTS), metadata={"help": f"What to measure: {PARTS}."}
    )
    """What to measure."""
    num_products: int = field(default=1000, metadata={"help": "Generated products for steps/http/soak."})
    """Generated products for the steps, HTTP and soak parts."""
    episodes: int = field(default=300, metadata={"help": "In-process episodes (about 14 steps each)."})
    """In-process episodes (about 14 steps each)."""
    servers: list[str] = field(
        default_factory=lambda: ["granian", "werkzeug"],
        metadata={
            "help": "HTTP servers to measure (the first also runs start-up and soak; granian if installed)."
        },
    )
    """HTTP servers to measure; the first one also runs the start-up and soak parts."""
    threads: int = field(default=1, metadata={"help": "granian worker threads (1 avoids GIL hand-offs)."})
    """granian worker threads (one avoids GIL hand-offs between threads)."""
    clients: int = field(default=16, metadata={"help": "Concurrent HTTP clients."})
    """Concurrent HTTP clients."""
    http_requests: int = field(default=8000, metadata={"help": "Requests of the latency part (all clients)."})
    """Requests of the latency part (all clients together)."""
    soak_requests: int = field(default=100_000, metadata={"help": "Requests of the soak part (all clients)."})
    """Requests of the soak part (all clients together)."""
    startup_sizes: list[int] = field(
        default_factory=lambda: [1000, 100_000], metadata={"help": "Shop sizes."}
    )
    """Generated shop sizes whose start-up is timed."""
    long_action_sizes: list[int] = field(
        default_factory=lambda: [10**3, 10**4, 10**5, 10**6], metadata={"help": "Action lengths n."}
    )
    """Lengths n of the long actions whose step time is measured."""
    long_action_repeats: int = field(default=5, metadata={"help": "Timings per action (best kept)."})
    """Timings of each long action; the best is kept (the others include scheduling noise)."""
    seed: int = field(default=0, metadata={"help": "Seed of the generated shop."})
    """Seed of the generated shop."""
    output: str = field(default="results/bench_webshop", metadata={"help": "Folder for JSON + Markdown."})
    """Folder for the JSON and Markdown results."""


def load_average() -> str:
    """The 1/5/15-minute load averages: latencies on a shared machine depend on them."""
    import os

    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def episode_actions(goal: dict, wrong_asin: str | None) -> list[str]:
    """A scripted episode: search, page, a wrong product and sub-pages, then the goal product."""
    actions = [f"search[{goal['name']}]", "click[next >]", "click[< prev]"]
    if wrong_asin:
        actions += [f"click[{wrong_asin}]", "click[description]", "click[< prev]", "click[< prev]"]
    actions += [f"click[{goal['asin'].lower()}]", "click[features]", "click[< prev]"]
    options = goal["goal_options"]
    actions += [f"click[{v}]" for v in (options.values() if isinstance(options, dict) else options)]
    return actions + ["click[buy now]"]


# ---------------------------------------------------------------------------- in-process
def bench_steps(args: Args) -> dict:
    import gymnasium as gym

    import agentgym_rl  # noqa: F401 - registers the env

    env = gym.make("AgentGymRL/WebShop-v0", split="all", num_products=args.num_products, seed=args.seed)
    base = env.unwrapped
    tasks = base.task_ids[: args.episodes]
    engine = base._backend.engine
    from webshop_server.nlp import nouns

    for task in tasks:  # warm the reward's noun cache (spaCy), as a long run would be
        nouns(engine.goals[task]["name"])
    steps, invalid, wins = 0, 0, 0
    start = time.perf_counter()
    for task in tasks:
        _, info = env.reset(options={"task": task})
        goal = base.goal
        results = [a for a in info["admissible_actions"] if a.startswith("click[b")]
        plan = episode_actions(goal, None)
        _, _, _, _, info = env.step(plan[0])
        steps += 1
        wrong = next(
            (a[6:-1] for a in info["admissible_actions"][2:] if a[6:-1] != goal["asin"].lower()), None
        )
        for action in episode_actions(goal, wrong)[1:]:
            _, _, terminated, truncated, info = env.step(action)
            steps += 1
            invalid += not info["action_valid"]
            if terminated or truncated:
                break
        wins += info["won"]
        del results
    elapsed = time.perf_counter() - start
    return {"steps": steps, "episodes": len(tasks), "seconds": elapsed, "steps_per_s": steps / elapsed,
            "invalid": invalid, "wins": wins}  # fmt: skip


# ---------------------------------------------------------------------------- long actions
def best_time(repeats: int, call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """The fastest of ``repeats`` timings of ``call(*args)`` in seconds, and its last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


def bench_long_actions(args: Args) -> dict:
    import gymnasium as gym

    import agentgym_rl  # noqa: F401 - registers the env
    from webshop_server.actions import parse_action

    env = gym.make("AgentGymRL/WebShop-v0", split="all", num_products=args.num_products, seed=args.seed)
    env.reset(seed=args.seed)  # the search page; every action below is invalid and leaves it
    sizes = sorted(args.long_action_sizes)
    result: dict = {}
    for label, make in LONG_ACTIONS.items():
        step_s, split_s, valid = [], [], False
        for n in sizes:
            action = make(n)
            seconds, step = best_time(args.long_action_repeats, env.step, action)
            step_s.append(seconds)
            valid |= step[4]["action_valid"]
            split_s.append(best_time(args.long_action_repeats, parse_action, action)[0])
        result[label] = {"n": sizes, "step_s": step_s, "split_s": split_s, "any_valid": valid,
                         "step_growth": step_s[-1] / step_s[0], "split_growth": split_s[-1] / split_s[0],
                         "n_growth": sizes[-1] / sizes[0]}  # fmt: skip
    env.close()
    return result


# ---------------------------------------------------------------------------- HTTP
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    num_products: int, seed: int, server: str, threads: int = 1
) -> tuple[subprocess.Popen, int, float]:
    """Launch ``python -m webshop_server``; returns (process, port, seconds until /health answered)."""
    port = free_port()
    command = [sys.executable, "-m", "webshop_server", "--port", str(port), "--num-products", str(num_products),
               "--seed", str(seed), "--quiet", "--server", server, "--threads", str(threads)]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return process, port, time.perf_counter() - start
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode()) from None
            time.sleep(0.01)


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(10)


class Client(threading.Thread):
    """One agent: sessions after sessions over a keep-alive connection, until the budget is spent."""

    def __init__(
        self, port: int, goals: list[dict], budget: list[int], lock: threading.Lock, offset: int
    ) -> None:
        super().__init__(daemon=True)
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.goals, self.budget, self.lock, self.offset = goals, budget, lock, offset
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def call(self, method: str, path: str, body: dict | None = None, expect: int = 200) -> dict | None:
        with self.lock:
            if self.budget[0] <= 0:
                return None
            self.budget[0] -= 1
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload else {}
        start = time.perf_counter()
        try:
            self.connection.request(method, path, body=payload, headers=headers)
            response = self.connection.getresponse()
            data = response.read()
        except OSError as error:
            self.errors.append(f"{method} {path}: {error!r}")
            self.connection.close()
            return {}
        self.latencies.append(time.perf_counter() - start)
        if response.status != expect:
            self.errors.append(f"{method} {path}: {response.status} {data[:200]!r}")
            return {}
        return json.loads(data)

    def run(self) -> None:
        episode = self.offset
        while True:
            goal = self.goals[episode % len(self.goals)]
            episode += 16
            created = self.call("POST", "/api/sessions", {"goal": goal["index"]}, expect=201)
            if not created:
                if created is None:
                    return
                continue
            path = f"/api/sessions/{created['id']}"
            for action in episode_actions(goal, None):
                if self.call("POST", path + "/step", {"action": action}) is None:
                    return
            if self.call("DELETE", path) is None:
                return


def run_clients(port: int, goals: list[dict], clients: int, requests: int) -> dict:
    budget, lock = [requests], threading.Lock()
    threads = [Client(port, goals, budget, lock, i) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    latencies = sorted(x for t in threads for x in t.latencies)
    errors = [e for t in threads for e in t.errors]
    quantile = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"requests": len(latencies) + len(errors), "errors": len(errors), "error_samples": errors[:5],
            "seconds": elapsed, "requests_per_s": len(latencies) / elapsed,
            "p50_ms": 1000 * quantile[49], "p90_ms": 1000 * quantile[89], "p99_ms": 1000 * quantile[98],
            "max_ms": 1000 * latencies[-1]}  # fmt: skip


def goal_list(num_products: int, seed: int, count: int = 2000) -> list[dict]:
    from webshop_server.engine import WebShopEngine

    engine = WebShopEngine.generated(num_products=num_products, seed=seed)
    n = min(count, len(engine.goals))
    return [{**engine.goals[i], "index": i} for i in range(n)]


def rss_mb(pid: int) -> float:
    """Resident memory of the server process and its children (granian's worker), MB."""
    import psutil

    root = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the server process and its children, seconds."""
    import psutil

    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])


def measured(process: subprocess.Popen, port: int, goals: list[dict], clients: int, requests: int) -> dict:
    """:func:`run_clients` plus the server's CPU time per request (independent of other load)."""
    cpu = cpu_seconds(process.pid)
    result = run_clients(port, goals, clients, requests)
    result["server_cpu_ms_per_request"] = 1000 * (cpu_seconds(process.pid) - cpu) / result["requests"]
    return result


def bench_http(args: Args, goals: list[dict], server: str) -> dict:
    process, port, _ = start_server(args.num_products, args.seed, server, args.threads)
    try:
        run_clients(port, goals, args.clients, 500)  # warm-up: spaCy loads on the first purchase
        return measured(process, port, goals, args.clients, args.http_requests)
    finally:
        stop_server(process)


def bench_soak(args: Args, goals: list[dict]) -> dict:
    process, port, _ = start_server(args.num_products, args.seed, args.servers[0], args.threads)
    try:
        warmup = min(5000, args.soak_requests // 10)
        run_clients(port, goals, args.clients, warmup)
        rss_start = rss_mb(process.pid)
        result = measured(process, port, goals, args.clients, args.soak_requests)
        rss_end = rss_mb(process.pid)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health")
        sessions = json.loads(connection.getresponse().read())["sessions"]
    finally:
        stop_server(process)
    growth = (rss_end - rss_start) / rss_start
    return {**result, "rss_start_mb": rss_start, "rss_end_mb": rss_end, "rss_growth": growth,
            "sessions_left": sessions}  # fmt: skip


def bench_startup(args: Args) -> dict:
    times = {}
    for size in args.startup_sizes:
        process, _, seconds = start_server(size, args.seed, args.servers[0])
        stop_server(process)
        times[str(size)] = seconds
    return times


def main(args: Args) -> dict:
    """Measure the parts asked for; returns their figures and the growth ratios (long actions, soak memory)."""
    import importlib.util

    if importlib.util.find_spec("granian") is None:  # measure what is installed
        args.servers = [s for s in args.servers if s != "granian"] or ["werkzeug"]
    result: dict = {"args": asdict(args), "load_average_start": load_average()}
    goals = goal_list(args.num_products, args.seed) if {"http", "soak"} & set(args.parts) else []
    if "steps" in args.parts:
        result["steps"] = bench_steps(args)
    if "http" in args.parts:
        result["http"] = {server: bench_http(args, goals, server) for server in args.servers}
    if "startup" in args.parts:
        result["startup_s"] = bench_startup(args)
    if "soak" in args.parts:
        result["soak"] = bench_soak(args, goals)
    if "long_actions" in args.parts:
        result["long_actions"] = bench_long_actions(args)

    lines = [f"# WebShop performance ({args.num_products} generated products, {args.clients} HTTP clients)", "",
             "| measure | value | goal |", "|---|---:|---|"]  # fmt: skip
    if "steps" in result:
        s = result["steps"]
        lines.append(
            f"| in-process env steps/s ({s['steps']} steps, resets included) | {s['steps_per_s']:,.0f} | >= 1,000 |"
        )
    for server, h in result.get("http", {}).items():
        lines += [
            f"| {server}: HTTP p50 / p90 / p99 latency, ms ({h['requests']} requests) | {h['p50_ms']:.2f} / {h['p90_ms']:.2f} / {h['p99_ms']:.2f} | p99 < 20 |",
            f"| {server}: HTTP throughput, requests/s | {h['requests_per_s']:,.0f} | |",
            f"| {server}: server CPU per request, ms | {h['server_cpu_ms_per_request']:.3f} | |",
            f"| {server}: HTTP errors | {h['errors']} | 0 |",
        ]  # fmt: skip
    for size, seconds in result.get("startup_s", {}).items():
        goal = "<= 2 s" if size == "1000" else ""
        lines.append(
            f"| {args.servers[0]}: start-up to first /health, {int(size):,} products, s | {seconds:.2f} | {goal} |"
        )
    if "soak" in result:
        k = result["soak"]
        lines += [
            f"| {args.servers[0]} soak: requests / errors | {k['requests']:,} / {k['errors']} | 0 errors |",
            f"| soak: p50 / p99 latency, ms | {k['p50_ms']:.2f} / {k['p99_ms']:.2f} | |",
            f"| soak: server RSS start -> end, MB (growth) | {k['rss_start_mb']:.0f} -> {k['rss_end_mb']:.0f} ({100 * k['rss_growth']:+.1f}%) | < 10% |",
        ]  # fmt: skip
    for label, g in result.get("long_actions", {}).items():
        sizes = " / ".join(f"{n:,}" for n in g["n"])
        steps = " / ".join(f"{1000 * t:.3f}" for t in g["step_s"])
        invalid = "all invalid" if not g["any_valid"] else "SOME VALID"
        lines += [
            f"| env step on `{label}` ({invalid}), n = {sizes}, ms | {steps} | |",
            f"| `{label}`: env step / action split time growth for n × {g['n_growth']:,.0f} | {g['step_growth']:,.1f}× / {g['split_growth']:,.1f}× | <= {g['n_growth']:,.0f}× (linear) |",
        ]  # fmt: skip
    result["load_average_end"] = load_average()
    lines += [
        "",
        f"load average {result['load_average_start']} at start, {result['load_average_end']} at end",
    ]
    report = "\n".join(lines)
    print(report)
    result["ratios"] = {
        **({"soak: server RSS end / start": 1 + result["soak"]["rss_growth"]} if "soak" in result else {}),
        **{
            f"long action {label}: {kind} time growth / length growth": g[f"{kind}_growth"] / g["n_growth"]
            for label, g in result.get("long_actions", {}).items()
            for kind in ("step", "split")
        },
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_webshop", __doc__)
