"""Row 11: a ``parallel`` workflow fanning a task out to 8 agents, against one agent alone.

One manifest: the offline model as the main agent, one copy of the benchmark server, and nine
scripted agents (each a script of its own): ``solo`` and ``w1`` ... ``w8``, each of which calls
``bench__sleep`` (200 ms) and then answers. The workflow ``fan`` is ``parallel: [w1, ..., w8]``
with a template joining the answers. Each turn the main model calls one of them (``solo`` or
``fan``) and reports its result; the row compares the turns' wall time. Eight agents waiting at
once should take about as long as one.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import stdio_entry
from bench.stats import Metrics, elapsed_ms, percentile
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

ROW = "11. parallel fan-out to 8 agents, each waiting 200 ms in a tool, vs one agent"
ONE = "one agent (floor)"
FAN_OUT = "parallel workflow of 8 agents"
WIDTH = 8
WAIT_S = 0.2
FAN_OUT_GOAL = Goal("fan-out to 8 agents <= 1.2× one agent's wall time", 1.2)
ANSWER = "waited"


def agent_script(turns: int) -> list[Any]:
    one = [{"tool_calls": [{"name": "bench__sleep", "args": {"seconds": WAIT_S}}]}, ANSWER]
    return one * turns


def write_manifest(folder: Path, turns: int) -> Path:
    folder.mkdir(parents=True)
    names = ["solo", *(f"w{index}" for index in range(1, WIDTH + 1))]
    agents: dict[str, Any] = {}
    for name in names:
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(agent_script(turns)))
        agents[name] = {"description": "Waits, then answers.", "tools": ["bench__sleep"],
                        "model": {"id": "scripted", "script": f"{name}.yaml"}}
    agents["fan"] = {"description": "Every worker at once.", "parallel": names[1:],
                     "template": "{{ answers | length }} answers: {{ answers.values() | join(', ') }}"}
    document = {"version": 1, "name": "bench-fan-out", "model": "offline", "checkpointer": "memory",
                "servers": {"bench": stdio_entry()}, "agent": {"agents": ["solo", "fan"]}, "agents": agents}
    path = folder / "fanout.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


async def turn(runtime: Runtime, agent: str) -> float:
    """One turn on a new thread in which the main model calls ``agent``; its wall time in ms."""
    message = f"/call {agent} " + json.dumps({"task": "wait"})
    final = None
    started = time.perf_counter()
    async for event in stream_turn(runtime, message, thread_id=uuid.uuid4().hex):
        if event["type"] == "final" and event.get("agent") is None:
            final = event["text"]
    took = elapsed_ms(started)
    expected = f"{WIDTH} answers: " + ", ".join([ANSWER] * WIDTH) if agent == "fan" else ANSWER
    if final != f"{agent} returned: {expected}":
        raise BenchError(f"the turn calling {agent} answered {final!r}")
    return took


def turns_per_slice(settings: Settings) -> int:
    return max(settings.agent_turns // (2 * settings.latency_slices), 1)


@asynccontextmanager
async def fan_out_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    # Every agent's script: a turn per timed turn of every round, one to check, and spares.
    path = write_manifest(folder, turns_per_slice(settings) * settings.latency_slices * settings.rounds + 2)
    async with load_agent(path) as runtime:
        for agent in ("solo", "fan"):
            await turn(runtime, agent)

        def measure(agent: str) -> Any:
            async def timed() -> Metrics:
                return {"samples_ms": [await turn(runtime, agent) for _ in range(turns_per_slice(settings))]}
            return timed

        yield [Case(ROW, ONE, measure("solo"), "p50_ms", slices=settings.latency_slices, combine=wall_time),
               Case(ROW, FAN_OUT, measure("fan"), "p50_ms", ONE, (FAN_OUT_GOAL,), settings.latency_slices,
                    wall_time)]


def wall_time(slices: list[Metrics]) -> Metrics:
    samples = [sample for part in slices for sample in part["samples_ms"]]
    return {"p50_ms": percentile(samples, 0.5), "p99_ms": percentile(samples, 0.99)}
