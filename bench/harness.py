"""Rounds: every case measured back to back, in a rotating order, and compared within its round.

A :class:`Case` is one path of one row ("call latency, stdio" / "raw mcp.Client"). Suites open
what their cases need (servers, sessions, runtimes) once, before the first round; each round then
runs every row, and every case of a row, starting one place further along each time, so no path
always runs first (warm caches) or last (a tired machine). A case's ratio is taken against its
floor *measured in the same round*, and the summary reports medians over rounds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from bench.stats import Metrics, median

logger = logging.getLogger(__name__)

Better = Literal["lower", "higher"]
CASE_TIMEOUT = 300.0  # one case, one round


@dataclass(frozen=True)
class Goal:
    """A target for one case: ``limit`` on its ratio to the floor, or on an absolute metric."""

    text: str
    limit: float
    metric: str = "ratio"  # "ratio", or a metric key such as "ms" or "peak_rss_mb"
    better: Better = "lower"
    percent: bool = False  # a ratio shown as a share of the floor ("1.7%")

    def met(self, value: float) -> bool:
        return value <= self.limit if self.better == "lower" else value >= self.limit


@dataclass
class Case:
    row: str
    path: str
    measure: Callable[[], Awaitable[Metrics]]
    key: str  # the metric the ratio and the table lead with
    floor: str | None = None  # the path, in the same row, this one is compared with
    goals: tuple[Goal, ...] = ()
    # Measured in this many slices per round, interleaved with the slices of the row's other
    # cases (so a floor and its path see the same machine), and the slices' metrics combined.
    slices: int = 1
    combine: Callable[[list[Metrics]], Metrics] | None = None


@dataclass
class CaseResult:
    case: Case
    rounds: list[Metrics] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # wall time of each round's measurement

    def summary(self) -> Metrics:
        """The median of every metric over the rounds (and of the per-round ratios)."""
        keys = {key for metrics in self.rounds for key in metrics}
        summary = {key: median([m[key] for m in self.rounds if key in m]) for key in sorted(keys)}
        if self.ratios:
            summary["ratio"] = median(self.ratios)
        return summary

    def goal_outcomes(self) -> list[tuple[Goal, float | None, bool | None]]:
        summary = self.summary() if self.rounds else {}
        outcomes = []
        for goal in self.case.goals:
            value = summary.get(goal.metric)
            outcomes.append((goal, value, None if value is None else goal.met(value)))
        return outcomes


def rotated(items: list, shift: int) -> list:
    if not items:
        return items
    shift %= len(items)
    return items[shift:] + items[:shift]


async def run_rounds(
    cases: list[Case],
    rounds: int,
    *,
    on_round: Callable[[int, float], None] | None = None,
) -> list[CaseResult]:
    """Run every case once per round; ratios to the floor are computed inside each round."""
    results = {(case.row, case.path): CaseResult(case) for case in cases}
    rows: dict[str, list[Case]] = {}
    for case in cases:
        rows.setdefault(case.row, []).append(case)
    row_names = list(rows)
    for index in range(rounds):
        started = time.perf_counter()
        this_round: dict[tuple[str, str], Metrics] = {}
        for row in rotated(row_names, index):
            sliced: dict[str, list[Metrics]] = {case.path: [] for case in rows[row]}
            took: dict[str, float] = dict.fromkeys(sliced, 0.0)
            for part in range(max(case.slices for case in rows[row])):
                for case in rotated(rows[row], index + part):
                    if part >= case.slices:
                        continue
                    case_started = time.perf_counter()
                    with anyio.fail_after(CASE_TIMEOUT):  # a hung call must not hang the run
                        sliced[case.path].append(await case.measure())
                    took[case.path] += time.perf_counter() - case_started
            for case in rows[row]:
                parts = sliced[case.path]
                metrics = case.combine(parts) if case.combine is not None else parts[0]
                logger.debug("round %d: %s / %s: %.2f s", index + 1, case.row, case.path, took[case.path])
                this_round[(case.row, case.path)] = metrics
                results[(case.row, case.path)].rounds.append(metrics)
                results[(case.row, case.path)].seconds.append(took[case.path])
        for case in cases:
            if case.floor is None:
                continue
            floor = this_round.get((case.row, case.floor))
            mine = this_round.get((case.row, case.path))
            if floor and mine and floor.get(case.key):
                results[(case.row, case.path)].ratios.append(mine[case.key] / floor[case.key])
        if on_round is not None:
            on_round(index + 1, time.perf_counter() - started)
    return list(results.values())


@asynccontextmanager
async def opened_together(
    contexts: list[AbstractAsyncContextManager[Any]], timeout: float
) -> AsyncIterator[list[Any]]:
    """Enter every context at once, each in a task of its own (setups overlap); yields their values.

    Each context is exited by the task that entered it when the block ends.
    """
    values: list[Any] = [None] * len(contexts)
    entered = 0
    all_entered = anyio.Event()
    if not contexts:  # no suite's row chosen (say, --rows 3b): nothing to wait for
        all_entered.set()
    release = anyio.Event()

    async def hold(index: int, context: AbstractAsyncContextManager[Any]) -> None:
        nonlocal entered
        async with context as value:
            values[index] = value
            entered += 1
            if entered == len(contexts):
                all_entered.set()
            await release.wait()

    async with anyio.create_task_group() as group:
        for index, context in enumerate(contexts):
            group.start_soon(hold, index, context)
        with anyio.fail_after(timeout):
            await all_entered.wait()
        try:
            yield values
        finally:
            release.set()


class BenchError(RuntimeError):
    """A benchmark could not run (a path gave a wrong answer, a worker failed)."""


@dataclass(frozen=True)
class Settings:
    """How much each case measures per round."""

    rounds: int
    calls: int  # latency: timed calls per case and round (shared among its slices)
    warmup: int
    default_calls: int  # langchain-mcp-adapters default mode: a new session (process) per call
    throughput_calls: int  # per slice (at least throughput_per_worker per worker: stats.slice_calls)
    throughput_per_worker: int
    throughput_slices: int  # throughput cases: slices per round, interleaved across the row
    latency_slices: int  # latency cases (rows 1 and 8): the same; each warms up again
    list_repeats: int  # tools/list (and build) repeats per case
    wide_builds: int  # catalog builds over 20 x 500 tools per round
    agent_turns: int
    reloads: int  # of each kind, per round
    concurrency: tuple[int, ...] = (1, 8, 32)
    start_sizes: tuple[int, ...] = (1, 4, 8)
    wide_servers: int = 20
    wide_tools: int = 500
    many_tools: int = 1000
    long_thread_turns: int = 1000  # row 9: turns of its one thread per round
    idle_threads: int = 1000  # row 13c: threads opened on the served agent per round


PRESETS = {
    "full": Settings(rounds=3, calls=200, warmup=20, default_calls=2, throughput_calls=160,
                     throughput_per_worker=16,
                     throughput_slices=3, latency_slices=4, list_repeats=3, wide_builds=2, agent_turns=20,
                     reloads=2),
    "quick": Settings(rounds=1, calls=100, warmup=10, default_calls=1, throughput_calls=96,
                      throughput_per_worker=8,
                      throughput_slices=2, latency_slices=2, list_repeats=2, wide_builds=1, agent_turns=10,
                      reloads=1, start_sizes=(1, 8), long_thread_turns=200, idle_threads=300),
    "smoke": Settings(rounds=1, calls=20, warmup=5, default_calls=1, throughput_calls=64,
                      throughput_per_worker=2,
                      throughput_slices=1, latency_slices=1, list_repeats=1, wide_builds=1, agent_turns=3,
                      reloads=1, start_sizes=(1, 2), wide_servers=4, wide_tools=100, many_tools=200,
                      long_thread_turns=20, idle_threads=16),
}
