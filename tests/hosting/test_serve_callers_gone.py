"""A caller of `mcp-run serve --http` that dies (`kill -9`) in the middle of a turn leaves no thread
behind it stuck: its connection closing stops the turn, even while the turn waits for the caller's
answer to a question, so the next caller's `ask` on that thread runs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
from builders import ROOT
from mcp_servers import gates as gates_server
from serving import call_message, http_agent, http_client, text_of, write_served_agent

LIMIT = 90
RELEASE_LIMIT = 20.0  # seconds the next ask on the thread may take once the first caller is dead

# A 2025-11-25 caller that asks on thread T1, says "asked" when the approval form arrives, then
# waits without answering until it is killed.
DYING_CALLER = """
import sys, anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def main(url: str, message: str) -> None:
    async def elicit(context, params):
        print("asked", flush=True)
        await anyio.sleep_forever()

    async with Client(streamable_http_client(url), mode="legacy", elicitation_callback=elicit) as client:
        print("connected", flush=True)
        await client.call_tool("ask", {"message": message, "thread": "T1"})

anyio.run(main, sys.argv[1], sys.argv[2])
"""


def kill_when_asked(caller: subprocess.Popen[str]) -> None:
    """Wait for the caller to be asked (or to end), then SIGKILL it."""
    assert caller.stdout is not None
    for line in caller.stdout:
        if line.strip() == "asked":
            break
    caller.send_signal(signal.SIGKILL)
    caller.wait(timeout=30)


async def test_a_caller_killed_while_asked_a_question_releases_its_thread_for_the_next_caller(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    with http_agent(manifest) as served:
        script = tmp_path / "dying_caller.py"
        script.write_text(DYING_CALLER)
        caller = subprocess.Popen(  # noqa: ASYNC220 - read and killed from a thread (kill_when_asked)
            [sys.executable, str(script), served.url, call_message("gates__note", text="n1")],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
        )
        try:
            with anyio.fail_after(LIMIT):
                await anyio.to_thread.run_sync(kill_when_asked, caller)
        finally:
            if caller.poll() is None:
                caller.kill()
                caller.wait(timeout=30)
        with anyio.fail_after(RELEASE_LIMIT):
            async with http_client(served.url, mode="legacy") as client:
                result = await client.call_tool("ask", {"message": "hello again", "thread": "T1"})
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None and result.structured_content["thread"] == "T1"
    assert log.log == []  # the question was never answered: the note was not written
