"""The HTTP sessions of 2025-11-25 callers are not kept for ever: one with no request in flight for
--session-idle-timeout ends (its id is then unknown), and past --max-sessions open ones a new one
is refused with an error that names the limit and how to raise it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from builders import ROOT, copy_bundled_agent
from serving import SERVE, http_agent

LIMIT = 90
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


async def open_session(http: httpx2.AsyncClient, url: str) -> str:
    """A new session, initialized: its id."""
    opened = await http.post(url, json=INITIALIZE, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    headers = {**HEADERS, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
    assert (await http.post(url, json=INITIALIZED, headers=headers)).status_code == 202
    return session


async def open_once_a_place_frees(http: httpx2.AsyncClient, url: str) -> None:
    """A session opened once one of those open ends (a refused opening touches no session)."""
    opening = await http.post(url, json=INITIALIZE, headers=HEADERS)
    while opening.status_code == 503:
        await anyio.sleep(0.1)
        opening = await http.post(url, json=INITIALIZE, headers=HEADERS)
    assert opening.status_code == 200


async def listing_status(http: httpx2.AsyncClient, url: str, session: str) -> int:
    headers = {**HEADERS, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
    return (await http.post(url, json=LISTING, headers=headers)).status_code


async def test_a_session_left_idle_past_the_idle_timeout_ends_and_makes_room_for_a_new_one(
    tmp_path: Path
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    with http_agent(manifest, "--session-idle-timeout", "1s", "--max-sessions", "1") as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            with anyio.fail_after(LIMIT):
                idle = await open_session(http, served.url)
                assert await listing_status(http, served.url, idle) == 200
                # A request on the idle session would keep it: watch for its place to free instead
                # (a refused opening touches no session).
                await open_once_a_place_frees(http, served.url)
                assert await listing_status(http, served.url, idle) == 404


async def test_a_session_with_an_open_event_stream_is_not_idle_and_outlives_the_idle_timeout(
    tmp_path: Path
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    with http_agent(manifest, "--session-idle-timeout", "1s", "--max-sessions", "2") as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            with anyio.fail_after(LIMIT):
                streaming = await open_session(http, served.url)
                stream_headers = {"Accept": "text/event-stream", "Mcp-Session-Id": streaming,
                                  "Mcp-Protocol-Version": "2025-11-25"}
                async with http.stream("GET", served.url, headers=stream_headers) as stream:
                    assert stream.status_code == 200
                    idle = await open_session(http, served.url)  # opened later, so ends later
                    # Room for a third comes once a session has ended: the idle one, the streaming
                    # one being older and yet kept by its stream.
                    await open_once_a_place_frees(http, served.url)
                    assert await listing_status(http, served.url, idle) == 404
                    assert await listing_status(http, served.url, streaming) == 200


async def test_past_max_sessions_a_new_session_is_refused_by_its_id_naming_the_limit_and_one_ended_makes_room(
    tmp_path: Path
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    with http_agent(manifest, "--max-sessions", "2") as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(LIMIT)) as http:
            with anyio.fail_after(LIMIT):
                first = await open_session(http, served.url)
                await open_session(http, served.url)
                refused = await http.post(served.url, json={**INITIALIZE, "id": "opening-7"}, headers=HEADERS)
                numbered = await http.post(served.url, json=INITIALIZE, headers=HEADERS)
                ended = await http.delete(served.url, headers={**HEADERS, "Mcp-Session-Id": first,
                                                               "Mcp-Protocol-Version": "2025-11-25"})
                assert ended.status_code == 200
                await open_session(http, served.url)  # room again
    assert refused.status_code == 503
    assert "mcp-session-id" not in refused.headers
    assert refused.json()["id"] == "opening-7"
    assert (numbered.status_code, numbered.json()["id"]) == (503, 1)
    error = refused.json()["error"]
    assert error["code"] == -32603
    assert "too many open sessions: this agent keeps at most 2 at once" in error["message"]
    assert "--max-sessions 2" in error["message"]


@pytest.mark.parametrize(("arguments", "complaint"), [
    (["--max-sessions", "5"], "apply to --http only"),
    (["--http", "127.0.0.1:0", "--stateless", "--session-idle-timeout", "1m"], "--stateless does without"),
    (["--http", "127.0.0.1:0", "--session-idle-timeout", "soon"], "expected a duration"),
    (["--http", "127.0.0.1:0", "--max-sessions", "0"], "0 is not in the range x>=1"),
])
def test_session_options_outside_sessions_or_out_of_range_are_refused_with_exit_2(
    tmp_path: Path, arguments: list[str], complaint: str
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    result = subprocess.run([*SERVE, str(manifest), *arguments], capture_output=True, text=True, timeout=60,
                            cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert complaint in " ".join(result.stderr.split())
