"""Profile the hot paths behind the goals the benchmark reports as missed.

    .venv/bin/python -m bench.profiling tool-call      # the catalog's LangChain tool, 1,000 calls
    .venv/bin/python -m bench.profiling build          # ToolCatalog.rebuild over 1,000 tools
    .venv/bin/python -m bench.profiling turn           # graph turns (SQLite checkpointer)
    .venv/bin/python -m bench.profiling sub-agent      # turns calling an agent of agents: (row 10)
    .venv/bin/python -m bench.profiling fan-out        # turns calling a parallel workflow (row 11)
    .venv/bin/python -m bench.profiling build --cprofile   # deterministic, by own time
    SORT=cumulative TOP=100 .venv/bin/python -m bench.profiling turn --cprofile   # another order, more lines

Needs pyinstrument (``pip install pyinstrument``; ``--cprofile`` needs nothing). Prints the
profile to stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import os
import pstats
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import yaml

from bench.agent import turn_script, write_manifest
from bench.calls import bench_manifest, tool_call
from bench.launch import ROOT, extra_for, stdio_entry
from runner.agent.runtime import load_agent
from runner.servers import open_fleet
from runner.tools.catalog import ToolCatalog

Body = Callable[[], Awaitable[None]]


async def profile_tool_call(run: Callable[[Body], Awaitable[None]], calls: int) -> None:
    manifest = bench_manifest({"bench": stdio_entry()})
    with tempfile.TemporaryDirectory(prefix="bench-") as state:
        async with open_fleet(manifest.servers, base_dir=ROOT, state_dir=Path(state)) as fleet:
            tool = ToolCatalog(manifest, fleet.connections, ROOT).entries["bench__echo"].tool

            async def body() -> None:
                for _ in range(calls):
                    await tool.ainvoke(tool_call("bench__echo", {"text": "ping"}))

            await run(body)


async def profile_build(run: Callable[[Body], Awaitable[None]], builds: int) -> None:
    manifest = bench_manifest({"many": stdio_entry(extra_for(1000))})
    with tempfile.TemporaryDirectory(prefix="bench-") as state:
        async with open_fleet(manifest.servers, base_dir=ROOT, state_dir=Path(state)) as fleet:
            catalog = ToolCatalog(manifest, fleet.connections, ROOT)

            async def body() -> None:
                for _ in range(builds):
                    catalog.rebuild()

            await run(body)


async def profile_turn(run: Callable[[Body], Awaitable[None]], turns: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        home = Path(folder)
        (home / "script.yaml").write_text(yaml.safe_dump(turn_script(turns + 1)))
        path = write_manifest(home, {"bench": stdio_entry()},
                              model={"id": "scripted", "script": "script.yaml"})
        async with load_agent(path) as runtime:
            await runtime.graph.ainvoke({"messages": [("user", "go")]}, runtime.config(uuid.uuid4().hex))

            async def body() -> None:
                for _ in range(turns):
                    await runtime.graph.ainvoke({"messages": [("user", "go")]},
                                                runtime.config(uuid.uuid4().hex))

            await run(body)


async def profile_sub_agent(run: Callable[[Body], Awaitable[None]], turns: int) -> None:
    """Row 10: turns whose one call is of an agent of ``agents:`` (in process)."""
    from bench.subagents import SUB_MESSAGE, timed_turn, write_team

    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        path, _ = write_team(Path(folder) / "team", turns + 2, "profile")
        async with load_agent(path) as runtime:
            await timed_turn(runtime, SUB_MESSAGE)

            async def body() -> None:
                for _ in range(turns):
                    await timed_turn(runtime, SUB_MESSAGE)

            await run(body)


async def profile_fan_out(run: Callable[[Body], Awaitable[None]], turns: int) -> None:
    """Row 11: turns whose one call is a ``parallel`` workflow of 8 agents."""
    from bench.fanout import turn
    from bench.fanout import write_manifest as write_fan_out

    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        async with load_agent(write_fan_out(Path(folder) / "fan-out", turns + 2)) as runtime:
            await turn(runtime, "fan")

            async def body() -> None:
                for _ in range(turns):
                    await turn(runtime, "fan")

            await run(body)


TARGETS = {"tool-call": (profile_tool_call, 1000), "build": (profile_build, 10), "turn": (profile_turn, 50),
           "sub-agent": (profile_sub_agent, 50), "fan-out": (profile_fan_out, 10)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profiling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--cprofile", action="store_true", help="cProfile, sorted by own time")
    parser.add_argument("--count", type=int, help="calls, builds or turns (default per target)")
    options = parser.parse_args()
    target, default_count = TARGETS[options.target]
    if not options.cprofile and importlib.util.find_spec("pyinstrument") is None:
        parser.exit(2, "python -m bench.profiling: pyinstrument is not installed: "
                       "pip install pyinstrument, or add --cprofile (needs nothing)\n")
    report = io.StringIO()

    async def run(body: Body) -> None:
        if options.cprofile:
            profiler = cProfile.Profile()
            profiler.enable()
            await body()
            profiler.disable()
            order, lines = os.environ.get("SORT", "tottime"), int(os.environ.get("TOP", "30"))
            pstats.Stats(profiler, stream=report).sort_stats(order).print_stats(lines)
            return
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
        profiler.start()
        await body()
        profiler.stop()
        report.write(profiler.output_text(unicode=False, color=False))

    anyio.run(target, run, options.count or default_count)
    sys.stdout.write(report.getvalue())


if __name__ == "__main__":
    main()
