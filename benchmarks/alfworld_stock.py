"""The official ALFWorld text path, played in a fresh process, as the reference for our engine.

``AlfredTWEnv`` plays games through ``textworld.start`` / ``textworld.gym`` with the
``AlfredDemangler`` wrapper; this module does exactly that, with no cache of ours
installed (it runs in a spawned interpreter that never imports our engine).
"""

from __future__ import annotations

from typing import Any


def stock_trace(game_file: str, commands: list[str]) -> list[dict[str, Any]]:
    """Feedback, admissible commands and win flag after reset and after each command."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

    infos = textworld.EnvInfos(won=True, admissible_commands=True)
    env = textworld.start(game_file, infos, wrappers=[AlfredDemangler(shuffle=False)])
    state = env.reset()
    trace = [
        {"feedback": state.feedback, "admissible": list(state.admissible_commands), "won": bool(state.won)}
    ]
    for command in commands:
        state, _, _ = env.step(command)
        trace.append(
            {
                "feedback": state.feedback,
                "admissible": list(state.admissible_commands),
                "won": bool(state.won),
            }
        )
    env.close()
    return trace


def stock_traces(jobs: list[tuple[str, list[str]]]) -> list[list[dict[str, Any]]]:
    """:func:`stock_trace` for several games."""
    return [stock_trace(game_file, commands) for game_file, commands in jobs]
