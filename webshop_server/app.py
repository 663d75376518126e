"""The Flask app: HTML pages a person can shop in, and a JSON API for agents.

JSON API (bodies are JSON objects):

- ``GET /health``: ``{"status": "ok", "products", "goals", "sessions"}``.
- ``GET /api/splits``: ``{"num_goals", "splits": {name: [start, stop]}}``;
  ``GET /api/goals/<i>``: goal ``i`` (the original's goal dict).
- ``POST /api/sessions`` ``{"goal": int}`` or ``{"split": "test"|"eval"|"train"|"all",
  "seed": int}`` (both optional; default a random goal of every split), optionally
  with ``"observation_mode": "text"|"text_rich"``, or
  ``{"state": {...}}`` (a state from ``GET``): ``201 {"id", "goal", "observation",
  "available_actions", "instruction"}``.
- ``POST /api/sessions/<id>/step`` ``{"action": "search[...]" | "click[...]"}``:
  ``{"observation", "reward", "done", "info": {"valid", "goal"}, "available_actions"}``;
  an action that is not valid on the page answers 400 with the same fields (the page
  is unchanged) plus ``error``, and so does one longer than
  :data:`~webshop_server.actions.MAX_ACTION_CHARS` (4,096 characters; its ``error``
  names the limit), however large ``max_content_length`` allows the body to be.
- ``GET /api/sessions/<id>``: ``{"id", "state", "observation", "available_actions"}``;
  ``PUT`` with ``{"state": {...}}`` restores a state; ``DELETE`` closes the session.

Errors are JSON ``{"error": ...}``: 400 (malformed JSON, bad fields, invalid action),
404 (unknown or expired session), 413 (body over ``max_content_length``).

Serve with ``python -m webshop_server`` (granian when installed, else Werkzeug's
threaded server; sessions in the process's memory), or with several worker processes
under gunicorn: ``gunicorn -c python:webshop_server.gunicorn_conf -w 4`` (see
:mod:`webshop_server.gunicorn_conf`): there ``session_db`` names a SQLite file that
holds every session for all the workers, so any worker serves any session.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, redirect, request
from markupsafe import escape
from werkzeug.exceptions import HTTPException

from webshop_server.actions import MAX_ACTION_CHARS
from webshop_server.catalog import Catalog
from webshop_server.engine import DEFAULT_NUM_PRODUCTS, OBSERVATION_MODES, Session, WebShopEngine
from webshop_server.goals import GoalSet
from webshop_server.search import SearchIndex
from webshop_server.sessions import SessionConflict, SessionEntry, SessionStore, SharedSessionStore

__all__ = ["app_from_env", "create_app", "serve"]

_STYLE = """body{font-family:sans-serif;max-width:60em;margin:2em auto}a.button{display:inline-block;
padding:.2em .6em;margin:.1em;border:1px solid #888;border-radius:4px;text-decoration:none}
a.selected{background:#333;color:#fff}.instruction{background:#eef;padding:.5em}"""


def _engine_from(
    catalog: Catalog | str | Path | None,
    goals: GoalSet | None,
    index: SearchIndex | None,
    engine: WebShopEngine | None,
    options: dict[str, Any],
) -> WebShopEngine:
    if engine is not None:
        return engine
    if isinstance(catalog, Catalog):
        return WebShopEngine(catalog, goals, index, show_attrs=options.get("show_attrs", False))
    return WebShopEngine.build(catalog or "generated", **options)


def create_app(
    catalog: Catalog | str | Path | None = None,
    goals: GoalSet | None = None,
    index: SearchIndex | None = None,
    *,
    engine: WebShopEngine | None = None,
    num_products: int = DEFAULT_NUM_PRODUCTS,
    seed: int = 0,
    human_goals: bool = False,
    show_attrs: bool = False,
    max_sessions: int = 10_000,
    session_ttl: float = 900.0,
    max_content_length: int = 64 * 1024,
    preload_nlp: bool = True,
    session_db: str | Path | None = None,
) -> Flask:
    """Build the WebShop Flask app.

    Args:
        catalog: None or ``"generated"`` (the generated shop), a directory of the
            original data files, or a loaded :class:`~webshop_server.catalog.Catalog`.
        goals: Goals of a given ``Catalog`` (default: its synthetic goals).
        index: Search index of a given ``Catalog`` (default: BM25 over it).
        engine: A ready engine (shared with in-process envs); overrides the above.
        num_products: Size of the generated shop.
        seed: Seed of the generated shop and of price draws.
        human_goals: Use human instructions (data directory with ``items_human_ins``).
        show_attrs: Show the ``Attributes`` button on item pages.
        max_sessions: Sessions kept at once (the least recently used go first).
        session_ttl: Seconds after which an idle session expires.
        max_content_length: Largest request body in bytes (larger ones get 413).
        preload_nlp: Load the reward's spaCy pipeline in a background thread now,
            so that the first purchase does not wait ~3 s for it.
        session_db: A SQLite file that keeps the sessions for every worker process of
            the server (gunicorn ``-w N``; see :class:`~webshop_server.sessions.SharedSessionStore`).
            None keeps them in this process's memory (one server process).

    Returns:
        The app; ``app.config["WEBSHOP_ENGINE"]`` and ``["WEBSHOP_SESSIONS"]`` hold
        the engine and the session store.
    """
    options: dict[str, Any] = {"seed": seed, "show_attrs": show_attrs}
    if catalog is None or str(catalog) == "generated":
        options["num_products"] = num_products
    elif not isinstance(catalog, Catalog):
        options["human_goals"] = human_goals
    shop = _engine_from(catalog, goals, index, engine, options)
    if session_db is None:
        store = SessionStore(max_sessions=max_sessions, ttl=session_ttl)
    else:  # a session is its small state dict; the page is re-rendered from it
        store = SharedSessionStore(
            session_db, lambda s: s.state.to_dict(), shop.restore, max_sessions=max_sessions, ttl=session_ttl
        )
    if preload_nlp:
        threading.Thread(target=_preload_nlp, name="webshop-nlp-preload", daemon=True).start()
    app = Flask("webshop_server")
    app.config.update(MAX_CONTENT_LENGTH=max_content_length, WEBSHOP_ENGINE=shop, WEBSHOP_SESSIONS=store)
    app.json.sort_keys = False  # type: ignore[attr-defined]

    def error(status: int, message: str, **extra: Any) -> tuple[Response, int]:
        return jsonify(error=message, **extra), status

    def body() -> dict[str, Any]:
        data = request.get_json(force=True, silent=True) if request.content_length or request.data else {}
        if not isinstance(data, dict):
            raise _BadRequest("the body must be a JSON object")
        return data

    def lookup(session_id: str):
        entry = store.get(session_id)
        if entry is None:
            raise _NotFound(f"unknown or expired session {session_id!r}; create one with POST /api/sessions")
        return entry

    def update(session_id: str, change: Any) -> Any:
        try:
            return store.update(session_id, change)
        except KeyError:
            raise _NotFound(
                f"unknown or expired session {session_id!r}; create one with POST /api/sessions"
            ) from None
        except SessionConflict as exc:
            raise _Conflict(str(exc)) from None

    def view(session: Session) -> dict[str, Any]:
        return {"observation": session.observation, "available_actions": session.page.available_actions()}

    @app.errorhandler(_ApiError)
    def api_error(exc: _ApiError):
        return error(exc.status, exc.message)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return error(exc.code or 500, exc.description or exc.name)

    @app.get("/health")
    def health():
        return jsonify(status="ok", products=len(shop.catalog), goals=len(shop.goals), sessions=len(store))

    # ------------------------------------------------------------------ JSON API
    @app.get("/api/splits")
    def splits():
        ranges = {
            name: [r.start, r.stop] for name in ("test", "eval", "train") for r in [shop.goals.split(name)]
        }
        return jsonify(num_goals=len(shop.goals), splits=ranges)

    @app.get("/api/goals/<int:goal_index>")
    def goal(goal_index: int):
        if goal_index >= len(shop.goals):
            raise _NotFound(f"no goal {goal_index}; there are {len(shop.goals)}")
        return jsonify(shop.goals[goal_index])

    def new_session(data: dict[str, Any]) -> Session:
        if "state" in data:
            try:
                return shop.restore(data["state"])
            except (TypeError, KeyError, IndexError, ValueError) as exc:
                raise _BadRequest(f"invalid state: {exc}") from None
        goal = data.get("goal")
        if goal is None:
            split = data.get("split", "all")
            seed = data.get("seed")
            if not isinstance(split, str) or (seed is not None and not isinstance(seed, int)):
                raise _BadRequest("'split' must be a string and 'seed' an integer")
            try:
                # a fresh OS-seeded generator per request: forked server workers must not share one
                goal = shop.random_goal(split, random.Random(seed))
            except ValueError as exc:
                raise _BadRequest(str(exc)) from None
        if not isinstance(goal, int) or isinstance(goal, bool) or not 0 <= goal < len(shop.goals):
            raise _BadRequest(f"'goal' must be an integer in [0, {len(shop.goals)})")
        mode = data.get("observation_mode", "text")
        if mode not in OBSERVATION_MODES:
            raise _BadRequest(f"'observation_mode' must be one of {list(OBSERVATION_MODES)}")
        return shop.new_session(goal, mode)

    @app.post("/api/sessions")
    def create_session():
        session = new_session(body())
        session_id = store.add(session)
        payload = {"id": session_id, "goal": session.state.goal_index, **view(session)}
        payload["instruction"] = session.goal["instruction_text"]
        return jsonify(payload), 201

    @app.post("/api/sessions/<session_id>/step")
    def step_session(session_id: str):
        data = body()
        action = data.get("action")
        if not isinstance(action, str):
            raise _BadRequest('the body must be {"action": "search[...]" or "click[...]"}')
        result, goal = update(session_id, lambda e: (shop.step(e.value, action), e.value.state.goal_index))
        payload = {
            "observation": result.observation,
            "reward": result.reward,
            "done": result.done,
            "info": {"valid": result.valid, "goal": goal},
            "available_actions": result.available_actions,
        }
        if len(action) > MAX_ACTION_CHARS:  # the engine answered it invalid unread
            message = (
                f"action of {len(action):,} characters is over the limit of {MAX_ACTION_CHARS:,} "
                "(webshop_server.actions.MAX_ACTION_CHARS); send one search[query] or click[label]"
            )
            return error(400, message, **payload)
        if not result.valid:
            return error(400, f"invalid action {action[:200]!r} on this page", **payload)
        return jsonify(payload)

    @app.get("/api/sessions/<session_id>")
    def get_session(session_id: str):
        entry = lookup(session_id)
        with entry.lock:
            return jsonify(id=session_id, state=entry.value.state.to_dict(), **view(entry.value))

    @app.put("/api/sessions/<session_id>")
    def put_session(session_id: str):
        data = body()
        if "state" not in data:
            raise _BadRequest('the body must be {"state": {...}}')
        restored = new_session(data)

        def put(entry: SessionEntry) -> dict[str, Any]:
            entry.value = restored
            return {"id": session_id, "state": restored.state.to_dict(), **view(restored)}

        return jsonify(update(session_id, put))

    @app.delete("/api/sessions/<session_id>")
    def delete_session(session_id: str):
        if not store.remove(session_id):
            raise _NotFound(f"unknown or expired session {session_id!r}")
        return jsonify(id=session_id, deleted=True)

    # ------------------------------------------------------------------ HTML
    @app.get("/")
    def index_page():
        goal = request.args.get("goal", type=int)
        split = request.args.get("split", "all")
        session = new_session({"goal": goal} if goal is not None else {"split": split})
        return redirect(f"/s/{store.add(session)}")

    @app.get("/s/<session_id>")
    def html_page(session_id: str):
        entry = lookup(session_id)
        with entry.lock:
            return _render_html(session_id, entry.value)

    @app.route("/s/<session_id>/act", methods=["GET", "POST"])
    def html_act(session_id: str):
        query = request.values.get("q")
        label = request.values.get("click")
        action = f"search[{query}]" if query else f"click[{label}]" if label else ""
        update(session_id, lambda e: shop.step(e.value, action))
        return redirect(f"/s/{session_id}")

    return app


class _ApiError(Exception):
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _BadRequest(_ApiError):
    status = 400


class _NotFound(_ApiError):
    status = 404


class _Conflict(_ApiError):
    status = 409


def _preload_nlp() -> None:
    from webshop_server.nlp import NounExtractorError, load_pipeline

    try:
        load_pipeline()
    except NounExtractorError:  # reported at the first purchase, with the install command
        pass


def _render_html(session_id: str, session: Session) -> str:
    state, page = session.state, session.page
    parts = [f"<!doctype html><html><head><title>WebShop</title><style>{_STYLE}</style></head><body>"]
    for element in page.elements:
        text = escape(element.text)
        if element.kind == "text":
            css = "instruction" if element.text == session.goal["instruction_text"] else "text"
            parts.append(f'<div class="{css}">{text}</div>')
            continue
        if element.text == "Search" and page.has_search_bar:
            parts.append(
                f'<form action="/s/{session_id}/act" method="post"><input name="q" size="60" '
                f'placeholder="Search..." autofocus><button type="submit">Search</button></form>'
            )
            continue
        label = element.text.lower() if element.kind != "option" else element.text
        selected = element.kind == "option" and state.options.get(element.group or "") == element.text
        css = "button selected" if selected else f"button {element.kind}"
        href = f"/s/{session_id}/act?{urlencode({'click': label})}"
        parts.append(f'<a class="{css}" href="{escape(href)}">{text}</a>')
    if state.done:
        parts.append('<p><a href="/">Shop again</a></p>')
    parts.append("</body></html>")
    return "\n".join(parts)


#: Environment variable carrying :func:`create_app` arguments (JSON) to server workers.
CONFIG_ENV = "WEBSHOP_SERVER_CONFIG"
SERVERS = ("auto", "werkzeug", "granian")


def app_from_env() -> Flask:
    """App factory for external servers: :func:`create_app` with the JSON kwargs in ``$WEBSHOP_SERVER_CONFIG``.

    ``granian --interface wsgi --factory webshop_server.app:app_from_env`` (or
    gunicorn's ``'webshop_server.app:app_from_env()'``) serve it.
    """
    return create_app(**json.loads(os.environ.get(CONFIG_ENV) or "{}"))


def _has_granian() -> bool:
    return importlib.util.find_spec("granian") is not None


def serve(
    host: str = "127.0.0.1",
    port: int = 3000,
    *,
    server: str = "auto",
    threads: int = 1,
    quiet: bool = False,
    **app_kwargs: Any,
) -> None:
    """Build the app and serve it until interrupted (blocks).

    Args:
        host: Address to bind (``127.0.0.1`` keeps it local).
        port: TCP port.
        server: ``werkzeug`` (Flask's threaded server, no extra dependency),
            ``granian`` (a Rust HTTP server, ~2-3x the throughput; ``pip install
            granian``) or ``auto`` (granian when installed). Both run one process:
            sessions live in its memory.
        threads: Worker threads of the granian server. One is fastest for this
            CPU-bound app (requests queue in granian, none waits for the GIL).
        quiet: Do not log every request.
        **app_kwargs: JSON-serializable arguments of :func:`create_app`.

    Raises:
        ValueError: for an unknown server, or granian when it is not installed.
    """
    if server not in SERVERS:
        raise ValueError(f"server must be one of {SERVERS}, got {server!r}")
    if server == "granian" and not _has_granian():
        raise ValueError("server='granian' needs granian: pip install granian (or use server='werkzeug')")
    if server == "werkzeug" or (server == "auto" and not _has_granian()):
        app = create_app(**app_kwargs)
        if quiet:
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
        app.run(host=host, port=port, threaded=True, use_reloader=False)
        return
    from granian import Granian
    from granian.constants import Interfaces

    os.environ[CONFIG_ENV] = json.dumps(
        {k: str(v) if isinstance(v, Path) else v for k, v in app_kwargs.items()}
    )
    Granian(
        "webshop_server.app:app_from_env",
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=1,  # sessions are in-process state
        blocking_threads=threads,
        factory=True,
        log_access=not quiet,
        log_level="warning" if quiet else "info",  # type: ignore[arg-type]
    ).serve()
