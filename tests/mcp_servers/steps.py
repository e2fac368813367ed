"""A server whose one tool has a side effect a test can count, and can hold a call until the
process running it is killed: what a crash in the middle of a turn needs.

    steps.py --folder DIR

Tool: ``work(step, hold=False)`` appends ``STEP`` to ``DIR/done`` (one line per call that ran) and
answers ``done STEP``. With ``hold``, the first call of that step writes the marker ``DIR/STEP.held``
and then never answers (the test kills the agent meanwhile); a later call of the step finds the
marker and answers at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `mcp_servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import MCPServer

HOLD_LIMIT = 120.0  # seconds a held call waits at most: a test that never kills still ends


def build(folder: Path) -> MCPServer:
    server = MCPServer("steps")

    @server.tool()
    async def work(step: str, hold: bool = False) -> str:
        """Do step ``step`` (recorded in the folder's ``done`` file)."""
        marker = folder / f"{step}.held"
        if hold and not marker.exists():
            marker.write_text("held\n")
            await anyio.sleep(HOLD_LIMIT)
            return f"step {step} was never killed"
        with (folder / "done").open("a") as done:
            done.write(f"{step}\n")
        return f"done {step}"

    return server


def main() -> None:
    from mcp_servers import _serve

    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=Path, required=True)
    options, rest = parser.parse_known_args()
    _serve.main(lambda: build(options.folder), rest)


if __name__ == "__main__":
    main()
