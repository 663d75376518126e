"""Leaderboard and performance scripts, one job a file (``python -m benchmarks.<name>``)."""
