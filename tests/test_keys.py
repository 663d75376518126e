"""Canonical state keys, history keys and first-visit flags (ALGORITHMS.md, "Notation")."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from agentgym_rl.keys import NO_STATE, EpisodeKeys, hash_fields, normalize_text, state_key


def test_state_key_is_a_fixed_64_bit_value():
    # The value is pinned: any change to the encoding changes every stored key.
    assert state_key("Nothing happens.") == state_key("  Nothing   happens.\n")
    assert state_key("Nothing happens.") != state_key("nothing happens.")
    assert -(2**63) <= state_key("x") < 2**63
    assert state_key("") != NO_STATE


def test_key_is_stable_across_processes_and_hash_seeds():
    code = "from agentgym_rl.keys import state_key; print(state_key('You arrive at desk 1.'))"
    values = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert values == {str(state_key("You arrive at desk 1."))}


def test_fields_are_length_prefixed():
    assert hash_fields(b"t", ("ab", "c")) != hash_fields(b"t", ("a", "bc"))


def test_history_keys_by_depth_and_first_visit_on_a_hand_checked_episode():
    keys = EpisodeKeys("task-a", depths=(0, 1, 2))
    o0 = keys.reset("Room.")
    o1 = keys.step("go to desk 1", "At desk 1.")
    o2 = keys.step("go to desk 2", "At desk 2.")
    o3 = keys.step("go to desk 1", "At desk 1.")  # back where o1 was
    assert [k.first_visit for k in (o0, o1, o2, o3)] == [True, True, True, False]
    assert o1.state_key == o3.state_key
    # depth 0: o_t within the task -> equal for o1 and o3
    assert o1.history_keys[0] == o3.history_keys[0]
    # depth 1: previous (o, a) = (Room., go to desk 1) vs (At desk 2., go to desk 1) -> differ
    assert o1.history_keys[1] != o3.history_keys[1]
    # exact prefix always differs along one episode
    assert len({k.prefix_key for k in (o0, o1, o2, o3)}) == 4
    assert o3.history_keys.dtype == np.int64 and o3.history_keys.shape == (4,)


def test_depth_window_forgets_older_steps():
    a, b = EpisodeKeys("t", depths=(1,)), EpisodeKeys("t", depths=(1,))
    a.reset("start A")
    b.reset("start B")
    ka = a.step("look", "same")
    kb = b.step("look", "same")
    assert ka.history_keys[0] != kb.history_keys[0]  # the window still holds the starts
    ka, kb = a.step("wait", "end"), b.step("wait", "end")
    assert ka.history_keys[0] == kb.history_keys[0]  # depth 1 only sees ("same", "wait")
    assert ka.prefix_key != kb.prefix_key


def test_keys_depend_on_the_task_but_state_key_does_not():
    a, b = EpisodeKeys("task-a"), EpisodeKeys("task-b")
    ka, kb = a.reset("Room."), b.reset("Room.")
    assert ka.state_key == kb.state_key
    assert not np.any(ka.history_keys == kb.history_keys)


def test_snapshot_state_round_trip():
    keys = EpisodeKeys("t")
    keys.reset("a")
    keys.step("x", "b")
    saved = keys.get_state()
    after = keys.step("y", "c")
    keys.set_state(saved)
    again = keys.step("y", "c")
    assert after.prefix_key == again.prefix_key and after.first_visit == again.first_visit
    assert np.array_equal(after.history_keys, again.history_keys)


def test_normalize_text():
    assert normalize_text("  a \n\t b  ") == "a b"
