"""Shared fixtures: where the real data is (tests that need it skip without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentgym_rl  # noqa: F401 - registers the envs


@pytest.fixture(scope="session")
def alfworld_root() -> Path:
    """The official ALFWorld ``json_2.1.1`` folder (``../shared/data`` or ``ALFWORLD_DATA``)."""
    from agentgym_rl.data import find_alfworld_root

    root = find_alfworld_root()
    if root is None:
        pytest.skip("no ALFWorld data (set ALFWORLD_DATA or put ../shared/data/alfworld beside the checkout)")
    return root
