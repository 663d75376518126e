"""What every benchmark script shares: one function that records and saves its result, and the CLI.

Each ``benchmarks/bench_*.py`` stays a top-to-bottom script (CleanRL style) whose
``main(args) -> dict`` ends with ``return write_result(args, result, report)``:
:func:`write_result` is the one place that adds the commit, the machine and the
command to a result and writes it (``result.json``, plus ``result.md`` when the script
has a Markdown report). ``agentgym-rl bench`` reads those ``result.json`` files.

A result may hold ``"ratios"``: ``{label: value}`` of the ratios the run measured
(speed-ups, shares of a step, growth factors); ``agentgym-rl bench`` tabulates them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["command", "commit", "flag", "machine", "run_cli", "write_result"]

_CHECKOUT = Path(__file__).resolve().parent


def machine() -> str:
    """The machine in one line: OS, usable/all cores, CPU model, memory, GPUs, Python."""
    from benchmarks.leaderboard.results import describe_machine

    info = describe_machine()
    gpus = ", ".join(info["gpus"]) or "no GPU"
    return (
        f"{info['platform']}, {info['usable_cores']}/{info['cores']} cores, {info['cpu']}, "
        f"{info['memory_gib']} GiB, {gpus}, Python {info['python']}"
    )


def commit() -> str:
    """The checkout's commit, ``+dirty`` with local changes to tracked files ('unknown' outside git)."""
    from benchmarks.leaderboard.results import git_commit

    return git_commit(_CHECKOUT) or "unknown"


def flag(name: str, value: Any) -> list[str]:
    """The command-line words that set field ``name`` to ``value`` (``--name`` as the field, rule 11).

    >>> flag("sizes", [10, 20]), flag("smoke", True), flag("max_games", 3)
    (['--sizes', '10', '20'], ['--smoke', 'true'], ['--max_games', '3'])
    """
    if isinstance(value, bool):
        return [f"--{name}", str(value).lower()]
    if isinstance(value, (list, tuple)):
        return [f"--{name}", *map(str, value)]
    return [f"--{name}", str(value)]


def _module_name(args_class: type) -> str:
    module = args_class.__module__
    if module == "__main__":  # run as `python -m benchmarks.bench_x`: the module's real name
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else Path(sys.argv[0]).stem
    return module


def command(args: Any) -> str:
    """The command that reproduces ``args``: ``python -m <script>`` and every flag off its default.

    Built from the dataclass, not from ``sys.argv``, so it is right however ``main`` was
    called (the command line, ``agentgym-rl bench``, a test). A field left at ``None``
    has no flag (it is the default everywhere here).
    """
    words = ["python", "-m", _module_name(type(args))]
    for spec in dataclasses.fields(args):
        value = getattr(args, spec.name)
        if spec.default is not dataclasses.MISSING:
            default = spec.default
        elif spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = spec.default_factory()  # type: ignore[misc]
        else:
            default = dataclasses.MISSING
        if value == default or value is None or value == []:
            continue
        words += flag(spec.name, value)
    return shlex.join(words)


def write_result(
    args: Any, result: dict[str, Any], report: str | None = None, output: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Add ``commit``, ``machine`` and ``command`` to ``result`` and write it; returns ``result``.

    Writes ``OUTPUT/result.json`` and, when ``report`` (Markdown) is given,
    ``OUTPUT/result.md``: the report plus one last line naming the machine, commit and
    command, which is also printed (the script printed its report already). ``args``
    are recorded too when ``result`` has none.

    Args:
        args: the script's ``Args`` (a dataclass instance).
        result: the measurements; ``main`` returns this same dict.
        report: the Markdown report, if the script has one.
        output: the folder; default ``args.output``.
    """
    result.setdefault("args", dataclasses.asdict(args))
    result["commit"] = commit()
    result["machine"] = machine()
    result["command"] = command(args)
    folder = Path(output if output is not None else args.output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(result, indent=1, default=str))
    if report is not None:
        footer = f"machine: {result['machine']}; commit {result['commit']}; command: `{result['command']}`"
        print(footer, flush=True)
        (folder / "result.md").write_text(f"{report.rstrip()}\n\n{footer}\n")
    return result


def run_cli(args_cls: type, main: Callable[[Any], Any], name: str, doc: str | None) -> None:
    """Parse ``args_cls`` from the command line (``--config`` too) and run ``main``."""
    from agentgym_rl.cli_args import make_command_parser, parse_command_args

    parser = make_command_parser(args_cls, name=name, description=(doc or name).splitlines()[0])
    main(parse_command_args(parser, args_cls, None))
