"""`mcp-run serve --watch` tells 2025-11-25 callers (one lasting session, over stdio or streamable
HTTP with sessions) when its prompt commands or its `ask` tool changed, as bare list_changed
notifications on their session; a stateless serve, where they have none, declares none. A
2026-07-28 caller over stdio hears the same on its ``subscriptions/listen`` stream (over HTTP:
tests/hosting/test_serve_lifecycle.py)."""

from __future__ import annotations

import logging
import os
import queue
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from builders import ROOT
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged
from mcp_servers import gates as gates_server
from serving import http_agent, http_client, write_served_agent

from runner.hosting.mcp.change_notices import AnnouncingServer, LegacySessions

LIMIT = 90
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"


@pytest.fixture
def gates_url(serve_http: Callable[..., str]) -> str:
    return serve_http(gates_server.build(gates_server.Gates()))


class Heard:
    """The server notifications a client received, by method, in order; ``next`` waits for one."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self._arrived = anyio.Event()
        self._taken = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.methods.append(message.method)
            self._arrived.set()
            self._arrived = anyio.Event()

    async def next(self) -> str:
        while self._taken == len(self.methods):
            await self._arrived.wait()
        self._taken += 1
        return self.methods[self._taken - 1]


class Lines:
    """The stderr lines of a served agent, read by a thread; ``wait_for`` blocks (bounded)."""

    def __init__(self) -> None:
        read, self.write = os.pipe()
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(read,), daemon=True).start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, encoding="utf-8", errors="replace") as stream:
            for line in stream:
                self._lines.put(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 30.0) -> str:
        while True:
            line = self._lines.get(timeout=timeout)
            if re.search(pattern, line):
                return line


@asynccontextmanager
async def legacy_stdio_agent(manifest: Path, heard: Heard, stderr: Lines) -> AsyncIterator[Client]:
    """A 2025-11-25 client of ``mcp-run serve MANIFEST --watch`` over stdio, its stderr in ``stderr``."""
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                   args=["-m", "runner", "serve", str(manifest), "--watch"])
    with os.fdopen(stderr.write, "w") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode="legacy", message_handler=heard) as client:
            yield client


@contextmanager
def get_stream_opened() -> Iterator[threading.Event]:
    """Set once a streamable-HTTP client's GET stream (where a session's notifications go) is open."""
    opened = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "GET SSE connection established":
                opened.set()

    client_log = logging.getLogger("mcp.client.streamable_http")
    watch, level = Watch(), client_log.level
    client_log.addHandler(watch)
    client_log.setLevel(logging.DEBUG)
    try:
        yield opened
    finally:
        client_log.removeHandler(watch)
        client_log.setLevel(level)


def _edit(manifest: Path, change: Callable[[dict[str, Any]], None]) -> None:
    document = yaml.safe_load(manifest.read_text())
    change(document)
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))


def _set_system_prompt(document: dict[str, Any]) -> None:  # neither the prompts nor the tool
    document.setdefault("prompts", {})["system"] = "Be brief."


def _describe(document: dict[str, Any]) -> None:  # the ask tool's description
    document["description"] = "Answers briefly."


def _rename_binding(document: dict[str, Any]) -> None:
    document["prompts"]["mcp"][0]["as"] = "welcome"


def _served_with_a_prompt(tmp_path: Path, gates_url: str) -> Path:
    binding = {"server": "demo", "name": "greet", "as": "hello"}
    return write_served_agent(tmp_path, gates_url, demo=True, prompts={"mcp": [binding]})


async def test_a_2025_caller_over_stdio_hears_tools_and_prompts_list_changed_and_nothing_for_other_edits(
    tmp_path: Path, gates_url: str
) -> None:
    manifest = _served_with_a_prompt(tmp_path, gates_url)
    heard, stderr = Heard(), Lines()
    with anyio.fail_after(LIMIT):
        async with legacy_stdio_agent(manifest, heard, stderr) as client:
            declared, version = client.server_capabilities, client.protocol_version
            _edit(manifest, _set_system_prompt)
            await anyio.to_thread.run_sync(stderr.wait_for, "reloaded in")
            _edit(manifest, _describe)
            first = await heard.next()
            tools = (await client.list_tools()).tools
            _edit(manifest, _rename_binding)
            second = await heard.next()
            prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
    assert version == "2025-11-25"
    assert declared.tools is not None and declared.tools.list_changed
    assert declared.prompts is not None and declared.prompts.list_changed
    assert (first, second) == (TOOLS_CHANGED, PROMPTS_CHANGED)
    assert "Answers briefly." in (tools[0].description or "")
    assert "welcome" in prompts
    assert heard.methods == [TOOLS_CHANGED, PROMPTS_CHANGED]


async def test_a_2025_caller_over_http_with_sessions_hears_both_changes_and_nothing_for_other_edits(
    tmp_path: Path, gates_url: str
) -> None:
    manifest = _served_with_a_prompt(tmp_path, gates_url)
    heard = Heard()
    with http_agent(manifest, "--watch") as served, get_stream_opened() as opened:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url, mode="legacy", message_handler=heard) as client:
                declared = client.server_capabilities
                assert await anyio.to_thread.run_sync(opened.wait, LIMIT)
                _edit(manifest, _set_system_prompt)
                await anyio.to_thread.run_sync(served.wait_for_line, "reloaded in")
                _edit(manifest, _describe)
                first = await heard.next()
                _edit(manifest, _rename_binding)
                second = await heard.next()
    assert declared.tools is not None and declared.tools.list_changed
    assert declared.prompts is not None and declared.prompts.list_changed
    assert (first, second) == (TOOLS_CHANGED, PROMPTS_CHANGED)
    assert heard.methods == [TOOLS_CHANGED, PROMPTS_CHANGED]


async def test_a_2025_caller_that_disconnected_is_dropped_and_the_others_still_hear_the_change(
    tmp_path: Path, gates_url: str
) -> None:
    manifest = write_served_agent(tmp_path, gates_url)
    staying, leaving = Heard(), Heard()
    with http_agent(manifest, "--watch") as served:
        with anyio.fail_after(LIMIT), get_stream_opened() as opened:
            async with http_client(served.url, mode="legacy", message_handler=staying) as client:
                assert await anyio.to_thread.run_sync(opened.wait, LIMIT)
                opened.clear()
                async with http_client(served.url, mode="legacy", message_handler=leaving):
                    assert await anyio.to_thread.run_sync(opened.wait, LIMIT)
                _edit(manifest, _describe)
                heard = await staying.next()
                tools = (await client.list_tools()).tools
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(timeout=30)
        stderr = list(iter(lambda: served.lines.get(timeout=10), ""))
    assert heard == TOOLS_CHANGED
    assert "Answers briefly." in (tools[0].description or "")
    assert leaving.methods == []
    assert [line for line in stderr if not line.startswith("reloaded in")] == ["stopped by SIGTERM"]


async def test_a_2025_session_is_kept_while_its_caller_is_connected_and_forgotten_when_it_leaves() -> None:
    sessions = LegacySessions()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    server = AnnouncingServer("kept", announces=True, on_list_tools=list_tools)
    server.middleware.append(sessions)
    staying, leaving = Heard(), Heard()
    with anyio.fail_after(LIMIT):
        async with Client(server, mode="legacy", message_handler=staying) as client:
            await client.list_tools()  # after notifications/initialized, which the client sent first
            async with Client(server, mode="legacy", message_handler=leaving) as other:
                await other.list_tools()
                both = len(sessions)
            await sessions.announce(prompts=False, tools=True)
            heard = await staying.next()
        left = len(sessions)
    assert (both, left) == (2, 0)
    assert heard == TOOLS_CHANGED
    assert leaving.methods == []


async def test_a_stateless_serve_declares_no_list_changed_to_a_2025_caller(
    tmp_path: Path, gates_url: str
) -> None:
    manifest = write_served_agent(tmp_path, gates_url)
    with http_agent(manifest, "--stateless") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url, mode="legacy") as client:
                declared = client.server_capabilities
    assert declared.tools is not None and not declared.tools.list_changed
    assert declared.prompts is not None and not declared.prompts.list_changed


async def test_a_2026_caller_over_stdio_hears_both_changes_on_its_listen_stream_and_nothing_for_other_edits(
    tmp_path: Path, gates_url: str
) -> None:
    manifest = _served_with_a_prompt(tmp_path, gates_url)
    stderr = Lines()
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                   args=["-m", "runner", "serve", str(manifest), "--watch"])
    with anyio.fail_after(LIMIT), os.fdopen(stderr.write, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            version = client.protocol_version
            async with client.listen(prompts_list_changed=True, tools_list_changed=True) as changes:
                _edit(manifest, _set_system_prompt)
                await anyio.to_thread.run_sync(stderr.wait_for, "reloaded in")
                _edit(manifest, _describe)
                first = await anext(changes)
                tools = (await client.list_tools()).tools
                _edit(manifest, _rename_binding)
                second = await anext(changes)
                prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
    assert version == "2026-07-28"
    assert (type(first), type(second)) == (ToolsListChanged, PromptsListChanged)
    assert "Answers briefly." in (tools[0].description or "")
    assert "welcome" in prompts
