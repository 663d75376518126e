"""The leaderboard harness behind ``agentgym-rl leaderboard``: evaluate an agent, print the papers' tables.

Modules, one job each: :mod:`~benchmarks.leaderboard.config` (the arguments),
:mod:`~benchmarks.leaderboard.policies` (batched random / expert agents),
:mod:`~benchmarks.leaderboard.hf_policy` (a Hugging Face causal LM),
:mod:`~benchmarks.leaderboard.runner` (episodes in ``GroupVectorEnv``),
:mod:`~benchmarks.leaderboard.results` (resumable episode files, run metadata),
:mod:`~benchmarks.leaderboard.tables` and :mod:`~benchmarks.leaderboard.references`
(measures and Markdown tables), :mod:`~benchmarks.leaderboard.harness` (a whole run).
"""

from benchmarks.leaderboard.config import LeaderboardConfig
from benchmarks.leaderboard.harness import render_report, run_leaderboard

__all__ = ["LeaderboardConfig", "render_report", "run_leaderboard"]
