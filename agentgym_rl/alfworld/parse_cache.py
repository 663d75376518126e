"""Memoized TatSu parses for TextWorld's PDDL text grammar and logic queries.

TextWorld's PDDL env re-parses, with TatSu, every command template and every
grammar condition each time it derives a text: ~50 admissible commands per step,
each a fresh parse of one of a few dozen distinct strings. Parsing is a pure
function of the string, so a memo gives the same results; it cuts a step from
~45 ms to under 20 ms (``DESIGN.md``, "Notes on ALFWorld / TextWorld internals").

The memo wraps the two module-level ``_parse_and_convert`` functions that
TextWorld's own code calls (textgen derivations and ``Rule.parse_conjunctive_query``)
and hands every caller a deep copy, because the derivation code mutates the symbols
it receives (it attaches contexts to them).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["install_parse_cache"]

_LOCK = threading.Lock()
_INSTALLED = False


def _memoize_parse(parse: Callable[..., Any], max_entries: int = 4096) -> Callable[..., Any]:
    memo: dict[tuple, Any] = {}

    def cached_parse(text: str, *args: Any, **kwargs: Any) -> Any:
        key = (text, args, tuple(sorted(kwargs.items())))
        try:
            result = memo[key]
        except (KeyError, TypeError):
            result = parse(text, *args, **kwargs)
            if len(memo) < max_entries:
                try:
                    memo[key] = result
                except TypeError:  # unhashable argument: no memo for this call
                    return result
        return copy.deepcopy(result)

    cached_parse.__wrapped__ = parse  # type: ignore[attr-defined]
    return cached_parse


def install_parse_cache() -> None:
    """Install the memo once per process (idempotent, thread-safe)."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        import textworld.envs.pddl.textgen as textgen
        import textworld.logic as logic

        textgen._parse_and_convert = _memoize_parse(textgen._parse_and_convert)
        logic._parse_and_convert = _memoize_parse(logic._parse_and_convert)
        _INSTALLED = True
