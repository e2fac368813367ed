"""Numbers from samples: percentiles, timed loops, throughput.

Shared with the langchain-mcp-adapters worker, which runs in another virtual environment (mcp 1.x):
this module imports nothing but the standard library and anyio (which both environments have).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

Metrics = dict[str, float]
Call = Callable[[], Awaitable[Any]]


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in 0..1) of a non-empty sample."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def median(values: list[float]) -> float:
    return statistics.median(values)


async def median_ms(call: Call, repeats: int) -> float:
    """The median time of ``repeats`` sequential calls, in milliseconds."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def latency_metrics(samples_ms: list[float]) -> Metrics:
    return {
        "p50_ms": percentile(samples_ms, 0.50),
        "p99_ms": percentile(samples_ms, 0.99),
        "mean_ms": statistics.fmean(samples_ms),
        "n": float(len(samples_ms)),
    }


async def time_calls(call: Call, calls: int, warmup: int) -> Metrics:
    """Latency of ``calls`` sequential calls, after ``warmup`` untimed ones."""
    return latency_metrics(await _timed(call, calls, warmup))


async def _timed(call: Call, calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await call()
    samples: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def latency_slice(call: Call, calls: int, warmup: int, slices: int) -> dict[str, Any]:
    """One of ``slices`` slices of a latency case of ``calls`` timed calls after ``warmup`` untimed
    ones (each slice gets its share of both, at least one); the samples themselves, so that the
    slices can be pooled (:func:`combined_latency`)."""
    return {"samples_ms": await _timed(call, max(calls // slices, 1), max(warmup // slices, 1))}


def combined_latency(slices: list[dict[str, Any]]) -> Metrics:
    """The latency metrics of every slice's samples pooled."""
    return latency_metrics([sample for part in slices for sample in part["samples_ms"]])


def throughput_metrics(calls: int, seconds: float) -> Metrics:
    return {"calls_per_s": calls / seconds, "seconds": seconds, "n": float(calls)}


def combined_throughput(slices: list[Metrics]) -> Metrics:
    """The throughput of several slices of one case taken together: all calls over all their time."""
    return throughput_metrics(int(sum(part["n"] for part in slices)), sum(part["seconds"] for part in slices))


def split_calls(total: int, workers: int) -> list[int]:
    """``total`` calls shared out among ``workers`` as evenly as possible."""
    share, extra = divmod(total, workers)
    return [share + (1 if index < extra else 0) for index in range(workers)]


def slice_calls(settings: Mapping[str, Any], concurrency: int) -> int:
    """Calls in one throughput slice at ``concurrency``: enough that each worker makes several, so
    the ramp (every worker's first request sent at once) and the drain (the last few in flight)
    are a small part of the slice at c=32 too."""
    return max(settings["throughput_calls"], settings["throughput_per_worker"] * concurrency)


async def run_concurrently(call: Call, total: int, concurrency: int) -> Metrics:
    """Throughput of ``total`` calls made by ``concurrency`` workers at once (one warm-up call first)."""
    await call()

    async def worker(count: int) -> None:
        for _ in range(count):
            await call()

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for count in split_calls(total, concurrency):
            group.start_soon(worker, count)
    return throughput_metrics(total, time.perf_counter() - started)


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
