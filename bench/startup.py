"""Row 3: cold start of N stdio servers until their tools are listed.

The floor starts N raw ``mcp.Client`` sessions in parallel, each listing its tools; mcp-run opens a
fleet of N servers (``open_fleet`` returns once every server is ready: handshake and first listing
of tools, prompts and resources). Stopping is not timed.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from bench.calls import bench_manifest
from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import ROOT, stdio_entry, stdio_parameters
from bench.stats import Metrics, elapsed_ms
from runner.servers import open_fleet

RAW = "raw mcp.Client, all in parallel (floor)"
FLEET = "mcp-run open_fleet"
START_TIMEOUT = 180.0  # eight interpreters importing the SDK on two busy cores
READY_GOAL = Goal("8 servers ready <= 1.1x the parallel raw floor", 1.1)


def start_row(count: int) -> str:
    return f"3. cold start, {count} stdio server{'s' if count > 1 else ''} to tools listed"


async def raw_start(count: int, extra_tools: int = 0) -> Metrics:
    """``count`` raw SDK sessions started at once; the time until the last one has listed its tools."""
    listed = 0
    all_listed = anyio.Event()
    release = anyio.Event()

    async def one() -> None:
        nonlocal listed
        async with Client(stdio_parameters(extra_tools), cache=None) as client:
            await client.list_tools()
            listed += 1
            if listed == count:
                all_listed.set()
            await release.wait()

    with anyio.fail_after(START_TIMEOUT):
        async with anyio.create_task_group() as group:
            started = time.perf_counter()
            for _ in range(count):
                group.start_soon(one)
            await all_listed.wait()
            took = elapsed_ms(started)
            release.set()
    return {"ms": took}


async def fleet_start(count: int) -> Metrics:
    """mcp-run's fleet of ``count`` stdio servers; the time until ``open_fleet`` hands it over."""
    manifest = bench_manifest({f"s{index}": stdio_entry() for index in range(count)})
    with tempfile.TemporaryDirectory(prefix="bench-") as state, anyio.fail_after(START_TIMEOUT):
        started = time.perf_counter()
        async with open_fleet(manifest.servers, base_dir=ROOT, state_dir=Path(state)) as fleet:
            took = elapsed_ms(started)
            not_ready = [key for key, c in fleet.connections.items() if c.status != "ready"]
            if not_ready:
                raise BenchError(f"servers not ready after open_fleet: {not_ready}")
    return {"ms": took}


def start_cases(settings: Settings) -> list[Case]:
    cases = []
    for count in settings.start_sizes:
        row = start_row(count)
        goals = (READY_GOAL,) if count == 8 else ()
        cases.append(Case(row, RAW, lambda count=count: raw_start(count), "ms"))
        cases.append(Case(row, FLEET, lambda count=count: fleet_start(count), "ms", RAW, goals))
    return cases
