"""The papers' numbers shown beside ours (ALGORITHMS.md, "Reference numbers").

Success rates in %, WebShop score on the papers' 0-100 scale. The papers' ALFWorld
rows are on ``valid_unseen`` (out of distribution) and WebShop on its 500 test goals
of the original catalogue; per-task-type numbers are not in our reference card, so
those cells stay empty. 3SPO reports gains over its own GRPO run, kept as text.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REFERENCES", "Reference"]


@dataclass(frozen=True)
class Reference:
    """One published row: the model, the method and its numbers (text, as published)."""

    model: str
    method: str
    alfworld_all: str | None = None
    webshop_score: str | None = None
    webshop_success: str | None = None


REFERENCES: tuple[Reference, ...] = (
    Reference("Qwen2.5-1.5B-Instruct", "GRPO", "72.8", "75.8", "56.8"),
    Reference("Qwen2.5-1.5B-Instruct", "GiGPO", "86.7", "83.1", "65.0"),
    Reference("Qwen2.5-7B-Instruct", "GRPO", "77.6"),
    Reference("Qwen2.5-7B-Instruct", "GiGPO", "90.8", "84.4", "72.8"),
    Reference("Qwen2.5-1.5B-Instruct", "SCPO (ProGPO-R paper v1)", "93.7 ± 4.1", None, "74.8 ± 2.0"),
    Reference("Qwen2.5-1.5B/7B", "3SPO", "GRPO + 22.6", "GRPO + 15.6 pts"),
)
