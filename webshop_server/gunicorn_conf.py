"""gunicorn settings for serving WebShop to many trainers from one URL.

Run (flags override the settings below; the app is :func:`make_app`)::

    WEBSHOP_SERVER_CONFIG='{"num_products": 1000}' \\
        gunicorn -c python:webshop_server.gunicorn_conf -w 8 -b 127.0.0.1:3000

``$WEBSHOP_SERVER_CONFIG`` carries :func:`webshop_server.create_app`'s arguments as
JSON (``catalog``, ``num_products``, ``seed``, ``human_goals``, ...).

What the settings do and why:

- ``preload_app = True``: the master builds the app, i.e. the catalogue, the goals and
  the BM25 index, once, then forks the workers, which share those pages copy-on-write
  instead of each rebuilding them.
  The reward's spaCy pipeline is loaded in the master too (:func:`when_ready`), before
  the fork: a background loading thread must not be running when the master forks.
- Sessions: gunicorn gives each request to whichever worker accepts it, so a session
  made on one worker is stepped on others. Every worker therefore keeps sessions in one
  SQLite file (``session_db``: :data:`SESSION_DB` unless the config names one; see
  :class:`webshop_server.sessions.SharedSessionStore`), removed when the server exits.
  Serve :func:`make_app`, not ``app_from_env()``, whose sessions stay in one process.
- ``worker_class = "gthread"``: each worker serves ``threads`` connections and keeps
  idle ones alive (``keepalive``) for the env's pooled ``requests.Session``; the sync
  worker closes every connection after one request. The app is CPU-bound Python:
  use about one worker per core; threads only cover network waits.
- ``timeout``: a worker silent that long is killed and replaced (its sessions live on
  in the file); ``graceful_timeout`` bounds a restart.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

wsgi_app = "webshop_server.gunicorn_conf:make_app()"
bind = ["127.0.0.1:3000"]
workers = os.cpu_count() or 1
worker_class = "gthread"
threads = 4
keepalive = 30
timeout = 60
graceful_timeout = 30
preload_app = True
control_socket_disable = True  # gunicorn >= 27: one fixed socket path would clash between servers

# Named in the master when gunicorn reads this file; workers inherit the module by fork.
_runtime = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
SESSION_DB = os.path.join(_runtime, f"webshop-sessions-{os.getpid()}.sqlite3")


def make_app() -> Flask:
    """The app for gunicorn: ``$WEBSHOP_SERVER_CONFIG``'s arguments, sessions in :data:`SESSION_DB`."""
    from webshop_server.app import CONFIG_ENV, create_app

    config = {"session_db": SESSION_DB, **json.loads(os.environ.get(CONFIG_ENV) or "{}")}
    config["preload_nlp"] = False  # loaded in when_ready, before the fork, not in a thread
    return create_app(**config)


def when_ready(server: object) -> None:
    """Load the reward's spaCy pipeline in the master, so the workers inherit it."""
    from webshop_server.app import _preload_nlp

    _preload_nlp()


def on_exit(server: object) -> None:
    """Remove the session file (with SQLite's WAL side files)."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(SESSION_DB + suffix)
        except FileNotFoundError:
            pass
