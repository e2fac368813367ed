"""Child processes a test leaves behind: found, reported and killed (the conftest's autouse
fixture, and tests that check one block of their own)."""

from __future__ import annotations

import psutil

ORPHAN_GRACE = 1.0  # a child that is exiting right now gets this long
# Processes a session fixture keeps for every test (the browser's driver): their descendants come and
# go between tests (Chromium starts helpers per page) and are stopped with the fixture, not by a test.
SESSION_PROCESSES: set[int] = set()


def _of_session(process: psutil.Process) -> bool:
    try:
        return process.pid in SESSION_PROCESSES or any(p.pid in SESSION_PROCESSES for p in process.parents())
    except psutil.NoSuchProcess:
        return False


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class ChildProcessGuard:
    """Remembers the child processes present at a point; reports (and kills) any newer survivor."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._before = {child.pid for child in self._me.children(recursive=True)}

    def leftovers(self, grace: float = ORPHAN_GRACE) -> list[str]:
        """Descriptions of new children still running after ``grace`` seconds; they are killed."""
        new = [
            child for child in self._me.children(recursive=True)
            if child.pid not in self._before and _running(child) and not _of_session(child)
        ]
        if not new:
            return []
        _, alive = psutil.wait_procs(new, timeout=grace)
        survivors = [child for child in alive if _running(child)]
        descriptions = []
        for child in survivors:
            try:
                descriptions.append(f"pid {child.pid}: {' '.join(child.cmdline())[:200]}")
                child.kill()
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(survivors, timeout=grace)
        return descriptions
