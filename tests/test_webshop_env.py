"""``AgentGymRL/WebShop-v0`` (agentgym_rl.webshop): the env contract, backends, expert, snapshots."""

from __future__ import annotations

import pickle
import threading
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym_rl  # noqa: F401 - registers the envs
from agentgym_rl.webshop import WebShopEnv, expert_actions, play_expert

NUM_PRODUCTS = 120
KWARGS = {"split": "all", "num_products": NUM_PRODUCTS}


def test_check_env_passes_without_warnings():
    env = gym.make("AgentGymRL/WebShop-v0", **KWARGS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
    assert env.spec.max_episode_steps == 15


def test_info_contract():
    env = WebShopEnv(**KWARGS)
    obs, info = env.reset(seed=0, options={"task": 11})
    assert set(info) == {
        "state_key", "history_keys", "prefix_key", "first_visit", "admissible_actions", "task_id",
        "task_type", "won", "score", "action_valid",
    }  # fmt: skip
    assert info["task_id"] == 11 and info["task_type"] == env.goal["category"]
    assert info["history_keys"].dtype == np.int64 and info["history_keys"].shape == (5,)
    assert info["prefix_key"] == int(info["history_keys"][-1]) and info["first_visit"]
    assert info["admissible_actions"] == ["search[<your query>]"]
    assert (info["won"], info["score"], info["action_valid"]) == (False, 0.0, True)
    search_state = info["state_key"]
    obs, reward, terminated, truncated, info = env.step("search[shoes]")
    assert info["admissible_actions"][:2] == ["click[back to search]", "click[next >]"]
    assert all(a.startswith("click[b") for a in info["admissible_actions"][2:])
    obs, *_, info = env.step("click[back to search]")
    assert info["state_key"] == search_state and not info["first_visit"]


def test_bad_actions_never_raise():
    env = WebShopEnv(**KWARGS)
    obs, _ = env.reset(seed=1)
    for action in ("", "click[nothing]", "search[", "]]][[", "click[search]", "ünïcödé[✓]", 42):
        new_obs, reward, terminated, truncated, info = env.step(action)  # type: ignore[arg-type]
        assert (new_obs, reward, terminated, truncated, info["action_valid"]) == (
            obs,
            0.0,
            False,
            False,
            False,
        )


@pytest.mark.parametrize(
    "action",
    ["[" * 2**20, "search" + "[" * 2**20, "click[" + "[" * 2**20 + "\n]", "search[shoes]" + " " * 2**20],
)
def test_megabyte_action_is_answered_fast(action):
    # The regex split backtracked quadratically (30 s for 64 kB); 1 MB is now over the cap.
    env = gym.make("AgentGymRL/WebShop-v0", **KWARGS)
    obs, _ = env.reset(seed=0)
    start = time.perf_counter()
    new_obs, reward, terminated, truncated, info = env.step(action)
    assert time.perf_counter() - start < 1.0
    assert (new_obs, reward, terminated, truncated, info["action_valid"]) == (obs, 0.0, False, False, False)


def test_expert_wins_generated_goals():
    env = gym.make("AgentGymRL/WebShop-v0", **KWARGS)
    base = env.unwrapped
    for task in base.task_ids[::17]:
        env.reset(options={"task": task})
        actions, info = play_expert(env)
        assert info["won"] and info["score"] == 1.0, (task, actions, base.goal)
        assert len(actions) <= 15


def test_reward_and_won():
    env = WebShopEnv(reward_type="won", reward_scale=10.0, **KWARGS)
    task = next(t for t in env.task_ids if env.unwrapped._backend.goal(t)["goal_options"])
    env.reset(options={"task": task})
    actions = expert_actions(env)
    assert env.step("click[buy now]")[4]["won"]  # after the end: invalid, the score stays
    # Replay the walkthrough without the option clicks: score below 1, no win reward.
    env.reset(options={"task": task})
    option_clicks = {f"click[{v}]" for v in env.goal["goal_options"].values()}
    for action in actions:
        if action not in option_clicks:
            _, reward, terminated, _, info = env.step(action)
    assert terminated and 0 < info["score"] < 1 and not info["won"] and reward == 0.0
    scored = WebShopEnv(**KWARGS)
    scored.reset(options={"task": task})
    for action in actions:
        if action not in option_clicks:
            _, reward, *_ = scored.step(action)
    assert reward == pytest.approx(info["score"])


def test_time_limit_truncates_at_15():
    env = gym.make("AgentGymRL/WebShop-v0", **KWARGS)
    env.reset(seed=0)
    flags = [env.step("search[socks]")[2:4] for _ in range(15)]
    assert flags == [(False, False)] * 14 + [(False, True)]


def test_seeded_reset_is_deterministic():
    a, b = WebShopEnv(split="train", num_products=400), WebShopEnv(split="train", num_products=400)
    obs_a, info_a = a.reset(seed=123)
    obs_b, info_b = b.reset(seed=123)
    assert obs_a == obs_b and info_a["task_id"] == info_b["task_id"] and info_a["task_id"] in a.task_ids
    assert min(a.task_ids) == 1500  # train split starts after test and eval
    for action in ("search[shirt]", "click[next >]", "click[< prev]"):
        out_a, out_b = a.step(action), b.step(action)
        assert out_a[0] == out_b[0] and out_a[4]["prefix_key"] == out_b[4]["prefix_key"]


def test_snapshot_restore_and_pickle():
    env = WebShopEnv(**KWARGS)
    env.reset(options={"task": 20})
    env.step(f"search[{env.goal['name']}]")
    env.step(f"click[{env.goal['asin'].lower()}]")
    snap = env.snapshot()
    assert len(snap) < 8000  # page state + key window, no engine
    branch_a = env.step("click[buy now]")
    obs, info = env.restore(snap)
    assert obs.endswith("Buy Now") and env.render() is None  # render_mode None renders nothing
    assert info["prefix_key"] == pickle.loads(snap)["step_keys"].prefix_key and not info["won"]
    branch_b = env.step("click[buy now]")
    assert branch_a[0] == branch_b[0] and branch_a[4]["prefix_key"] == branch_b[4]["prefix_key"]
    env.restore(snap)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.step("click[description]")[0] == env.step("click[description]")[0]


def test_http_backend_matches_local():
    pytest.importorskip("requests")
    from werkzeug.serving import make_server

    from webshop_server import create_app

    local = WebShopEnv(**KWARGS)
    app = create_app(engine=local.unwrapped._backend.engine)
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        remote = WebShopEnv(split="all", backend="http", url=f"http://127.0.0.1:{httpd.server_port}")
        assert remote.task_ids == local.task_ids
        obs_l, info_l = local.reset(options={"task": 9})
        obs_r, info_r = remote.reset(options={"task": 9})
        assert obs_l == obs_r and info_l["state_key"] == info_r["state_key"] and remote.goal == local.goal
        actions = expert_actions(local)
        local.reset(options={"task": 9})
        # A 1 MB action is over the server's 64 kB body limit: still an in-game "invalid".
        for action in ["click[bogus]", "search[x]" + "]" * 2**20, *actions]:
            out_l, out_r = local.step(action), remote.step(action)
            assert out_l[:4] == out_r[:4]
            assert out_l[4]["admissible_actions"] == out_r[4]["admissible_actions"]
            assert out_l[4]["action_valid"] == out_r[4]["action_valid"]
        assert out_r[4]["won"]
        # Snapshots work over HTTP too.
        remote.reset(options={"task": 9})
        remote.step("search[anything]")
        snap = remote.snapshot()
        first = remote.step("click[next >]")[0]
        remote.restore(snap)
        assert remote.step("click[next >]")[0] == first
        remote.close()
        remote.close()  # idempotent
    finally:
        httpd.shutdown()
        thread.join(5)


def test_text_rich_env():
    env = WebShopEnv(observation_mode="text_rich", **KWARGS)
    obs, _ = env.reset(options={"task": 2})
    assert obs.startswith("\nWebShop \n") and obs.endswith("[button] Search [button_]\n")
    _, info = play_expert(env)
    assert info["won"]


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="url="):
        WebShopEnv(backend="http")
    with pytest.raises(ValueError, match="choose one of"):
        WebShopEnv(split="validation", num_products=50)
    with pytest.raises(ValueError, match="no goals"):
        WebShopEnv(split="train", num_products=50)


def test_group_vector_env():
    vector = pytest.importorskip("agentgym_rl.vector")
    envs = vector.GroupVectorEnv("AgentGymRL/WebShop-v0", num_tasks=2, group_size=2, workers=1, **KWARGS)
    try:
        obs, info = envs.reset(seed=0, options={"tasks": [4, 9]})
        assert obs[0] == obs[1] and obs[2] == obs[3] and obs[0] != obs[2]
        assert list(info["task_id"]) == [4, 4, 9, 9]
        obs, rewards, terminated, truncated, info = envs.step(
            ["search[hat]", "click[x]", "search[hat]", "click[x]"]
        )
        assert info["action_valid"].tolist() == [True, False, True, False]
        assert obs[1] == envs.reset(seed=0, options={"tasks": [4, 9]})[0][1]
        envs.step(["search[hat]"] * 4)
        observation, info = envs.restore(1, envs.snapshot(0))  # branch member 1 from member 0
        assert observation.startswith("Instruction:") and info["task_id"] == 4
    finally:
        envs.close()


def test_benchmark_script_smoke(tmp_path):
    bench = pytest.importorskip("benchmarks.bench_webshop")
    args = bench.Args(parts=["steps"], num_products=60, episodes=3, output=str(tmp_path))
    result = bench.main(args)
    assert result["steps"]["wins"] == 3 and result["steps"]["invalid"] == 0
    assert (tmp_path / "result.json").exists() and "steps/s" in (tmp_path / "result.md").read_text()


def test_long_actions_benchmark_smoke(tmp_path):
    bench = pytest.importorskip("benchmarks.bench_webshop")
    args = bench.Args(
        parts=["long_actions"], num_products=60, long_action_sizes=[1000, 100_000], long_action_repeats=3,
        output=str(tmp_path),
    )  # fmt: skip
    result = bench.main(args)["long_actions"]
    assert set(result) == set(bench.LONG_ACTIONS)
    for growth in result.values():
        assert not growth["any_valid"]
        # A quadratic split grows ~10,000x for 100x the length; a linear step at most 100x.
        assert growth["step_growth"] <= growth["n_growth"] == 100
    assert "env step / action split time growth" in (tmp_path / "result.md").read_text()
