"""``agentgym-rl bench``: run the performance benchmarks under ``benchmarks/`` and write one report.

Each ``benchmarks/bench_<name>.py`` is a CleanRL-style script (``python -m
benchmarks.bench_<name>``: an ``Args`` dataclass, a top-to-bottom ``main(args) -> dict``)
whose ``main`` returns its measurements through :func:`benchmarks.report.write_result`,
which adds the commit, machine and command and saves that same dict as
``result.json`` (and the Markdown report as ``result.md``) in its ``--output``. This
command runs the scripts one after the other, each in a fresh process (so none inherits
another's threads, caches or Ray instance), points each ``--output`` into its own
folder, and collects every returned dict, the ratios it lists under ``"ratios"``
(``{label: value}``), its Markdown and the machine's description into ``bench.md`` and
``bench.json``. A script that fails is recorded with the end of its output and the
others still run.

Examples::

    agentgym-rl bench --quick                    # every benchmark, small sizes
    agentgym-rl bench --only group_vector advantages --output results/bench-today
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.cli_args import make_command_parser, parse_command_args

__all__ = ["Args", "QUICK_VALUES", "discover", "main", "make_parser", "quick_flags"]

#: Small sizes for ``--quick``, by ``Args`` field name; a script gets those its ``Args``
#: has (numbers never above the script's default). Fields not listed keep their defaults.
QUICK_VALUES: dict[str, Any] = {
    "games": 3,
    "warm_repeats": 3,
    "repeats": 2,
    "padding_repeats": 2,
    "rounds": 1,
    "warmup": 1,
    "steps": 5,
    "num_tasks": 2,
    "group_size": 2,
    "episodes": 20,
    "num_products": 200,
    "clients": 4,
    "http_requests": 200,
    "soak_requests": 500,
    "startup_sizes": [1000],
    "sizes": [10_000],
    "reference_max_rows": 10_000,
    "async_vector": False,
    "smoke": True,  # bench_learning: 1 seed, 2 RL steps (a script with `smoke` gets this flag alone)
}


@dataclass
class Args:
    """Arguments of ``agentgym-rl bench``."""

    only: list[str] | None = field(
        default=None,
        metadata={"help": "Benchmarks to run, by name (group_vector or bench_group_vector); default all."},
    )
    quick: bool = field(default=False, metadata={"help": "Small sizes (a smoke run: ratios are rough)."})
    output: str = field(
        default="results/bench",
        metadata={"help": "Report folder; each benchmark writes into OUTPUT/<name>/."},
    )
    timeout: float = field(
        default=3600.0,
        metadata={"help": "Seconds a benchmark may run before it is stopped and recorded as failed."},
    )
    list_benchmarks: bool = field(default=False, metadata={"help": "List the benchmarks found and exit."})


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl bench``."""
    return make_command_parser(
        Args,
        name="bench",
        description="Run the performance benchmarks (benchmarks/bench_*.py) and write one report.",
        subparsers=subparsers,
        prog=prog,
    )


def _benchmarks_dir() -> Path:
    spec = importlib.util.find_spec("benchmarks")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "no `benchmarks` package: run from an agentgym-rl checkout (pip install -e .)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def discover(folder: Path | None = None) -> list[str]:
    """The benchmark names (``bench_*.py`` stems), sorted."""
    return sorted(path.stem for path in (folder or _benchmarks_dir()).glob("bench_*.py"))


def _select(names: list[str], only: list[str] | None) -> list[str]:
    if not only:
        return names
    wanted = [name if name.startswith("bench_") else f"bench_{name}" for name in only]
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise ValueError(f"unknown benchmarks {unknown}; found {names}")
    return [name for name in names if name in wanted]


def quick_flags(args_class: type) -> list[str]:
    """``--quick`` flags for a script's ``Args``: the :data:`QUICK_VALUES` it has, never above its defaults.

    A script with its own ``smoke`` mode gets ``--smoke`` alone: it picks sizes that work
    together (bench_learning's WebShop needs its default catalogue, whose train split has goals).
    """
    from benchmarks.report import flag

    if any(spec.name == "smoke" for spec in dataclasses.fields(args_class)):
        return flag("smoke", QUICK_VALUES["smoke"])
    flags: list[str] = []
    for spec in dataclasses.fields(args_class):
        if spec.name not in QUICK_VALUES:
            continue
        value = QUICK_VALUES[spec.name]
        default = spec.default if spec.default is not dataclasses.MISSING else None
        if default is None and spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = spec.default_factory()  # type: ignore[misc]
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(default, int):
            value = min(value, default)
        flags += flag(spec.name, value)
    return flags


def _run_one(name: str, args: Args, folder: Path, out: Path) -> dict[str, Any]:
    """Run one benchmark script (``python -m <package>.<name>`` beside its package) in a fresh process."""
    module = f"{folder.name}.{name}"
    flags: list[str] = []
    fields: set[str] = set()
    try:  # its Args tell which flags it takes (an import error shows up in the run below)
        args_class = importlib.import_module(module).Args
        fields = {spec.name for spec in dataclasses.fields(args_class)}
        if args.quick:
            flags += quick_flags(args_class)
    except Exception:  # noqa: BLE001 - recorded when the script itself fails
        pass
    results_dir = out / name
    for stale in ("result.json", "result.md"):  # left by an earlier run into the same folder
        (results_dir / stale).unlink(missing_ok=True)
    if "output" in fields or not fields:
        flags += ["--output", str(results_dir)]
    command = [sys.executable, "-m", module, *flags]
    print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=folder.parent, capture_output=True, text=True, timeout=args.timeout
        )
        status = "ok" if done.returncode == 0 else "failed"
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as error:
        status, code = "timeout", None
        stdout = error.stdout.decode() if isinstance(error.stdout, bytes) else error.stdout or ""
        stderr = error.stderr.decode() if isinstance(error.stderr, bytes) else error.stderr or ""
    seconds = time.perf_counter() - start
    print(stdout, flush=True)
    if status != "ok":
        print(f"--- {name} {status}:\n{stderr[-3000:]}", flush=True)
    # What the script's main returned, as benchmarks.report.write_result saved it.
    result: dict[str, Any] = {}
    markdown = ""
    if status == "ok":
        try:
            result = json.loads((results_dir / "result.json").read_text())
        except (OSError, ValueError) as error:
            status, stderr = "failed", f"{stderr}\nno result: {error} (main must end with write_result)"
        try:
            markdown = (results_dir / "result.md").read_text()
        except OSError:
            pass
    return {
        "name": name,
        "command": ["python", *command[1:]],
        "status": status,
        "returncode": code,
        "seconds": round(seconds, 1),
        "report": markdown,
        "stderr_tail": stderr[-3000:] if status != "ok" else "",
        "ratios": result.get("ratios", {}),
        "result": result,
    }


def _markdown(
    runs: list[dict[str, Any]], machine: dict[str, Any], commit: str | None, args: Args, argv: list[str]
) -> str:
    gpus = ", ".join(machine.get("gpus") or []) or "none"
    lines = [
        "# agentgym-rl benchmarks",
        "",
        f"Machine: {machine['cpu']}, {machine['usable_cores']}/{machine['cores']} cores usable, "
        f"{machine['memory_gib']} GiB, GPUs: {gpus}; {machine['platform']}; Python {machine['python']}.",
        f"Commit: {commit or 'unknown'}. Command: `{' '.join(['agentgym-rl', 'bench', *argv])}`"
        + (" (quick: small sizes, rough ratios)." if args.quick else "."),
        "",
        "| benchmark | status | seconds | ratios measured |",
        "|---|---|---:|---|",
    ]
    for run in runs:
        ratios = "; ".join(
            f"{label}: {value:.3g}x" if isinstance(value, (int, float)) else f"{label}: {value}"
            for label, value in run["ratios"].items()
        )
        ratios = ratios or "—"
        lines.append(f"| {run['name']} | {run['status']} | {run['seconds']} | {ratios} |")
    for run in runs:
        lines += ["", f"## {run['name']} ({run['status']})", "", f"`{' '.join(run['command'])}`", ""]
        if run["report"].strip():
            lines += [run["report"].rstrip()]
        if run["status"] != "ok":
            lines += ["", "```", run["stderr_tail"].rstrip() or "(no error output)", "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl bench``; returns 0 when every benchmark ran, 1 otherwise."""
    parser = parser or make_parser()
    args = parse_command_args(parser, Args, argv)
    from benchmarks.leaderboard.results import (
        atomic_write_text,
        describe_machine,
        git_commit,
        now_utc,
        package_versions,
    )

    folder = _benchmarks_dir()
    try:
        names = _select(discover(folder), args.only)
    except ValueError as error:
        parser.error(str(error))
    if args.list_benchmarks:
        print("\n".join(names))
        return 0
    out = Path(args.output).resolve()
    out.mkdir(parents=True, exist_ok=True)
    machine, commit, started = describe_machine(), git_commit(folder), now_utc()
    runs = [_run_one(name, args, folder, out) for name in names]
    payload = {
        "started": started,
        "args": dataclasses.asdict(args),
        "machine": machine,
        "commit": commit,
        "versions": package_versions(),
        "benchmarks": runs,
    }
    atomic_write_text(out / "bench.json", json.dumps(payload, indent=1, default=str))
    report = _markdown(runs, machine, commit, args, list(sys.argv[1:] if argv is None else argv))
    atomic_write_text(out / "bench.md", report)
    print(f"\nReport: {out / 'bench.md'} and {out / 'bench.json'}")
    return 0 if all(run["status"] == "ok" for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
