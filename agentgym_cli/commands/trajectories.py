"""``agentgym-rl trajectories``: expert episodes as a supervised dataset in the trainer's prompt format.

Examples::

    agentgym-rl trajectories --env alfworld --data_dir generated --split train --episodes all --output runs/traj
    agentgym-rl trajectories --env webshop --episodes 500 --epsilon 0.1 --output runs/traj-webshop

Each expert step becomes one example (TRL's conversational prompt–completion format); with
probability ``--epsilon`` a step is a random admissible action instead (no target), and the
expert recovers from it. Rerunning the same command resumes it.
"""

from __future__ import annotations

import argparse

from agentgym_rl.cli_args import make_command_parser, parse_command_args
from trainers.trajectories import TrajectoryConfig as Args

__all__ = ["Args", "main", "make_parser"]


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl trajectories``."""
    return make_command_parser(
        Args,
        name="trajectories",
        description="Play expert episodes and write them as an SFT dataset (the trainer's prompts).",
        subparsers=subparsers,
        prog=prog,
    )


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl trajectories``; returns the exit code."""
    parser = parser or make_parser()
    try:
        args = parse_command_args(parser, Args, argv)
    except ValueError as error:  # Args.__post_init__ names the bad value and the fix
        parser.error(str(error))
    import json

    from trainers.trajectories import META_FILE, collect_trajectories

    try:
        folder = collect_trajectories(args)
    except ValueError as error:
        parser.error(str(error))
    meta = json.loads((folder / META_FILE).read_text())
    print(f"{meta['rows']} examples from {meta['episodes_done']} episodes ({meta['wins']} won) in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
