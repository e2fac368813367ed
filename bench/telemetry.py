"""Row 8: one tool call (the catalog's LangChain tool, invoked as in row 1) with telemetry off and
on, over stdio.

Both paths run each call in a task of its own context: the "on" context records through a
recorder exporting OTLP/HTTP to a loopback sink (which accepts and drops everything), the "off"
context has none, so the hooks are the cheap no-ops an agent without telemetry runs. The row's
ratio is the cost of recording; the cost of the hooks when off is row 1 against the build before.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.calls import ARGUMENTS, bench_manifest, check_echo, tool_call
from bench.harness import Case, Settings
from bench.launch import ROOT, stdio_entry
from bench.stats import Call, combined_latency, latency_slice
from runner import telemetry
from runner.servers import open_fleet
from runner.tools.caller import ToolCaller
from runner.tools.catalog import ToolCatalog

logger = logging.getLogger("bench")
ROW = "8. tool call with telemetry, stdio"
OFF = "telemetry off (floor)"
ON = "telemetry on (OTLP/HTTP to a loopback sink)"
NAME = "stdio__echo"


@asynccontextmanager
async def telemetry_suite(settings: Settings) -> AsyncIterator[list[Case]]:
    """The cases of row 8 (none, with a warning, without the OpenTelemetry packages)."""
    try:
        import runner.telemetry.exporting  # noqa: F401
    except ImportError:
        logger.warning("row 8 skipped: the OpenTelemetry packages are not installed (%s)",
                       telemetry.EXTRA_HINT)
        yield []
        return
    manifest = bench_manifest({"stdio": stdio_entry()})
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        sink = stack.enter_context(_sink())
        fleet = await stack.enter_async_context(
            open_fleet(manifest.servers, base_dir=ROOT, state_dir=state_dir))
        off = contextvars.copy_context()
        on = contextvars.copy_context()
        recording = ExitStack()
        on.run(recording.enter_context, telemetry.recording(manifest, {"OTEL_EXPORTER_OTLP_ENDPOINT": sink}))
        stack.callback(on.run, recording.close)  # flushed and shut down in the context it began in
        paths = {OFF: _call_in(off, manifest, fleet), ON: _call_in(on, manifest, fleet)}
        cases = []
        for path, call in paths.items():
            await check_echo(path, call)
            measure = _latency(call, settings)
            cases.append(Case(ROW, path, measure, "p50_ms", None if path == OFF else OFF,
                              slices=settings.latency_slices, combine=combined_latency))
        yield cases


def _call_in(context: contextvars.Context, manifest: Any, fleet: Any) -> Call:
    """The catalog's tool called in ``context`` (its catalog built there, so its hook is too)."""
    catalog = context.run(_catalog, manifest, fleet)
    entry = catalog.entries[NAME]

    async def call() -> Any:
        return await asyncio.create_task(entry.tool.ainvoke(tool_call(NAME, ARGUMENTS)), context=context)

    return call


def _catalog(manifest: Any, fleet: Any) -> ToolCatalog:
    def current() -> ToolCatalog:
        return catalog

    caller = ToolCaller(current, hook=telemetry.tool_hook(current, None))  # as the runtime does
    catalog = ToolCatalog(manifest, fleet.connections, ROOT, call=caller.model_call)
    return catalog


def _latency(call: Call, settings: Settings) -> Any:
    return lambda: latency_slice(call, settings.calls, settings.warmup, settings.latency_slices)


@contextmanager
def _sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on loopback that answers every export with success."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
