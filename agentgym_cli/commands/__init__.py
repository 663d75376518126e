"""Subcommands of the ``agentgym-rl`` command line, one module each."""
