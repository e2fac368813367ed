"""Row 3: cold start of N stdio servers until their tools are listed; 3b: a whole command.

The floor starts N raw ``mcp.Client`` sessions in parallel, each listing its tools; mcp-run opens a
fleet of N servers (``open_fleet`` returns once every server is ready: handshake and first listing
of tools, prompts and resources). Stopping is not timed.

Row 3b times whole processes, interpreter start and imports included: ``mcp-run tools FILE`` for
one stdio server against a minimal script that imports the SDK, connects, lists and exits.
"""

from __future__ import annotations

import compileall
import sys
import tempfile
import time
from pathlib import Path

import anyio
import yaml
from mcp import Client

from bench.calls import bench_manifest
from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import ROOT, stdio_entry, stdio_parameters
from bench.stats import Metrics, elapsed_ms
from runner.servers import open_fleet

RAW = "raw mcp.Client, all in parallel (floor)"
FLEET = "mcp-run open_fleet"
START_TIMEOUT = 180.0  # eight interpreters importing the SDK on two busy cores
READY_GOAL = Goal("8 servers ready <= 1.1× the parallel raw floor", 1.1)
COMMAND_ROW = "3b. start-up: one command listing one stdio server's tools, process to exit"
SDK_SCRIPT = "minimal SDK script: import, connect, list (floor)"
TOOLS_COMMAND = "mcp-run tools FILE"
COMMAND_GOAL = Goal("mcp-run tools FILE <= 1.3× a minimal SDK script", 1.3)
MINIMAL_SCRIPT = """
import sys, anyio
from mcp import Client, StdioServerParameters
async def main():
    async with Client(StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])) as client:
        print(len((await client.list_tools()).tools))
anyio.run(main)
"""


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


async def process_ms(command: list[str], cwd: Path) -> Metrics:
    """One process from start to exit; it must succeed."""
    with anyio.fail_after(START_TIMEOUT):
        started = time.perf_counter()
        done = await anyio.run_process(command, cwd=cwd, check=False)
        took = elapsed_ms(started)
    if done.returncode != 0:
        raise BenchError(f"{command[:4]} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return {"ms": took}


def command_cases(folder: Path) -> list[Case]:
    """Row 3b: ``mcp-run tools FILE`` against the minimal SDK script, as whole processes.

    mcp-run's modules are byte-compiled first, as an installed package's are: the floor's SDK
    loads from its .pyc files, and a source checkout run under PYTHONDONTWRITEBYTECODE would
    otherwise compile every module of mcp-run again at each start.
    """
    compileall.compile_dir(ROOT / "runner", quiet=1)
    folder.mkdir(parents=True, exist_ok=True)
    entry = stdio_entry()
    manifest = {"version": 1, "name": "bench-start", "model": {"id": "offline"},
                "servers": {"bench": entry}}
    (folder / "agent.yaml").write_text(yaml.safe_dump(manifest))
    script = [sys.executable, "-c", MINIMAL_SCRIPT, entry["command"], *entry["args"]]
    tools = [sys.executable, "-m", "runner", "tools", "agent.yaml"]
    return [
        Case(COMMAND_ROW, SDK_SCRIPT, lambda: process_ms(script, folder), "ms"),
        Case(COMMAND_ROW, TOOLS_COMMAND, lambda: process_ms(tools, folder), "ms", SDK_SCRIPT,
             (COMMAND_GOAL,)),
    ]


def start_cases(settings: Settings) -> list[Case]:
    cases = []
    for count in settings.start_sizes:
        row = start_row(count)
        goals = (READY_GOAL,) if count == 8 else ()
        cases.append(Case(row, RAW, lambda count=count: raw_start(count), "ms"))
        cases.append(Case(row, FLEET, lambda count=count: fleet_start(count), "ms", RAW, goals))
    return cases
