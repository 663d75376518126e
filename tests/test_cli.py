"""The ``agentgym-rl`` command line: every subcommand answers --help; play and data run for real."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentgym_cli.main import COMMANDS, main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_answers_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_top_level_help_lists_the_subcommands(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert all(command in out for command in COMMANDS)


def test_play_expert_and_random_on_generated_games(capsys):
    assert main(["play", "--data-dir", "generated", "--split", "valid_unseen", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "--- expert: WON" in out and "--- random:" in out


def test_play_expert_and_random_on_the_generated_shop(capsys):
    # The README's `agentgym-rl play --env webshop --agents expert` (it crashed: no walkthrough).
    assert main(["play", "--env", "webshop", "--agents", "expert", "random", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "--- expert: WON" in out and "score 1.000" in out and "--- random:" in out


def test_play_expert_and_random_on_the_bandit(capsys):
    assert main(["play", "--env", "bandit", "--episodes", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("--- expert: WON after 1 steps") == 2 and out.count("--- random:") == 2


def test_module_entry_point_and_bad_flag():
    run = subprocess.run(
        [sys.executable, "-m", "agentgym_cli", "play", "--episodes", "zero"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "invalid int value" in run.stderr


def test_data_info_prints_the_lookup(capsys):
    assert main(["data", "info"]) == 0
    assert "ALFWorld" in capsys.readouterr().out


def _long_flags(help_text: str) -> set[str]:
    import re

    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", help_text))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_flags_are_spelled_like_fields(command, capsys):
    """TRL's parser spells fields with underscores: every command offers that spelling."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    flags = _long_flags(capsys.readouterr().out)
    hyphenated = {f for f in flags if "-" in f[2:]}
    # Each hyphenated flag is an alias of the underscore spelling, never the only one.
    assert all(f.replace("-", "_").replace("__", "--", 1) in flags for f in hyphenated), sorted(hyphenated)


def test_a_data_dir_flag_copied_between_commands_works(capsys):
    # The same spelling in play as in train (`--data_dir`), with the hyphenated alias kept.
    assert (
        main(["play", "--data_dir", "generated", "--split", "valid_unseen", "--quiet", "--agents", "expert"])
        == 0
    )
    assert "--- expert: WON" in capsys.readouterr().out


def test_a_yaml_output_dir_is_not_overridden_by_the_default(tmp_path):
    from agentgym_rl.cli_args import with_default_output_dir

    config = tmp_path / "run.yaml"
    config.write_text("output_dir: runs/from-yaml\nmax_steps: 2\n")
    assert with_default_output_dir(["--config", str(config)], "runs/default") == ["--config", str(config)]
    bare = tmp_path / "bare.yaml"
    bare.write_text("max_steps: 2\n")
    assert with_default_output_dir([f"--config={bare}"], "runs/default")[-2:] == [
        "--output_dir",
        "runs/default",
    ]
    assert with_default_output_dir(["--output_dir", "x"], "runs/default") == ["--output_dir", "x"]


def test_data_generate_writes_small_rooms(tmp_path, capsys):
    import json

    from agentgym_rl.alfworld.generator import DEFAULT_COUNTS

    assert main(["data", "generate", "alfworld", "--output", str(tmp_path), "--room_size", "small"]) == 0
    assert str(tmp_path) in capsys.readouterr().out
    games = sorted(tmp_path.rglob("game.tw-pddl"))
    assert len(games) == sum(DEFAULT_COUNTS.values())
    for game in games:  # a small room holds 5-8 receptacles; the full rooms 10-17
        problem = json.loads(game.read_text())["pddl_problem"]
        objects = problem.split("(:objects", 1)[1].split(")", 1)[0]
        assert 5 <= objects.count(" - receptacle") <= 8, game
    with pytest.raises(SystemExit):
        main(["data", "generate", "alfworld", "--output", str(tmp_path / "x"), "--room_size", "tiny"])
    assert "invalid choice: 'tiny'" in capsys.readouterr().err
