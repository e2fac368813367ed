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
from contextlib import aclosing
from pathlib import Path

import anyio

from runner.agent.checks import checked_agent
from runner.agent.reconcile import ReloadReport
from runner.agent.runtime import Runtime
from runner.agent.watching import WatchedFiles, resolved, watch_changes
from runner.errors import ManifestError, RunnerError
from runner.events import ReloadEvent, ReloadFailed

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
    modules = {resolved(path) for path in changed if path.suffix == ".py"}
    if not modules:
        return
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and resolved(origin) in modules:
            del sys.modules[name]


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
        files = runtime.files
        watch = runtime.manifest.watch
        watched = WatchedFiles(files, trees=[runtime.loaded.base_dir / path for path in watch.paths])
        changes = watch_changes(watched, debounce=watch.debounce, stop=stop,
                                on_idle=ready.set if ready is not None else None)
        async with aclosing(changes):
            async for changed in changes:
                if runtime.only_token_refreshes(changed):
                    continue  # running servers refreshed their tokens: nothing to reload
                try:
                    report = await reload_runtime(runtime, changed_files=changed)
                except ManifestError as exc:
                    on_event(ReloadFailed(type="reload_error", problems=[str(p) for p in exc.problems]))
                    continue
                except RunnerError as exc:  # the model or tools could not be built: keep the last good
                    on_event(ReloadFailed(type="reload_error", problems=[str(exc)]))
                    continue
                on_event(report.event())
                if runtime.files != files:
                    break  # the set of files changed: watch the new set
