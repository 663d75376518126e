"""Where the benchmark data lives: a flag / env var / ``../shared/data`` / the official download.

ALFWorld games are looked up, first match wins, in

1. the ``data_dir`` argument (env kwarg or ``--data_dir`` flag);
2. the ``ALFWORLD_DATA`` environment variable (the official alfworld convention);
3. ``../shared/data/alfworld`` beside the working directory or beside this checkout;
4. alfworld's own download folder, ``~/.cache/alfworld``, when it holds the games.

Each location may hold ``json_2.1.1/<split>/...`` (or be that folder itself) or the
``json_2.1.1.tar.xz`` archive, which is extracted once into
``$AGENTGYM_RL_CACHE/alfworld/`` (default ``~/.cache/agentgym-rl``) under a file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "ALFWORLD_SPLITS",
    "DataNotFoundError",
    "cache_root",
    "download_alfworld",
    "find_alfworld_root",
    "shared_data_dir",
]

ALFWORLD_SPLITS = ("train", "valid_seen", "valid_unseen", "valid_train")
ALFWORLD_ARCHIVE = "json_2.1.1.tar.xz"
ALFWORLD_FOLDER = "json_2.1.1"
#: The official release of the TextWorld game files (alfworld's ``alfworld-download``).
ALFWORLD_TW_PDDL_URL = "https://github.com/alfworld/alfworld/releases/download/0.4.0/json_2.1.2_tw-pddl.zip"

_PACKAGE_CHECKOUT = Path(__file__).resolve().parent.parent
#: Where alfworld's own ``alfworld-download`` puts the data.
ALFWORLD_DEFAULT_DIR = Path.home() / ".cache" / "alfworld"


class DataNotFoundError(FileNotFoundError):
    """The benchmark data is not where it was looked for; the message says how to get it."""


def cache_root() -> Path:
    """The folder for extracted archives and translation caches."""
    return Path(os.environ.get("AGENTGYM_RL_CACHE", Path.home() / ".cache" / "agentgym-rl"))


def shared_data_dir() -> Path | None:
    """``../shared/data`` beside the working directory or this checkout, if it exists."""
    for base in (Path.cwd(), _PACKAGE_CHECKOUT):
        candidate = (base / ".." / "shared" / "data").resolve()
        if candidate.is_dir():
            return candidate
    return None


def _has_splits(folder: Path) -> bool:
    return any((folder / split).is_dir() for split in ALFWORLD_SPLITS)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(root: Path, is_ready: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """Make the folder ``root`` once, safe against concurrent processes and crashes.

    Returns at once when ``is_ready(root)``; otherwise, under a file lock beside ``root``,
    ``build`` fills a fresh scratch folder that is then renamed to ``root``, so a crash
    never leaves a partial folder and a second process reuses the first one's. A ``root``
    that exists but is not ready (left by older code or by hand) is replaced.
    """
    if is_ready(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(root.parent / f"{root.name}.lock"):
        if is_ready(root):
            return root
        scratch = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}-"))
        try:
            build(scratch)
            if root.exists():
                shutil.rmtree(root)
            os.replace(scratch, root)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return root


def _archive_id(archive: Path) -> str:
    stat = archive.stat()
    return hashlib.blake2b(
        f"{archive.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode(), digest_size=8
    ).hexdigest()


def extract_archive(archive: Path) -> Path:
    """Extract an ALFWorld ``.tar.xz`` once into the cache; return the ``json_2.1.1`` folder.

    Made with :func:`build_once`: concurrent processes wait on a file lock, and a crash never
    leaves a half-extracted tree.
    """

    def extract(scratch: Path) -> None:
        unpacked = scratch / ".archive"
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(unpacked, filter="data")
        # Archives hold json_2.1.1/ or the splits themselves.
        found = next((p for p in (unpacked / ALFWORLD_FOLDER, unpacked) if _has_splits(p)), None)
        if found is None:
            raise DataNotFoundError(f"{archive} holds no ALFWorld splits {ALFWORLD_SPLITS}")
        for child in found.iterdir():
            os.replace(child, scratch / child.name)
        shutil.rmtree(unpacked)

    return build_once(
        cache_root() / "alfworld" / _archive_id(archive) / ALFWORLD_FOLDER, Path.is_dir, extract
    )


def _resolve_location(location: Path) -> Path | None:
    """The ``json_2.1.1`` folder held by ``location``, or ``None``."""
    if location.is_file() and location.name.endswith((".tar.xz", ".tar.gz", ".tar")):
        return extract_archive(location)
    if not location.is_dir():
        return None
    if _has_splits(location):
        return location
    if _has_splits(location / ALFWORLD_FOLDER):
        return location / ALFWORLD_FOLDER
    if (location / ALFWORLD_ARCHIVE).is_file():
        return extract_archive(location / ALFWORLD_ARCHIVE)
    return None


_HOW_TO_GET_DATA = (
    "Get the games with `agentgym-rl data download alfworld` (official release, needs internet), "
    "or point to a folder holding json_2.1.1/ or json_2.1.1.tar.xz with the env kwarg data_dir=..., "
    "the --data_dir flag or the ALFWORLD_DATA environment variable."
)


def find_alfworld_root(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The ``json_2.1.1`` folder to play, or ``None`` when no data is configured anywhere.

    Raises:
        DataNotFoundError: ``data_dir`` or ``ALFWORLD_DATA`` is set but holds no games.
    """
    env_value = os.environ.get("ALFWORLD_DATA")
    if env_value and Path(env_value).expanduser() == ALFWORLD_DEFAULT_DIR:
        # `import alfworld.info` sets ALFWORLD_DATA to its default folder as a side effect; that
        # folder is looked at below anyway, and an empty one is not a user's choice.
        env_value = None
    for origin, value in (("data_dir", data_dir), ("ALFWORLD_DATA", env_value)):
        if value:
            root = _resolve_location(Path(value).expanduser())
            if root is None:
                raise DataNotFoundError(
                    f"{origin}={str(value)!r} holds no ALFWorld games (expected json_2.1.1/<split>/ or "
                    f"{ALFWORLD_ARCHIVE} inside it). {_HOW_TO_GET_DATA}"
                )
            return root
    shared = shared_data_dir()
    for location in ([shared / "alfworld"] if shared else []) + [ALFWORLD_DEFAULT_DIR]:
        root = _resolve_location(location)
        if root is not None:
            return root
    return None


def download_alfworld(data_dir: str | os.PathLike, force: bool = False) -> Path:
    """Download the official ALFWorld TextWorld games into ``data_dir`` (needs internet).

    Returns the ``json_2.1.1`` folder. Cannot run on machines without internet access.
    """
    from tqdm.auto import tqdm

    data_dir = Path(data_dir).expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    if not force and _has_splits(data_dir / ALFWORLD_FOLDER):
        return data_dir / ALFWORLD_FOLDER
    zip_path = data_dir / Path(ALFWORLD_TW_PDDL_URL).name
    with urllib.request.urlopen(ALFWORLD_TW_PDDL_URL, timeout=60) as response:  # noqa: S310 - fixed https URL
        total = int(response.headers.get("Content-Length", 0)) or None
        with (
            open(zip_path, "wb") as out,
            tqdm(total=total, unit="B", unit_scale=True, desc="alfworld") as bar,
        ):
            while chunk := response.read(1 << 20):
                out.write(chunk)
                bar.update(len(chunk))
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(data_dir)
    zip_path.unlink()
    root = _resolve_location(data_dir)
    if root is None:
        raise DataNotFoundError(f"the download into {data_dir} holds no ALFWorld splits")
    return root
