"""One leaderboard run end to end: results folder, episodes per env, tables and summary.

The folder holds ``config.json`` (the exact settings, package versions, machine, commit
and every invocation), ``episodes_<env>.json`` (every episode, written as tasks
finish), ``summary.json`` (the measures) and ``results.md`` (the tables).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.leaderboard.config import LeaderboardConfig, agent_slug
from benchmarks.leaderboard.policies import BatchPolicy
from benchmarks.leaderboard.results import (
    EpisodeStore,
    atomic_write_text,
    describe_machine,
    git_commit,
    now_utc,
    package_versions,
)
from benchmarks.leaderboard.runner import GroupCallback, env_kwargs, play_env
from benchmarks.leaderboard.tables import alfworld_table, summarize, webshop_table

__all__ = ["render_report", "run_leaderboard"]


def _write_config(folder: Path, config: LeaderboardConfig, argv: list[str] | None) -> None:
    """Record this invocation; earlier ones (a resumed run's) are kept."""
    path = folder / "config.json"
    invocations: list[dict[str, Any]] = []
    if config.resume and path.exists():
        invocations = json.loads(path.read_text()).get("invocations", [])
    invocations.append({"started": now_utc(), "argv": list(sys.argv if argv is None else argv)})
    payload = {
        "config": asdict(config),
        "env_kwargs": {env: env_kwargs(config, env) for env in config.envs},
        "versions": package_versions(),
        "machine": describe_machine(with_gpu=config.agent.startswith(("hf:", "checkpoint:"))),
        "commit": git_commit(),
        "invocations": invocations,
    }
    atomic_write_text(path, json.dumps(payload, indent=1))


def render_report(config: LeaderboardConfig, summaries: dict[str, dict[str, Any]]) -> str:
    """The run's Markdown: one table per env, with the papers' rows."""
    agent = agent_slug(config.agent)
    settings = f"G = {config.group_size}, seed {config.seed}, data: {config.data_dir or 'default'}"
    if ":" in config.agent:
        settings += f", temperature {config.temperature}, max_new_tokens {config.max_new_tokens}"
    parts = [f"# Leaderboard: {config.agent}", "", f"Settings: {settings}.", ""]
    for env, summary in summaries.items():
        split = config.split_for(env)
        table = alfworld_table if env == "alfworld" else webshop_table
        parts += [
            f"## {'ALFWorld' if env == 'alfworld' else 'WebShop'} ({split})",
            "",
            table(summary, agent, split),
            "",
        ]
    return "\n".join(parts)


def run_leaderboard(
    config: LeaderboardConfig,
    policy: BatchPolicy | None = None,
    on_group: GroupCallback | None = None,
    argv: list[str] | None = None,
) -> dict[str, Any]:
    """Evaluate ``config.agent`` on ``config.envs``; resumes from ``config.output_dir()``.

    Args:
        config: The run's settings.
        policy: An agent object to use instead of the one ``config.agent`` names.
        on_group: Called with each finished task's records, after they are saved.
        argv: The command line recorded in ``config.json`` (default ``sys.argv``).

    Returns:
        ``{"folder", "summaries", "report"}``: the results folder, the measures per env
        and the Markdown report (also written to ``results.md``).
    """
    folder = config.output_dir()
    folder.mkdir(parents=True, exist_ok=True)
    # Open every store first: a folder of another run is refused before anything is written.
    stores = {
        env: EpisodeStore(folder / f"episodes_{env}.json", config.identity(env), resume=config.resume)
        for env in config.envs
    }
    _write_config(folder, config, argv)
    summaries: dict[str, dict[str, Any]] = {}
    for env, store in stores.items():
        episodes = play_env(config, env, store, policy=policy, on_group=on_group)
        summaries[env] = summarize(episodes, config.group_size)
    report = render_report(config, summaries)
    atomic_write_text(folder / "summary.json", json.dumps(summaries, indent=1))
    atomic_write_text(folder / "results.md", report + "\n")
    return {"folder": folder, "summaries": summaries, "report": report}
