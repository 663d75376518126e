"""GroupVectorEnv (N tasks x G rollouts in worker processes) and the PettingZoo group view."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from agentgym_rl import GroupParallelEnv, GroupVectorEnv
from agentgym_rl.vector import WorkerFailure
from agentgym_rl.workers import WorkerEnvError

ENV_ID = "AgentGymRL/ALFWorld-v0"
KW = dict(split="valid_unseen", data_dir="generated")


def _children() -> set[int]:
    """Live child processes of this test process (from /proc).

    multiprocessing's resource tracker (one per interpreter, started with the first
    spawned process and kept for the interpreter's life) is not a worker: left out.
    """
    me, kids = str(os.getpid()), set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    command = handle.read()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z" and b"resource_tracker" not in command:
                kids.add(int(pid))
    return kids


@pytest.fixture(scope="module")
def envs():
    vector = GroupVectorEnv(ENV_ID, num_tasks=2, group_size=3, workers=2, timeout=60, **KW)
    yield vector
    vector.close()


def test_groups_share_task_seed_observation_and_keys(envs):
    obs, info = envs.reset(seed=3)
    assert info["group_id"].tolist() == [0, 0, 0, 1, 1, 1]
    assert info["rollout_id"].tolist() == [0, 1, 2, 0, 1, 2]
    for group in (slice(0, 3), slice(3, 6)):
        assert len(set(obs[group])) == 1
        assert len(set(info["task_id"][group])) == 1
        assert len(set(info["state_key"][group])) == 1
        assert (info["history_keys"][group] == info["history_keys"][group][0]).all()
    assert info["task_id"][0] != info["task_id"][3]  # the seed picked distinct tasks
    assert info["active"].all() and not info["stepped"].any()


def test_masks_when_members_finish_at_different_steps(envs):
    obs, info = envs.reset(options={"tasks": [envs.task_ids[0], envs.task_ids[1]]})
    walkthrough = _walkthrough(envs, 0)
    finished_at = None
    for t in range(len(walkthrough) + 2):
        actions = [walkthrough[t] if t < len(walkthrough) else None, "look", "look", "look", "look", "look"]
        active_before = envs.active.copy()
        obs, rewards, terminated, truncated, info = envs.step(actions)
        assert (info["stepped"] == active_before).all()
        if terminated[0]:
            finished_at = t
            assert rewards[0] == 1.0 and info["won"][0] and not info["active"][0]
        if finished_at is not None and t > finished_at:
            assert not info["stepped"][0] and not terminated[0] and rewards[0] == 0.0
            assert not info["_state_key"][0]  # no new info for a finished member
        assert info["active"][1:].all()
    assert finished_at == len(walkthrough) - 1


def _walkthrough(envs: GroupVectorEnv, index: int) -> list[str]:
    return envs.member_attr(index, "walkthrough")


def test_results_equal_single_envs_run_one_by_one(envs):
    tasks = [envs.task_ids[2], envs.task_ids[5]]
    rng = np.random.default_rng(0)
    obs, info = envs.reset(seed=11, options={"tasks": tasks})
    vector_trace = [obs.tolist()]
    scripted = []
    for _ in range(6):
        actions = [str(rng.choice(info["admissible_actions"][i])) for i in range(6)]
        scripted.append(actions)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        vector_trace.append((obs.tolist(), rewards.tolist(), info["prefix_key"].tolist()))

    single_trace = [[], *[([], [], []) for _ in scripted]]
    for i in range(6):
        env = gym.make(ENV_ID, **KW)
        o, inf = env.reset(seed=11, options={"task": tasks[i // 3]})
        single_trace[0].append(o)
        for t, actions in enumerate(scripted):
            o, r, _, _, inf = env.step(actions[i])
            single_trace[t + 1][0].append(o)
            single_trace[t + 1][1].append(r)
            single_trace[t + 1][2].append(inf["prefix_key"])
        env.close()
    assert vector_trace == [single_trace[0], *[tuple(x) for x in single_trace[1:]]]


def test_group_sizes_may_differ_per_task(envs):
    obs, info = envs.reset(seed=0, options={"tasks": envs.task_ids[:3], "group_sizes": [3, 0, 2]})
    assert info["group_id"].tolist() == [0, 0, 0, 2, 2, -1]
    assert info["active"].tolist() == [True] * 5 + [False] and obs[5] == ""
    obs, *_, info = envs.step(["look"] * 5 + [None])
    assert info["stepped"].tolist() == [True] * 5 + [False]
    with pytest.raises(ValueError, match="slots"):
        envs.reset(options={"tasks": envs.task_ids[:2], "group_sizes": [4, 3]})


def test_bad_actions_are_clear_errors(envs):
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="expected 6 actions"):
        envs.step(["look"])
    with pytest.raises(TypeError, match="env 2 is active"):
        envs.step(["look", "look", None, "look", "look", "look"])


def test_snapshot_restore_branches_a_member(envs):
    envs.reset(seed=0, options={"tasks": [envs.task_ids[0]] * 2})
    walkthrough = _walkthrough(envs, 0)
    envs.step([walkthrough[0]] + ["look"] * 5)
    snap = envs.snapshot(0)
    observation, info = envs.restore(4, snap)  # member 4 (another group) branches from member 0's state
    assert info["task_id"] == envs.tasks[0] and envs.active[4]
    rest = walkthrough[1:]
    for action in rest:
        actions = ["look"] * 6
        actions[0] = actions[4] = action
        obs, rewards, terminated, *_ = envs.step(actions)
        assert obs[0] == obs[4]
    assert terminated[0] and terminated[4] and rewards[4] == 1.0


def test_env_error_in_worker_comes_with_its_traceback(envs):
    envs.reset(seed=0)
    with pytest.raises(WorkerEnvError, match="Traceback"):
        envs.call_member(1, "restore", b"not a snapshot")
    envs.step(["look"] * 6)  # the worker keeps serving


def test_make_vec_builds_a_group_vector_env():
    vector = gym.make_vec(ENV_ID, num_envs=4, group_size=2, workers=1, **KW)
    try:
        assert isinstance(vector, GroupVectorEnv) and vector.num_envs == 4 and vector.group_size == 2
        obs, info = vector.reset(seed=1)
        assert obs[0] == obs[1] and info["group_id"].tolist() == [0, 0, 1, 1]
    finally:
        vector.close()


def test_killed_worker_is_restarted_and_its_envs_truncated():
    before = _children()
    vector = GroupVectorEnv(ENV_ID, num_tasks=2, group_size=2, workers=2, timeout=30, **KW)
    try:
        vector.reset(seed=0)
        victim, lost = vector.worker_pids()[1], vector.worker_slots()[1]
        kept = vector.worker_slots()[0]
        os.kill(victim, signal.SIGKILL)
        obs, rewards, terminated, truncated, info = vector.step(["look"] * 4)
        assert truncated[lost].all() and not truncated[kept].any()
        assert all(info["worker_failed"][i] is True for i in lost) and not info["active"][lost].any()
        assert vector.worker_pids()[1] != victim
        vector.reset(seed=0)  # the fresh worker plays again
        assert vector.step(["look"] * 4)[4]["stepped"].all()
    finally:
        vector.close()
    assert _children() - before == set()


def test_hung_worker_raises_naming_env_and_task_within_the_timeout():
    before = _children()
    vector = GroupVectorEnv(ENV_ID, num_tasks=2, group_size=1, workers=2, on_worker_failure="raise", **KW)
    try:
        vector.reset(seed=0)
        vector.timeout = 3  # after start-up and the first reset, which may be slow on a busy machine
        os.kill(vector.worker_pids()[0], signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(WorkerFailure, match=r"no answer in 3 s.*envs \[0\] playing \['") as caught:
            vector.step(["look", "look"])
        assert time.monotonic() - start < 15
        assert vector.tasks[0] in str(caught.value)
    finally:
        vector.close()
    assert _children() - before == set()


def test_interpreter_exit_reaps_workers():
    code = (
        "import agentgym_rl\n"
        "v = agentgym_rl.GroupVectorEnv('AgentGymRL/ALFWorld-v0', num_tasks=2, group_size=1, workers=2, "
        "split='valid_unseen', data_dir='generated')\n"
        "print(*v.worker_pids())\n"  # exit without close()
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    pids = [int(p) for p in out.stdout.split()]
    time.sleep(0.5)
    assert len(pids) == 2 and not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_close_is_idempotent_and_reaps():
    before = _children()
    vector = GroupVectorEnv(ENV_ID, num_tasks=1, group_size=2, workers=2, **KW)
    vector.close()
    vector.close()
    assert _children() - before == set()


def test_pettingzoo_parallel_api():
    group = GroupParallelEnv(ENV_ID, group_size=3, **KW)
    parallel_api_test(group, num_cycles=60)
    group.close()
    parallel_seed_test(lambda: GroupParallelEnv(ENV_ID, group_size=2, **KW))


def test_pettingzoo_agents_leave_when_done():
    group = GroupParallelEnv(ENV_ID, group_size=2, **KW)
    group.reset(seed=0)
    walkthrough = group._envs["rollout_0"].unwrapped.walkthrough
    for action in walkthrough:
        _, rewards, terminations, _, _ = group.step({"rollout_0": action, "rollout_1": "look"})
    assert terminations["rollout_0"] and rewards["rollout_0"] == 1.0
    assert group.agents == ["rollout_1"]
    group.close()
