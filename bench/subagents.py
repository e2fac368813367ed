"""Row 10: what calling an agent of ``agents:`` costs, in process and composed through ``serve``.

One manifest (``team``) has the offline model as its main agent and one agent, ``sub``, a one-step
scripted model that answers ``ping`` at once; both share one copy of the benchmark server (``sub``
is given its tools, and calls none). Each turn the main model makes one call, then reports its
result, so a turn answers ``<tool> returned: ping`` whichever tool it called:

- 10a: the call of ``sub`` (its task: ``ping``) against a plain tool call of ``bench__echo``
  (``ping``), on the same runtime, turns timed alternately; ``overhead_ms`` is the sub-agent
  turn's p50 minus the plain turn's.
- 10b: the same call of ``sub`` against composition through ``mcp-run serve``: a second manifest
  whose server ``sub`` is ``command: mcp-run, args: [serve, sub.yaml]`` (the same scripted agent,
  served over stdio, with its own copy of the benchmark server), the main model calling
  ``sub__ask``. Compared: the call itself, from the turn's ``tool_call`` event to its
  ``tool_result``; each path also reports how many benchmark server processes it runs (counted
  in ``/proc`` after set-up, by an environment tag each setup gives its servers).
- 10b's bound: the same call run by LangGraph and LangChain alone (:mod:`bench.stack_floor`), and
  without a subgraph, timed alternately with the in-process and composed calls. The composed call
  runs the called agent's graph too (in ``serve``), so were the in-process call this cheap, the
  composed call would lose the same time: ``ceiling_ratio`` = (composed - in process + floor) /
  floor is the most 10b can reach while an agent's call is a LangGraph subgraph with a LangChain
  model step.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import ROOT, stdio_entry
from bench.stack_floor import stack_graph, timed_stack_call
from bench.stats import Metrics, elapsed_ms, percentile
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

OVERHEAD_ROW = "10a. sub-agent call in process vs a plain tool call, same answer"
COMPOSED_ROW = "10b. sub-agent call in process vs composition through mcp-run serve"
PLAIN = "plain tool call: bench__echo (floor)"
IN_PROCESS = "agent of agents: called in process"
IN_PROCESS_FLOOR = "agent of agents: called in process (floor)"
COMPOSED = "mcp-run serve sub.yaml as a stdio server: sub__ask"
STACK = "the same call in LangGraph and LangChain alone (no mcp-run): the stack's floor"
OVERHEAD_GOAL = Goal("sub-agent call in process: p50 overhead <= 2 ms over a plain tool call", 2.0,
                     metric="overhead_ms")
COMPOSED_GOAL = Goal("sub-agent call in process >= 5× faster than through mcp-run serve", 5.0,
                     better="higher")
TAG = "BENCH_COPY"  # the environment variable each setup's servers carry, to count them
ANSWER = "ping"
PLAIN_MESSAGE = "/call bench__echo " + json.dumps({"text": ANSWER})
SUB_MESSAGE = "/call sub " + json.dumps({"task": ANSWER})
COMPOSED_MESSAGE = "/call sub__ask " + json.dumps({"message": ANSWER})


def script_turns(settings: Settings) -> int:
    """Answers the scripted sub-agent needs: every turn of every slice of every round, and spares."""
    return 4 * settings.agent_turns * settings.rounds + 8


def mcp_run_command() -> list[str]:
    """``mcp-run`` as installed beside this interpreter (the venv's), else ``python -m runner``."""
    beside = Path(sys.executable).with_name("mcp-run")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mcp-run")
    return [found] if found else [sys.executable, "-m", "runner"]


def write_team(folder: Path, turns: int, tag: str) -> tuple[Path, Path]:
    """The in-process manifest and the served sub-agent's manifest (its own copy of the server)."""
    folder.mkdir(parents=True)
    (folder / "sub-script.yaml").write_text(yaml.safe_dump([ANSWER] * turns))
    sub = {"description": "Answers at once.", "model": {"id": "scripted", "script": "sub-script.yaml"},
           "tools": ["bench"]}
    team = {"version": 1, "name": "bench-team", "model": "offline", "checkpointer": "memory",
            "servers": {"bench": stdio_entry(env={TAG: tag})}, "agent": {"agents": ["sub"]},
            "agents": {"sub": sub}}
    team_path = folder / "team.yaml"
    team_path.write_text(yaml.safe_dump(team))
    served = {"version": 1, "name": "sub", "model": {"id": "scripted", "script": "sub-script.yaml"},
              "checkpointer": "memory", "servers": {"bench": stdio_entry(env={TAG: tag})}}
    served_path = folder / "sub.yaml"
    served_path.write_text(yaml.safe_dump(served))
    return team_path, served_path


def write_composed(folder: Path, served: Path, tag: str) -> Path:
    program, *args = mcp_run_command()
    document = {"version": 1, "name": "bench-composed", "model": "offline", "checkpointer": "memory",
                "servers": {"bench": stdio_entry(env={TAG: tag}),
                            "sub": {"command": program, "args": [*args, "serve", str(served)],
                                    # the repository's runner, as the benchmark's own (PYTHONPATH
                                    # is not among the variables a server inherits)
                                    "env": {TAG: tag, "PYTHONPATH": str(ROOT)}, "timeout": "5m",
                                    # a whole mcp-run starting: on a busy machine past the 20 s default
                                    "startup_timeout": "3m"}}}
    path = folder / "composed.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


async def timed_turn(runtime: Runtime, message: str) -> tuple[float, float]:
    """One turn on a new thread: its ms, and the ms of its one call (``tool_call`` to
    ``tool_result``, the main agent's own); checks the answer."""
    call_started = call_ms = 0.0
    final = None
    started = time.perf_counter()
    async for event in stream_turn(runtime, message, thread_id=uuid.uuid4().hex):
        if event.get("agent") is not None:  # the sub-agent's own events
            continue
        if event["type"] == "tool_call":
            call_started = time.perf_counter()
        elif event["type"] == "tool_result":
            call_ms = elapsed_ms(call_started)
            if event["status"] != "success":
                raise BenchError(f"{message}: the call failed: {event['text']}")
        elif event["type"] == "final":
            final = event["text"]
    turn_ms = elapsed_ms(started)
    if final is None or not final.endswith(f"returned: {ANSWER}") or not call_started:
        raise BenchError(f"{message}: the turn answered {final!r}, not one call's report of {ANSWER!r}")
    return turn_ms, call_ms


def tagged_processes(tag: str) -> dict[str, int]:
    """How many of this process's descendants carrying ``BENCH_COPY=tag`` are benchmark servers,
    and how many are ``mcp-run serve``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
    mine, found = {os.getpid()}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                found = True
    counts = {"bench_servers": 0, "serve_processes": 0}
    marker = f"{TAG}={tag}".encode()
    for pid in mine - {os.getpid()}:
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in environment:
            counts["bench_servers"] += b"bench/server.py" in command
            counts["serve_processes"] += b"\0serve\0" in command
    return counts


@asynccontextmanager
async def sub_agent_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    team_tag, composed_tag = f"team-{os.getpid()}", f"composed-{os.getpid()}"
    team_path, _ = write_team(folder / "team", script_turns(settings), team_tag)
    _, served_path = write_team(folder / "composed", script_turns(settings), composed_tag)
    composed_path = write_composed(folder / "composed", served_path, composed_tag)
    async with AsyncExitStack() as stack:
        team = await stack.enter_async_context(load_agent(team_path))
        composed = await stack.enter_async_context(load_agent(composed_path))
        served = composed.fleet.connections["sub"]
        if served.status != "ready":
            raise BenchError(f"mcp-run serve sub.yaml did not start: {served.status}")
        for runtime, message in ((team, PLAIN_MESSAGE), (team, SUB_MESSAGE), (composed, COMPOSED_MESSAGE)):
            await timed_turn(runtime, message)
        copies = {IN_PROCESS_FLOOR: tagged_processes(team_tag), COMPOSED: tagged_processes(composed_tag)}
        if copies[IN_PROCESS_FLOOR]["bench_servers"] != 1 or copies[COMPOSED]["bench_servers"] != 2:
            raise BenchError(f"expected one benchmark server in process and two composed: {copies}")
        per_slice = max(settings.agent_turns // settings.latency_slices, 1)

        async def plain() -> Metrics:
            return {"turn_samples_ms": [(await timed_turn(team, PLAIN_MESSAGE))[0] for _ in range(per_slice)]}

        async def sub_against_plain() -> Metrics:
            plain_ms, sub_ms = [], []
            for _ in range(per_slice):  # alternately, so both see the same machine
                plain_ms.append((await timed_turn(team, PLAIN_MESSAGE))[0])
                sub_ms.append((await timed_turn(team, SUB_MESSAGE))[0])
            return {"turn_samples_ms": sub_ms, "floor_samples_ms": plain_ms}

        def calls(runtime: Runtime, message: str, path: str) -> Any:
            async def measure() -> Metrics:
                samples = [(await timed_turn(runtime, message))[1] for _ in range(per_slice)]
                return {"call_samples_ms": samples, **copies[path]}
            return measure

        stack, flat = stack_graph(), stack_graph(subgraph=False)
        await timed_stack_call(stack)
        await timed_stack_call(flat)

        async def stack_against_both() -> Metrics:
            floor_ms, flat_ms, in_process_ms, composed_ms = [], [], [], []
            for _ in range(per_slice):  # alternately, so the four see the same machine
                floor_ms.append(await timed_stack_call(stack))
                flat_ms.append(await timed_stack_call(flat))
                in_process_ms.append((await timed_turn(team, SUB_MESSAGE))[1])
                composed_ms.append((await timed_turn(composed, COMPOSED_MESSAGE))[1])
            return {"call_samples_ms": floor_ms, "no_subgraph_samples_ms": flat_ms,
                    "in_process_samples_ms": in_process_ms,
                    "composed_samples_ms": composed_ms}

        yield [
            Case(OVERHEAD_ROW, PLAIN, plain, "p50_ms", slices=settings.latency_slices, combine=turn_latency),
            Case(OVERHEAD_ROW, IN_PROCESS, sub_against_plain, "p50_ms", PLAIN, (OVERHEAD_GOAL,),
                 settings.latency_slices, turn_overhead),
            Case(COMPOSED_ROW, IN_PROCESS_FLOOR, calls(team, SUB_MESSAGE, IN_PROCESS_FLOOR), "call_p50_ms",
                 slices=settings.latency_slices, combine=call_latency),
            Case(COMPOSED_ROW, COMPOSED, calls(composed, COMPOSED_MESSAGE, COMPOSED), "call_p50_ms",
                 IN_PROCESS_FLOOR, (COMPOSED_GOAL,), settings.latency_slices, call_latency),
            Case(COMPOSED_ROW, STACK, stack_against_both, "call_p50_ms", IN_PROCESS_FLOOR,
                 slices=settings.latency_slices, combine=stack_ceiling),
        ]


def turn_latency(slices: list[Metrics]) -> Metrics:
    samples = [sample for part in slices for sample in part["turn_samples_ms"]]
    return {"p50_ms": percentile(samples, 0.5), "p99_ms": percentile(samples, 0.99)}


def turn_overhead(slices: list[Metrics]) -> Metrics:
    """The sub-agent turns' p50 and p99, and their p50 minus that of the plain turns timed between
    them, every slice's samples pooled."""
    mine = [sample for part in slices for sample in part["turn_samples_ms"]]
    floor = [sample for part in slices for sample in part["floor_samples_ms"]]
    metrics = {"p50_ms": percentile(mine, 0.5), "p99_ms": percentile(mine, 0.99),
               "plain_p50_ms": percentile(floor, 0.5)}
    metrics["overhead_ms"] = metrics["p50_ms"] - metrics["plain_p50_ms"]
    return metrics


def call_latency(slices: list[Metrics]) -> Metrics:
    samples = [sample for part in slices for sample in part["call_samples_ms"]]
    counts = {key: slices[0][key] for key in ("bench_servers", "serve_processes")}
    return {"call_p50_ms": percentile(samples, 0.5), "call_p99_ms": percentile(samples, 0.99), **counts}


def stack_ceiling(slices: list[Metrics]) -> Metrics:
    """The stack's floor call (p50, p99), the same without a subgraph, the in-process and composed
    calls timed alongside, and the ratio 10b would reach with the in-process call at that floor
    (the composed call losing the same time, since ``serve`` runs the called agent's graph too)."""
    def pooled(key: str) -> list[float]:
        return [sample for part in slices for sample in part[key]]

    floor, in_process, composed = (percentile(pooled(key), 0.5) for key in (
        "call_samples_ms", "in_process_samples_ms", "composed_samples_ms"))
    return {"call_p50_ms": floor, "call_p99_ms": percentile(pooled("call_samples_ms"), 0.99),
            "no_subgraph_p50_ms": percentile(pooled("no_subgraph_samples_ms"), 0.5),
            "in_process_p50_ms": in_process, "composed_p50_ms": composed,
            "ceiling_ratio": (composed - in_process + floor) / floor}
