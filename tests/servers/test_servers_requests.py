"""What servers ask of the client, in both eras: input (forms, URLs), roots, log levels, floods."""

from __future__ import annotations

import json
import resource
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp_servers import asking, specs
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.errors import ServerRequestError
from runner.servers import ServerConnection, open_fleet

ERAS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])


@asynccontextmanager
async def asking_connection(
    serve_http: Callable[..., str], tmp_path: Path, *, legacy: bool, **settings: object
) -> AsyncIterator[ServerConnection]:
    url = serve_http(asking.build(), legacy=legacy)
    async with open_fleet(
        {"asking": specs.http(url, **settings)}, base_dir=tmp_path, state_dir=tmp_path / "state"
    ) as fleet:
        yield fleet.connections["asking"]


def answering(*answers: types.ElicitResult, seen: list[types.ElicitRequestParams] | None = None):
    queue = list(answers)

    async def ask(server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
        assert server == "asking"
        if seen is not None:
            seen.append(request)
        return queue.pop(0)

    return ask


@ERAS
async def test_an_accepted_form_reaches_the_server_with_the_schema_defaults_filled_in(
    serve_http, tmp_path: Path, legacy: bool
) -> None:
    seen: list[types.ElicitRequestParams] = []
    ask = answering(types.ElicitResult(action="accept", content={"date": "friday"}), seen=seen)
    async with asking_connection(serve_http, tmp_path, legacy=legacy) as connection:
        with anyio.fail_after(20):
            result = await connection.call_tool("book", {}, ask=ask)
    assert result.content[0].text == "booked friday for 2"
    assert isinstance(seen[0], types.ElicitRequestFormParams)
    assert seen[0].message == "Which day, for how many?"


@ERAS
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_form_is_reported_to_the_server(
    serve_http, tmp_path: Path, legacy: bool, action: str
) -> None:
    async with asking_connection(serve_http, tmp_path, legacy=legacy) as connection:
        with anyio.fail_after(20):
            result = await connection.call_tool("book", {}, ask=answering(types.ElicitResult(action=action)))
    assert result.content[0].text == f"not booked: the user chose {action}"


@ERAS
async def test_a_request_for_input_while_no_one_asks_is_declined_at_once(
    serve_http, tmp_path: Path, legacy: bool
) -> None:
    async with asking_connection(serve_http, tmp_path, legacy=legacy) as connection:
        with anyio.fail_after(20):
            result = await connection.call_tool("book", {})
    assert result.content[0].text == "not booked: the user chose decline"


@ERAS
async def test_a_url_request_shows_its_url_and_the_answer_reaches_the_server(
    serve_http, tmp_path: Path, legacy: bool
) -> None:
    seen: list[types.ElicitRequestParams] = []
    ask = answering(types.ElicitResult(action="accept"), seen=seen)
    async with asking_connection(serve_http, tmp_path, legacy=legacy) as connection:
        with anyio.fail_after(20):
            result = await connection.call_tool("visit", {}, ask=ask)
    assert result.content[0].text == "visit: accept"
    assert isinstance(seen[0], types.ElicitRequestURLParams)
    assert seen[0].url == "https://calendar.example/sign-in"


async def test_elicitation_decline_in_the_manifest_declares_no_capability_and_never_asks(
    serve_http, tmp_path: Path
) -> None:
    asked: list[types.ElicitRequestParams] = []
    ask = answering(types.ElicitResult(action="accept", content={"date": "x"}), seen=asked)
    async with asking_connection(serve_http, tmp_path, legacy=True, elicitation="decline") as connection:
        with anyio.fail_after(20), pytest.raises(ServerRequestError):  # the server's own failure
            await connection.call_tool("book", {}, ask=ask)
    assert asked == []


@ERAS
async def test_the_roots_are_the_manifest_folders_relative_to_the_manifest(
    serve_http, tmp_path: Path, legacy: bool
) -> None:
    async with asking_connection(serve_http, tmp_path, legacy=legacy, roots=["src", "docs"]) as connection:
        with anyio.fail_after(20):
            result = await connection.call_tool("roots", {})
    assert result.content[0].text.splitlines() == [(tmp_path / "src").as_uri(), (tmp_path / "docs").as_uri()]


def recording_methods(methods: list[str]):
    """Wrap an ASGI app so that the JSON-RPC methods posted to it are appended to ``methods``."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def recording(scope: Scope, receive: Receive, send: Send) -> None:
            body = b""

            async def tap() -> Message:
                nonlocal body
                message = await receive()
                if message["type"] == "http.request":
                    body += message.get("body", b"")
                    if not message.get("more_body") and body.startswith(b"{"):
                        methods.append(json.loads(body).get("method", ""))
                return message

            await app(scope, tap, send)

        return recording

    return wrap


async def test_a_reload_that_changes_the_roots_notifies_the_server_and_it_lists_the_new_ones(
    serve_http, tmp_path: Path
) -> None:
    methods: list[str] = []
    url = serve_http(asking.build(), legacy=True, wrap=recording_methods(methods))
    async with open_fleet(
        {"asking": specs.http(url, roots=["a"])}, base_dir=tmp_path, state_dir=tmp_path / "state"
    ) as fleet:
        connection = fleet.connections["asking"]
        with anyio.fail_after(20):
            assert await fleet.update("asking", specs.http(url, roots=["b"])) == "updated"
            result = await connection.call_tool("roots", {})
    assert "notifications/roots/list_changed" in methods
    assert result.content[0].text == (tmp_path / "b").as_uri()


async def test_a_reload_that_keeps_the_roots_sends_no_notification(serve_http, tmp_path: Path) -> None:
    methods: list[str] = []
    url = serve_http(asking.build(), legacy=True, wrap=recording_methods(methods))
    async with open_fleet(
        {"asking": specs.http(url, roots=["a"])}, base_dir=tmp_path, state_dir=tmp_path / "state"
    ) as fleet:
        with anyio.fail_after(20):
            assert await fleet.update("asking", specs.http(url, roots=["a"], timeout=9)) == "updated"
            await fleet.connections["asking"].call_tool("roots", {})
    assert "notifications/roots/list_changed" not in methods


@ERAS
async def test_log_messages_at_or_above_the_level_go_to_the_server_log_file_with_their_logger(
    serve_http, tmp_path: Path, legacy: bool
) -> None:
    async with asking_connection(
        serve_http, tmp_path, legacy=legacy, logging={"level": "info"}
    ) as connection:
        with anyio.fail_after(20):
            await connection.call_tool("levels", {})
    lines = (tmp_path / "state" / "logs" / "asking.log").read_text().splitlines()
    messages = [line.split(" ", 1)[1] for line in lines]
    assert messages == [
        "info [asking.levels]: a info message",
        "warning [asking.levels]: a warning message",
        "error [asking.levels]: a error message",
    ]


async def test_terminal_lines_name_the_server_and_start_at_the_terminal_level(
    serve_http, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="runner.servers.log.asking")
    async with asking_connection(
        serve_http, tmp_path, legacy=True, logging={"level": "debug", "terminal": "error"}
    ) as connection:
        with anyio.fail_after(20):
            await connection.call_tool("levels", {})
    shown = [r.getMessage() for r in caplog.records if r.name == "runner.servers.log.asking"]
    assert shown == ["[asking] error: a error message"]


async def test_a_server_flooding_log_messages_neither_stalls_calls_nor_grows_memory(
    serve_http, tmp_path: Path
) -> None:
    async with asking_connection(serve_http, tmp_path, legacy=True) as connection:
        with anyio.fail_after(60):
            await connection.call_tool("flood", {"count": 500})
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            result = await connection.call_tool("flood", {"count": 3000})
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.content[0].text == "flooded 3000"
    assert after - before < 20_000  # KiB: 3000 messages of 200 characters are not kept
    lines = (tmp_path / "state" / "logs" / "asking.log").read_text().count("\n")
    assert lines == 3500
