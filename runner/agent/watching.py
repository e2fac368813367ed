"""The file watcher of watch mode and of ``mcp-run test --watch``: which changes matter, and when.

Folders are watched, not files: an editor that saves by writing a new file and renaming it over
the old one replaces the file, and a watch on the old one would see nothing more. A
:class:`WatchedFiles` filter keeps the changes that matter in those folders.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
from watchfiles import Change, DefaultFilter, awatch

# watchfiles' settings, in milliseconds: how often it looks for the end of a burst of changes, and
# how often it wakes up with no change (the idle call: it is watching; tests wait on it).
STEP_MS = 20
WAKE_UP_MS = 200
CASE_SUFFIXES = (".yaml", ".yml")


def resolved(path: str | Path) -> Path:
    """``path`` absolute, its symbolic links followed as far as they go. Unlike ``Path.resolve``
    it never raises: a symbolic link loop in a watched folder (``ln -s b a; ln -s a b``) is a
    change like any other, not the end of watch mode."""
    return Path(os.path.realpath(path))


def entry(path: str | Path) -> Path:
    """``path`` absolute with its folder's symbolic links followed, but not its own: the folder
    entry itself, whatever it is now (a file, a folder, a link into a loop)."""
    path = Path(path)
    return resolved(path.parent) / path.name


class WatchedFiles(DefaultFilter):
    """The changes that matter: to one of ``files`` (the manifest, its templates, included files,
    Python modules and token files; resolved), to anything inside ``trees`` (the manifest's
    ``watch.paths``) but editor and cache files, or to a case file directly in ``case_folders``."""

    def __init__(
        self,
        files: Iterable[Path],
        *,
        trees: Iterable[Path] = (),
        case_folders: Iterable[Path] = (),
    ) -> None:
        super().__init__()
        self.files = frozenset(files)
        self.trees = frozenset(resolved(path) for path in trees)
        self.case_folders = frozenset(resolved(path) for path in case_folders)

    @property
    def folders(self) -> set[Path]:
        """The folders to watch: those of the files and case files, and the trees (or the folders
        of the trees that are files); only those that exist."""
        folders = {path.parent for path in self.files} | set(self.case_folders)
        folders |= {tree if tree.is_dir() else tree.parent for tree in self.trees}
        return {folder for folder in folders if folder.exists()}

    def __call__(self, change: Change, path: str) -> bool:
        real = resolved(path)
        if real in self.files or entry(path) in self.files:
            # The entry itself too: a file replaced by a link elsewhere (into a symbolic link
            # loop, say) resolves to where the link leads, yet what was watched has changed.
            return True
        if real.parent in self.case_folders and real.suffix in CASE_SUFFIXES:
            return True
        in_tree = any(real == tree or tree in real.parents for tree in self.trees)
        return in_tree and super().__call__(change, path)


async def watch_changes(
    watched: WatchedFiles,
    *,
    debounce: float,
    stop: anyio.Event,
    on_idle: Callable[[], Any] | None = None,
) -> AsyncGenerator[set[Path], None]:
    """The resolved paths of each burst of changes that matter, ``debounce`` seconds after its
    last one, until ``stop`` is set. ``on_idle`` is called whenever the watcher wakes up with no
    change. Close it (``contextlib.aclosing``) when leaving early: that ends the OS watches."""
    watcher = awatch(*watched.folders, watch_filter=watched, debounce=int(debounce * 1000), step=STEP_MS,
                     stop_event=stop, recursive=bool(watched.trees), rust_timeout=WAKE_UP_MS,
                     yield_on_timeout=True)
    async with aclosing(watcher):
        async for changes in watcher:
            if not changes:
                if on_idle is not None:
                    on_idle()
                continue
            yield {resolved(raw) for _, raw in changes}
