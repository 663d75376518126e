"""Coarser observation keys for the optional ``StepBatch`` fields (text in, int64 keys out).

- :func:`semantic_state_key`: ProGPO-R's semantic expansion key (``ALGORITHMS.md``,
  ProGPO-R 4): lowercase, punctuation stripped, comma lists sorted, object instance
  numbers dropped (``"apple 2"`` → ``"apple"``), hashed with the task id.
- :func:`similarity_anchor_keys`: GiGPO's ``enable_similarity`` anchors: within a task
  group, observations whose ``difflib`` similarity ratio is ≥ 0.95 share a key.

These run in the rollout collector on text, before tensors exist; the estimators
only see the resulting keys (``semantic_key`` / ``anchor_key`` records).

>>> canonical_text("On the desk 1, you see a pen 3, and a apple 2.")
'a apple, on the desk, you see a pen'
>>> semantic_state_key("A pen 1, a apple 2.", "t") == semantic_state_key("a apple 1, and a pen 3", "t")
True
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Hashable, Sequence

from agentgym_rl.keys import hash_fields, normalize_text, state_key

__all__ = ["canonical_text", "semantic_state_key", "similarity_anchor_keys"]

_TAG_SEMANTIC = b"agr-semantic"
_SENTENCE = re.compile(r"[.!?;:\n]+")
_PUNCT = re.compile(r"[^\w\s]")
_INSTANCE = re.compile(r"\b([a-z]+) \d+\b")
_LEAD_AND = re.compile(r"^(and|or)\s+")


def canonical_text(observation: str) -> str:
    """The observation canonicalized for semantic comparison (see module docstring)."""
    text = normalize_text(observation).lower()
    sentences = []
    for sentence in _SENTENCE.split(text):
        items = []
        for item in sentence.split(","):
            item = _PUNCT.sub(" ", item)
            item = _INSTANCE.sub(r"\1", normalize_text(item))
            item = _LEAD_AND.sub("", item)
            if item:
                items.append(item)
        if items:
            sentences.append(", ".join(sorted(items)))
    return ". ".join(sentences)


def semantic_state_key(observation: str, task_id: str = "") -> int:
    """Int64 key of the canonicalized observation within a task (never 0)."""
    return hash_fields(_TAG_SEMANTIC, (task_id, canonical_text(observation)))


def similarity_anchor_keys(
    observations: Sequence[str],
    group_ids: Sequence[Hashable],
    threshold: float = 0.95,
) -> list[int]:
    """Anchor keys merging similar observations within each task group.

    Greedy clustering in row order: an observation joins the first cluster of its
    group whose representative has ``SequenceMatcher.ratio() ≥ threshold``, else it
    starts a cluster. The key is the representative's state key.

    Args:
        observations: ``o_t`` text of every step row.
        group_ids: the task group of every row.
        threshold: similarity ratio (verl-agent: 0.95).

    Returns:
        One int64 key per row (the ``anchor_key`` record field).
    """
    if len(observations) != len(group_ids):
        raise ValueError(f"{len(observations)} observations but {len(group_ids)} group ids")
    clusters: dict[Hashable, list[str]] = {}
    exact: dict[tuple[Hashable, str], int] = {}
    keys = []
    for text, group in zip(observations, group_ids, strict=False):
        text = normalize_text(text)
        if (group, text) not in exact:
            reps = clusters.setdefault(group, [])
            match = next(
                (rep for rep in reps if difflib.SequenceMatcher(None, text, rep).ratio() >= threshold), None
            )
            if match is None:
                reps.append(text)
                match = text
            exact[(group, text)] = state_key(match)
        keys.append(exact[(group, text)])
    return keys
