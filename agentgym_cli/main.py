"""The ``agentgym-rl`` command line (also ``python -m agentgym_cli``).

Every subcommand lives in its own module under ``agentgym_cli/commands/`` with
``make_parser(subparsers=None, prog=None)`` and ``main(args)``; heavy libraries are
imported inside ``main`` so that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Subcommand name -> module path. A module that is missing (its extra not built yet)
#: is skipped so that the others still work.
COMMANDS: dict[str, str] = {
    "play": "agentgym_cli.commands.play",
    "data": "agentgym_cli.commands.data",
    "serve-webshop": "agentgym_cli.commands.serve_webshop",
    "trajectories": "agentgym_cli.commands.trajectories",
    "sft": "agentgym_cli.commands.sft",
    "train": "agentgym_cli.commands.train",
    "leaderboard": "agentgym_cli.commands.leaderboard",
    "bench": "agentgym_cli.commands.bench",
}


def _available_commands() -> dict[str, object]:
    modules = {}
    for name, path in COMMANDS.items():
        try:
            modules[name] = importlib.import_module(path)
        except ModuleNotFoundError as error:
            if error.name != path:  # the module exists but something it imports is broken
                raise
    return modules


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's parser."""
    parser = argparse.ArgumentParser(
        prog="agentgym-rl", description="Train and benchmark LLM agents with step-level group RL."
    )
    from agentgym_rl import __version__

    parser.add_argument("--version", action="version", version=f"agentgym-rl {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subcommand_parsers = {
        name: module.make_parser(subparsers) for name, module in _available_commands().items()
    }
    return parser, subcommand_parsers


def main(argv: list[str] | None = None) -> int:
    """Run ``agentgym-rl COMMAND [flags]``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        module = _available_commands().get(argv[0])
        if module is not None and getattr(module, "PASSTHROUGH", False):
            # The command parses its own flags (e.g. `train` with TRL's parser of the whole config).
            return int(module.main(argv[1:]) or 0)
    parser, subcommand_parsers = build_parser()
    namespace = parser.parse_args(argv)
    if namespace.command is None:
        parser.print_help()
        return 2
    module = _available_commands()[namespace.command]
    sub_argv = argv[argv.index(namespace.command) + 1 :]
    return int(module.main(sub_argv, parser=subcommand_parsers[namespace.command]) or 0)


if __name__ == "__main__":
    sys.exit(main())
