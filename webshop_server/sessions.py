"""A bounded, thread-safe session store: idle sessions expire, the oldest go first.

>>> store = SessionStore(max_sessions=2, ttl=60.0)
>>> a, b, c = store.add("A"), store.add("B"), store.add("C")
>>> store.get(a) is None, store.get(c).value, len(store)
(True, 'C', 2)
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SessionEntry", "SessionStore"]


@dataclass
class SessionEntry:
    """A stored value, its lock (one request at a time per session) and last use."""

    value: Any
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)


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

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._entries)
