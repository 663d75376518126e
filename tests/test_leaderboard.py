"""The leaderboard harness: known results of scripted agents, tables, resume, a tiny LM.

Runs are kept small (a few tasks, one env worker) so that the file takes well under
a minute and a half on two cores; the real-data test skips without ``../shared/data``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.leaderboard import LeaderboardConfig, run_leaderboard
from benchmarks.leaderboard.hf_policy import resolve_checkpoint
from benchmarks.leaderboard.results import ResumeMismatch
from benchmarks.leaderboard.tables import alfworld_table, summarize, webshop_table


def _config(tmp_path: Path, **overrides) -> LeaderboardConfig:
    # One worker and no bar: tests share two cores; batch_size 4 = 4 tasks per reset.
    settings = dict(
        env="alfworld", data_dir="generated", workers=1, batch_size=4, progress=False, output=str(tmp_path)
    )
    settings.update(overrides)
    return LeaderboardConfig(**settings)


# ---------------------------------------------------------------------- known results
def test_expert_wins_every_generated_alfworld_game(tmp_path):
    result = run_leaderboard(_config(tmp_path, agent="expert", episodes=5))
    summary = result["summaries"]["alfworld"]
    assert (summary["tasks"], summary["mean_success"], summary["mean_score"]) == (5, 1.0, 1.0)
    episodes = json.loads((tmp_path / "episodes_alfworld.json").read_text())["episodes"]
    for episode in episodes:
        assert episode["won"] and not episode["truncated"]
        assert (
            episode["steps"] == len(episode["actions"]) and len(episode["state_keys"]) == episode["steps"] + 1
        )
        assert episode["task_type"] in episode["task_id"]
    assert "| this run | expert | mean@1 |" in (tmp_path / "results.md").read_text()
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["config"]["agent"] == "expert" and config["versions"]["gymnasium"]


def test_expert_and_random_on_webshop(tmp_path):
    expert = run_leaderboard(
        _config(tmp_path / "expert", env="webshop", data_dir=None, agent="expert", episodes=4)
    )
    summary = expert["summaries"]["webshop"]
    assert (summary["mean_score"], summary["mean_success"]) == (1.0, 1.0)
    # Random searches for the instruction, then clicks at random: it buys the wrong things, if any.
    random = run_leaderboard(
        _config(tmp_path / "random", env="webshop", data_dir=None, agent="random", episodes=3)
    )
    assert random["summaries"]["webshop"]["mean_score"] < 0.5
    assert random["summaries"]["webshop"]["episodes"] == 3


def test_expert_on_real_valid_unseen(tmp_path, alfworld_root):
    result = run_leaderboard(_config(tmp_path, data_dir=str(alfworld_root), agent="expert", episodes=3))
    summary = result["summaries"]["alfworld"]
    assert (summary["tasks"], summary["mean_success"]) == (3, 1.0)


# ---------------------------------------------------------------------- resume
class _Stop(Exception):
    """Raised by a callback to interrupt a run, as Ctrl-C would."""


def test_resume_skips_finished_tasks_and_group_measures(tmp_path):
    # batch_size 2 with G = 2: one task per reset, so the run can stop after each task.
    config = _config(tmp_path, agent="random", episodes=3, group_size=2, batch_size=2, max_steps=4)
    played: list[str] = []

    def stop_after_two(group):
        played.append(group[0]["task_id"])
        if len(played) == 2:
            raise _Stop

    with pytest.raises(_Stop):
        run_leaderboard(config, on_group=stop_after_two)
    stored = json.loads((tmp_path / "episodes_alfworld.json").read_text())["episodes"]
    assert len(stored) == 4 and [e["rollout"] for e in stored] == [0, 1, 0, 1]

    replayed: list[str] = []
    result = run_leaderboard(config, on_group=lambda group: replayed.append(group[0]["task_id"]))
    assert len(replayed) == 1 and replayed[0] not in played  # only the unfinished task ran
    episodes = json.loads((tmp_path / "episodes_alfworld.json").read_text())["episodes"]
    assert episodes[:4] == stored and len(episodes) == 6
    summary = result["summaries"]["alfworld"]
    assert (summary["tasks"], summary["episodes"], summary["group_size"]) == (3, 6, 2)
    assert all(e["steps"] == 4 and e["truncated"] for e in episodes if not e["won"])
    assert "| this run | random | pass@2 |" in result["report"]
    assert len(json.loads((tmp_path / "config.json").read_text())["invocations"]) == 2

    with pytest.raises(ResumeMismatch, match="--resume false"):
        run_leaderboard(_config(tmp_path, agent="expert", episodes=3, group_size=2))


# ---------------------------------------------------------------------- tables
def _episode(task_id, task_type, won, score=None):
    return {
        "task_id": task_id,
        "task_type": task_type,
        "won": won,
        "score": float(won) if score is None else score,
    }


def test_alfworld_table_rows():
    # Two Pick tasks (G = 2): a wins once of twice, b never; one Heat task won twice.
    episodes = [
        _episode("a", "pick_and_place_simple", True),
        _episode("a", "pick_and_place_simple", False),
        _episode("b", "pick_and_place_simple", False),
        _episode("b", "pick_and_place_simple", False),
        _episode("c", "pick_heat_then_place_in_recep", True),
        _episode("c", "pick_heat_then_place_in_recep", True),
    ]
    table = alfworld_table(summarize(episodes, group_size=2), "expert", "valid_unseen")
    lines = table.splitlines()
    assert lines[0] == "| Source | Model | Method | Pick | Look | Clean | Heat | Cool | Pick2 | All |"
    assert lines[2] == "| paper | Qwen2.5-1.5B-Instruct | GRPO | — | — | — | — | — | — | 72.8 |"
    # mean@2: Pick 1/4, Heat 2/2, all 3/6; pass@2: Pick 1/2, Heat 1/1, all 2/3.
    assert "| this run | expert | mean@2 | 25.0 | — | — | 100.0 | — | — | 50.0 |" in lines
    assert "| this run | expert | pass@2 | 50.0 | — | — | 100.0 | — | — | 66.7 |" in lines
    assert "3 games of ALFWorld `valid_unseen` (Pick 2, Look 0, Clean 0, Heat 1, Cool 0, Pick2 0)" in table


def test_webshop_table_rows():
    episodes = [_episode(0, "beauty", True), _episode(1, "fashion", False, score=0.5)]
    lines = webshop_table(summarize(episodes, group_size=1), "random", "test").splitlines()
    assert lines[0] == "| Source | Model | Method | Score | Succ. |"
    assert "| paper | Qwen2.5-1.5B-Instruct | GiGPO | 83.1 | 65.0 |" in lines
    assert "| paper | Qwen2.5-1.5B-Instruct | SCPO (ProGPO-R paper v1) | — | 74.8 ± 2.0 |" in lines
    assert "| this run | random | mean@1 | 75.0 | 50.0 |" in lines
    assert not any("pass@" in line for line in lines)


# ---------------------------------------------------------------------- language models
def test_hf_agent_on_tiny_qwen2(tmp_path):
    pytest.importorskip("transformers")
    from trainers.tiny_models import tiny_qwen2_path

    model = tiny_qwen2_path()
    # 2 steps of 8 new tokens: a random model only has to run the loop, not to win.
    config = _config(
        tmp_path, agent=f"hf:{model}", episodes=2, max_steps=2, max_new_tokens=8, temperature=1.0
    )
    result = run_leaderboard(config)
    episodes = json.loads((tmp_path / "episodes_alfworld.json").read_text())["episodes"]
    assert len(episodes) == 2 and all(e["steps"] == 2 and len(e["actions"]) == 2 for e in episodes)
    assert all(e["format_errors"] <= 2 for e in episodes)
    assert result["summaries"]["alfworld"]["mean_success"] <= 1.0
    assert f"| this run | hf-{model.name} | mean@1 |" in result["report"]


def test_resolve_checkpoint_picks_latest_model_folder(tmp_path):
    for step, with_weights in ((5, True), (10, True), (20, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        if with_weights:
            (folder / "model.safetensors").write_bytes(b"")
    assert resolve_checkpoint(tmp_path) == tmp_path / "checkpoint-10"  # checkpoint-20 has no weights
    assert resolve_checkpoint(tmp_path / "checkpoint-5") == tmp_path / "checkpoint-5"
    with pytest.raises(FileNotFoundError, match="checkpoint-N"):
        resolve_checkpoint(tmp_path / "checkpoint-20")


def test_prompt_settings_come_from_the_training_run(tmp_path):
    from benchmarks.leaderboard.hf_policy import prompt_config_for

    # A trainer output dir: prompt_config.json beside checkpoint-N; flags override it.
    (tmp_path / "prompt_config.json").write_text(
        '{"history_window": 0, "action_format": "plain", "env_kind": "webshop"}'
    )
    config = prompt_config_for(str(tmp_path / "checkpoint-3"), "webshop", {"system_prompt": "Be brief."})
    assert (config.env_kind, config.history_window, config.action_format) == ("webshop", 0, "plain")
    assert config.system_prompt == "Be brief."
    # A model trained on another env's prompts is refused, not silently re-prompted.
    with pytest.raises(ValueError, match="trained on webshop prompts"):
        prompt_config_for(str(tmp_path / "checkpoint-3"), "alfworld")
    assert prompt_config_for(str(tmp_path / "elsewhere" / "model"), "alfworld").history_window == 2


# ---------------------------------------------------------------------- command line
def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="hf:PATH_OR_ID"):
        LeaderboardConfig(agent="gpt4")
    with pytest.raises(ValueError, match="run each env on its own"):
        LeaderboardConfig(env="all", split="test")
    with pytest.raises(ValueError, match="'all' or a number"):
        LeaderboardConfig(episodes="many")


@pytest.mark.parametrize("command", ["leaderboard", "bench"])
def test_help(command, capsys):
    from agentgym_cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "--output" in capsys.readouterr().out


@pytest.mark.parametrize("module", ["config", "policies", "results", "runner", "tables"])
def test_harness_doctests(module):
    # benchmarks/ is not in pytest's doctest paths: run the harness's examples here.
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"benchmarks.leaderboard.{module}"))
    assert result.attempted > 0 and result.failed == 0
