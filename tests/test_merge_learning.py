"""Learning runs made apart: merged into one report, and the SFT start evaluated once for all of them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks import bench_learning
from benchmarks.bench_learning import Args as LearningArgs
from benchmarks.merge_learning import Args, main, merge_results

SFT = {"examples": 100, "train_loss": 0.25, "seconds": 12.0, "recipe": {"expert": "search"}}
SFT_EVAL = {"success": 0.05, "score": 0.05, "episodes": 8, "seen_success": 0.10}


def _run(seed: int, successes: list[float], seen: list[float]) -> dict:
    points = [
        {"step": step, "success": s, "score": s, "episodes": 8, "seen_success": v}
        for step, s, v in zip((8, 16), successes, seen, strict=True)
    ]
    diagnostics = {name: [0.5, 0.5] for name in bench_learning.DIAGNOSTICS}
    return {"seed": seed, "points": points, "diagnostics": diagnostics, "seconds": 100.0}


def _result(estimator: str, runs: list[dict], **changes) -> dict:
    args = LearningArgs(
        env=["alfworld"], estimators=[estimator], seeds=[r["seed"] for r in runs], rl_steps=16
    )
    record = {"args": {**asdict(args), **changes}, "seconds": 300.0}
    record["envs"] = {
        "alfworld": {
            "sft": dict(SFT),
            "sft_eval": dict(SFT_EVAL),
            "random_eval": {"success": 0.01, "score": 0.01, "episodes": 8},
            "runs": {estimator: runs},
        }
    }
    return record


def _write(folder: Path, result: dict) -> str:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result))
    return str(folder)


def test_runs_made_apart_merge_into_one_table_and_plot(tmp_path) -> None:
    runs = [
        _write(tmp_path / "grpo-s1", _result("grpo", [_run(1, [0.20, 0.30], [0.1, 0.1])])),
        _write(
            tmp_path / "grpo-s0", _result("grpo", [_run(0, [0.10, 0.10], [0.1, 0.3])], sft_checkpoint="x")
        ),
        _write(
            tmp_path / "gigpo-s0", _result("gigpo", [_run(0, [0.40, 0.50], [0.2, 0.2])], expert_episodes=7)
        ),
    ]
    result = main(Args(runs=runs, output=str(tmp_path / "merged")))
    alfworld = result["envs"]["alfworld"]
    assert [r["seed"] for r in alfworld["runs"]["grpo"]] == [0, 1]  # sorted by seed
    assert result["args"]["seeds"] == [0, 1] and result["args"]["estimators"] == ["grpo", "gigpo"]
    assert result["seconds"] == 900.0 and result["merged_from"] == runs
    report = (tmp_path / "merged" / "result.md").read_text()
    # grpo: step 8 mean(10, 20) = 15.0, sample std 7.1; step 16 mean(10, 30) = 20.0, std 14.1
    assert "| grpo | 5.0 | 15.0 ± 7.1 | 20.0 ± 14.1 |" in report
    assert "| gigpo (seeds 0) | 5.0 | 40.0 ± 0.0 | 50.0 ± 0.0 |" in report  # fewer seeds than grpo: named
    assert "- grpo: SFT 10.0; step 8: 10.0 ± 0.0; step 16: 20.0 ± 14.1" in report  # the seen-scene games
    assert "Merged from 3 runs (15.0 min of runs added up)." in report
    png = tmp_path / "merged" / "learning_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_made_before_runs_recorded_their_seed_take_it_from_args() -> None:
    older = _result("grpo", [_run(2, [0.1, 0.1], [0.1, 0.1]), _run(5, [0.3, 0.3], [0.1, 0.1])])
    for run in older["envs"]["alfworld"]["runs"]["grpo"]:
        del run["seed"]
    args, envs = merge_results([older], ["a"])
    assert [r["seed"] for r in envs["alfworld"]["runs"]["grpo"]] == [2, 5] and args.seeds == [2, 5]
    assert envs["alfworld"]["runs"]["grpo"][1]["points"][0]["success"] == 0.3


def test_runs_of_other_settings_are_not_merged() -> None:
    grpo = _result("grpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    other_lr = _result("gigpo", [_run(0, [0.1, 0.1], [0.1, 0.1])], learning_rate=1e-3)
    with pytest.raises(ValueError, match="other settings than a: learning_rate"):
        merge_results([grpo, other_lr], ["a", "b"])


def test_a_setting_added_after_a_run_counts_as_its_default_there() -> None:
    older = _result("grpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    del older["args"]["task_types"]
    newer = _result("gigpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    merge_results([older, newer], ["a", "b"])
    other_games = _result("gigpo", [_run(0, [0.1, 0.1], [0.1, 0.1])], task_types=["pick_and_place_simple"])
    with pytest.raises(ValueError, match="other settings than a: task_types"):
        merge_results([older, other_games], ["a", "b"])


def test_runs_from_another_checkpoint_are_not_merged() -> None:
    grpo = _result("grpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    other = _result("gigpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    other["envs"]["alfworld"]["sft"]["train_loss"] = 0.3
    with pytest.raises(ValueError, match="another SFT checkpoint on alfworld \\(train_loss differ\\)"):
        merge_results([grpo, other], ["a", "b"])
    other = _result("gigpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    other["envs"]["alfworld"]["sft_eval"]["success"] = 0.5
    with pytest.raises(ValueError, match="another evaluation of the SFT checkpoint"):
        merge_results([grpo, other], ["a", "b"])


def test_estimators_evaluated_at_other_steps_merge_but_one_estimators_seeds_must_agree(tmp_path) -> None:
    grpo = _result("grpo", [_run(0, [0.1, 0.3], [0.1, 0.1])], eval_every=8)
    every_16 = _result("gigpo", [_run(0, [0.2, 0.2], [0.1, 0.1])], eval_every=16)
    del every_16["envs"]["alfworld"]["runs"]["gigpo"][0]["points"][0]  # evaluated at step 16 only
    folders = [_write(tmp_path / "a", grpo), _write(tmp_path / "b", every_16)]
    main(Args(runs=folders, output=str(tmp_path / "merged")))
    report = (tmp_path / "merged" / "result.md").read_text()
    assert (
        "| grpo | 5.0 | 10.0 ± 0.0 | 30.0 ± 0.0 |" in report and "| gigpo | 5.0 | — | 20.0 ± 0.0 |" in report
    )
    other_seed = _result("gigpo", [_run(1, [0.2, 0.2], [0.1, 0.1])], eval_every=8)  # gigpo at steps 8 and 16
    with pytest.raises(ValueError, match="alfworld gigpo: its seeds were evaluated at different steps"):
        merge_results([grpo, every_16, other_seed], ["a", "b", "c"])


def test_a_seed_given_twice_is_an_error() -> None:
    first = _result("grpo", [_run(0, [0.1, 0.1], [0.1, 0.1])])
    again = _result("grpo", [_run(0, [0.2, 0.2], [0.1, 0.1])])
    with pytest.raises(ValueError, match="alfworld grpo seed 0 is in more than one"):
        merge_results([first, again], ["a", "b"])


def test_a_missing_run_names_the_command_that_makes_it(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="benchmarks.bench_learning --output"):
        main(Args(runs=[str(tmp_path / "none")], output=str(tmp_path / "merged")))
    with pytest.raises(ValueError, match="nothing to merge"):
        merge_results([], [])


def test_the_sft_start_is_evaluated_once_per_checkpoint(tmp_path, monkeypatch) -> None:
    # The evaluation itself is the leaderboard's (tested there and by the smoke run); this counts them.
    calls: list[str] = []

    def evaluate(args, env, settings, checkpoint, out):
        calls.append(str(checkpoint))
        return {"success": 0.25 if checkpoint != "random" else 0.01, "score": 0.0, "episodes": 4}

    monkeypatch.setattr(bench_learning, "evaluate", evaluate)
    sft = tmp_path / "sft"
    sft.mkdir()
    args = LearningArgs(eval_group_size=2, eval_temperature=1.0, real_episodes=0)  # real games: at "f" below
    settings = bench_learning.env_settings(args, "alfworld", tmp_path / "games")

    def start(work: str, summary: dict = SFT, **changes):
        return bench_learning.start_evaluations(
            LearningArgs(**{**asdict(args), **changes}), "alfworld", settings, sft, summary, tmp_path / work
        )

    first = start("a")
    assert start("b") == first and first[1]["success"] == 0.25
    assert calls == ["random", str(sft)]  # the second run reused both
    start("c", eval_group_size=4)  # other evaluation settings: evaluated anew
    assert len(calls) == 4
    start("d", summary={**SFT, "seconds": 13.0})  # retrained in place
    assert len(calls) == 6
    # The real games' folder (an extraction cache, named anew on another machine) counts only
    # where real games are played.
    from agentgym_rl import data

    monkeypatch.setattr(data, "find_alfworld_root", lambda: tmp_path / "elsewhere")
    start("e")
    assert len(calls) == 6
    start("f", real_episodes=2)
    monkeypatch.setattr(data, "find_alfworld_root", lambda: tmp_path / "moved")
    start("g", real_episodes=2)
    assert len(calls) == 10
