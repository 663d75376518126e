"""Bounded, thread-safe session stores: idle sessions expire, the oldest go first.

:class:`SessionStore` keeps sessions in this process's memory (one server process).
:class:`SharedSessionStore` keeps them in a small SQLite file that every worker
process of a server reads and writes (``gunicorn -w N``), so a session made by one
worker can be stepped by any other: gunicorn hands each request to whichever worker
accepts it, there is no stickiness to rely on.

>>> store = SessionStore(max_sessions=2, ttl=60.0)
>>> a, b, c = store.add("A"), store.add("B"), store.add("C")
>>> store.get(a) is None, store.get(c).value, len(store)
(True, 'C', 2)
>>> store.update(c, lambda entry: entry.value.lower())
'c'
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["SessionConflict", "SessionEntry", "SessionStore", "SharedSessionStore"]

T = TypeVar("T")


class SessionConflict(RuntimeError):
    """Another worker kept changing the session while this one tried to (retries ran out)."""


@dataclass
class SessionEntry:
    """A stored value, its lock (one request at a time per session) and last use."""

    value: Any
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    version: int = 0
    """Times the session was saved (the shared store's check for concurrent changes)."""


class SessionStore:
    """Sessions by random id, least recently used first.

    Memory stays bounded: a session idle for ``ttl`` seconds is dropped, and adding
    one beyond ``max_sessions`` drops the least recently used.

    Args:
        max_sessions: The most sessions kept at once.
        ttl: Seconds of inactivity after which a session expires.
        clock: Time source (tests pass a fake one).
    """

    def __init__(
        self, max_sessions: int = 10_000, ttl: float = 900.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_sessions < 1 or ttl <= 0:
            raise ValueError(f"need max_sessions >= 1 and ttl > 0, got {max_sessions} and {ttl}")
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[str, SessionEntry] = OrderedDict()
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if now - oldest.last_used < self.ttl and len(self._entries) <= self.max_sessions:
                break
            self._entries.popitem(last=False)

    def add(self, value: Any) -> str:
        """Store ``value`` under a new random id and return the id."""
        session_id = secrets.token_hex(8)
        with self._lock:
            now = self._clock()
            self._entries[session_id] = SessionEntry(value, now)
            self._expire(now)
        return session_id

    def get(self, session_id: str) -> SessionEntry | None:
        """The entry of ``session_id`` (marked used), or None if unknown or expired."""
        with self._lock:
            now = self._clock()
            self._expire(now)
            entry = self._entries.get(session_id)
            if entry is not None:
                entry.last_used = now
                self._entries.move_to_end(session_id)
            return entry

    def remove(self, session_id: str) -> bool:
        """Drop a session; returns whether it existed."""
        with self._lock:
            return self._entries.pop(session_id, None) is not None

    def save(self, session_id: str, entry: SessionEntry) -> bool:
        """Commit a change of ``entry.value`` (in memory it is the stored object: nothing to do)."""
        return True

    def update(self, session_id: str, change: Callable[[SessionEntry], T], attempts: int = 8) -> T:
        """Apply ``change`` to the session under its lock and save it; returns what ``change`` returns.

        ``change`` may mutate ``entry.value`` or assign a new one. In a shared store, a
        change that raced one by another process is thrown away and applied again to
        the fresh session.

        Raises:
            KeyError: if the session is unknown or expired.
            SessionConflict: if ``attempts`` tries all raced another process.
        """
        for _ in range(attempts):
            entry = self.get(session_id)
            if entry is None:
                raise KeyError(session_id)
            with entry.lock:
                result = change(entry)
                if self.save(session_id, entry):
                    return result
        raise SessionConflict(f"session {session_id} changed under {attempts} attempts; retry the request")

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._entries)


class SharedSessionStore(SessionStore):
    """Sessions in a SQLite file shared by a server's worker processes.

    Each session is stored as ``dump(value)`` (JSON) with a version; each worker keeps
    the live objects it used in a local cache and reloads one (``load``) only when
    another worker saved it since. A save succeeds only if the version is still the one
    read (compare and swap), so concurrent steps of one session on two workers cannot
    both apply: :meth:`update` redoes the loser on the fresh state. The file holds only
    small states; SQLite's WAL mode lets every worker read while one writes.

    Args:
        path: The SQLite file (created if missing; every worker must get the same path).
        dump: A value as a JSON-serializable object (e.g. a session's state dict).
        load: The inverse of ``dump`` (e.g. the engine's ``restore``).
        max_sessions: The most sessions kept at once.
        ttl: Seconds of inactivity after which a session expires.
        clock: Time source, shared by the processes (wall-clock seconds).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        dump: Callable[[Any], Any],
        load: Callable[[Any], Any],
        max_sessions: int = 10_000,
        ttl: float = 900.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(max_sessions=max_sessions, ttl=ttl, clock=clock)
        self.path = os.fspath(path)
        self._dump, self._load = dump, load
        self._local = threading.local()
        with sqlite3.connect(self.path, timeout=30.0) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, state TEXT NOT NULL, "
                "version INTEGER NOT NULL, last_used REAL NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS sessions_last_used ON sessions (last_used)")
        db.close()  # a connection must not cross a fork: each process and thread opens its own

    def _db(self) -> sqlite3.Connection:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            # autocommit; states are throw-away, so no fsync (synchronous=OFF)
            local.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            local.db.execute("PRAGMA synchronous=OFF")
            local.pid = os.getpid()
        return local.db

    def _cache(self, session_id: str, entry: SessionEntry | None) -> None:
        with self._lock:
            if entry is None:
                self._entries.pop(session_id, None)
                return
            self._entries[session_id] = entry
            self._entries.move_to_end(session_id)
            while len(self._entries) > self.max_sessions:
                self._entries.popitem(last=False)

    def add(self, value: Any) -> str:
        """Store ``value`` under a new random id and return the id."""
        session_id, now = secrets.token_hex(8), self._clock()
        db = self._db()
        db.execute("DELETE FROM sessions WHERE last_used < ?", (now - self.ttl,))
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, 0, ?)", (session_id, json.dumps(self._dump(value)), now)
        )
        db.execute(  # beyond max_sessions, the least recently used go first
            "DELETE FROM sessions WHERE id IN "
            "(SELECT id FROM sessions ORDER BY last_used DESC LIMIT -1 OFFSET ?)",
            (self.max_sessions,),
        )
        self._cache(session_id, SessionEntry(value, now))
        return session_id

    def get(self, session_id: str) -> SessionEntry | None:
        """The entry of ``session_id`` (marked used), or None if unknown or expired."""
        now = self._clock()
        db = self._db()
        row = db.execute(
            "SELECT state, version, last_used FROM sessions WHERE id = ? AND last_used >= ?",
            (session_id, now - self.ttl),
        ).fetchone()
        if row is None:
            self._cache(session_id, None)
            return None
        if now - row[2] > 1.0:  # renew; a step's save renews it anyway, so most reads write nothing
            db.execute("UPDATE sessions SET last_used = ? WHERE id = ?", (now, session_id))
        with self._lock:
            entry = self._entries.get(session_id)
        if entry is None or entry.version != row[1]:  # new here, or another worker saved it since
            entry = SessionEntry(self._load(json.loads(row[0])), now, version=row[1])
        entry.last_used = now
        self._cache(session_id, entry)
        return entry

    def save(self, session_id: str, entry: SessionEntry) -> bool:
        """Write ``entry.value`` back unless another worker saved the session since it was read."""
        changed = (
            self._db()
            .execute(
                "UPDATE sessions SET state = ?, version = version + 1, last_used = ? WHERE id = ? AND version = ?",
                (json.dumps(self._dump(entry.value)), self._clock(), session_id, entry.version),
            )
            .rowcount
        )
        if changed:
            entry.version += 1
        else:
            self._cache(session_id, None)  # stale (or gone): reload on the next get
        return bool(changed)

    def remove(self, session_id: str) -> bool:
        """Drop a session; returns whether it existed."""
        self._cache(session_id, None)
        return self._db().execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0

    def __len__(self) -> int:
        row = (
            self._db()
            .execute("SELECT COUNT(*) FROM sessions WHERE last_used >= ?", (self._clock() - self.ttl,))
            .fetchone()
        )
        return int(row[0])
