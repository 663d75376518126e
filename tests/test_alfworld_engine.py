"""Our cached engine gives the stock TextWorld path's observations, commands and wins, step for step."""

from __future__ import annotations

import json
import multiprocessing
import random
import sys
from pathlib import Path

import pytest

from agentgym_rl.alfworld.engine import GameCache, make_engine
from agentgym_rl.alfworld.tasks import TASK_TYPES, game_path, list_tasks, task_type_of
from benchmarks import alfworld_stock


def _sample_tasks(root: Path, split: str, per_type: int) -> list[str]:
    tasks = list_tasks(root, split)
    chosen = []
    for task_type in TASK_TYPES:
        chosen += [t for t in tasks if task_type_of(t) == task_type][:per_type]
    return chosen


def _commands_for(game_file: Path, seed: int) -> list[str]:
    """A few random admissible moves, two invalid ones, then the walkthrough (valid or not by then)."""
    walkthrough = json.loads(game_file.read_text())["walkthrough"]
    engine = make_engine(GameCache())
    engine.load(game_file)
    state = engine.reset()
    rng = random.Random(seed)
    commands = []
    for _ in range(3):
        command = rng.choice(state.admissible_commands)
        commands.append(command)
        state, _, _ = engine.step(command)
    engine.close()
    return [*commands, "dance", "go to the moon 7", *walkthrough]


def test_engine_matches_stock_textworld_on_every_step(alfworld_root):
    tasks = _sample_tasks(alfworld_root, "valid_unseen", per_type=2)  # 12 games, 2 of each type
    jobs = []
    for i, task in enumerate(tasks):
        path = game_path(alfworld_root, "valid_unseen", task)
        jobs.append((str(path), _commands_for(path, seed=i)))
    for task in tasks[::2]:  # one plain walkthrough per type, which must win
        path = game_path(alfworld_root, "valid_unseen", task)
        jobs.append((str(path), json.loads(path.read_text())["walkthrough"]))
    # The reference runs in a spawned interpreter: none of our caches or memos are installed there.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        expected = pool.apply(alfworld_stock.stock_traces, (jobs,))

    engine = make_engine(GameCache())
    for (game_file, commands), reference in zip(jobs, expected, strict=True):
        engine.load(game_file)
        state = engine.reset()
        ours = [
            {
                "feedback": state.feedback,
                "admissible": list(state.admissible_commands),
                "won": bool(state.won),
            }
        ]
        for command in commands:
            state, _, _ = engine.step(command)
            ours.append(
                {
                    "feedback": state.feedback,
                    "admissible": list(state.admissible_commands),
                    "won": bool(state.won),
                }
            )
        assert ours == reference, game_file
    assert all(trace[-1]["won"] for trace in expected[len(tasks) :])  # the plain walkthroughs win


def test_reset_of_a_loaded_game_restores_the_initial_state(alfworld_root):
    task = list_tasks(alfworld_root, "valid_seen")[0]
    path = game_path(alfworld_root, "valid_seen", task)
    walkthrough = json.loads(path.read_text())["walkthrough"]
    engine = make_engine(GameCache())
    engine.load(path)
    first = engine.reset()
    for command in walkthrough:
        state, _, _ = engine.step(command)
    assert state.won
    again = engine.reset()  # warm: no reload, state id 0 and cached facts
    assert again.feedback == first.feedback and again.admissible_commands == first.admissible_commands
    assert not again.won
    for command in walkthrough:
        state, _, _ = engine.step(command)
    assert state.won


def test_snapshot_restore_and_planner(alfworld_root):
    task = list_tasks(alfworld_root, "valid_seen")[1]
    path = game_path(alfworld_root, "valid_seen", task)
    walkthrough = json.loads(path.read_text())["walkthrough"]
    engine = make_engine(GameCache())
    engine.load(path)
    engine.reset()
    engine.step(walkthrough[0])
    snap = engine.snapshot()
    rest = [engine.step(c)[0].feedback for c in walkthrough[1:]]
    engine.restore(snap)
    assert [engine.step(c)[0].feedback for c in walkthrough[1:]] == rest
    engine.restore(snap)
    plan = engine.policy_commands()  # Fast Downward from the restored state
    for command in plan:
        state, _, _ = engine.step(command)
    assert state.won


def test_translation_cache_on_disk_is_used(alfworld_root, tmp_path):
    task = list_tasks(alfworld_root, "valid_unseen")[0]
    path = game_path(alfworld_root, "valid_unseen", task)
    first = GameCache(tmp_path)
    first.translation(first.game(path))
    files = list(tmp_path.rglob("*.pkl.z"))
    assert len(files) == 1
    second = GameCache(tmp_path)
    task_obj, sas = second.translation(second.game(path))
    assert sas == first.translation(first.game(path))[1]
    engine = make_engine(second)
    engine.load(path)
    assert "Your task is to:" in engine.reset().feedback


def test_translation_restores_sys_argv(alfworld_root):
    argv = list(sys.argv)
    cache = GameCache()
    task = list_tasks(alfworld_root, "valid_unseen")[2]
    cache.translation(cache.game(game_path(alfworld_root, "valid_unseen", task)))
    assert sys.argv == argv


@pytest.mark.parametrize("bad", ["not json", json.dumps({"grammar": "x"})])
def test_bad_game_file_is_a_clear_error(tmp_path, bad):
    path = tmp_path / "game.tw-pddl"
    path.write_text(bad)
    with pytest.raises(ValueError):
        GameCache().game(path)


def test_equality_benchmark_smoke(alfworld_root, tmp_path):
    from benchmarks.bench_engine_equality import Args, main

    result = main(
        Args(
            splits=["valid_unseen"], max_games=2, workers=1, data_dir=str(alfworld_root), output=str(tmp_path)
        )
    )
    assert result["games"] == 2 and result["steps"] > 2 * 2
    assert result["mismatch_steps"] == 0, result["mismatches"]
    assert all(r["won_stock"] == r["won_ours"] for r in result["rows"])
    assert (tmp_path / "result.md").exists()
