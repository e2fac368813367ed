"""Ctrl-C of `mcp-run serve` over stdio while a turn runs: the caller's call is answered that the
agent is stopping (as over HTTP) before the process exits. A client that closes stdin sees 0, even
when it sends SIGTERM after its grace (as the MCP SDK's stdio client does) while serve stops."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
import psutil
from builders import ROOT, server, write_manifest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_servers import gates as gates_server
from serving import SERVE, call_message, stdio_agent, text_of, write_served_agent

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


# Runs `mcp-run serve` on its own stdin/stdout (the client's pipes) and, once it has exited, writes
# its exit code (a negative number: killed by that signal) to argv[1]; its stderr goes to argv[2].
# It ignores SIGTERM itself, so a client's SIGTERM to the process group reaches serve alone.
RECORDING = """
import signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[2], "w") as errors:
    default_sigterm = lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)  # an ignored one is inherited
    code = subprocess.call(sys.argv[3:], stderr=errors, preexec_fn=default_sigterm)
with open(sys.argv[1], "w") as outcome:
    outcome.write(str(code))
"""


async def test_the_sdks_stdio_client_closing_sees_serve_exit_with_0_not_stopped_by_its_sigterm(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    # A server slow to leave: stopping it takes most of the 2 s the SDK's client waits after
    # closing stdin, before it sends SIGTERM to serve's process group.
    manifest = write_manifest(tmp_path, {"gates": {"url": url}, "slow": server("slow_to_leave")},
                              name="served", model="offline")
    outcome, errors = tmp_path / "exit-code", tmp_path / "stderr"
    params = StdioServerParameters(
        command=sys.executable, cwd=str(ROOT),
        args=["-c", RECORDING, str(outcome), str(errors), *SERVE, str(manifest)])
    with anyio.fail_after(LIMIT):
        async with Client(params) as client:
            result = await client.call_tool("ask", {"message": call_message("gates__note", text="hi")})
    assert text_of(result) == "gates__note returned: noted hi"
    # The client has reaped its process: serve had exited, and the code was written, or it was killed.
    assert outcome.exists(), f"serve was killed; its stderr: {errors.read_text()}"
    assert outcome.read_text() == "0", errors.read_text()
    assert "stopped by" not in errors.read_text()


def test_sigterm_then_stdin_closed_at_once_stops_by_the_signal_and_answers_the_turn_stopping(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    # The signal came first: it is why serve stops (143), not the end of input that followed it,
    # and the call in flight is answered that the agent is stopping (not the wire's "closed").
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    ask = {"name": "ask", "arguments": {"message": call_message("gates__hold", key="race")}}
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                 "protocolVersion": "2025-11-25", "capabilities": {},
                 "clientInfo": {"name": "t", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ask}]
    errors = (tmp_path / "stderr").open("wb")
    process = subprocess.Popen([*SERVE, str(manifest)], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=errors)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1
        log.wait_for("enter race")
        process.send_signal(signal.SIGTERM)
        process.stdin.close()
        process.wait(timeout=LIMIT)
        out = process.stdout.read()
    finally:
        log.open("race")
        if process.poll() is None:
            process.kill()
            process.wait()
        errors.close()
    err = (tmp_path / "stderr").read_text()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err
    [answer] = [json.loads(line) for line in out.splitlines() if json.loads(line).get("id") == 2]
    assert "error" not in answer, answer
    assert answer["result"]["isError"]
    assert answer["result"]["content"][0]["text"].startswith("the agent is stopping: this turn was cancelled")
