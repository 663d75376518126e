"""What every benchmark script shares: the machine's description, the commit, writing results, the CLI.

Each ``benchmarks/bench_*.py`` stays a top-to-bottom script (CleanRL style); only these
few lines of plumbing live here.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["commit", "machine", "run_cli", "write_result"]


def machine() -> str:
    """OS, core count, CPU model and, when present, the GPU (the context of every figure)."""
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if "model name" in line)
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    gpu = ""
    try:
        import torch

        if torch.cuda.is_available():
            gpu = f", GPU {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return f"{platform.platform()}, {os.cpu_count()} cores, {cpu}{gpu}, Python {platform.python_version()}"


def commit() -> str:
    """The checkout's short commit id ('?' outside a git checkout)."""
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return run.stdout.strip() or "?"


def write_result(output: str | os.PathLike, result: dict[str, Any], report: str) -> Path:
    """Write ``result.json`` and ``result.md`` into ``output``; returns the folder."""
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    (folder / "result.md").write_text(report + "\n")
    return folder


def run_cli(args_cls: type, main: Callable[[Any], Any], name: str, doc: str | None) -> None:
    """Parse ``args_cls`` from the command line (``--config`` too) and run ``main``."""
    from agentgym_rl.cli_args import make_command_parser, parse_command_args

    parser = make_command_parser(args_cls, name=name, description=(doc or name).splitlines()[0])
    main(parse_command_args(parser, args_cls, None))
