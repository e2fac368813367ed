"""Requests through a connection: results, domain errors, protocol errors, timeouts, progress, logs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp_servers import specs

from runner.errors import ErrorKind, ServerClosedError, ServerRequestError, ServerTimeoutError
from runner.servers import ServerConnection, open_fleet

ERAS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])


@asynccontextmanager
async def demo_connection(
    demo_urls: dict[str, str], tmp_path: Path, *, legacy: bool = False, **settings: object
) -> AsyncIterator[ServerConnection]:
    url = demo_urls["2025-11-25" if legacy else "2026-07-28"]
    async with open_fleet(
        {"demo": specs.http(url, **settings)}, base_dir=tmp_path, state_dir=tmp_path / "state"
    ) as fleet:
        yield fleet.connections["demo"]


@ERAS
async def test_a_tool_call_returns_the_result(demo_urls, tmp_path: Path, legacy: bool) -> None:
    async with demo_connection(demo_urls, tmp_path, legacy=legacy) as connection:
        result = await connection.call_tool("echo", {"text": "hello"})
    assert not result.is_error
    assert result.content == [types.TextContent(type="text", text="hello")]


async def test_an_is_error_result_is_returned_not_raised(demo_urls, tmp_path: Path) -> None:
    async with demo_connection(demo_urls, tmp_path) as connection:
        result = await connection.call_tool("fail", {"message": "no such file"})
    assert result.is_error
    assert "no such file" in result.content[0].text


async def test_images_and_big_outputs_come_back_whole(demo_urls, tmp_path: Path) -> None:
    async with demo_connection(demo_urls, tmp_path) as connection:
        image = await connection.call_tool("image", {})
        big = await connection.call_tool("big_output", {"chars": 300_000})
    assert image.content[0].type == "image"
    assert image.content[0].mime_type == "image/png"
    assert len(big.content[0].text) == 300_000


async def test_progress_notifications_reach_the_callback(demo_urls, tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with demo_connection(demo_urls, tmp_path) as connection:
        await connection.call_tool("progress", {"steps": 3}, progress=on_progress)
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


@ERAS
async def test_server_log_messages_are_forwarded_to_logging(
    demo_urls, tmp_path: Path, caplog: pytest.LogCaptureFixture, legacy: bool
) -> None:
    caplog.set_level(logging.DEBUG, logger="runner.servers.log.demo")
    async with demo_connection(demo_urls, tmp_path, legacy=legacy) as connection:
        await connection.call_tool("log", {"message": "disk almost full"})
    records = [r for r in caplog.records if r.name == "runner.servers.log.demo"]
    shown = [(r.levelno, r.getMessage()) for r in records]
    assert shown == [(logging.WARNING, "[demo] warning: disk almost full")]


@ERAS
async def test_a_hanging_tool_times_out_and_is_cancelled_on_the_server(
    demo_urls, tmp_path: Path, legacy: bool
) -> None:
    async with demo_connection(demo_urls, tmp_path, legacy=legacy) as connection:
        before = (await connection.call_tool("cancellations_seen", {})).structured_content["result"]
        with anyio.fail_after(5):
            with pytest.raises(ServerTimeoutError) as raised:
                await connection.call_tool("hang", {}, timeout=0.2)
        assert raised.value.server == "demo"
        assert raised.value.timeout == 0.2
        assert raised.value.kind is ErrorKind.TRANSIENT
        seen = await connection.call_tool("cancellations_seen", {"at_least": before + 1}, timeout=5)
        assert seen.structured_content == {"result": before + 1}
        assert (await connection.call_tool("echo", {"text": "alive"})).content[0].text == "alive"


@ERAS
async def test_a_cancelled_caller_cancels_the_call_on_the_server(
    demo_urls, tmp_path: Path, legacy: bool
) -> None:
    async with demo_connection(demo_urls, tmp_path, legacy=legacy) as connection:
        before = (await connection.call_tool("cancellations_seen", {})).structured_content["result"]
        hanging = anyio.Event()

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            hanging.set()  # the server is inside the handler

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await connection.call_tool("hang", {}, timeout=60, progress=on_progress)

                tg.start_soon(call)
                await hanging.wait()
                tg.cancel_scope.cancel()  # what Ctrl-C does to a running turn
            seen = await connection.call_tool("cancellations_seen", {"at_least": before + 1}, timeout=8)
        assert seen.structured_content == {"result": before + 1}


async def test_with_max_timeout_a_call_without_progress_ends_after_the_idle_timeout(
    demo_urls, tmp_path: Path
) -> None:
    async with demo_connection(demo_urls, tmp_path, timeout=0.3, max_timeout=30) as connection:
        counted = await connection.call_tool("cancellations_seen", {}, timeout=5)
        before = counted.structured_content["result"]
        with anyio.fail_after(10):
            with pytest.raises(ServerTimeoutError) as raised:
                await connection.call_tool("hang", {})
            seen = await connection.call_tool("cancellations_seen", {"at_least": before + 1}, timeout=8)
    assert raised.value.timeout == 0.3
    assert seen.structured_content == {"result": before + 1}


async def test_with_max_timeout_progress_keeps_a_call_alive_past_the_idle_timeout(
    serve_http, tmp_path: Path
) -> None:
    from mcp_servers import asking

    url = serve_http(asking.build())
    spec = specs.http(url, timeout=1.5, max_timeout=30)
    async with open_fleet({"asking": spec}, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        with anyio.fail_after(20):
            result = await fleet.connections["asking"].call_tool("slow", {"steps": 6, "interval": 0.5})
    assert result.content[0].text == "slow done 6"


async def test_max_timeout_is_the_hard_limit_even_with_progress(serve_http, tmp_path: Path) -> None:
    from mcp_servers import asking

    url = serve_http(asking.build())
    spec = specs.http(url, timeout=2, max_timeout=2.5)
    async with open_fleet({"asking": spec}, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        with anyio.fail_after(20), pytest.raises(ServerTimeoutError) as raised:
            await fleet.connections["asking"].call_tool("slow", {"steps": 40, "interval": 0.25})
    assert raised.value.timeout == 2.5


async def test_a_per_tool_timeout_overrides_the_server_timeout(demo_urls, tmp_path: Path) -> None:
    tools = {"timeouts": {"sleep": 0.2}}
    async with demo_connection(demo_urls, tmp_path, tools=tools) as connection:
        assert connection.tool_timeout("sleep") == 0.2
        assert connection.tool_timeout("echo") == 10
        with anyio.fail_after(5):
            with pytest.raises(ServerTimeoutError) as raised:
                await connection.call_tool("sleep", {"seconds": 30})
        assert raised.value.timeout == 0.2
        slept = await connection.call_tool("sleep", {"seconds": 0.01}, timeout=5)
        assert slept.content[0].text == "slept 0.01"


async def test_a_call_that_timed_out_after_reporting_progress_names_max_timeout_in_its_hint(
    demo_urls, tmp_path: Path
) -> None:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    tools = {"timeouts": {"hang": 1, "sleep": 1}}  # `hang` reports progress, then never answers
    async with demo_connection(demo_urls, tmp_path, tools=tools) as connection:
        with anyio.fail_after(15):
            with pytest.raises(ServerTimeoutError) as progressed:
                await connection.call_tool("hang", {}, progress=on_progress)
            with pytest.raises(ServerTimeoutError) as silent:
                await connection.call_tool("sleep", {"seconds": 30}, progress=on_progress)
    assert progressed.value.timeout == 1 and silent.value.timeout == 1
    assert str(progressed.value).endswith(
        "tools/call 'hang' timed out after 1s (set servers.demo.tools.timeouts.hang or "
        "servers.demo.timeout to allow longer, or servers.demo.max_timeout: a call that reports "
        "progress then keeps going up to that total)")
    assert str(silent.value).endswith(
        "tools/call 'sleep' timed out after 1s (set servers.demo.tools.timeouts.sleep or "
        "servers.demo.timeout to allow longer)")


@ERAS
async def test_protocol_errors_carry_their_json_rpc_code(demo_urls, tmp_path: Path, legacy: bool) -> None:
    async with demo_connection(demo_urls, tmp_path, legacy=legacy) as connection:
        with pytest.raises(ServerRequestError) as raised:
            await connection.read_resource("demo://no-such-resource")
    assert raised.value.code == types.INVALID_PARAMS
    assert raised.value.kind is ErrorKind.PERMANENT


async def test_prompts_and_resources_are_served(demo_urls, tmp_path: Path) -> None:
    async with demo_connection(demo_urls, tmp_path) as connection:
        prompt = await connection.get_prompt("review", {"code": "x = 1"})
        readme = await connection.read_resource("demo://readme")
        item = await connection.read_resource("demo://items/42")
    assert prompt.messages[0].content.text == "Review this python code:\nx = 1"
    assert readme.contents[0].text == "This is the demo server."
    assert item.contents[0].text == "item 42"


async def test_fifty_concurrent_calls_on_one_session_each_get_their_answer(
    demo_urls, tmp_path: Path
) -> None:
    answers: dict[int, int] = {}
    async with demo_connection(demo_urls, tmp_path) as connection:

        async def add(number: int) -> None:
            result = await connection.call_tool("add", {"a": number, "b": 1000})
            answers[number] = result.structured_content["result"]

        async with anyio.create_task_group() as tg:
            for number in range(50):
                tg.start_soon(add, number)
    assert answers == {number: number + 1000 for number in range(50)}


async def test_two_hundred_calls_at_once_over_stdio_each_get_their_own_answer(tmp_path: Path) -> None:
    # Requests queued while one is written go out in one write: none may be merged or lost.
    answers: dict[int, int] = {}
    async with open_fleet(
        {"demo": specs.stdio("demo")}, base_dir=tmp_path, state_dir=tmp_path / "s"
    ) as fleet:
        connection = fleet.connections["demo"]

        async def add(number: int) -> None:
            result = await connection.call_tool("add", {"a": number, "b": 1000})
            answers[number] = result.structured_content["result"]

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for number in range(200):
                    tg.start_soon(add, number)
    assert answers == {number: number + 1000 for number in range(200)}


async def test_a_stopped_server_refuses_calls_at_once(demo_urls, tmp_path: Path) -> None:
    async with demo_connection(demo_urls, tmp_path) as connection:
        pass
    assert connection.status == "stopped"
    with anyio.fail_after(1):
        with pytest.raises(ServerClosedError):
            await connection.call_tool("echo", {"text": "anyone?"})


async def test_a_timed_out_call_says_after_how_long_and_which_settings_change_it(
    demo_urls, tmp_path: Path
) -> None:
    async with demo_connection(demo_urls, tmp_path, timeout=1) as connection:
        with anyio.fail_after(10):
            with pytest.raises(ServerTimeoutError) as raised:
                await connection.call_tool("sleep", {"seconds": 30})
    message = str(raised.value)
    assert "timed out after 1s" in message
    assert "servers.demo.tools.timeouts.sleep" in message and "servers.demo.timeout" in message


async def test_a_request_stuck_where_the_sdk_does_not_time_it_still_ends_as_a_timeout(
    demo_urls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's timeout starts once the request is written; a wedged write meets the backstop."""

    async def wedged(*args: object, **kwargs: object) -> dict:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr("runner.servers.connection.BACKSTOP_GRACE", 0.1)
    async with demo_connection(demo_urls, tmp_path, timeout=0.2) as connection:
        monkeypatch.setattr(connection._client.session._dispatcher, "send_raw_request", wedged)
        with anyio.fail_after(10):
            with pytest.raises(ServerTimeoutError, match="timed out after 0.2s"):
                await connection.call_tool("echo", {"text": "stuck"})
        monkeypatch.undo()
        assert (await connection.call_tool("echo", {"text": "free"})).content[0].text == "free"
