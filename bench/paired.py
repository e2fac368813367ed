"""``python -m bench.paired``: row 2's throughput at one concurrency, paired, many rounds, with an
interval for each ratio: is a difference of a few percent there at all, on this machine?

    .venv/bin/python -m bench.paired                       # stdio and HTTP, c=32, 30 rounds (~4 min)
    .venv/bin/python -m bench.paired --transport http --rounds 60

Each round times one slice of each path (the floor, the floor declaring mcp-run's capabilities, the
graph tool node) back to back, in an order that rotates and reverses from round to round; a
round's ratio is that of two slices timed seconds apart. Printed per ratio: the median over the
rounds and a distribution-free 95% interval for it (order statistics of the binomial). An interval
that holds 1.0 says the two paths cannot be told apart here.
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import AsyncExitStack

import anyio

from bench.calls import NODE, RAW, SAME, TRANSPORTS, open_call_paths
from bench.launch import http_server
from bench.stats import median, run_concurrently

PATHS = (RAW, SAME, NODE)
PAIRS = ((SAME, RAW), (NODE, RAW), (NODE, SAME))
Z_95 = 1.96


def median_interval(values: list[float], z: float = Z_95) -> tuple[float, float, float]:
    """The median of ``values`` and a distribution-free interval for it (about 95% with ``z`` 1.96)."""
    ordered = sorted(values)
    count = len(ordered)
    spread = z * math.sqrt(count)
    low_rank = math.floor((count - spread) / 2)  # 1-based ranks, as the textbooks give them
    high_rank = math.ceil(1 + (count + spread) / 2)
    return median(ordered), ordered[max(low_rank, 1) - 1], ordered[min(high_rank, count) - 1]


def round_order(index: int) -> list[str]:
    start = index % len(PATHS)
    order = [*PATHS[start:], *PATHS[:start]]
    return order[::-1] if index % 2 else order


Results = dict[str, dict[str, list[float]]]  # calls/s by transport, then path, one per round


async def measure(transports: list[str], rounds: int, concurrency: int, calls: int) -> Results:
    async with AsyncExitStack() as stack:
        http_url = await stack.enter_async_context(http_server())
        paths = await stack.enter_async_context(open_call_paths(http_url))
        results: Results = {transport: {path: [] for path in PATHS} for transport in transports}
        for transport in transports:
            for index in range(rounds):
                for path in round_order(index):
                    metrics = await run_concurrently(paths[transport][path], calls, concurrency)
                    results[transport][path].append(metrics["calls_per_s"])
                print(f"bench.paired: {transport} round {index + 1}/{rounds}", file=sys.stderr)
        return results


def report(results: Results, concurrency: int) -> str:
    lines = [f"| transport | ratio (c={concurrency}, calls/s) | median | 95% interval | rounds |",
             "|---|---|---|---|---|"]
    for transport, by_path in results.items():
        for numerator, denominator in PAIRS:
            pairs = zip(by_path[numerator], by_path[denominator], strict=True)
            ratios = [top / bottom for top, bottom in pairs]
            middle, low, high = median_interval(ratios)
            lines.append(f"| {transport} | {numerator} / {denominator} | {middle:.3f}× | "
                         f"{low:.3f}× - {high:.3f}× | {len(ratios)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.paired", description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=[*TRANSPORTS, "both"], default="both")
    parser.add_argument("--rounds", type=int, default=30, help="rounds (at least 5)")
    parser.add_argument("--concurrency", type=int, default=32, help="calls at once")
    parser.add_argument("--calls", type=int, default=512, help="calls per slice")
    options = parser.parse_args(argv)
    if options.rounds < 5 or options.concurrency < 1 or options.calls < options.concurrency:
        parser.error("--rounds must be at least 5, --concurrency at least 1, --calls at least --concurrency")
    transports = list(TRANSPORTS) if options.transport == "both" else [options.transport]
    try:
        results = anyio.run(measure, transports, options.rounds, options.concurrency, options.calls)
    except KeyboardInterrupt:  # every server is stopped by then (their contexts exit)
        sys.stderr.write("bench.paired: interrupted\n")
        return 130
    print(report(results, options.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
