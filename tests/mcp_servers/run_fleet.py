"""Run a fleet in a process of its own, for tests of what happens when that process is signalled.

    run_fleet.py STATE_DIR NAME [NAME...]

Starts the test servers NAME... over stdio, prints one JSON line ``{"pids": [...]}`` once all are
ready, and waits. SIGTERM ends it through ``stop_on_signals``; SIGINT (Ctrl-C) through the
KeyboardInterrupt that ``anyio.run`` raises. Either way every server is stopped first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from mcp_servers import specs
from runner.servers import open_fleet, stop_on_signals


async def main(state_dir: Path, names: list[str]) -> None:
    servers = {f"{name}-{index}": specs.stdio(name) for index, name in enumerate(names)}
    async with stop_on_signals() as stop:
        async with open_fleet(servers, base_dir=state_dir, state_dir=state_dir) as fleet:
            pids = [connection.pid for connection in fleet.connections.values()]
            print(json.dumps({"pids": pids}), flush=True)
            await anyio.sleep_forever()
    print(json.dumps({"stopped_by": stop.received.name if stop.received else None}), flush=True)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), sys.argv[2:])
