"""Results on disk: one JSON of episodes per env, written atomically after every task, and run metadata.

An episode record holds what is needed to audit and re-score a run: ``task_id``,
``task_type``, ``rollout``, ``won``, ``score``, ``steps``, ``return``, ``truncated``,
``actions``, ``state_keys`` (one per observation, the first observation's included),
``inadmissible`` (steps the env refused, ``action_valid`` False) and ``format_errors``
(model replies that broke the reply format; 0 for scripted agents): the vocabulary of
:mod:`agentgym_rl.episodes`. Files written before that call ``inadmissible``
``invalid_actions``; they are read under the new name.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "episodes_alfworld.json"
>>> store = EpisodeStore(path, {"env": "alfworld", "group_size": 1})
>>> store.add([{"task_id": "a", "rollout": 0, "won": True}])
>>> EpisodeStore(path, {"env": "alfworld", "group_size": 1}).finished_tasks()
{'a'}
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "EpisodeStore",
    "ResumeMismatch",
    "atomic_write_text",
    "describe_machine",
    "git_commit",
    "package_versions",
]

#: Packages whose versions a run records (missing ones are recorded as None).
PACKAGES = (
    "agentgym-rl", "gymnasium", "numpy", "textworld", "alfworld", "torch", "transformers",
    "trl", "accelerate", "tokenizers", "bm25s", "flask",
)  # fmt: skip


class ResumeMismatch(ValueError):
    """The results file on disk measures something else than the run asked for."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


#: Episode keys renamed since results were first written: old name -> new name.
_RENAMED = {"invalid_actions": "inadmissible"}


def _upgrade(episode: dict[str, Any]) -> dict[str, Any]:
    """An episode record with today's key names (an older file's are renamed, values kept).

    >>> _upgrade({"task_id": "a", "invalid_actions": 2})
    {'task_id': 'a', 'inadmissible': 2}
    """
    return {_RENAMED.get(key, key): value for key, value in episode.items()}


class EpisodeStore:
    """The episodes of one env in one run, kept in a JSON file that a rerun resumes from.

    Args:
        path: The JSON file (``episodes_<env>.json``).
        identity: What the episodes measure (env, split, agent, group size, seed, ...);
            an existing file with another identity is refused.
        resume: Keep the file's episodes; ``False`` starts over (the file is replaced on
            the first save).
    """

    def __init__(self, path: Path, identity: dict[str, Any], resume: bool = True) -> None:
        self.path = Path(path)
        self.identity = dict(identity)
        self.episodes: list[dict[str, Any]] = []
        if resume and self.path.exists():
            stored = json.loads(self.path.read_text())
            if stored.get("identity") != self.identity:
                changed = {
                    key: (stored.get("identity", {}).get(key), value)
                    for key, value in self.identity.items()
                    if stored.get("identity", {}).get(key) != value
                }
                raise ResumeMismatch(
                    f"{self.path} holds another run ((stored, asked) per setting: {changed}); "
                    "pass another --output, or --resume false to start over"
                )
            self.episodes = [_upgrade(episode) for episode in stored["episodes"]]

    def finished_tasks(self) -> set[Any]:
        """Tasks whose every rollout is stored."""
        counts = Counter(json.dumps(e["task_id"]) for e in self.episodes)
        group_size = int(self.identity.get("group_size", 1))
        return {json.loads(task) for task, count in counts.items() if count >= group_size}

    def add(self, episodes: list[dict[str, Any]]) -> None:
        """Append one finished task's episodes and save."""
        self.episodes.extend(episodes)
        self.save()

    def save(self) -> None:
        """Write the file atomically."""
        payload = {"identity": self.identity, "episodes": self.episodes}
        atomic_write_text(self.path, json.dumps(payload, indent=1))


# ---------------------------------------------------------------------- run metadata
def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a result depends on (None: not installed)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(cwd: Path | None = None) -> str | None:
    """The checkout's commit, with ``+dirty`` when it has local changes (None outside git)."""
    where = cwd or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_machine(with_gpu: bool = True) -> dict[str, Any]:
    """The machine a result was measured on: OS, CPU, cores, memory and GPUs (via torch if installed)."""
    description: dict[str, Any] = {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": sys.version.split()[0],
        "gpus": [],
    }
    if with_gpu:
        try:
            import torch

            if torch.cuda.is_available():
                description["gpus"] = [
                    torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
                ]
        except ImportError:
            pass
    return description


def now_utc() -> str:
    """The time as ISO 8601 UTC, seconds resolution."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
