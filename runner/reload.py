"""Watch mode: edits to the manifest, its templates and its Python modules become a new generation.

A reload loads and checks the new manifest first; an invalid one changes nothing. A valid one is
reconciled against the running servers: added servers start, removed ones stop, servers whose
connection settings changed restart (after their in-flight calls end), servers that failed for want
of a login restart when their stored login changes (``mcp-run auth login`` in another terminal),
and all the others keep their sessions and processes. Tools, prompts, model and graph are then
rebuilt and swapped in at once, so the next model step sees the new generation and the
conversation goes on.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from watchfiles import Change, awatch

from runner.auth import login_files
from runner.checks import checked_agent, import_paths
from runner.errors import AuthError, ManifestError, RunnerError, ServerStartError
from runner.loading import LoadedManifest
from runner.manifest import Manifest, ServerBase
from runner.prompts import template_files
from runner.runtime import Runtime, launch_spec, prepare

logger = logging.getLogger(__name__)

# A change to any of these restarts the server; any other setting is applied to the live one.
CONNECTION_FIELDS = frozenset({
    "transport", "command", "args", "env", "env_passthrough", "cwd", "url", "headers",
    "startup_timeout", "heartbeat", "restart",
})


@dataclass
class ReloadReport:
    """What a reload did, for the one-line summary and the JSON event stream."""

    seconds: float = 0.0
    started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # required servers that did not start

    def summary(self) -> str:
        parts = [f"{verb} {', '.join(keys)}" for verb, keys in (
            ("started", self.started), ("stopped", self.stopped), ("restarted", self.restarted),
            ("rebuilt", self.rebuilt)) if keys]
        parts += [f"{key} failed to start: {reason}" for key, reason in self.failed.items()]
        return f"reloaded in {self.seconds * 1000:.0f} ms: " + ("; ".join(parts) or "nothing changed")

    def event(self) -> dict[str, Any]:
        return {"type": "reload", "ms": round(self.seconds * 1000, 1), "started": self.started,
                "stopped": self.stopped, "restarted": self.restarted, "rebuilt": self.rebuilt,
                "failed": self.failed}


def _connection_settings(spec: ServerBase) -> dict[str, Any]:
    launched = launch_spec(spec)  # type: ignore[arg-type]
    return {name: value for name, value in launched.model_dump().items() if name in CONNECTION_FIELDS}


def _tool_settings(manifest: Manifest) -> list[tuple[str, dict[str, Any]]]:
    """Every server's settings that are applied without a restart (filters, timeouts, ...)."""
    return [
        (key, {name: value for name, value in spec.model_dump().items() if name not in CONNECTION_FIELDS})
        for key, spec in sorted(manifest.servers.items())
    ]


def _rebuilt_parts(old: LoadedManifest, new: LoadedManifest, template_changed: bool) -> list[str]:
    before, after = old.manifest, new.manifest
    parts = []
    if before.prompts != after.prompts or template_changed:
        parts.append("prompts")
    if before.model != after.model:
        parts.append("model")
    if before.agent != after.agent:
        parts.append("agent")
    if _tool_settings(before) != _tool_settings(after) or before.local_tools != after.local_tools:
        parts.append("tools")
    return parts


async def reload_runtime(runtime: Runtime, *, changed_files: set[Path] | None = None) -> ReloadReport:
    """Load the manifest again and swap in a new generation; raises ManifestError (and changes
    nothing) when the new manifest is invalid."""
    began = time.perf_counter()
    forget_modules(changed_files or set())
    path = runtime.loaded.path
    checked = await anyio.to_thread.run_sync(checked_agent, path)
    loaded = checked.loaded
    prepared = prepare(checked)
    if runtime.manifest.model == loaded.manifest.model:
        prepared.model = runtime.model  # keep the client (and its connection pool)
    old_servers, new_servers = runtime.manifest.servers, loaded.manifest.servers
    report = ReloadReport()
    report.stopped = sorted(set(old_servers) - set(new_servers))
    report.started = sorted(set(new_servers) - set(old_servers))
    report.restarted = sorted(
        key for key in set(old_servers) & set(new_servers)
        if _connection_settings(old_servers[key]) != _connection_settings(new_servers[key])
        or key in _logged_in_meanwhile(runtime, changed_files or set())
    )
    known = runtime.template_paths or watched_files(runtime.loaded)
    template_changed = bool(changed_files and changed_files & known)
    report.rebuilt = _rebuilt_parts(runtime.loaded, loaded, template_changed)
    fleet = runtime.fleet
    await runtime.catalog.drained(set(report.stopped) | set(report.restarted))

    async def start(key: str, restart: bool) -> None:
        try:
            if restart:
                await fleet.replace(key, launch_spec(new_servers[key]))
            else:
                await fleet.add(key, launch_spec(new_servers[key]))
        except ServerStartError as exc:  # a required server: reported, the rest goes on
            report.failed[key] = str(exc)

    async with anyio.create_task_group() as group:
        for key in report.stopped:
            group.start_soon(fleet.remove, key)
        for key in report.restarted:
            group.start_soon(start, key, True)
        for key in report.started:
            group.start_soon(start, key, False)
    for key in set(new_servers) - set(report.started) - set(report.restarted) - set(report.failed):
        fleet.connections[key].spec = launch_spec(new_servers[key])  # timeouts, filters, ...
    runtime.install(prepared)
    runtime.template_paths = watched_files(loaded)
    report.seconds = time.perf_counter() - began
    return report


def _logged_in_meanwhile(runtime: Runtime, changed: set[Path]) -> set[str]:
    """Servers that failed for want of a login and whose stored login has just changed."""
    files = login_files(runtime.manifest.servers)
    return {
        key for key, path in files.items() if path.resolve() in changed and _waits_for_login(runtime, key)
    }


def _waits_for_login(runtime: Runtime, key: str) -> bool:
    connection = runtime.fleet.connections.get(key)
    return connection is not None and isinstance(connection.error, AuthError)


def _login_files_of_running(runtime: Runtime) -> set[Path]:
    files = login_files(runtime.manifest.servers)
    return {path.resolve() for key, path in files.items() if not _waits_for_login(runtime, key)}


def forget_modules(changed: set[Path]) -> None:
    """Drop changed Python modules from the import cache, so the next import reads them again."""
    resolved = {path.resolve() for path in changed if path.suffix == ".py"}
    if not resolved:
        return
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and Path(origin).resolve() in resolved:
            del sys.modules[name]


def watched_files(loaded: LoadedManifest) -> set[Path]:
    """The manifest, every template it uses, the local Python modules it names, and the stored
    logins of its http/sse servers."""
    files = {loaded.path.resolve()}
    files |= {path.resolve() for path in template_files(loaded.manifest, loaded.base_dir)}
    files |= {path.resolve() for path in login_files(loaded.manifest.servers).values()}
    for _, import_path in import_paths(loaded.manifest):
        module = import_path.partition(":")[0]
        origin = _module_file(module, loaded.base_dir)
        if origin is not None:
            files.add(origin)
    return files


def _module_file(module: str, base_dir: Path) -> Path | None:
    added = str(base_dir) not in sys.path
    if added:
        sys.path.insert(0, str(base_dir))
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    finally:
        if added:
            sys.path.remove(str(base_dir))
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _watch_roots(loaded: LoadedManifest, files: set[Path]) -> tuple[set[Path], set[Path]]:
    """Folders to watch (parents of the files, so rename-on-save is seen) and extra watch paths."""
    extra = {(loaded.base_dir / entry).resolve() for entry in loaded.manifest.watch.paths}
    roots = {path.parent for path in files} | {p if p.is_dir() else p.parent for p in extra}
    return {root for root in roots if root.exists()}, extra


async def watch_and_reload(
    runtime: Runtime,
    on_event: Callable[[dict[str, Any]], None],
    *,
    stop: anyio.Event,
    ready: anyio.Event | None = None,
) -> None:
    """Reload ``runtime`` on every change of the files it depends on, until ``stop`` is set.

    ``on_event`` receives ``reload`` events and ``reload_error`` events (with the located
    problems); an invalid edit keeps the last good generation running.
    """
    runtime.template_paths = watched_files(runtime.loaded)
    while not stop.is_set():
        files = runtime.template_paths
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
            if changed <= _login_files_of_running(runtime):
                continue  # a running server refreshed its token: nothing to reload
            try:
                report = await reload_runtime(runtime, changed_files=changed)
            except ManifestError as exc:
                on_event({"type": "reload_error", "problems": [str(p) for p in exc.problems]})
                continue
            except RunnerError as exc:  # the model or the tools could not be built: keep the last good
                on_event({"type": "reload_error", "problems": [str(exc)]})
                continue
            on_event(report.event() | {"summary": report.summary()})
            if runtime.template_paths != files:
                break  # the set of files changed: watch the new set
