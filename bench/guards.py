"""Row 12: what usage accounting, budgets (``limits:``) and ``policy:`` add to a turn.

Two manifests, the same scripted turn (call ``bench__echo``, then answer) on the same benchmark
server over stdio, a memory checkpointer each:

- off (the floor): no prices, no ``limits``, no ``policy``, and a script that reports no usage;
- on: each model step reports its tokens (``usage`` in the script) and the model has prices (so
  each step's cost is computed and the thread's totals kept in its checkpoint), every budget of
  ``limits`` is set (per turn: tokens, tool calls, duration; per thread: tokens, cost), and
  ``policy`` has three rules, the call matched by the last (an argument glob), after two that
  do not match it (a regular expression on an argument, another tool).

As in row 5, the overhead of a turn is its p50 minus the p50 of the tool call alone
(``run_tool_call``, timed alternately with the turns). The on path times on and off turns (and
their tool calls) in pairs, in alternating order, and its goal is on the ratio of those
overheads (``overhead_ratio``): on a shared machine, overheads measured a slice apart differ by
more than the 5% asked. The ratio column, against the off path's own slices, is shown as usual.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.agent import check_turn, combined_overhead, turn_overhead
from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import stdio_entry
from bench.stats import Metrics
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

ROW = "12. turn overhead with usage, budgets and policy on vs all off"
OFF = "usage, limits and policy off (floor)"
ON = "usage with prices, every limit, three policy rules"
GOAL = Goal("turn overhead with usage, budgets and policy on <= 1.05× all off", 1.05,
            metric="overhead_ratio")
PAIRED_KEYS = ("tool_samples_ms", "turn_samples_ms", "floor_tool_samples_ms", "floor_turn_samples_ms")
USAGE = {"input_tokens": 120, "output_tokens": 12}
LIMITS = {"per_turn": {"max_tokens": 10_000_000, "max_tool_calls": 1_000, "max_duration": "10m"},
          "per_thread": {"max_tokens": 1_000_000_000, "max_cost": 1_000_000.0}}
POLICY = [
    {"tool": "bench__echo", "args": {"text": {"regex": "(?i)secret"}}, "action": "deny",
     "reason": "no secrets"},
    {"tool": "bench__add", "action": "ask"},
    {"tool": "bench__*", "args": {"text": "p*"}, "action": "allow"},
]


def script(turns: int, *, usage: bool) -> list[Any]:
    call: dict[str, Any] = {"tool_calls": [{"name": "bench__echo", "args": {"text": "ping"}}]}
    answer: dict[str, Any] = {"text": "done"}
    if usage:
        call, answer = {**call, "usage": USAGE}, {**answer, "usage": USAGE}
    return [call, answer] * turns


def write_manifest(folder: Path, turns: int, *, on: bool) -> Path:
    folder.mkdir(parents=True)
    (folder / "script.yaml").write_text(yaml.safe_dump(script(turns, usage=on)))
    model: dict[str, Any] = {"id": "scripted", "script": "script.yaml"}
    document: dict[str, Any] = {"version": 1, "name": "bench-guards", "model": model,
                                "checkpointer": "memory", "servers": {"bench": stdio_entry()}}
    if on:
        model["pricing"] = {"input_per_mtok": 0.4, "output_per_mtok": 1.6}
        document |= {"limits": LIMITS, "policy": POLICY}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


async def check_guards(runtime: Runtime, *, on: bool) -> None:
    """On: the call is allowed by the policy's last rule and each step is priced; off: neither."""
    decisions, costs = [], []
    async for event in stream_turn(runtime, "go", thread_id=uuid.uuid4().hex):
        if event["type"] == "policy":
            decisions.append((event["action"], event["rule"]))
        elif event["type"] == "usage":
            costs.append(event["turn"]["cost"])
    expected = ([("allow", len(POLICY) - 1)], 2) if on else ([], 0)
    if (decisions, sum(cost is not None for cost in costs)) != expected:
        raise BenchError(f"row 12 ({'on' if on else 'off'}): policy decisions {decisions}, costs {costs}")


def turns_per_slice(settings: Settings) -> int:
    """Turns of one slice: a ratio of 1.05 needs more turns than row 5's (a latency case's calls)."""
    return max(settings.calls // settings.latency_slices, 1)


@asynccontextmanager
async def guards_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    # Off's script serves its own case and the off turns timed between the on turns.
    turns = 2 * turns_per_slice(settings) * settings.latency_slices * settings.rounds + 4
    async with AsyncExitStack() as stack:
        runtimes = {}
        for on in (False, True):
            path = write_manifest(folder / ("on" if on else "off"), turns, on=on)
            runtimes[on] = await stack.enter_async_context(load_agent(path))
            await check_turn(runtimes[on])
            await check_guards(runtimes[on], on=on)

        async def off() -> Metrics:
            return await turn_overhead(runtimes[False], turns_per_slice(settings))

        async def on_against_off() -> Metrics:
            return await paired_overheads(runtimes[True], runtimes[False], turns_per_slice(settings))

        yield [Case(ROW, OFF, off, "overhead_ms", slices=settings.latency_slices, combine=combined_overhead),
               Case(ROW, ON, on_against_off, "overhead_ms", OFF, (GOAL,), settings.latency_slices,
                    combined_paired)]


async def paired_overheads(on: Runtime, off: Runtime, turns: int) -> dict[str, Any]:
    """One slice of ``turns`` pairs: a tool call and a turn of each runtime, the two runtimes'
    order swapped every pair, so that both see the same moments of a shared machine."""
    samples: dict[str, list[float]] = {key: [] for key in PAIRED_KEYS}
    for index in range(turns):
        for runtime, prefix in ((on, ""), (off, "floor_"))[:: 1 if index % 2 else -1]:
            part = await turn_overhead(runtime, 1)
            samples[f"{prefix}tool_samples_ms"] += part["tool_samples_ms"]
            samples[f"{prefix}turn_samples_ms"] += part["turn_samples_ms"]
    return samples


def combined_paired(slices: list[dict[str, Any]]) -> Metrics:
    """The on turns' overhead (as row 5's), and its ratio to that of the off turns timed between
    them (``overhead_ratio``: what the goal is on)."""
    mine = combined_overhead(slices)
    floor = combined_overhead([{key.removeprefix("floor_"): value for key, value in part.items()
                                if key.startswith("floor_")} for part in slices])
    return {**mine, "floor_overhead_ms": floor["overhead_ms"],
            "overhead_ratio": mine["overhead_ms"] / floor["overhead_ms"]}
