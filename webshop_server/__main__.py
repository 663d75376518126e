"""``python -m webshop_server``: serve the WebShop app on Werkzeug's threaded server."""

from __future__ import annotations

import argparse
import sys

from webshop_server.engine import DEFAULT_NUM_PRODUCTS


def build_parser() -> argparse.ArgumentParser:
    """The command-line flags (the same as ``agentgym-rl serve-webshop``)."""
    parser = argparse.ArgumentParser(
        prog="python -m webshop_server",
        description="Serve the WebShop shop (HTML) and its JSON API for agents.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=3000, help="TCP port")
    parser.add_argument(
        "--catalog", default="generated", help="'generated' or a directory of the original files"
    )
    parser.add_argument(
        "--num-products", type=int, default=DEFAULT_NUM_PRODUCTS, help="size of the generated shop"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated shop and price draws")
    parser.add_argument("--human-goals", action="store_true", help="goals from human instructions")
    parser.add_argument("--show-attrs", action="store_true", help="show the Attributes button")
    parser.add_argument("--max-sessions", type=int, default=10_000, help="sessions kept at once")
    parser.add_argument(
        "--session-ttl", type=float, default=900.0, help="seconds before an idle session expires"
    )
    parser.add_argument("--quiet", action="store_true", help="do not log every request")
    parser.add_argument(
        "--server",
        default="auto",
        choices=("auto", "werkzeug", "granian"),
        help="HTTP server (auto: granian if installed)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="worker threads (granian; 1 avoids GIL hand-offs)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse flags and serve until interrupted."""
    args = build_parser().parse_args(argv)
    from webshop_server.app import serve

    serve(
        args.host,
        args.port,
        quiet=args.quiet,
        server=args.server,
        threads=args.threads,
        catalog=args.catalog,
        num_products=args.num_products,
        seed=args.seed,
        human_goals=args.human_goals,
        show_attrs=args.show_attrs,
        max_sessions=args.max_sessions,
        session_ttl=args.session_ttl,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
