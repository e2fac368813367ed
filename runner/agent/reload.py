"""Watch mode: edits to the manifest, its templates and its Python modules become a new generation.

This module only watches: on a change it forgets the changed Python modules, checks the manifest
again and hands it to :meth:`runner.agent.runtime.Runtime.apply`, which decides what restarts and what
is rebuilt. An invalid manifest changes nothing; the last good generation keeps running. The
token files of http/sse servers are watched too: a login stored meanwhile starts a server that
waited for it, and token refreshes of running servers reload nothing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
from watchfiles import Change, awatch

from runner.agent.checks import checked_agent
from runner.agent.reconcile import ReloadReport
from runner.agent.runtime import Runtime
from runner.errors import ManifestError, RunnerError
from runner.events import ReloadEvent, ReloadFailed
from runner.manifest.loading import LoadedManifest

logger = logging.getLogger(__name__)

__all__ = ["forget_modules", "reload_runtime", "watch_and_reload"]


async def reload_runtime(runtime: Runtime, *, changed_files: set[Path] | None = None) -> ReloadReport:
    """Check the manifest again and apply it; raises ManifestError (and changes nothing) when the
    new manifest is invalid."""
    changed = changed_files or set()
    forget_modules(changed)
    checked = await anyio.to_thread.run_sync(checked_agent, runtime.loaded.path)
    return await runtime.apply(checked, changed_files=changed)


def forget_modules(changed: set[Path]) -> None:
    """Drop changed Python modules from the import cache, so the next import reads them again."""
    resolved = {path.resolve() for path in changed if path.suffix == ".py"}
    if not resolved:
        return
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and Path(origin).resolve() in resolved:
            del sys.modules[name]


def _watch_roots(loaded: LoadedManifest, files: set[Path]) -> tuple[set[Path], set[Path]]:
    """Folders to watch (parents of the files, so rename-on-save is seen) and extra watch paths."""
    extra = {(loaded.base_dir / entry).resolve() for entry in loaded.manifest.watch.paths}
    roots = {path.parent for path in files} | {p if p.is_dir() else p.parent for p in extra}
    return {root for root in roots if root.exists()}, extra


async def watch_and_reload(
    runtime: Runtime,
    on_event: Callable[[ReloadEvent], None],
    *,
    stop: anyio.Event,
    ready: anyio.Event | None = None,
) -> None:
    """Reload ``runtime`` on every change of the files it depends on, until ``stop`` is set.

    ``on_event`` receives ``reload`` events and ``reload_error`` events (with the located
    problems); an invalid edit keeps the last good generation running.
    """
    while not stop.is_set():
        files = set(runtime.files)
        roots, extra = _watch_roots(runtime.loaded, files)

        def relevant(change: Change, raw: str, files: set[Path] = files, extra: set[Path] = extra) -> bool:
            path = Path(raw).resolve()
            return path in files or any(path == root or root in path.parents for root in extra)

        debounce = int(runtime.manifest.watch.debounce * 1000)
        watcher = awatch(*roots, watch_filter=relevant, debounce=debounce, step=20, stop_event=stop,
                         recursive=bool(extra), rust_timeout=200, yield_on_timeout=True)
        async for changes in watcher:
            if not changes:  # the watcher's periodic wake-up: it is watching, nothing changed
                if ready is not None:
                    ready.set()
                continue
            changed = {Path(raw).resolve() for _, raw in changes}  # noqa: ASYNC240 (no I/O, cheap)
            if runtime.only_token_refreshes(changed):
                continue  # running servers refreshed their tokens: nothing to reload
            try:
                report = await reload_runtime(runtime, changed_files=changed)
            except ManifestError as exc:
                on_event(ReloadFailed(type="reload_error", problems=[str(p) for p in exc.problems]))
                continue
            except RunnerError as exc:  # the model or the tools could not be built: keep the last good
                on_event(ReloadFailed(type="reload_error", problems=[str(exc)]))
                continue
            on_event(report.event())
            if runtime.files != files:
                break  # the set of files changed: watch the new set
