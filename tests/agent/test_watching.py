"""WatchedFiles: which changes in the watched folders matter to watch mode and `test --watch`."""

from __future__ import annotations

from pathlib import Path

from watchfiles import Change

from runner.agent.watching import WatchedFiles


def test_the_files_matter_and_their_neighbours_do_not(tmp_path: Path) -> None:
    manifest = (tmp_path / "agent.yaml").resolve()
    watched = WatchedFiles({manifest})
    assert watched(Change.modified, str(manifest))
    assert not watched(Change.modified, str(tmp_path / "notes.yaml"))
    assert watched.folders == {manifest.parent}


def test_case_files_directly_in_a_case_folder_matter(tmp_path: Path) -> None:
    cases = tmp_path / "evals"
    cases.mkdir()
    watched = WatchedFiles((), case_folders={cases})
    assert watched(Change.added, str(cases / "new.yml"))
    assert watched(Change.modified, str(cases / "old.yaml"))
    assert not watched(Change.modified, str(cases / "notes.txt"))
    assert not watched(Change.modified, str(cases / "deeper" / "case.yaml"))
    assert watched.folders == {cases.resolve()}


def test_anything_in_a_tree_matters_but_editor_and_cache_files(tmp_path: Path) -> None:
    tree = tmp_path / "data"
    tree.mkdir()
    watched = WatchedFiles((), trees={tree})
    assert watched(Change.modified, str(tree / "deep" / "facts.csv"))
    assert not watched(Change.modified, str(tree / "__pycache__" / "helpers.cpython-311.pyc"))
    assert not watched(Change.modified, str(tree / ".facts.csv.swp"))
    assert not watched(Change.modified, str(tmp_path / "elsewhere.csv"))
    assert watched.folders == {tree.resolve()}


def test_a_tree_that_is_a_file_is_watched_in_its_folder(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    watched = WatchedFiles((), trees={notes})
    assert watched(Change.added, str(notes))
    assert not watched(Change.added, str(tmp_path / "other.md"))
    assert watched.folders == {tmp_path.resolve()}


def test_a_symlink_loop_in_a_watched_folder_is_a_change_like_any_other(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    manifest = (tmp_path / "agent.yaml").resolve()
    watched = WatchedFiles({manifest}, trees={tmp_path / "a", tmp_path / "data"},
                           case_folders={tmp_path / "b"})
    assert watched(Change.added, str(tmp_path / "a"))  # the tree named 'a' is the loop itself
    assert not watched(Change.added, str(tmp_path / "b" / "deeper"))
    assert watched.folders == {tmp_path.resolve()}


def test_a_watched_file_replaced_by_a_link_into_a_symlink_loop_matters(tmp_path: Path) -> None:
    manifest = (tmp_path / "agent.yaml").resolve()
    watched = WatchedFiles({manifest})
    (tmp_path / "x").symlink_to("y")
    (tmp_path / "y").symlink_to("x")
    manifest.symlink_to("x")  # resolves into the loop, no longer to the manifest's own name
    assert watched(Change.added, str(manifest))
    assert not watched(Change.added, str(tmp_path / "x"))


def test_a_watched_file_replaced_by_a_link_to_another_file_matters(tmp_path: Path) -> None:
    manifest = (tmp_path / "agent.yaml").resolve()
    watched = WatchedFiles({manifest})
    (tmp_path / "other.yaml").write_text("version: 1\n")
    manifest.symlink_to("other.yaml")
    assert watched(Change.added, str(manifest))
    assert not watched(Change.modified, str(tmp_path / "other.yaml"))
