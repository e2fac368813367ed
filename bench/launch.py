"""Starting the benchmark server: stdio parameters, manifest entries, and HTTP server processes."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.text import TextReceiveStream
from mcp.client.stdio import StdioServerParameters

from bench.harness import BenchError

ROOT = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = ROOT / "bench" / "server.py"
HTTP_START_TIMEOUT = 60.0  # importing the SDK alone takes seconds on a busy 2-core machine
STOP_TIMEOUT = 10.0
BASE_TOOLS = 5  # echo, add, sleep, big_payload, add_tool: "--extra-tools N" makes N + 5 in all


def extra_for(total_tools: int) -> int:
    """The ``--extra-tools`` value for a server with ``total_tools`` tools in all."""
    return max(total_tools - BASE_TOOLS, 0)


def server_command(extra_tools: int = 0) -> list[str]:
    """The command line of the stdio benchmark server, run by this interpreter."""
    command = [sys.executable, str(SERVER_SCRIPT)]
    return command + (["--extra-tools", str(extra_tools)] if extra_tools else [])


def stdio_parameters(extra_tools: int = 0) -> StdioServerParameters:
    program, *args = server_command(extra_tools)
    return StdioServerParameters(command=program, args=args)


def stdio_entry(extra_tools: int = 0, **settings: Any) -> dict[str, Any]:
    """The manifest entry (``servers.<key>``) of the stdio benchmark server."""
    program, *args = server_command(extra_tools)
    return {"command": program, "args": args, **settings}


@asynccontextmanager
async def http_server(extra_tools: int = 0, mounts: int = 0) -> AsyncIterator[str]:
    """Run the HTTP benchmark server in a subprocess; yields its base URL (``http://127.0.0.1:N``).

    Endpoints: ``/mcp``, or ``/s00/mcp`` ... with ``mounts``. Ready once the URL is yielded.
    """
    command = [*server_command(extra_tools), "--transport", "http", "--mounts", str(mounts)]
    process = await anyio.open_process(command, stdout=-1, stderr=None)
    try:
        assert process.stdout is not None
        with anyio.fail_after(HTTP_START_TIMEOUT):
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 100)
        word, _, port = line.decode().partition(" ")
        if word != "PORT" or not port.isdigit():
            raise RuntimeError(f"the HTTP benchmark server said {line!r} instead of its port")
        yield f"http://127.0.0.1:{port}"
    finally:
        await stop(process)


async def stop(process: Process) -> None:
    """Terminate ``process`` and reap it; kill it if it does not go (bounded, shielded)."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(STOP_TIMEOUT):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


@asynccontextmanager
async def announcing_process(command: list[str], announced: re.Pattern[str], what: str,
                             timeout: float) -> AsyncIterator[tuple[str, int]]:
    """``command`` (an ``mcp-run`` command, say) in a subprocess, run from the repository; yields
    the first group of ``announced`` once its stderr shows it, and the process id. Its stderr is
    read until it stops (the pipe never fills up); the process is stopped when the block ends."""
    process = await anyio.open_process(command, cwd=ROOT, stdin=-3, stdout=-3, stderr=-1)  # DEVNULL, PIPE
    try:
        assert process.stderr is not None
        seen = ""
        with anyio.fail_after(timeout):
            async for chunk in TextReceiveStream(process.stderr):
                seen += chunk
                if match := announced.search(seen):
                    break
            else:
                raise BenchError(f"{what} ended before it was ready: {seen[-2000:]}")
        async with anyio.create_task_group() as group:
            group.start_soon(_drain, process.stderr)
            yield match.group(1), process.pid
            group.cancel_scope.cancel()
    finally:
        await stop(process)


async def _drain(stream: Any) -> None:
    async for _ in stream:  # keep the pipe from filling up while the run goes on
        pass
