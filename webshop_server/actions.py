"""WebShop action text: the length cap and the original's ``name[argument]`` split.

Kept apart from the engine so that an HTTP client (:class:`~agentgym_rl.webshop.backends.HttpBackend`)
reads the cap without loading the catalogue and search code.
"""

from __future__ import annotations

__all__ = ["MAX_ACTION_CHARS", "parse_action"]

#: Longest action read, in characters (4 KiB of ASCII): longer ones are invalid (page
#: unchanged, reward 0) without being parsed. Queries and labels are far shorter; the cap
#: bounds the work one step (or one API request) can cost.
MAX_ACTION_CHARS = 4096


def parse_action(action: str) -> tuple[str, str] | None:
    """Split an action into ``(name, argument)`` exactly as the original's regex does.

    The original runs ``re.match(r"(.+)\\[(.+)\\]", action)``, which backtracks
    quadratically (a 64 kB run of ``[`` took 30 s). This gives the same groups in linear
    time: ``.`` stops at the first newline, so the match lies in the first line; the
    greedy second group ends at that line's last ``]``; the greedy first group ends at
    the last ``[`` that still leaves the argument one character. The argument is
    returned as written (the engine lower-cases it).

    Args:
        action: The raw action text.

    Returns:
        ``(name, argument)``, or None where the regex finds no match.

    >>> parse_action("search[Trail Shoes]")
    ('search', 'Trail Shoes')
    >>> parse_action("a[b] [c] tail")
    ('a[b] ', 'c')
    >>> parse_action("click[x\\n]") is None
    True
    """
    line_end = action.find("\n")
    if line_end == -1:
        line_end = len(action)
    close = action.rfind("]", 0, line_end)
    if close < 3:  # the shortest match, "a[b]", closes at index 3
        return None
    # "[" at an index in [1, close - 2]: a name and an argument of one character at least.
    opening = action.rfind("[", 1, close - 1)
    if opening == -1:
        return None
    return action[:opening], action[opening + 1 : close]
