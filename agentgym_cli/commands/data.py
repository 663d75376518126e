"""``agentgym-rl data``: find, download, prepare or generate benchmark data.

- ``agentgym-rl data info``: where each dataset is found and how many tasks each split has.
- ``agentgym-rl data download alfworld [--data_dir DIR]``: the official ALFWorld games
  (needs internet; default folder ``~/.cache/alfworld``, alfworld's own).
- ``agentgym-rl data prepare alfworld [--split S]``: extract the archive and fill the
  on-disk translation cache so that cold resets cost ~50 ms (progress bar).
- ``agentgym-rl data generate alfworld --output DIR [--room_size small]``: write the embedded
  generated games (or a set in small rooms, about half the search).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from agentgym_rl.alfworld.scenes import ROOM_SIZES
from agentgym_rl.cli_args import make_command_parser, parse_command_args

ACTIONS = ("info", "download", "prepare", "generate")


@dataclass
class Args:
    """Arguments of ``agentgym-rl data``."""

    action: str = field(
        default="info", metadata={"help": "What to do.", "choices": ACTIONS, "positional": True}
    )
    dataset: str = field(
        default="alfworld", metadata={"help": "Dataset.", "choices": ("alfworld",), "positional": True}
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "Data folder (download target; where to look otherwise)."}
    )
    split: list[str] = field(
        default_factory=lambda: ["valid_seen", "valid_unseen"], metadata={"help": "Splits to prepare."}
    )
    translation_cache: str | None = field(
        default=None,
        metadata={"help": "Translation cache folder for prepare (default: under $AGENTGYM_RL_CACHE)."},
    )
    output: str | None = field(default=None, metadata={"help": "Output folder for generate."})
    seed: int = field(default=0, metadata={"help": "Seed for generate."})
    room_size: str = field(
        default="full",
        metadata={
            "help": "Rooms for generate: full (10-17 receptacles) or small (5-8).",
            "choices": ROOM_SIZES,
        },
    )
    force: bool = field(default=False, metadata={"help": "Download again even if the data is there."})


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl data``."""
    return make_command_parser(
        Args,
        name="data",
        description="Find, download, prepare or generate benchmark data (info | download | prepare | generate).",
        subparsers=subparsers,
        prog=prog,
    )


def _info(args: Args) -> int:
    from agentgym_rl.alfworld.tasks import list_tasks
    from agentgym_rl.data import ALFWORLD_SPLITS, find_alfworld_root, shared_data_dir

    root = find_alfworld_root(args.data_dir)
    print(f"shared data folder: {shared_data_dir() or '(none)'}")
    if root is None:
        print("ALFWorld: no data found; the env plays the embedded generated games.")
        return 0
    print(f"ALFWorld games: {root}")
    for split in ALFWORLD_SPLITS:
        try:
            print(f"  {split:<13} {len(list_tasks(root, split)):>5} tasks")
        except FileNotFoundError:
            print(f"  {split:<13}     - (missing)")
    return 0


def _prepare(args: Args) -> int:
    from tqdm.auto import tqdm

    from agentgym_rl.alfworld.engine import GameCache
    from agentgym_rl.alfworld.tasks import game_path, list_tasks
    from agentgym_rl.data import DataNotFoundError, cache_root, find_alfworld_root

    root = find_alfworld_root(args.data_dir)
    if root is None:
        raise DataNotFoundError("no ALFWorld data to prepare; see `agentgym-rl data download alfworld`")
    cache = GameCache(args.translation_cache or cache_root() / "translations")
    for split in args.split:
        for task_id in tqdm(list_tasks(root, split), desc=f"translating {split}", unit="game"):
            cache.translation(cache.game(game_path(root, split, task_id)))
    print(
        f"translations cached in {cache.translation_dir}; pass translation_cache=True (or that folder) to the env"
    )
    return 0


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl data``; returns the exit code."""
    args = parse_command_args(parser or make_parser(), Args, argv)
    if args.action == "info":
        return _info(args)
    if args.action == "download":
        from agentgym_rl.data import download_alfworld

        root = download_alfworld(args.data_dir or Path.home() / ".cache" / "alfworld", force=args.force)
        print(
            f"ALFWorld games in {root}; set ALFWORLD_DATA={root.parent} (the default location needs nothing)"
        )
        return 0
    if args.action == "prepare":
        return _prepare(args)
    from agentgym_rl.alfworld.generator import generate_games

    if not args.output:
        raise SystemExit("error: generate needs --output DIR")
    print(f"generated games in {generate_games(Path(args.output), seed=args.seed, room_size=args.room_size)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
