"""``agentgym-rl leaderboard``: evaluate an agent on ALFWorld / WebShop and print the papers' tables.

Examples::

    agentgym-rl leaderboard --env alfworld --agent expert
    agentgym-rl leaderboard --env all --agent random --episodes 50
    agentgym-rl leaderboard --env webshop --agent hf:/models/Qwen2.5-1.5B-Instruct --group-size 4
    agentgym-rl leaderboard --agent checkpoint:outputs/gigpo-alfworld --output results/gigpo

Rerunning a command continues its run (same ``--output``) without replaying finished tasks.
"""

from __future__ import annotations

import argparse

from agentgym_rl.cli_args import make_command_parser, parse_command_args
from benchmarks.leaderboard.config import LeaderboardConfig as Args

__all__ = ["Args", "main", "make_parser"]


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl leaderboard``."""
    return make_command_parser(
        Args,
        name="leaderboard",
        description="Evaluate an agent on ALFWorld / WebShop splits and print the papers' tables.",
        subparsers=subparsers,
        prog=prog,
    )


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl leaderboard``; returns the exit code."""
    parser = parser or make_parser()
    try:
        args = parse_command_args(parser, Args, argv)
    except ValueError as error:  # Args.__post_init__ names the bad value and the fix
        parser.error(str(error))
    from benchmarks.leaderboard.harness import run_leaderboard
    from benchmarks.leaderboard.results import ResumeMismatch

    try:
        result = run_leaderboard(args)
    except ResumeMismatch as error:
        parser.error(str(error))
    print(result["report"])
    print(f"Results: {result['folder']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
