"""Per-call latency of ``ServerConnection.call_tool`` against the raw ``mcp.Client``, over stdio.

Both sides talk to the same test server (tests/servers/demo.py, tool ``echo``) started as a stdio
subprocess, in each protocol era. Prints p50/p90/p99/mean in milliseconds per side and the
overhead of the fleet layer.

    .venv/bin/python bench/call_latency.py [--calls 500] [--warmup 50] [--era 2026-07-28|2025-11-25|both]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from servers import specs  # noqa: E402

from runner.servers import open_fleet  # noqa: E402

DEMO = ROOT / "tests" / "servers" / "demo.py"
ERAS = {"2026-07-28": [], "2025-11-25": ["--legacy"]}


async def timed(call: Callable[[], Awaitable[object]], samples: list[float]) -> None:
    started = time.perf_counter()
    await call()
    samples.append((time.perf_counter() - started) * 1000)


async def compare(era_args: list[str], calls: int, warmup: int) -> tuple[list[float], list[float]]:
    """Both clients connected at once; calls alternate, so load on the machine hits both alike."""
    parameters = StdioServerParameters(command=sys.executable, args=[str(DEMO), *era_args])
    raw_samples: list[float] = []
    layer_samples: list[float] = []
    with tempfile.TemporaryDirectory() as state:
        servers = {"demo": specs.stdio("demo", *era_args)}
        async with Client(parameters, cache=None) as client, open_fleet(
            servers, base_dir=ROOT, state_dir=Path(state)
        ) as fleet:
            connection = fleet.connections["demo"]

            async def raw() -> object:
                return await client.call_tool("echo", {"text": "ping"})

            async def layer() -> object:
                return await connection.call_tool("echo", {"text": "ping"})

            for _ in range(warmup):
                await raw()
                await layer()
            for _ in range(calls):
                await timed(raw, raw_samples)
                await timed(layer, layer_samples)
    return raw_samples, layer_samples


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def row(label: str, samples: list[float]) -> str:
    return (
        f"{label:<28} p50 {percentile(samples, 0.50):7.3f}  p90 {percentile(samples, 0.90):7.3f}  "
        f"p99 {percentile(samples, 0.99):7.3f}  mean {statistics.fmean(samples):7.3f}  (ms, n={len(samples)})"
    )


async def main(calls: int, warmup: int, eras: list[str]) -> None:
    print(f"python {sys.version.split()[0]}, stdio, tool 'echo', {calls} calls after {warmup} warm-up calls")
    for era in eras:
        raw, layer = await compare(ERAS[era], calls, warmup)
        print(f"-- {era}")
        print(row("raw mcp.Client", raw))
        print(row("ServerConnection.call_tool", layer))
        overhead = percentile(layer, 0.5) - percentile(raw, 0.5)
        print(f"{'overhead at p50':<28} {overhead:+.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--era", choices=[*ERAS, "both"], default="both")
    options = parser.parse_args()
    anyio.run(main, options.calls, options.warmup, list(ERAS) if options.era == "both" else [options.era])
