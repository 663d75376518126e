"""``AgentGymRL/ALFWorld-v0`` through ``gym.make``: contract, walkthroughs, keys, bad input."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentgym_rl.alfworld.tasks import TASK_TYPES, list_tasks
from agentgym_rl.data import DataNotFoundError

ENV_ID = "AgentGymRL/ALFWorld-v0"


@pytest.fixture(scope="module")
def unseen_env(alfworld_root):
    env = gym.make(ENV_ID, split="valid_unseen", data_dir=str(alfworld_root))
    yield env
    env.close()


def test_check_env_passes_without_warnings(alfworld_root):
    env = gym.make(ENV_ID, split="valid_seen", data_dir=str(alfworld_root))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
    env.close()


def test_spec_step_limit_truncates_at_50(unseen_env):
    assert unseen_env.spec.max_episode_steps == 50
    unseen_env.reset(seed=0)
    for step in range(50):
        _, _, terminated, truncated, _ = unseen_env.step("look")
        assert not terminated
        assert truncated == (step == 49)


def test_every_valid_unseen_walkthrough_wins(unseen_env, alfworld_root):
    tasks = unseen_env.unwrapped.task_ids
    assert len(tasks) == 134
    start, lost = time.perf_counter(), []
    for task in tasks:
        obs, info = unseen_env.reset(options={"task": task})
        assert "Your task is to:" in obs and not obs.startswith("-=")
        reward = 0.0
        for action in unseen_env.unwrapped.walkthrough:
            obs, reward, terminated, truncated, info = unseen_env.step(action)
            assert info["action_valid"], (task, action)
        if not (reward == 1.0 and terminated and info["won"]):
            lost.append(task)
    print(f"\n134 valid_unseen walkthroughs replayed in {time.perf_counter() - start:.1f} s")
    assert lost == []


def test_task_ids_and_types(unseen_env):
    tasks = unseen_env.unwrapped.task_ids
    assert tasks == sorted(tasks)
    assert all(t.count("/") == 1 and t.split("/")[1].startswith("trial_") for t in tasks)
    _, info = unseen_env.reset(options={"task": tasks[0]})
    assert info["task_id"] == tasks[0] and info["task_type"] in TASK_TYPES
    assert {t.split("-")[0] for t in tasks} == set(TASK_TYPES)


def test_info_contract(unseen_env):
    obs, info = unseen_env.reset(seed=5)
    assert set(info) >= {
        "state_key", "history_keys", "prefix_key", "first_visit", "admissible_actions",
        "task_id", "task_type", "won", "action_valid",
    }  # fmt: skip
    assert isinstance(info["state_key"], int) and info["history_keys"].dtype == np.int64
    assert info["history_keys"][-1] == info["prefix_key"] and info["first_visit"] is True
    assert "look" in info["admissible_actions"] and info["won"] is False


def test_same_seed_same_episode(alfworld_root):
    runs = []
    for _ in range(2):
        env = gym.make(ENV_ID, split="valid_unseen", data_dir=str(alfworld_root))
        obs, info = env.reset(seed=42)
        trace = [(obs, info["prefix_key"])]
        for action in env.unwrapped.walkthrough[:3]:
            obs, _, _, _, info = env.step(action)
            trace.append((obs, info["prefix_key"]))
        runs.append(trace)
        env.close()
    assert runs[0] == runs[1]


def test_first_visit_flags_on_a_hand_checked_episode(unseen_env):
    unseen_env.reset(options={"task": unseen_env.unwrapped.task_ids[0]})
    # AlarmClock/DeskLamp room 308: desk 1 and desk 2 exist; going back to desk 1 repeats its text.
    flags = []
    for action in ["go to desk 1", "go to desk 2", "go to desk 1", "look", "look", "dance"]:
        obs, _, _, _, info = unseen_env.step(action)
        flags.append(info["first_visit"])
    # look repeats itself; "dance" gives "Nothing happens." which is new once.
    assert flags == [True, True, False, True, False, True]


def test_keys_equal_in_two_processes(alfworld_root):
    code = (
        "import gymnasium as gym, agentgym_rl, json\n"
        f"env = gym.make('{ENV_ID}', split='valid_unseen', data_dir={str(alfworld_root)!r})\n"
        "obs, info = env.reset(seed=7); keys = [info['history_keys'].tolist()]\n"
        "for a in env.unwrapped.walkthrough: keys.append(env.step(a)[4]['history_keys'].tolist())\n"
        "print(json.dumps(keys))\n"
    )
    outputs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1] and len(json.loads(outputs[0])) >= 3


@pytest.mark.parametrize(
    "action",
    [
        "",
        "   ",
        "\U0001f916 h\u00e9llo \u2192 \u4e16\u754c",
        "x" * 2_000_000,
        "go to desk 1; rm -rf /",
        "\x00\x01",
        "GO TO\n\nNOWHERE 99",
    ],
)
def test_bad_actions_are_answered_in_game(unseen_env, action):
    unseen_env.reset(seed=1)
    obs, reward, terminated, truncated, info = unseen_env.step(action)
    assert obs == "Nothing happens." and reward == 0.0 and not terminated and info["action_valid"] is False


def test_actions_are_normalized(unseen_env):
    _, info = unseen_env.reset(seed=1)
    command = info["admissible_actions"][0]
    _, _, _, _, info = unseen_env.step("  " + command.upper().replace(" ", "   ") + "\n")
    assert info["action_valid"]


def test_wrong_task_id_suggests_the_close_one(unseen_env):
    task = unseen_env.unwrapped.task_ids[3]
    with pytest.raises(ValueError, match="Did you mean"):
        unseen_env.reset(options={"task": task[:-2]})


def test_missing_or_empty_data_dir_names_the_fix(tmp_path):
    with pytest.raises(DataNotFoundError, match="ALFWORLD_DATA"):
        gym.make(ENV_ID, data_dir=str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFoundError, match="agentgym-rl data download alfworld"):
        gym.make(ENV_ID, data_dir=str(tmp_path))


def test_unknown_split(alfworld_root):
    with pytest.raises(ValueError, match="valid_unseen"):
        gym.make(ENV_ID, split="valid_unsen", data_dir=str(alfworld_root))


def test_snapshot_restore_and_pickle(unseen_env):
    env = unseen_env.unwrapped
    env.reset(seed=11)
    plan = env.walkthrough
    env.step(plan[0])
    snap = env.snapshot()
    expected = [env.step(a)[:3] for a in plan[1:]]
    obs, info = env.restore(snap)
    assert [env.step(a)[:3] for a in plan[1:]] == expected
    env.restore(snap)
    clone = pickle.loads(pickle.dumps(env))  # a fresh engine: restored by replay
    try:
        assert [clone.step(a)[:3] for a in plan[1:]] == expected
    finally:
        clone.close()


def test_make_vec(alfworld_root):
    envs = gym.make_vec(
        ENV_ID, num_envs=2, vectorization_mode="sync", split="valid_seen", data_dir=str(alfworld_root)
    )
    obs, info = envs.reset(seed=0)
    assert len(obs) == 2 and all("Your task is to:" in o for o in obs)
    envs.close()


def test_no_spacy_model_download_on_our_path(alfworld_root):
    code = (
        "import sys, gymnasium as gym, agentgym_rl\n"
        f"env = gym.make('{ENV_ID}', split='valid_unseen', data_dir={str(alfworld_root)!r})\n"
        "env.reset(seed=0); env.step('look'); env.close()\n"
        "print('spacy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


def test_list_tasks_excludes_nothing_in_the_official_release(alfworld_root):
    assert len(list_tasks(alfworld_root, "valid_seen")) == 140
