"""The generated ALFWorld games: solvable through the env, deterministic, every task type, not trivial."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

from agentgym_rl.alfworld.generator import DEFAULT_COUNTS, generate_games, generated_games_root, version_tag
from agentgym_rl.alfworld.tasks import GAME_FILE, TASK_TYPES, list_tasks, task_type_of
from agentgym_rl.data import ALFWORLD_SPLITS

REPO = Path(__file__).resolve().parents[1]
_TASK_NAME = re.compile(r"^(\w+)-([A-Za-z]+)-None-([A-Za-z]+)-(\d+)/trial_T\d{8}_\d{6}_\d{6}$")


@pytest.fixture(scope="module")
def root() -> Path:
    """The embedded games (generated into the cache on first use)."""
    return generated_games_root()


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("split", ALFWORLD_SPLITS)
def test_every_walkthrough_wins_through_the_env(root, split):
    env = gym.make("AgentGymRL/ALFWorld-v0", split=split, data_dir="generated")
    tasks = env.unwrapped.task_ids
    assert len(tasks) == DEFAULT_COUNTS[split]
    for task in tasks:
        obs, info = env.reset(options={"task": task})
        assert "Your task is to:" in obs and not info["won"], task  # not won at the start
        walkthrough = env.unwrapped.walkthrough
        assert len(walkthrough) >= 2, task
        for i, action in enumerate(walkthrough):
            assert action in info["admissible_actions"], (task, action)
            obs, reward, terminated, truncated, info = env.step(action)
            last = i == len(walkthrough) - 1
            assert (reward, terminated, info["won"]) == (
                (1.0, True, True) if last else (0.0, False, False)
            ), (
                task,
                i,
                obs,
            )
    env.close()


def test_every_task_type_in_every_split(root):
    for split in ALFWORLD_SPLITS:
        tasks = list_tasks(root, split)
        assert {task_type_of(t) for t in tasks} == set(TASK_TYPES), split
        for task in tasks:
            match = _TASK_NAME.match(task)
            assert match and match.group(1) == task_type_of(task), task
            if split == "valid_unseen":  # held-out scenes: 26-30 of each room family
                assert int(match.group(4)) % 100 >= 26, task


def test_task_sentence_and_goal_match_the_folder_name(root):
    for task in list_tasks(root, "valid_seen"):
        task_type, obj, target = _TASK_NAME.match(task).groups()[:3]
        game = json.loads((root / "valid_seen" / task / GAME_FILE).read_text())
        sentence = re.search(r"Your task is to: ([^\"]+)\.", game["grammar"]).group(1)
        assert obj.lower() in sentence and target.lower() in sentence, (task, sentence)
        assert "UNKNOWN GOAL" not in game["grammar"] and game["solvable"] is True
        goal = game["pddl_problem"].split("(:goal", 1)[1]
        assert f"{obj}Type" in goal and f"{target}Type" in goal


def test_same_seed_same_bytes_and_other_seed_differs(tmp_path, root):
    counts = {"train": 4, "valid_unseen": 2}
    first = _files(generate_games(tmp_path / "a", counts=counts, seed=0))
    second = _files(generate_games(tmp_path / "b", counts=counts, seed=0))
    assert len(first) == 6 and first == second
    # Game i of a split depends only on (seed, split, i): these are the embedded set's first games.
    assert all((root / name).read_bytes() == data for name, data in first.items())
    other = _files(generate_games(tmp_path / "c", counts={"train": 2}, seed=1))
    assert len(other) == 2 and not set(other) & set(first)


def test_task_types_pick_which_types_the_games_cycle_through(tmp_path):
    types = ["look_at_obj_in_light", "pick_and_place_simple"]
    games = _files(generate_games(tmp_path / "a", counts={"train": 4}, task_types=types))
    assert sorted(name.split("/")[1].split("-")[0] for name in games) == sorted(types * 2)
    with pytest.raises(ValueError, match="unknown task types \\['pick_up'\\]"):
        generate_games(tmp_path / "b", counts={"train": 1}, task_types=["pick_up"])
    with pytest.raises(ValueError, match="none given"):
        generate_games(tmp_path / "c", counts={"train": 1}, task_types=[])


def test_small_rooms_hold_each_fixture_type_its_fewest_times(tmp_path):
    from agentgym_rl.alfworld.scenes import ROOM_STYLES, scene_layout

    for style in ROOM_STYLES:
        small = scene_layout(style, 3, 0, "small")
        fewest = {kind: n for kind, n, _ in style.fixtures}
        assert sorted(r.type for r in small.receptacles) == sorted(
            k for k, n in fewest.items() for _ in range(n)
        )
        assert len(small.receptacles) <= len(scene_layout(style, 3, 0).receptacles)
    sizes = {s.name: sum(n for _, n, _ in s.fixtures) for s in ROOM_STYLES}
    assert sizes == {"kitchen": 8, "livingroom": 5, "bedroom": 5, "bathroom": 6}
    # The games are solvable: each walkthrough wins through the env, and differs from the full rooms' games.
    folder = generate_games(tmp_path / "small", counts={"train": 6}, room_size="small")
    env = gym.make("AgentGymRL/ALFWorld-v0", split="train", data_dir=str(folder))
    for task in env.unwrapped.task_ids:
        obs, info = env.reset(options={"task": task})
        go_tos = [a for a in info["admissible_actions"] if a.startswith("go to ")]
        assert 5 <= len(go_tos) <= 8, (task, go_tos)
        for action in env.unwrapped.walkthrough:
            obs, reward, terminated, truncated, info = env.step(action)
        assert info["won"] and terminated, task
    env.close()
    small, full = _files(folder), _files(generate_games(tmp_path / "full", counts={"train": 6}))
    assert all(small[name] != full.get(name) for name in small)  # other rooms, whatever the names
    with pytest.raises(ValueError, match="room_size must be one of"):
        generate_games(tmp_path / "bad", counts={"train": 1}, room_size="tiny")


def test_root_is_versioned_and_returns_at_once(root):
    assert root.name == version_tag() and root.parent.name == "alfworld-generated"
    start = time.perf_counter()
    assert generated_games_root() == root
    assert time.perf_counter() - start < 0.5


def test_concurrent_first_use_generates_once(tmp_path):
    """Two processes on an empty cache: one generates, the other waits; no partial or temporary folders."""
    script = (
        "import agentgym_rl.alfworld.generator as g; "
        "g.DEFAULT_COUNTS = {'valid_unseen': 2}; "  # a small set keeps the test quick
        "print(g.generated_games_root())"
    )
    env = {**os.environ, "AGENTGYM_RL_CACHE": str(tmp_path), "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs[0] == outputs[1]
    made = Path(outputs[0])
    assert len(list_tasks(made, "valid_unseen")) == 2
    leftovers = [p.name for p in made.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_unknown_task_type_is_refused():
    import random

    from agentgym_rl.alfworld.generator import generate_game

    with pytest.raises(ValueError, match="unknown task type"):
        generate_game("juggle", random.Random(0))


def test_reading_the_wheel_does_not_set_alfworld_data():
    """``import alfworld`` sets ALFWORLD_DATA; the generator must not leak it into the data lookup."""
    script = (
        "import os; from agentgym_rl.alfworld import generator, scenes; "
        "generator._wheel_files(); scenes.object_properties('Mug'); print(os.environ.get('ALFWORLD_DATA'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"} | {"PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "None"
