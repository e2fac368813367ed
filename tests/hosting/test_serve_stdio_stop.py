"""Ctrl-C of `mcp-run serve` over stdio while a turn runs: the caller's call is answered that the
agent is stopping (as over HTTP) before the process exits."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import mcp_types as types
import psutil
from mcp_servers import gates as gates_server
from serving import call_message, stdio_agent, text_of, write_served_agent

LIMIT = 90


def served_process(manifest: Path) -> psutil.Process:
    """The `mcp-run serve MANIFEST` process this test's client started."""
    [process] = [child for child in psutil.Process().children(recursive=True) if _serves(child, manifest)]
    return process


def _serves(process: psutil.Process, manifest: Path) -> bool:
    try:
        command = process.cmdline()
    except psutil.Error:  # another test's child, gone or not yet reaped
        return False
    return "serve" in command and str(manifest) in command


async def test_ctrl_c_over_stdio_answers_the_running_turn_that_the_agent_is_stopping(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    outcome: list[types.CallToolResult | BaseException] = []
    try:
        with anyio.fail_after(LIMIT):
            async with stdio_agent(manifest) as client:
                process = served_process(manifest)

                async def ask() -> None:
                    try:
                        message = call_message("gates__hold", key="s")
                        outcome.append(await client.call_tool("ask", {"message": message}))
                    # The connection going away instead of an answer: a failure below.
                    except Exception as exc:
                        outcome.append(exc)

                async with anyio.create_task_group() as group:
                    group.start_soon(ask)
                    await anyio.to_thread.run_sync(log.wait_for, "enter s")
                    process.send_signal(signal.SIGINT)
                    # Its exit code goes to the client that started it (which reaps it), not here.
                    await anyio.to_thread.run_sync(lambda: process.wait(timeout=30))
        log.wait_for("cancelled s")  # the agent's call was cancelled on the gates server
    finally:
        log.open("s")  # frees the waiting thread either way
    answer = outcome[0]
    assert isinstance(answer, types.CallToolResult), repr(answer)
    assert answer.is_error
    assert text_of(answer).startswith("the agent is stopping: this turn was cancelled")
