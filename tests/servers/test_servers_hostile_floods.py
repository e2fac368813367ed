"""Hostile servers that flood: junk on stdout, bodies beyond the message limit, bodies that do not
parse. Each costs a bounded amount of memory and a few warning lines naming the server."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import anyio
import pytest
from mcp_servers import demo, flooding, specs

from runner.errors import ServerError
from runner.servers import open_fleet
from runner.servers.transports import message_limits

pytestmark = pytest.mark.anyio

JUNK_LINES = 5_000


async def test_a_server_flooding_stdout_with_junk_gets_a_few_warnings_and_a_count(
    tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with open_fleet({"junk": specs.stdio("junk")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        junk = fleet.connections["junk"]
        await junk.call_tool("junk", {"text": "\n".join(f"junk {n}" for n in range(JUNK_LINES))})
        with anyio.fail_after(20):  # every junk line is read before the answer behind it
            answer = await junk.call_tool("echo", {"text": "still talking"})
        assert "still talking" in answer.content[0].text
    about_junk = [message for message in caplog.messages if message.startswith("server junk")]
    shown = [message for message in about_junk if "(ignored)" in message]
    counted = [int(found.group(1).replace(",", "")) for message in about_junk
               if (found := re.search(r"([\d,]+) more warnings about non-JSON-RPC output", message))]
    assert len(about_junk) < 50 and counted, about_junk[:10]
    assert len(shown) + sum(counted) == JUNK_LINES + 1  # and the server's banner
    log = (state_dir / "logs" / "junk.log").read_text()
    assert "junk 4999" in log  # the server's log keeps every line


async def test_a_server_flooding_stdout_without_pause_answers_each_call_and_its_junk_is_counted(
    tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    spec = specs.stdio("stdout_flood")
    async with open_fleet({"flood": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        flood = fleet.connections["flood"]
        for n in range(3):  # each answer is read behind the junk the pipe held before it
            with anyio.fail_after(60):
                answer = await flood.call_tool("echo", {"text": f"call {n}"})
            assert f"call {n}" in answer.content[0].text
    about_junk = [message for message in caplog.messages if message.startswith("server flood")]
    counted = [found for message in about_junk
               if (found := re.search(r"([\d,]+) more warnings about non-JSON-RPC output", message))]
    assert counted and len(about_junk) < 50, about_junk[:10]
    log = (state_dir / "logs" / "flood.log").read_text()
    assert "ignored non-JSON-RPC output on stdout: 'flood line 99: this is not JSON-RPC'" in log


@pytest.mark.parametrize("flood", [flooding.ENDLESS_JSON, flooding.ENDLESS_EVENT])
async def test_an_http_answer_past_the_message_limit_fails_its_call_naming_the_server_and_the_limit(
    serve_http, tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch, flood: str,
) -> None:
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(message_limits, "MAX_MESSAGE_BYTES", 1024 * 1024)
    url = serve_http(demo.build(), wrap=flooding.flooding)
    async with open_fleet({"web": specs.http(url)}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        web = fleet.connections["web"]
        # The body never ends: only a client that stops reading at the limit gets past this call.
        with anyio.fail_after(30), pytest.raises(ServerError) as raised:
            await web.call_tool("echo", {"text": flood})
        assert "server web sent" in str(raised.value) and "limit of one message (1 MiB)" in str(raised.value)
        with anyio.fail_after(30):
            answer = await web.call_tool("echo", {"text": "still talking"})
        assert answer.structured_content == {"result": "still talking"}
    over = [message for message in caplog.messages if "limit of one message" in message]
    assert len(over) == 1 and over[0].startswith("server web sent"), caplog.messages


async def test_an_http_answer_nested_past_the_parser_gives_one_warning_line_naming_the_server(
    serve_http, tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)  # no --debug
    url = serve_http(demo.build(), wrap=flooding.flooding)
    async with open_fleet({"web": specs.http(url)}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        web = fleet.connections["web"]
        with anyio.fail_after(30), pytest.raises(ServerError):
            await web.call_tool("echo", {"text": flooding.NESTED_EVENT})
        with anyio.fail_after(30):
            answer = await web.call_tool("echo", {"text": "still talking"})
        assert answer.structured_content == {"result": "still talking"}
    assert [record for record in caplog.records if record.exc_info] == []
    parsing = [message for message in caplog.messages if "Error parsing SSE message" in message]
    assert len(parsing) == 1 and parsing[0].startswith("server web: Error parsing SSE message ("), parsing
    assert "\n" not in parsing[0]


async def test_an_http_server_behind_the_environments_proxy_is_reached_through_it_and_bounded(
    serve_http, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(message_limits, "MAX_MESSAGE_BYTES", 1024 * 1024)
    # The "proxy" is the server itself: it answers the absolute-form requests a proxy gets.
    proxy = serve_http(demo.build(), wrap=flooding.flooding).removesuffix("/mcp")
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, proxy)
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    spec = specs.http("http://127.0.0.1:9/mcp")  # nothing listens there: reachable only by the proxy
    async with open_fleet({"web": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        web = fleet.connections["web"]
        with anyio.fail_after(30):
            answer = await web.call_tool("echo", {"text": "through the proxy"})
        assert answer.structured_content == {"result": "through the proxy"}
        with anyio.fail_after(30), pytest.raises(ServerError) as raised:
            await web.call_tool("echo", {"text": flooding.ENDLESS_JSON})
        assert "limit of one message (1 MiB)" in str(raised.value)
