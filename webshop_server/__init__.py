"""Our WebShop: a generated (or original) catalogue, BM25 search, the original's pages and reward.

The engine (:class:`~webshop_server.engine.WebShopEngine`) runs in-process for the
``AgentGymRL/WebShop-v0`` env; :func:`create_app` serves the same engine over HTTP
(Flask), ``python -m webshop_server`` runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

__all__ = ["create_app"]


def create_app(*args: Any, **kwargs: Any) -> Flask:
    """Build the Flask app (see :func:`webshop_server.app.create_app`); Flask loads only here."""
    from webshop_server.app import create_app as _create_app

    return _create_app(*args, **kwargs)
