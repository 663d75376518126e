"""Folders made once in the cache: ``build_once`` and the ALFWorld archive extraction built on it."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from agentgym_rl.data import DataNotFoundError, build_once, extract_archive


def _archive(path: Path, members: dict[str, str]) -> Path:
    """A ``.tar.xz`` holding ``members`` (relative path -> text)."""
    source = path.parent / f"{path.name}-src"
    for name, text in members.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    with tarfile.open(path, "w:xz") as tar:
        for child in sorted(source.iterdir()):
            tar.add(child, arcname=child.name)
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTGYM_RL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("prefix", ["json_2.1.1/", ""], ids=["in-json_2.1.1", "splits-at-top"])
def test_archive_is_extracted_once_to_its_splits(prefix, tmp_path, cache, monkeypatch) -> None:
    game = "valid_seen/pick_and_place_simple-Mug-None-Desk-301/trial_T1/game.tw-pddl"
    archive = _archive(tmp_path / "games.tar.xz", {prefix + game: "{}", "README": "not a split"})
    root = extract_archive(archive)
    assert root.name == "json_2.1.1" and root.is_relative_to(cache)
    assert (root / game).read_text() == "{}"
    # The folder is json_2.1.1/ when the archive has one (its other files stay out), else the whole archive.
    assert sorted(p.name for p in root.iterdir()) == (["valid_seen"] if prefix else ["README", "valid_seen"])
    assert not list(root.parent.glob(".json_2.1.1-*"))  # no scratch folder left

    def no_second_extraction(*args, **kwargs):
        raise AssertionError("extracted twice")

    monkeypatch.setattr(tarfile, "open", no_second_extraction)
    assert extract_archive(archive) == root


def test_archive_without_splits_is_an_error_and_leaves_nothing(tmp_path, cache) -> None:
    archive = _archive(tmp_path / "other.tar.xz", {"data/file.txt": "x"})
    with pytest.raises(DataNotFoundError, match="holds no ALFWorld splits"):
        extract_archive(archive)
    (folder,) = (cache / "alfworld").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["json_2.1.1.lock"]


def test_build_once_replaces_a_folder_that_is_not_ready(tmp_path) -> None:
    root = tmp_path / "model"
    (root / "partial").mkdir(parents=True)  # a leftover: no config.json
    calls = []

    def build(scratch: Path) -> None:
        calls.append(scratch)
        (scratch / "config.json").write_text("{}")

    def ready(folder: Path) -> bool:
        return (folder / "config.json").is_file()

    assert build_once(root, ready, build) == root
    assert sorted(p.name for p in root.iterdir()) == ["config.json"]
    assert build_once(root, ready, build) == root and len(calls) == 1  # made once


def test_a_failed_build_leaves_no_folder(tmp_path) -> None:
    def build(scratch: Path) -> None:
        (scratch / "half").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_once(tmp_path / "set", Path.is_dir, build)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set.lock"]
