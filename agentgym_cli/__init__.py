"""The ``agentgym-rl`` command line: the top layer, above the packages it drives.

It imports downward only (``agentgym_rl``, ``webshop_server``, ``trainers``, ``benchmarks``);
none of those imports it. Run it as ``agentgym-rl COMMAND`` or ``python -m agentgym_cli COMMAND``.
"""
