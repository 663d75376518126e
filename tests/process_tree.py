"""The live process tree below this test process, read from ``/proc`` (no extra tool needed)."""

from __future__ import annotations

import os


def descendants() -> set[int]:
    """This process and its live (non-zombie) descendants: Ray's daemons and actors, gunicorn workers."""
    parent_of: dict[int, int] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parent_of[int(pid)] = int(fields[1])
    found, frontier = {os.getpid()}, {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parent_of.items() if parent in frontier} - found
        found |= frontier
    return found
