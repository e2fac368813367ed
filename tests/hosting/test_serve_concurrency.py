"""Many conversations on one served agent: threads run side by side, one thread's turns queue in
order, and past the limits a request gets a clear 'busy' error. Proved by the order of events in
the gates' log (a turn held open by the test), never by timing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp_servers import gates as gates_server
from serving import Progress, call_message, http_agent, http_client, text_of, write_served_agent

LIMIT = 90


async def wait_in_thread(function: Callable[..., Any], *args: Any) -> None:
    await anyio.to_thread.run_sync(function, *args)


async def test_a_slow_conversation_does_not_hold_up_another_thread(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    results: dict[str, types.CallToolResult] = {}
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:

                async def ask(name: str, message: str) -> None:
                    results[name] = await client.call_tool("ask", {"message": message, "thread": name})

                async with anyio.create_task_group() as group:
                    group.start_soon(ask, "slow", call_message("gates__hold", key="a"))
                    await wait_in_thread(log.wait_for, "enter a")
                    await ask("quick", call_message("gates__note", text="meanwhile"))
                    log.open("a")
    assert log.log == ["enter a", "note meanwhile", "open a", "leave a"]
    assert text_of(results["slow"]) == "gates__hold returned: held a"


async def test_two_requests_on_one_thread_run_one_after_the_other(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    results: dict[str, types.CallToolResult] = {}
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:

                async def ask(name: str, message: str, progress: Progress | None = None) -> None:
                    results[name] = await client.call_tool("ask", {"message": message, "thread": "shared"},
                                                           progress_callback=progress)

                second = Progress()
                async with anyio.create_task_group() as group:
                    group.start_soon(ask, "first", call_message("gates__hold", key="x"))
                    await wait_in_thread(log.wait_for, "enter x")
                    group.start_soon(ask, "second", call_message("gates__note", text="after"), second)
                    assert await second.seen("queued") == "queued: an earlier turn of this thread is running"
                    log.open("x")
                thread = await client.read_resource("mcp-run://threads/shared")
    assert log.log == ["enter x", "open x", "leave x", "note after"]
    assert text_of(results["second"]) == "gates__note returned: noted after"
    assert thread.contents[0].text.count('"role": "user"') == 2


async def test_past_the_running_and_queued_limits_a_request_is_told_the_agent_is_busy(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    results: dict[str, types.CallToolResult] = {}
    with http_agent(manifest, "--max-turns", "1", "--max-queued", "1") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:

                async def ask(thread: str, message: str, progress: Progress | None = None) -> None:
                    results[thread] = await client.call_tool("ask", {"message": message, "thread": thread},
                                                             progress_callback=progress)

                waiting = Progress()
                async with anyio.create_task_group() as group:
                    group.start_soon(ask, "running", call_message("gates__hold", key="k"))
                    await wait_in_thread(log.wait_for, "enter k")
                    group.start_soon(ask, "waiting", call_message("gates__note", text="queued"), waiting)
                    assert await waiting.seen("queued") == "queued: all 1 turn slots are taken"
                    await ask("refused", call_message("gates__note", text="refused"))
                    log.open("k")
                await ask("later", call_message("gates__note", text="later"))
    refused = results["refused"]
    assert refused.is_error
    assert text_of(refused) == (
        "the agent is busy: it holds 2 requests, as many as it takes (--max-turns 1 may run at once and "
        "--max-queued 1 more may wait): 1 running, 1 waiting for a free turn slot and 0 waiting behind an "
        "earlier turn of their own thread; try again later")
    assert log.log == ["enter k", "open k", "leave k", "note queued", "note later"]
    assert not results["waiting"].is_error and not results["later"].is_error
