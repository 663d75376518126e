"""The official ALFWorld text path, played in a fresh process, as the reference for our engine.

``AlfredTWEnv`` plays games through ``textworld.start`` / ``textworld.gym`` with the
``AlfredDemangler`` wrapper; this module does exactly that, with no cache of ours
installed: call it in a spawned interpreter that never imports our engine (this
module imports nothing of ``agentgym_rl``).
"""

from __future__ import annotations

from typing import Any


def trace_entry(state: Any, reward: float = 0.0) -> dict[str, Any]:
    """One step of a trace: feedback, admissible commands, reward and win flag of a game state
    (stock TextWorld's or our engine's: both have these fields)."""
    return {
        "feedback": state.feedback,
        "admissible": list(state.admissible_commands),
        "reward": float(reward),
        "won": bool(state.won),
    }


def stock_trace(game_file: str, commands: list[str], reward: bool = False) -> list[dict[str, Any]]:
    """Feedback, admissible commands and win flag after reset and after each command.

    With ``reward``, each entry also holds the step's reward (0.0 after reset).
    """
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

    infos = textworld.EnvInfos(won=True, admissible_commands=True)
    env = textworld.start(game_file, infos, wrappers=[AlfredDemangler(shuffle=False)])
    trace = [trace_entry(env.reset())]
    for command in commands:
        state, step_reward, _ = env.step(command)
        trace.append(trace_entry(state, step_reward))
    env.close()
    if not reward:
        for entry in trace:
            del entry["reward"]
    return trace


def stock_traces(jobs: list[tuple[str, list[str]]], reward: bool = False) -> list[list[dict[str, Any]]]:
    """:func:`stock_trace` for several games."""
    return [stock_trace(game_file, commands, reward) for game_file, commands in jobs]
