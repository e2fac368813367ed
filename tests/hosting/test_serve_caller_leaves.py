"""A caller of `mcp-run serve` that goes away in the middle of a turn (its HTTP connection closes,
it sends `notifications/cancelled`, or it closes stdin) has that turn cancelled, and the tool call
the turn was making cancelled at its server (which receives `notifications/cancelled`); the thread
keeps what was complete (the message and the model's tool call), and the next ask on it runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from builders import ROOT, server, write_manifest
from mcp import Client
from serving import SERVE, call_message, http_agent, http_client, stdio_agent, text_of

LIMIT = 90
CANCEL_LIMIT = 30.0  # seconds, generous: the server is told at once, but the machine may be busy
THREAD = "T1"
HANG = call_message("w__hang")  # the wire server never answers it

# A caller that asks on THREAD, then waits for the answer until it is killed.
CALLER = """
import sys, anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def main(url: str, mode: str, message: str) -> None:
    async with Client(streamable_http_client(url), mode=mode) as client:
        await client.call_tool("ask", {"message": message, "thread": "T1"})

anyio.run(main, *sys.argv[1:])
"""


def hanging_agent(folder: Path) -> tuple[Path, Path]:
    """The served agent with the wire server, which records every message it receives: the
    manifest and that record. Its threads are kept in SQLite beside the manifest (the default)."""
    record = folder / "received"
    record.touch()
    manifest = write_manifest(folder, {"w": server("wire", "--record", str(record))}, name="served",
                              model="offline")
    return manifest, record


async def received(record: Path, method: str) -> str:
    """The id of the first ``method`` the wire server recorded, once it has (bound it with fail_after)."""
    while True:
        for line in (await anyio.Path(record).read_text()).splitlines():
            if line.startswith(f"received {method} "):
                return line.split()[-1]
        await anyio.sleep(0.05)


async def kept_history(client: Client) -> list[tuple[str, str]]:
    """THREAD's messages as (role, text), the text of a tool call the called tools' names."""
    thread = json.loads((await client.read_resource(f"mcp-run://threads/{THREAD}")).contents[0].text)
    return [(message["role"], message["text"] or json.dumps([call["name"] for call in message["tool_calls"]]))
            for message in thread["messages"]]


async def check_kept_and_continued(client: Client) -> None:
    """THREAD kept what was complete when its caller left, and the next ask on it runs."""
    assert await kept_history(client) == KEPT
    again = await client.call_tool("ask", {"message": call_message("w__echo", text="back"), "thread": THREAD})
    assert text_of(again) == "w__echo returned: wire: back"


KEPT = [("user", HANG), ("assistant", '["w__hang"]')]  # what was complete when the caller left
# A 2025-11-25 caller over stdio, as lines: the handshake, then ask (id 2) on THREAD.
STDIO_ASK = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "leaving", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "ask", "arguments": {"message": HANG, "thread": THREAD}}},
]


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: 2026-07-28, one POST per call
async def test_a_caller_whose_http_connection_closes_has_its_turn_and_the_servers_call_cancelled(
    tmp_path: Path, mode: str
) -> None:
    manifest, record = hanging_agent(tmp_path)
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    with http_agent(manifest) as served:
        caller = subprocess.Popen([sys.executable, str(script), served.url, mode, HANG],  # noqa: ASYNC220
                                  cwd=ROOT, stdin=subprocess.DEVNULL)
        try:
            with anyio.fail_after(LIMIT):
                call = await received(record, "tools/call")
        finally:
            caller.send_signal(signal.SIGKILL)
            caller.wait(timeout=30)
        with anyio.fail_after(CANCEL_LIMIT):
            cancelled = await received(record, "notifications/cancelled")
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                await check_kept_and_continued(client)
    assert cancelled == call


@asynccontextmanager
async def served_client(manifest: Path, transport: str, mode: str) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with stdio_agent(manifest, mode=mode) as client:
            yield client
        return
    with http_agent(manifest) as served:
        async with http_client(served.url, mode=mode) as client:
            yield client


# 2025-11-25 callers send notifications/cancelled (over HTTP, a POST to their session); a
# 2026-07-28 caller over HTTP closes its call's response stream instead, as that era says.
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_caller_that_cancels_its_call_has_its_turn_and_the_servers_call_cancelled(
    tmp_path: Path, transport: str, mode: str
) -> None:
    manifest, record = hanging_agent(tmp_path)
    with anyio.fail_after(LIMIT):
        async with served_client(manifest, transport, mode) as client:
            async with anyio.create_task_group() as asking:
                asking.start_soon(client.call_tool, "ask", {"message": HANG, "thread": THREAD})
                call = await received(record, "tools/call")
                asking.cancel_scope.cancel()
            with anyio.fail_after(CANCEL_LIMIT):
                cancelled = await received(record, "notifications/cancelled")
            await check_kept_and_continued(client)
    assert cancelled == call


async def test_a_caller_that_closes_stdin_has_its_turn_and_the_servers_call_cancelled(tmp_path: Path) -> None:
    manifest, record = hanging_agent(tmp_path)
    serve = subprocess.Popen([*SERVE, str(manifest)], cwd=ROOT, stdin=subprocess.PIPE,  # noqa: ASYNC220
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert serve.stdin is not None and serve.stdout is not None
    try:
        for message in STDIO_ASK:
            serve.stdin.write(json.dumps(message) + "\n")
        serve.stdin.flush()
        with anyio.fail_after(LIMIT):
            call = await received(record, "tools/call")
        serve.stdin.close()  # the caller goes away, its call unanswered
        with anyio.fail_after(CANCEL_LIMIT):
            cancelled = await received(record, "notifications/cancelled")
        answers = await anyio.to_thread.run_sync(serve.stdout.read)  # until serve closes it
        code = await anyio.to_thread.run_sync(lambda: serve.wait(timeout=LIMIT))
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(timeout=30)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:  # the thread, from the conversation store
            kept = await kept_history(client)
    assert cancelled == call
    assert code == 0
    [answer] = [json.loads(line) for line in answers.splitlines() if json.loads(line).get("id") == 2]
    assert answer["result"]["isError"], answer
    assert kept == KEPT


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_to_serve_cancels_a_call_in_flight_at_its_stdio_server_before_stopping_it(
    tmp_path: Path, stop: signal.Signals
) -> None:
    manifest, record = hanging_agent(tmp_path)
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as asking:
                async def ask() -> None:
                    async with http_client(served.url) as client:
                        await client.call_tool("ask", {"message": HANG, "thread": THREAD})

                asking.start_soon(ask)
                call = await received(record, "tools/call")
                served.process.send_signal(stop)
                code = await anyio.to_thread.run_sync(lambda: served.process.wait(timeout=LIMIT))
                asking.cancel_scope.cancel()
    with anyio.fail_after(CANCEL_LIMIT):
        cancelled = await received(record, "notifications/cancelled")
    assert cancelled == call
    assert code == 128 + int(stop)
