"""The websocket transport against a real MCP server over websocket (the MCP SDK 1.x's, in its own venv)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
import yaml
from builders import TESTS
from mcp_servers import specs

from runner.errors import ServerClosedError, ServerStartError, ServerTimeoutError
from runner.servers import open_fleet
from runner.servers.transports import message_limits

THIRDPARTY = TESTS / "thirdparty"
WS_PYTHON = THIRDPARTY / ".venv-ws" / "bin" / "python"
START_WAIT = 60.0
RESTART_WAIT = 20.0


@contextmanager
def ws_server(port: int = 0) -> Iterator[tuple[int, Callable[[], None]]]:
    """``thirdparty/ws_server.py`` on ``port`` (a free one by default): its port, and a function that
    stops it; it is stopped when the block ends in any case."""
    assert WS_PYTHON.exists(), "tests/thirdparty/install.sh (run by scripts/test.sh) installs .venv-ws"
    process = subprocess.Popen(
        [str(WS_PYTHON), str(THIRDPARTY / "ws_server.py"), "--port", str(port)], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    try:
        assert process.stdout is not None
        yield _first_line(process, START_WAIT), stop
    finally:
        stop()


@pytest.fixture(scope="module")
def ws_url() -> Iterator[str]:
    """``ws://127.0.0.1:PORT/ws`` of ``thirdparty/ws_server.py``, running until the module ends."""
    with ws_server() as (port, _):
        yield f"ws://127.0.0.1:{port}/ws"


def _first_line(process: subprocess.Popen[str], timeout: float) -> int:
    import selectors

    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise TimeoutError(f"the websocket server printed no port within {timeout}s")
    return int(process.stdout.readline())


async def test_a_websocket_server_lists_and_calls_tools_and_gets_the_headers(
    ws_url: str, tmp_path: Path, state_dir: Path
) -> None:
    spec = specs.http(ws_url, headers={"X-Token": "abc"})
    async with open_fleet({"ws": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["ws"]
        names = {tool.name for tool in connection.catalogue.tools}
        result = await connection.call_tool("echo", {"text": "over the socket"})
        token = await connection.call_tool("header", {"name": "X-Token"})
    assert {"echo", "hang", "drop", "connections", "header"} <= names
    assert result.content[0].text == "over the socket" and token.content[0].text == "abc"


async def test_a_dropped_websocket_connection_is_reopened(
    ws_url: str, tmp_path: Path, state_dir: Path
) -> None:
    async with open_fleet({"ws": specs.http(ws_url)}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["ws"]
        before = (await connection.call_tool("connections", {})).structured_content["result"]
        with anyio.fail_after(RESTART_WAIT), pytest.raises(ServerClosedError):
            await connection.call_tool("drop", {})
        with anyio.fail_after(RESTART_WAIT):
            await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        after = (await connection.call_tool("connections", {})).structured_content["result"]
        echoed = await connection.call_tool("echo", {"text": "again"})
    assert after == before + 1 and echoed.content[0].text == "again"


async def test_while_a_websocket_server_is_down_calls_say_so_at_once_and_its_return_is_told_once(
    tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runner.servers.supervision")
    restart = {"max_attempts": 1000, "backoff": 0.05, "max_backoff": 0.2}  # it keeps trying
    with ws_server() as (port, stop):
        spec = specs.http(f"ws://127.0.0.1:{port}/ws", restart=restart)
        async with open_fleet({"ws": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
            connection = fleet.connections["ws"]
            stop()
            with anyio.fail_after(RESTART_WAIT):  # a restart attempt found the port closed
                await connection.wait_until(lambda c: c.status == "restarting" and c.error is not None)
            with anyio.fail_after(RESTART_WAIT), pytest.raises(ServerClosedError) as down:
                await connection.call_tool("echo", {"text": "anyone?"})
            with ws_server(port):  # back on the same port
                with anyio.fail_after(RESTART_WAIT):
                    await connection.wait_until(lambda c: c.status == "ready")
                echoed = await connection.call_tool("echo", {"text": "back"})
                attempts = connection.restarts
    assert "cannot reach" in str(down.value) and "ConnectionRefusedError" in str(down.value)
    assert "keeps restarting it" in str(down.value) and echoed.content[0].text == "back"
    lines = [record.getMessage() for record in caplog.records if record.name == "runner.servers.supervision"]
    assert [line for line in lines if "is back" in line] == ["server ws is back (session 2)"]
    assert len([line for line in lines if "restarting in" in line]) == attempts  # one line per attempt
    assert len(lines) == attempts + 1


async def test_a_websocket_answer_past_the_message_limit_is_refused_naming_the_server_and_the_limit(
    ws_url: str, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(message_limits, "MAX_MESSAGE_BYTES", 64 * 1024)
    async with open_fleet({"ws": specs.http(ws_url)}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["ws"]
        with anyio.fail_after(RESTART_WAIT), pytest.raises(ServerClosedError):
            await connection.call_tool("echo", {"text": "x" * 100_000})  # its echo is too big
        with anyio.fail_after(RESTART_WAIT):
            await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        echoed = await connection.call_tool("echo", {"text": "small again"})
    assert echoed.content[0].text == "small again"
    refused = "server ws sent a message larger than the limit of one message (64 KiB)"
    assert any(message.startswith(refused) for message in caplog.messages), caplog.messages


async def test_a_hung_websocket_call_times_out(ws_url: str, tmp_path: Path, state_dir: Path) -> None:
    async with open_fleet({"ws": specs.http(ws_url)}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connection = fleet.connections["ws"]
        with anyio.fail_after(10), pytest.raises(ServerTimeoutError) as raised:
            await connection.call_tool("hang", {}, timeout=0.5)
        still = await connection.call_tool("echo", {"text": "alive"})
    assert "timed out after 0.5s" in str(raised.value) and still.content[0].text == "alive"


async def test_a_websocket_url_nobody_serves_is_a_start_error(tmp_path: Path, state_dir: Path) -> None:
    spec = specs.http("ws://127.0.0.1:9/ws", required=True, restart={"max_attempts": 1, "backoff": 0.05})
    with anyio.fail_after(30), pytest.raises(ServerStartError) as raised:
        async with open_fleet({"ws": spec}, base_dir=tmp_path, state_dir=state_dir):
            pass
    assert raised.value.server == "ws" and "ConnectionRefusedError" in str(raised.value)


def test_mcp_run_call_reaches_a_websocket_server(ws_url: str, tmp_path: Path) -> None:
    server = {"url": ws_url, "headers": {"X-Token": "s3cret"}}
    manifest = {"version": 1, "name": "ws", "servers": {"ws": server}}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(manifest))
    done = subprocess.run(
        [sys.executable, "-m", "runner", "call", "agent.yaml", "ws__echo", '{"text": "via the cli"}'],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=dict(os.environ),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "via the cli" in done.stdout and "s3cret" not in done.stdout + done.stderr


async def test_a_websocket_server_without_the_library_names_the_extra_to_install(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "websockets.asyncio.client", None)  # as if it were not installed
    spec = specs.http("ws://127.0.0.1:9/ws", required=True)
    with anyio.fail_after(30), pytest.raises(ServerStartError) as raised:
        async with open_fleet({"ws": spec}, base_dir=tmp_path, state_dir=state_dir):
            pass
    assert "pip install 'mcp-run[websocket]'" in str(raised.value) and raised.value.permanent
