"""A permissive text space: any Python string, of any characters, up to a length.

Gymnasium's :class:`gymnasium.spaces.Text` only holds strings over a fixed charset,
but game text and LLM replies contain arbitrary Unicode. :class:`TextSpace` accepts
every ``str`` no longer than ``max_length`` and samples short random strings (which
the envs must accept as actions and answer in-game).

>>> space = TextSpace(max_length=8)
>>> space.contains("héllo ✓"), space.contains(b"bytes"), space.contains("x" * 9)
(True, False, False)
>>> _ = space.seed(0)
>>> isinstance(space.sample(), str)
True
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Space

__all__ = ["TextSpace"]

_SAMPLE_ALPHABET = string.ascii_lowercase + string.digits + " []"


class TextSpace(Space[str]):
    """Any string of at most ``max_length`` characters.

    Args:
        max_length: The longest string that belongs to the space.
        min_length: The shortest string that belongs to the space.
        seed: Seed of the space's random generator (for :meth:`sample`).
    """

    def __init__(self, max_length: int = 1_000_000, min_length: int = 0, seed: int | None = None) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length, got {min_length} and {max_length}")
        self.max_length = int(max_length)
        self.min_length = int(min_length)
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Free text cannot be flattened into a fixed-size array."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of lowercase letters, digits, spaces and brackets (up to 32 chars)."""
        high = min(self.max_length, max(self.min_length, 32))
        length = int(self.np_random.integers(self.min_length, high + 1))
        letters = self.np_random.choice(list(_SAMPLE_ALPHABET), size=length)
        return "".join(letters.tolist())

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a ``str`` within the length bounds."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TextSpace)
            and other.max_length == self.max_length
            and other.min_length == self.min_length
        )

    def __hash__(self) -> int:  # equal spaces hash equal (``__eq__`` alone makes instances unhashable)
        return hash((TextSpace, self.min_length, self.max_length))

    def to_jsonable(self, sample_n: Any) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        return list(sample_n)
