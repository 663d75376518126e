"""The ``agentgym-rl`` command line: every subcommand answers --help; play and data run for real."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentgym_rl.cli import COMMANDS, main


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


def test_module_entry_point_and_bad_flag():
    run = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "play", "--episodes", "zero"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "invalid int value" in run.stderr


def test_data_info_prints_the_lookup(capsys):
    assert main(["data", "info"]) == 0
    assert "ALFWorld" in capsys.readouterr().out
