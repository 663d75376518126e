"""``agentgym-rl bench``: run the performance benchmarks under ``benchmarks/`` and write one report.

Each ``benchmarks/bench_<name>.py`` is a CleanRL-style script (``python -m
benchmarks.bench_<name>``: an ``Args`` dataclass, a top-to-bottom ``main``) that prints
its report and writes JSON + Markdown into its ``--output``. This command runs them
one after the other in fresh processes, points each ``--output`` into its own folder,
and collects every printed report, every ratio it measured (``1.83x`` in its report,
``ratio`` / ``speedup`` numbers in its JSON) and the machine's description into
``bench.md`` and ``bench.json``. A script that fails is recorded with the end of its
output and the others still run.

Examples::

    agentgym-rl bench --quick                    # every benchmark, small sizes
    agentgym-rl bench --only group_vector advantages --output results/bench-today
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.cli_args import make_command_parser, parse_command_args

__all__ = ["Args", "QUICK_VALUES", "discover", "extract_ratios", "main", "make_parser", "quick_flags"]

#: Small sizes for ``--quick``, by ``Args`` field name; a script gets those its ``Args``
#: has (numbers never above the script's default). Fields not listed keep their defaults.
QUICK_VALUES: dict[str, Any] = {
    "games": 3,
    "warm_repeats": 3,
    "repeats": 2,
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
    "smoke": True,  # bench_learning: 1 seed, 2 RL steps
}

_RATIO = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?[x×](?![\w])")
_RATIO_KEYS = ("ratio", "speedup", "times_faster")


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


def _flag(name: str, value: Any) -> list[str]:
    flag = f"--{name.replace('_', '-')}"
    if isinstance(value, bool):
        return [flag, str(value).lower()]
    if isinstance(value, (list, tuple)):
        return [flag, *map(str, value)]
    return [flag, str(value)]


def quick_flags(args_class: type) -> list[str]:
    """``--quick`` flags for a script's ``Args``: the :data:`QUICK_VALUES` it has, never above its defaults."""
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
        flags += _flag(spec.name, value)
    return flags


_MEASUREMENT = re.compile(r"^[-+]?\d*\.\d+|±")


def _label(line: str) -> str:
    """What a ratio line measures: a table row's leading cells up to its first measurement.

    >>> _label("| 10000 | grpo | 0.25 ± 0.02 | 379x |"), _label("W=2 runs 1.8x faster")
    ('10000 grpo', 'W=2 runs 1.8x faster')
    """
    text = line.strip()
    if not text.startswith("|"):
        return text[:80]
    cells = [cell.strip() for cell in text.strip("|").split("|")]
    leading = []
    for cell in cells:
        if _MEASUREMENT.search(cell) or _RATIO.search(cell):
            break
        leading.append(cell)
    return " ".join(leading) or text[:80]


def extract_ratios(report: str, results: Any) -> list[dict[str, Any]]:
    """Every ratio a benchmark measured: ``Nx`` figures of its printed lines, ratio keys of its JSON."""
    found: list[dict[str, Any]] = []
    for line in report.splitlines():
        values = [float(v) for v in _RATIO.findall(line)]
        if values:
            found.append({"label": _label(line), "line": line.strip(), "values": values})

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            leaf = re.split(r"[.\[]", path)[-1].lower()
            if any(key in leaf for key in _RATIO_KEYS):
                found.append({"json": path, "value": node})

    walk(results, "")
    return found


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
    results: dict[str, Any] = {}
    if results_dir.is_dir():
        for path in sorted(results_dir.glob("*.json")):
            try:
                results[path.name] = json.loads(path.read_text())
            except (OSError, ValueError):
                pass
    return {
        "name": name,
        "command": ["python", *command[1:]],
        "status": status,
        "returncode": code,
        "seconds": round(seconds, 1),
        "report": stdout,
        "stderr_tail": stderr[-3000:] if status != "ok" else "",
        "ratios": extract_ratios(stdout, results),
        "results": results,
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
            f"{r['label']}: " + ", ".join(f"{v:g}x" for v in r["values"])
            for r in run["ratios"]
            if "values" in r
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
