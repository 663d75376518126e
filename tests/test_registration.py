"""Every registered env passes Gymnasium's ``check_env`` on the embedded default data; spaces hash."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym_rl  # noqa: F401  (registers the envs)
from agentgym_rl.spaces import TextSpace

#: What each env needs to run with no downloaded data (generated games, a small generated shop).
NO_DATA_KWARGS = {
    "AgentGymRL/ALFWorld-v0": {"data_dir": "generated", "split": "valid_unseen"},
    "AgentGymRL/WebShop-v0": {"num_products": 60, "split": "test"},
    "AgentGymRL/TextBandit-v0": {},
}


def test_every_registered_id_is_covered():
    registered = {env_id for env_id in gym.registry if env_id.startswith("AgentGymRL/")}
    assert registered == set(NO_DATA_KWARGS)


@pytest.mark.parametrize("env_id", sorted(NO_DATA_KWARGS))
def test_check_env_passes_on_the_embedded_default(env_id):
    env = gym.make(env_id, **NO_DATA_KWARGS[env_id])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
    finally:
        env.close()
    assert [str(w.message) for w in caught] == []


def test_text_spaces_hash_as_they_compare():
    assert TextSpace(10) == TextSpace(10) and hash(TextSpace(10)) == hash(TextSpace(10))
    assert len({TextSpace(10), TextSpace(10), TextSpace(11)}) == 2
