"""``mcp-run serve`` in a subprocess, and real MCP clients talking to it over stdio and HTTP.

    async with stdio_agent(manifest) as client: ...
    with http_agent(manifest, "--max-turns", "1") as served:
        async with http_client(served.url) as client: ...

The served agents use the offline model and the gates server (``tests/mcp_servers/gates.py``) run
in the test process, so a test opens the gates and reads their log itself.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import openai
from builders import ROOT, SERVERS, await_announcement, write_manifest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

SERVE = [sys.executable, "-m", "runner", "serve"]
START_LIMIT = 60.0  # seconds for the served agent to start its servers and listen
LISTENING = re.compile(r"serving '.*' on (http://\S+)")


def write_served_agent(folder: Path, gates_url: str, *, approve: list[str] | None = None,
                       demo: bool = False, **top: Any) -> Path:
    """An offline agent with the gates server (``approve``: its tools that need approval) and,
    with ``demo``, the demo server (its prompts greet and review)."""
    gates: dict[str, Any] = {"url": gates_url, **({"tools": {"approve": approve}} if approve else {})}
    servers: dict[str, Any] = {"gates": gates}
    if demo:
        servers["demo"] = {"command": "python", "args": [str(SERVERS / "demo.py")]}
    return write_manifest(folder, servers, name="served", model="offline", **top)


def call_message(tool: str, **args: Any) -> str:
    """What the offline model takes as "call ``tool`` with ``args``"."""
    return f"/call {tool} {json.dumps(args)}"


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@dataclass
class Progress:
    """The progress messages one call received, in order, and their progress values; ``seen``
    waits for one."""

    messages: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._changed = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        self.values.append(progress)
        self._changed.set()
        self._changed = anyio.Event()

    async def seen(self, prefix: str) -> str:
        while True:
            for message in self.messages:
                if message.startswith(prefix):
                    return message
            await self._changed.wait()


@asynccontextmanager
async def stdio_agent(manifest: Path, *args: str, **client_options: Any) -> AsyncIterator[Client]:
    """A client of ``mcp-run serve MANIFEST ARGS`` over stdio (the client starts the process)."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "runner", "serve", str(manifest), *args],
                                   cwd=str(ROOT))
    async with Client(params, **client_options) as client:
        yield client


@asynccontextmanager
async def http_client(url: str, *, token: str | None = None, **client_options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http:
        async with Client(streamable_http_client(url, http_client=http), **client_options) as client:
            yield client


@dataclass
class ServedProcess:
    process: subprocess.Popen[str]
    url: str
    lines: queue.Queue[str]  # the stderr lines after the listening one

    def wait_for_line(self, pattern: str, timeout: float = 30.0) -> str:
        while True:
            line = self.lines.get(timeout=timeout)
            if re.search(pattern, line):
                return line


@contextmanager
def http_agent(manifest: Path, *args: str, env: dict[str, str] | None = None,
               stdout: int = subprocess.DEVNULL) -> Iterator[ServedProcess]:
    """``mcp-run serve MANIFEST --http 127.0.0.1:0 ARGS`` until the block ends (then SIGTERM)."""
    process = subprocess.Popen([*SERVE, str(manifest), "--http", "127.0.0.1:0", *args], cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, **(env or {})})
    try:
        match, lines = await_announcement(
            process, LISTENING, limit=START_LIMIT,
            silent="mcp-run serve did not listen", exited="mcp-run serve exited")
        # The listening line's second one names the OpenAI-compatible API's address: part of it.
        api_line = lines.get(timeout=START_LIMIT)
        assert api_line.startswith("  and the OpenAI-compatible API on "), api_line
        yield ServedProcess(process, match.group(1), lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


OPENAI_CLIENTS: list[openai.AsyncOpenAI] = []


def openai_api(url: str, token: str = "unused") -> openai.AsyncOpenAI:
    """The official ``openai`` client on the agent served at ``url`` (its MCP URL), without
    retries (a refusal is seen as it comes); closed when the test ends (one using the fixture
    ``closed_openai_clients``)."""
    client = openai.AsyncOpenAI(base_url=url.removesuffix("/mcp") + "/v1", api_key=token, max_retries=0,
                                timeout=60.0)
    OPENAI_CLIENTS.append(client)
    return client


async def close_openai_clients() -> None:
    while OPENAI_CLIENTS:
        await OPENAI_CLIENTS.pop().close()
