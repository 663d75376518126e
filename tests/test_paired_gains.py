"""Paired gains: each held-out game's success after RL minus at the SFT start, from the runs' episode files."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks.bench_learning import Args as LearningArgs
from benchmarks.paired_gains import Args, main

IDENTITY = {"env": "alfworld", "split": "valid_unseen", "group_size": 2, "seed": 0, "data_dir": "g",
            "temperature": 1.0, "max_steps": 30, "max_new_tokens": 24}  # fmt: skip
GAMES = {
    "pick-1": "pick_and_place_simple",
    "pick-2": "pick_and_place_simple",
    "look-1": "look_at_obj_in_light",
    "goal-1": "beauty",
    "goal-2": "beauty",
}


def _board(folder: Path, outcomes: dict[str, list[float]], env: str = "alfworld", **identity) -> None:
    """A leaderboard board: per task, each rollout's outcome (a win or a score; won only at 1)."""
    folder.mkdir(parents=True)
    episodes = [
        {
            "task_id": task,
            "task_type": GAMES[task],
            "rollout": k,
            "won": outcome == 1,
            "score": float(outcome),
        }
        for task, task_outcomes in outcomes.items()
        for k, outcome in enumerate(task_outcomes)
    ]
    record = {"identity": {**IDENTITY, "env": env, **identity}, "episodes": episodes}
    (folder / f"episodes_{env}.json").write_text(json.dumps(record))


def _run(
    root: Path,
    seed: int,
    after: dict[str, list[float]],
    start: dict[str, list[float]] | None,
    estimator: str = "gigpo",
    env: str = "alfworld",
    **identity,
) -> str:
    """A bench_learning output folder: one seed evaluated at step 4 (and the SFT start when given)."""
    work = root / "work" / env
    if start is not None:
        _board(work / "sft-board" / "heldout", start, env)
    _board(work / f"{estimator}-seed{seed}" / "eval-4" / "board" / "heldout", after, env, **identity)
    point = {"step": 4, "success": 0.0, "score": 0.0, "episodes": 6}
    args = LearningArgs(env=[env], estimators=[estimator], seeds=[seed], output=str(root))
    if start is None:
        args.sft_checkpoint = str(root.parent / "first" / "work" / env / "sft")
    result = {
        "args": asdict(args),
        "seconds": 1.0,
        "envs": {env: {"sft": {}, "sft_eval": {}, "random_eval": {}, "runs": {estimator: [{"seed": seed, "points": [point]}]}}},
    }  # fmt: skip
    (root / "result.json").write_text(json.dumps(result))
    return str(root)


START = {"pick-1": [False, False], "pick-2": [True, False], "look-1": [False, False]}


def test_gains_are_paired_game_by_game_and_pooled_over_seeds(tmp_path) -> None:
    # Seed 0: pick-1 0 -> 1 (+1), pick-2 .5 -> .5, look-1 0 -> .5 (+.5): mean gain 0.5.
    # Seed 1 (reusing seed 0's start, as --sft_checkpoint runs do): pick-2 .5 -> 0 (-.5), rest unchanged: -1/6.
    runs = [
        _run(tmp_path / "first", 0, {"pick-1": [True, True], "pick-2": [False, True], "look-1": [True, False]}, START),
        _run(tmp_path / "second", 1, {"pick-1": [False, False], "pick-2": [False, False], "look-1": [False, False]}, None),
    ]  # fmt: skip
    result = main(Args(runs=runs, output=str(tmp_path / "gains"), resamples=2000))
    s = result["gains"]["alfworld"]["gigpo"]["heldout"][4]
    assert s["seeds"] == [0, 1] and s["games"] == 3
    assert s["per_seed"] == [50.0, -16.7]
    assert s["gain"] == pytest.approx(16.7)  # (0.5 - 1/6) / 2
    # Per game, averaged over seeds: pick-1 +0.5, pick-2 -0.25, look-1 +0.25.
    assert (s["better"], s["worse"]) == (2, 1)
    assert s["types"] == {"look_at_obj_in_light": 25.0, "pick_and_place_simple": 12.5}
    assert -25.0 <= s["ci95"][0] < 16.7 < s["ci95"][1] <= 50.0  # within the games' own extremes
    table = (tmp_path / "gains" / "result.md").read_text()
    assert "| gigpo | 4 | 0, 1 | +16.7 ± 47.1 | +50.0, -16.7 |" in table
    assert "| Pick | Look |" in table
    assert table.startswith("# Held-out success gained over the SFT start")


def test_a_gain_every_game_shares_has_no_spread(tmp_path) -> None:
    after = {"pick-1": [True, False], "pick-2": [True, True], "look-1": [True, False]}  # +.5 each
    runs = [_run(tmp_path / "first", 0, after, START)]
    s = main(Args(runs=runs, output=str(tmp_path / "gains")))["gains"]["alfworld"]["gigpo"]["heldout"][4]
    assert s["gain"] == 50.0 and s["ci95"] == [50.0, 50.0] and s["seed_sd"] == 0.0


def test_checkpoints_evaluated_otherwise_than_the_start_are_refused(tmp_path) -> None:
    runs = [_run(tmp_path / "first", 0, START, START, temperature=0.0)]
    with pytest.raises(ValueError, match="evaluated differently: temperature"):
        main(Args(runs=runs, output=str(tmp_path / "gains")))


def test_a_run_without_its_start_episodes_names_where_they_come_from(tmp_path) -> None:
    runs = [_run(tmp_path / "second", 1, START, None)]
    with pytest.raises(FileNotFoundError, match="bench_learning run that evaluated the checkpoint first"):
        main(Args(runs=runs, output=str(tmp_path / "gains")))


def test_an_estimator_is_compared_with_a_baseline_game_by_game(tmp_path) -> None:
    # gigpo seeds 0 and 1 (gains as in the first test): per game +0.5, -0.25, +0.25.
    # grpo seed 0: pick-1 0 -> .5 (+.5), pick-2 .5 -> 0 (-.5), look-1 unchanged: per game +.5, -.5, 0.
    # gigpo - grpo per game: 0, +0.25, +0.25: +1/6 on average; 2 games better, none worse.
    runs = [
        _run(tmp_path / "first", 0, {"pick-1": [True, True], "pick-2": [False, True], "look-1": [True, False]}, START),
        _run(tmp_path / "second", 1, {"pick-1": [False, False], "pick-2": [False, False], "look-1": [False, False]}, None),
        _run(tmp_path / "third", 0, {"pick-1": [True, False], "pick-2": [False, False], "look-1": [False, False]}, None, "grpo"),
    ]  # fmt: skip
    result = main(Args(runs=runs, output=str(tmp_path / "gains"), resamples=2000, baseline="grpo"))
    c = result["versus_baseline"]["alfworld"]["gigpo"]["heldout"][4]
    assert c["difference"] == pytest.approx(16.7) and (c["better"], c["worse"]) == (2, 0)
    assert c["seeds"] == [0, 1] and c["baseline_seeds"] == [0]
    assert c["ci95"][0] <= 16.7 <= c["ci95"][1]
    assert "grpo" not in result["versus_baseline"]["alfworld"]  # the baseline is not compared with itself
    table = (tmp_path / "gains" / "result.md").read_text()
    assert "| gigpo | 4 | 0, 1 | 0 | +16.7 |" in table


def test_a_baseline_absent_from_the_runs_names_those_present(tmp_path) -> None:
    runs = [_run(tmp_path / "first", 0, START, START)]
    with pytest.raises(
        ValueError, match="--baseline 'grpo' is in none of the runs; their estimators are \\['gigpo'\\]"
    ):
        main(Args(runs=runs, output=str(tmp_path / "gains"), baseline="grpo"))


def test_webshop_gains_are_in_score_per_goal(tmp_path) -> None:
    # Score 0.5 -> 1.0 and 0.0 -> 0.25: +37.5 points; in success (goal-1 won after RL) it would be +50.
    start, after = {"goal-1": [0.5], "goal-2": [0.0]}, {"goal-1": [1.0], "goal-2": [0.25]}
    runs = [_run(tmp_path / "first", 0, after, start, env="webshop")]
    s = main(Args(runs=runs, output=str(tmp_path / "gains")))["gains"]["webshop"]["gigpo"]
    assert s["heldout"][4]["gain"] == 37.5 and s["heldout"][4]["better"] == 2
    table = (tmp_path / "gains" / "result.md").read_text()
    assert (
        table.startswith("# Held-out score gained")
        and "## webshop, held-out goals, score: gain in points" in table
    )
