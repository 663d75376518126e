"""``agentgym-rl serve-webshop``: serve our WebShop (HTML shop + JSON API for agents).

Runs :func:`webshop_server.app.serve` (granian when installed, else Werkzeug's threaded
server); under gunicorn use
``gunicorn -w 1 --threads 16 'webshop_server:create_app()'``. Equivalent to
``python -m webshop_server``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from agentgym_rl.cli_args import make_command_parser, parse_command_args

__all__ = ["Args", "main", "make_parser"]


@dataclass
class Args:
    """Arguments of ``agentgym-rl serve-webshop``."""

    # Parameters that control where it listens
    host: str = field(
        default="127.0.0.1", metadata={"help": "Address to bind (127.0.0.1 keeps the shop local)."}
    )
    port: int = field(default=3000, metadata={"help": "TCP port."})
    # Parameters that control the shop
    catalog: str = field(
        default="generated",
        metadata={
            "help": "'generated' (the built-in shop) or a directory of the original WebShop data files."
        },
    )
    num_products: int = field(default=500, metadata={"help": "Products of the generated shop."})
    seed: int = field(default=0, metadata={"help": "Seed of the generated shop and of price draws."})
    human_goals: bool = field(
        default=False,
        metadata={"help": "Goals from human instructions (a data directory with items_human_ins)."},
    )
    show_attrs: bool = field(default=False, metadata={"help": "Show the Attributes button on item pages."})
    # Parameters that control sessions
    max_sessions: int = field(
        default=10_000, metadata={"help": "Sessions kept at once (least recently used go first)."}
    )
    session_ttl: float = field(
        default=900.0, metadata={"help": "Seconds after which an idle session expires."}
    )
    quiet: bool = field(default=False, metadata={"help": "Do not log every request."})
    # Parameters that control the HTTP server
    server: str = field(
        default="auto",
        metadata={
            "help": "HTTP server: 'werkzeug' (Flask's, no extra dependency), 'granian' (Rust, faster; "
            "pip install granian) or 'auto' (granian when installed).",
            "choices": ("auto", "werkzeug", "granian"),
        },
    )
    threads: int = field(
        default=1,
        metadata={"help": "Worker threads of the granian server (1 avoids GIL hand-offs between threads)."},
    )


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl serve-webshop``."""
    return make_command_parser(
        Args,
        name="serve-webshop",
        description="Serve the WebShop shop (HTML pages and a JSON API for agents).",
        subparsers=subparsers,
        prog=prog,
    )


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Serve until interrupted; returns the exit code."""
    parser = parser or make_parser()
    args = parse_command_args(parser, Args, argv)
    import dataclasses

    from webshop_server.app import serve

    options = dataclasses.asdict(args)
    serve(options.pop("host"), options.pop("port"), **options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
