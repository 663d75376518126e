"""Canonical state keys, history keys and first-visit flags (``ALGORITHMS.md``, "Notation").

Every key is a signed 64-bit integer computed with BLAKE2b (8-byte digest) over a
length-prefixed byte encoding of its fields, so it is the same in every process,
Python version and machine (Python's ``hash()`` is salted per process and is never
used). ``0`` is reserved for "no state" (e.g. ``next_state_key`` after the last step
of a rollout) and is never returned.

- ``state_key(o)``: ``k(o)``, the key of the normalized observation text alone, so
  equal observations in different rollouts (or tasks) share a key.
- ``HistoryKeyTracker``: the depth-``d`` history keys ``K_t^(d)`` (task id, ``o_t``
  and the last ``d`` (action, observation) pairs) for each configured depth, plus the
  exact-prefix key ``K_t^(∞)`` (task id and every action and observation so far),
  which is always the last column.
- ``FirstVisitTracker``: ``f_t = 1`` when ``k(o_t)`` was not seen earlier in the
  episode (the first observation counts as a visit).

>>> state_key("You are in the middle of a room.") == state_key("  You are in the\\n middle of a room. ")
True
>>> tracker = EpisodeKeys(task_id="demo", depths=(0, 1))
>>> first = tracker.reset("You are in a room.")
>>> second = tracker.step("look", "You are in a room.")
>>> first.first_visit, second.first_visit
(True, False)
>>> first.state_key == second.state_key, first.prefix_key == second.prefix_key
(True, False)
>>> int(first.history_keys[0]) == int(second.history_keys[0])  # depth 0: o_t within the task
True
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_DEPTHS",
    "NO_STATE",
    "EpisodeKeys",
    "FirstVisitTracker",
    "HistoryKeyTracker",
    "StepKeys",
    "hash_fields",
    "normalize_text",
    "state_key",
]

#: Depths of the history keys emitted by default; the exact-prefix key is appended
#: as the last column (``ALGORITHMS.md``, ProGPO-R: ``d ∈ {0, 1, 2, 4, ∞}``).
DEFAULT_DEPTHS: tuple[int, ...] = (0, 1, 2, 4)

#: The key that means "no state" (never produced by the hash functions).
NO_STATE: int = 0

_WHITESPACE = re.compile(r"\s+")
# Distinct "personalization" tags keep the key families apart: a state key can never
# collide with a history key of the same text by construction.
_TAG_STATE = b"agr-state"
_TAG_HISTORY = b"agr-hist"
_TAG_PREFIX = b"agr-prefix"


def normalize_text(text: str) -> str:
    """Strip the text and collapse every run of whitespace into one space."""
    return _WHITESPACE.sub(" ", text).strip()


def _to_int64(digest: bytes) -> int:
    value = int.from_bytes(digest, "little", signed=True)
    return value if value != NO_STATE else 1


def hash_fields(tag: bytes, fields: Iterable[str | bytes | int]) -> int:
    """Hash a sequence of fields to a non-zero signed 64-bit integer.

    Each field is length-prefixed, so ``("ab", "c")`` and ``("a", "bc")`` differ.
    Integers (e.g. earlier keys) are encoded as 8 little-endian bytes.
    """
    h = hashlib.blake2b(digest_size=8, person=tag[:16])
    for field in fields:
        if isinstance(field, int):
            data = field.to_bytes(8, "little", signed=True)
        elif isinstance(field, str):
            data = field.encode("utf-8", "surrogatepass")
        else:
            data = field
        h.update(len(data).to_bytes(4, "little"))
        h.update(data)
    return _to_int64(h.digest())


def state_key(observation: str) -> int:
    """``k(o)``: the canonical key of an observation's normalized text."""
    return hash_fields(_TAG_STATE, (normalize_text(observation),))


@dataclass(frozen=True)
class StepKeys:
    """The keys of one observation ``o_t`` of an episode."""

    state_key: int
    """``k(o_t)``."""
    history_keys: np.ndarray
    """int64 ``[len(depths) + 1]``: ``K_t^(d)`` per depth, last column ``K_t^(∞)``."""
    first_visit: bool
    """Whether ``k(o_t)`` is new in this episode."""

    @property
    def prefix_key(self) -> int:
        """``K_t^(∞)``: the exact-prefix key (last column of ``history_keys``)."""
        return int(self.history_keys[-1])


class HistoryKeyTracker:
    """Depth-``d`` history keys and the exact-prefix key of one episode.

    The exact-prefix key is chained (``K_t = H(K_{t-1}, a_{t-1}, o_t)``), so it costs
    O(1) per step however long the episode; the depth-``d`` keys hash a window of
    at most ``max(depths)`` pairs.
    """

    def __init__(self, task_id: str, depths: Sequence[int] = DEFAULT_DEPTHS) -> None:
        if any(d < 0 for d in depths):
            raise ValueError(f"history depths must be >= 0, got {list(depths)}")
        self.task_id = task_id
        self.depths = tuple(int(d) for d in depths)
        self._window: deque[tuple[str, str]] = deque(maxlen=max(self.depths, default=0))
        self._observation = ""
        self._prefix = NO_STATE

    def reset(self, observation: str) -> np.ndarray:
        """Start the episode at ``o_0`` and return its keys."""
        self._window.clear()
        self._observation = normalize_text(observation)
        self._prefix = hash_fields(_TAG_PREFIX, (self.task_id, self._observation))
        return self.keys()

    def step(self, action: str, observation: str) -> np.ndarray:
        """Record ``(a_{t-1}, o_t)`` and return the keys of ``o_t``."""
        action = normalize_text(action)
        observation = normalize_text(observation)
        if self._window.maxlen:
            self._window.append((self._observation, action))
        self._observation = observation
        self._prefix = hash_fields(_TAG_PREFIX, (self._prefix, action, observation))
        return self.keys()

    def keys(self) -> np.ndarray:
        """The current keys: one per depth, then the exact-prefix key."""
        out = np.empty(len(self.depths) + 1, dtype=np.int64)
        pairs = list(self._window)
        for column, depth in enumerate(self.depths):
            fields: list[str | int] = [self.task_id, self._observation, depth]
            for previous_observation, action in pairs[len(pairs) - depth :] if depth else ():
                fields += (previous_observation, action)
            out[column] = hash_fields(_TAG_HISTORY, fields)
        out[-1] = self._prefix
        return out

    def get_state(self) -> tuple:
        """A picklable copy of the tracker's state (for env snapshots)."""
        return (list(self._window), self._observation, self._prefix)

    def set_state(self, state: tuple) -> None:
        """Restore a state returned by :meth:`get_state`."""
        window, self._observation, self._prefix = state
        self._window.clear()
        self._window.extend(window)


class FirstVisitTracker:
    """First-visit flags ``f_t`` of one episode, over state keys."""

    def __init__(self) -> None:
        self._seen: set[int] = set()

    def reset(self) -> None:
        """Forget every visit (a new episode)."""
        self._seen.clear()

    def visit(self, key: int) -> bool:
        """Record a visit of ``key``; return whether it was the first one."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def get_state(self) -> frozenset[int]:
        """A picklable copy of the visited set (for env snapshots)."""
        return frozenset(self._seen)

    def set_state(self, state: Iterable[int]) -> None:
        """Restore a set returned by :meth:`get_state`."""
        self._seen = set(state)


class EpisodeKeys:
    """All the keys of one episode: state key, history keys and first-visit flag.

    The envs hold one of these and put its output into ``info``.
    """

    def __init__(self, task_id: str, depths: Sequence[int] = DEFAULT_DEPTHS) -> None:
        self.history = HistoryKeyTracker(task_id, depths)
        self.visits = FirstVisitTracker()

    @property
    def depths(self) -> tuple[int, ...]:
        """The configured history depths (the exact prefix is extra)."""
        return self.history.depths

    def reset(self, observation: str) -> StepKeys:
        """Start an episode at ``o_0``."""
        self.visits.reset()
        history = self.history.reset(observation)
        return self._keys(observation, history)

    def step(self, action: str, observation: str) -> StepKeys:
        """Advance by ``(a_{t-1}, o_t)`` and return the keys of ``o_t``."""
        history = self.history.step(action, observation)
        return self._keys(observation, history)

    def _keys(self, observation: str, history: np.ndarray) -> StepKeys:
        key = state_key(observation)
        return StepKeys(state_key=key, history_keys=history, first_visit=self.visits.visit(key))

    def get_state(self) -> tuple:
        """A picklable copy (for env snapshots)."""
        return (self.history.get_state(), self.visits.get_state())

    def set_state(self, state: tuple) -> None:
        """Restore a copy made by :meth:`get_state`."""
        history, visits = state
        self.history.set_state(history)
        self.visits.set_state(visits)
