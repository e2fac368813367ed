"""Row 4b in a fresh process, so its peak RSS is the runner's own: many servers, many tools.

    python -m bench.scale_worker --url http://127.0.0.1:N --servers 20 --tools 500 --builds 3

Connects an mcp-run fleet to ``--servers`` streamable-HTTP benchmark servers (the ``--mounts``
endpoints of one ``bench/server.py`` process), builds the ``ToolCatalog`` over all their tools
``--builds`` times, and writes one JSON line: build times, fleet start time, tool count, and the
process's RSS after imports and at its peak.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

from bench.calls import bench_manifest
from bench.harness import BenchError
from bench.launch import ROOT
from bench.server import mount_path
from bench.stats import elapsed_ms, median
from runner.servers import open_fleet
from runner.tools.catalog import ToolCatalog

START_TIMEOUT = 120.0


def peak_rss_mb() -> float:
    """This process's own high-water RSS. Not ``ru_maxrss``: Linux carries it across ``exec``, so
    it would report the forking parent's RSS (the benchmark holding other rows' tools) instead."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # elsewhere; Linux reports KiB


async def measure(url: str, servers: int, tools: int, builds: int) -> dict[str, float]:
    baseline_mb = psutil.Process().memory_info().rss / 2**20
    manifest = bench_manifest({f"s{index:02d}": {"url": url + mount_path(index)} for index in range(servers)})
    with tempfile.TemporaryDirectory(prefix="bench-") as state, anyio.fail_after(START_TIMEOUT):
        started = time.perf_counter()
        async with open_fleet(manifest.servers, base_dir=ROOT, state_dir=Path(state)) as fleet:
            fleet_ms = elapsed_ms(started)
            offered = sum(len(connection.tools) for connection in fleet.connections.values())
            times = []
            built = 0
            for _ in range(builds):
                started = time.perf_counter()
                catalog = ToolCatalog(manifest, fleet.connections, ROOT)
                times.append(elapsed_ms(started))
                built = len(catalog.entries)
    if offered != servers * tools or built != offered:
        raise BenchError(f"expected {servers * tools} tools; the servers offered {offered}, {built} built")
    return {
        "build_ms": median(times),
        "first_build_ms": times[0],
        "fleet_start_ms": fleet_ms,
        "tools": float(built),
        "baseline_rss_mb": baseline_mb,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--builds", type=int, default=3)
    options = parser.parse_args()
    metrics = anyio.run(measure, options.url, options.servers, options.tools, options.builds)
    sys.stdout.write(json.dumps(metrics) + "\n")


if __name__ == "__main__":
    main()
