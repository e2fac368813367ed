"""Row 4: many tools. One server with 1,000 tools (list, and list + build), and 20 servers with
500 tools each (catalog build time and the runner process's peak RSS, in a fresh subprocess).

mcp-run's "list + build" is what a tools/list_changed costs it: ``ServerConnection.refresh``
of the tools (list, filter, diff against the cache, publish) followed by ``ToolCatalog.rebuild()``.
The floor is one raw ``tools/list`` on an open session.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
from mcp import Client

from bench.calls import bench_manifest
from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import ROOT, extra_for, http_server, stdio_entry, stdio_parameters
from bench.stats import Metrics, median_ms
from runner.servers import open_fleet
from runner.tools.catalog import ToolCatalog

logger = logging.getLogger(__name__)

RAW_LIST = "raw mcp.Client tools/list (floor)"
RUN_LIST = "mcp-run refresh + ToolCatalog.rebuild"
WIDE = "mcp-run fleet + ToolCatalog (fresh process)"
WORKER_TIMEOUT = 240.0


def list_goal(settings: Settings) -> Goal:  # labelled with the sizes measured (smaller in --smoke)
    return Goal(f"{settings.many_tools:,} tools listed and built <= 1.2× the raw tools/list", 1.2)


def wide_goals(settings: Settings) -> tuple[Goal, Goal]:
    size = f"{settings.wide_servers} x {settings.wide_tools} tools"
    return (Goal(f"{size}: first build <= 0.5 s", 500.0, metric="first_build_ms"),
            Goal(f"{size}: peak RSS <= 200 MB", 200.0, metric="peak_rss_mb"))


def many_row(settings: Settings) -> str:
    return f"4a. one server, {settings.many_tools:,} tools: list (+ build)"


def wide_row(settings: Settings) -> str:
    return f"4b. {settings.wide_servers} servers x {settings.wide_tools} tools: build, peak RSS"


@asynccontextmanager
async def scale_suite(settings: Settings, *, wide: bool = True) -> AsyncIterator[list[Case]]:
    """Rows 4a and, with ``wide``, 4b (whose 20-endpoint server is started only then)."""
    extra = extra_for(settings.many_tools)
    manifest = bench_manifest({"many": stdio_entry(extra)})
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        client = await stack.enter_async_context(Client(stdio_parameters(extra), cache=None))
        fleet = await stack.enter_async_context(
            open_fleet(manifest.servers, base_dir=ROOT, state_dir=state_dir)
        )
        connection = fleet.connections["many"]
        catalog = ToolCatalog(manifest, fleet.connections, ROOT)
        listed = len((await client.list_tools()).tools)
        if listed != settings.many_tools or len(catalog.entries) != settings.many_tools:
            raise BenchError(f"expected {settings.many_tools} tools: listed {listed}, "
                             f"built {len(catalog.entries)}")

        async def raw_list() -> Metrics:
            return {"ms": await median_ms(client.list_tools, settings.list_repeats)}

        async def run_list() -> Metrics:
            totals, lists, builds = [], [], []
            for _ in range(settings.list_repeats):
                started = time.perf_counter()
                await connection.refresh(("tools",))  # what a tools/list_changed re-lists
                listed_at = time.perf_counter()
                catalog.rebuild()
                done = time.perf_counter()
                totals.append((done - started) * 1000)
                lists.append((listed_at - started) * 1000)
                builds.append((done - listed_at) * 1000)
            return {"ms": statistics.median(totals), "list_ms": statistics.median(lists),
                    "build_ms": statistics.median(builds)}

        cases = [
            Case(many_row(settings), RAW_LIST, raw_list, "ms"),
            Case(many_row(settings), RUN_LIST, run_list, "ms", RAW_LIST, (list_goal(settings),)),
        ]
        if wide and importlib.util.find_spec("psutil") is None:  # the worker reads its RSS with it
            logger.warning("row 4b skipped: psutil is not installed (pip install -e '.[test]')")
        elif wide:
            wide_url = await stack.enter_async_context(
                http_server(extra_for(settings.wide_tools), mounts=settings.wide_servers)
            )
            cases.append(Case(wide_row(settings), WIDE, lambda: wide_build(wide_url, settings), "build_ms",
                              goals=wide_goals(settings)))
        yield cases


async def wide_build(url: str, settings: Settings) -> Metrics:
    """Row 4b in ``bench.scale_worker``, a fresh interpreter, so peak RSS is the runner's alone."""
    command = [sys.executable, "-m", "bench.scale_worker", "--url", url,
               "--servers", str(settings.wide_servers), "--tools", str(settings.wide_tools),
               "--builds", str(settings.wide_builds)]
    with anyio.fail_after(WORKER_TIMEOUT):
        done = await anyio.run_process(command, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise BenchError(f"bench.scale_worker failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])
