"""`mcp-run serve` as a process: it refuses unsafe bindings, requires its bearer token, reloads with
--watch, and stops its agent's servers however it ends (stdin closed, Ctrl-C, SIGTERM)."""

from __future__ import annotations

import os
import pty
import signal
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import psutil
import pytest
import yaml
from builders import ROOT
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged
from mcp_servers import gates as gates_server
from serving import SERVE, ServedProcess, call_message, http_agent, http_client, text_of, write_served_agent
from test_serve_announcements import get_stream_opened

LIMIT = 90
TOKEN = "s3cret-t0ken-for-tests"


@pytest.mark.parametrize(("arguments", "complaint"), [
    (["--http", "0.0.0.0:0"], "0.0.0.0 is not a loopback address: serving there needs --allow-remote"),
    (["--http", "0.0.0.0:0", "--allow-remote"], "serving on 0.0.0.0 needs a bearer token"),
    (["--http", "127.0.0.1"], "'127.0.0.1' is not HOST:PORT"),
    (["--http", "127.0.0.1:0", "--token-env", "MCP_RUN_TEST_UNSET"], "MCP_RUN_TEST_UNSET is not set"),
    (["--allow-remote"], "apply to --http only"),
    (["--token-env", "MCP_RUN_TEST_UNSET"], "apply to --http only"),  # not "is not set"
])
def test_an_unsafe_or_malformed_binding_is_refused_with_exit_2(
    tmp_path: Path, arguments: list[str], complaint: str
) -> None:
    manifest = write_served_agent(tmp_path, "http://127.0.0.1:9/mcp")
    result = subprocess.run([*SERVE, str(manifest), *arguments], capture_output=True, text=True, timeout=60,
                            cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert complaint in " ".join(result.stderr.split())


async def test_http_requests_without_the_bearer_token_get_401_and_the_token_is_never_shown(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    token_env = {"MCP_RUN_SERVE_TOKEN": TOKEN}
    with http_agent(manifest, "--token-env", "MCP_RUN_SERVE_TOKEN", env=token_env) as served:
        with anyio.fail_after(LIMIT):
            async with httpx2.AsyncClient() as http:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                    response = await http.post(served.url, json=body, headers=headers)
                    assert response.status_code == 401, headers
                    assert response.headers["www-authenticate"].startswith("Bearer")
                    assert TOKEN not in response.text
            async with http_client(served.url, token=TOKEN) as client:
                result = await client.call_tool("ask", {"message": call_message("gates__note", text="in")})
    assert text_of(result) == "gates__note returned: noted in"
    assert log.log == ["note in"]


async def test_serve_watch_offers_an_edited_prompt_to_the_next_call(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    binding = {"server": "demo", "name": "greet", "as": "hello"}
    manifest = write_served_agent(tmp_path, url, demo=True, prompts={"mcp": [binding]})
    with http_agent(manifest, "--watch") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                before = {prompt.name for prompt in (await client.list_prompts()).prompts}
                _rename_binding(manifest, "welcome")
                await anyio.to_thread.run_sync(served.wait_for_line, "reloaded in")
                after = {prompt.name for prompt in (await client.list_prompts()).prompts}
                greeting = await client.get_prompt("welcome", {"name": "Ada"})
    assert "hello" in before and "welcome" not in before
    assert "welcome" in after and "hello" not in after
    assert "Ada" in greeting.messages[0].content.text


async def test_serve_watch_tells_a_listening_2026_caller_that_the_prompts_changed(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    binding = {"server": "demo", "name": "greet", "as": "hello"}
    manifest = write_served_agent(tmp_path, url, demo=True, prompts={"mcp": [binding]})
    with http_agent(manifest, "--watch") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                async with client.listen(prompts_list_changed=True, tools_list_changed=True) as changes:
                    _rename_binding(manifest, "welcome")
                    event = await anext(changes)
                    after = {prompt.name for prompt in (await client.list_prompts()).prompts}
    assert isinstance(event, PromptsListChanged)
    assert "welcome" in after and "hello" not in after


async def test_serve_watch_sends_tools_list_changed_when_the_ask_tool_changes_and_not_for_other_edits(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, demo=True)
    with http_agent(manifest, "--watch") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                async with client.listen(prompts_list_changed=True, tools_list_changed=True) as changes:
                    document = yaml.safe_load(manifest.read_text())
                    document["prompts"] = {"system": "Be brief."}  # neither the prompts nor the tool
                    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
                    await anyio.to_thread.run_sync(served.wait_for_line, "reloaded in")
                    document["description"] = "Answers briefly."
                    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
                    event = await anext(changes)
                    tools = (await client.list_tools()).tools
    assert isinstance(event, ToolsListChanged)
    assert "Answers briefly." in (tools[0].description or "")


async def test_stopping_the_served_agent_ends_a_callers_listen_stream_gracefully(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url)
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                async with client.listen(prompts_list_changed=True) as changes:
                    served.process.send_signal(signal.SIGTERM)
                    events = [event async for event in changes]  # an abrupt drop raises SubscriptionLost
        code = await anyio.to_thread.run_sync(served.process.wait, LIMIT)
    assert events == []
    assert code == 143


def _rename_binding(manifest: Path, alias: str) -> None:
    document = yaml.safe_load(manifest.read_text())
    document["prompts"]["mcp"][0]["as"] = alias
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))


def _agent_children(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_served_agent_and_every_server_it_started(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], stop: signal.Signals, code: int
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, demo=True)
    with http_agent(manifest) as served:
        children = _agent_children(served.process.pid)
        assert children, "the demo server runs as a child of mcp-run serve"
        served.process.send_signal(stop)
        assert served.process.wait(timeout=30) == code
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


def test_closing_stdin_ends_a_stdio_serve_with_0_and_stops_its_servers(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, demo=True)
    process = subprocess.Popen([*SERVE, str(manifest)], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "over stdio" in process.stderr.readline()
        children = _agent_children(process.pid)
        assert children
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        assert process.stdout.read() == ""  # nothing but the protocol ever goes to stdout
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


async def test_a_stateless_http_serve_answers_and_forwards_approvals_to_2026_callers(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    asked: list[types.ElicitRequestParams] = []

    async def approve(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    with http_agent(manifest, "--stateless") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url, elicitation_callback=approve) as client:
                first = await client.call_tool("ask", {"message": call_message("gates__note", text="a")})
            async with http_client(served.url) as other:  # another connection continues the thread
                second = await other.call_tool("ask", {"message": call_message("gates__note", text="b"),
                                                       "thread": first.structured_content["thread"]})
    assert text_of(first) == "gates__note returned: noted a"
    assert len(asked) == 1
    assert "its MCP client has no elicitation" in text_of(second)
    assert log.log == ["note a"]


async def test_a_stateless_serve_tells_a_2025_caller_with_elicitation_why_it_was_not_asked(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])

    async def approve(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("a stateless serve cannot send a question during the call")

    with http_agent(manifest, "--stateless") as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url, elicitation_callback=approve, mode="legacy") as client:
                result = await client.call_tool("ask", {"message": call_message("gates__note", text="a")})
    assert "served without sessions (--stateless)" in text_of(result)
    assert "no elicitation" not in text_of(result)
    assert log.log == []


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
async def test_a_signal_during_a_turn_tells_the_caller_the_agent_stops_then_stops_cleanly(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], stop: signal.Signals, code: int
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, demo=True)
    outcome: list[types.CallToolResult | BaseException] = []
    with http_agent(manifest, "--watch") as served:
        children = _agent_children(served.process.pid)

        async def ask() -> None:
            try:
                async with http_client(served.url) as client:
                    message = call_message("gates__hold", key="t")
                    outcome.append(await client.call_tool("ask", {"message": message}))
            except Exception as exc:  # the connection going away instead of an answer: a failure below
                outcome.append(exc)

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await anyio.to_thread.run_sync(log.wait_for, "enter t")
                served.process.send_signal(stop)
                assert await anyio.to_thread.run_sync(lambda: served.process.wait(timeout=30)) == code
        stderr = _rest_of(served)
    try:
        log.wait_for("cancelled t")  # the agent's call was cancelled on the gates server
    finally:
        log.open("t")  # frees the waiting thread either way
    answer = outcome[0]
    assert isinstance(answer, types.CallToolResult), repr(answer)
    assert answer.is_error
    assert text_of(answer).startswith("the agent is stopping: this turn was cancelled")
    assert stderr == [f"stopped by {stop.name}"]  # no uvicorn error, no traceback
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


def _rest_of(served: ServedProcess) -> list[str]:
    """The stderr lines of an ended serve after its listening lines."""
    lines = []
    while line := served.lines.get(timeout=10):
        lines.append(line)
    return lines


def test_the_http_servers_log_lines_carry_no_colour_codes_when_stderr_is_not_a_terminal(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url)
    terminal, attached = pty.openpty()  # stdout a terminal: where uvicorn's own colour test looks
    try:
        with http_agent(manifest, stdout=attached) as served:
            address = urlsplit(served.url)
            with socket.create_connection((address.hostname, address.port), timeout=LIMIT) as raw:
                raw.sendall(b"\x00 no HTTP at all\r\n\r\n")  # uvicorn logs a warning of its own
                raw.recv(1024)
            warning = served.wait_for_line("Invalid HTTP request")
    finally:
        os.close(terminal)
        os.close(attached)
    assert "\x1b[" not in warning
    assert warning.startswith("warning:")


def test_a_port_already_taken_fails_with_exit_1_and_says_so(tmp_path: Path, listening_port: int) -> None:
    manifest = write_served_agent(tmp_path, "http://127.0.0.1:9/mcp")
    result = subprocess.run([*SERVE, str(manifest), "--http", f"127.0.0.1:{listening_port}"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{listening_port}" in result.stderr


def test_a_second_ctrl_c_while_serve_stops_ends_it_quietly_with_130_and_no_server_left(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, demo=True)
    document = yaml.safe_load(manifest.read_text())
    # Outlives its input and ignores SIGTERM: the stop takes seconds, long enough for a second Ctrl-C.
    lingering = str(ROOT / "tests" / "mcp_servers" / "undying.py")
    document["servers"]["lingering"] = {"command": "python", "args": [lingering]}
    manifest.write_text(yaml.safe_dump(document))
    with http_agent(manifest) as served:
        children = _agent_children(served.process.pid)
        [demo] = [child for child in children if "demo.py" in " ".join(child.cmdline())]
        served.process.send_signal(signal.SIGINT)
        demo.wait(timeout=30)  # the servers are being stopped; the lingering one is still there
        assert served.process.poll() is None
        served.process.send_signal(signal.SIGINT)
        assert served.process.wait(timeout=30) == 130
        stderr = _rest_of(served)
    assert stderr == ["stopped by SIGINT"]  # no traceback, no KeyboardInterrupt
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


async def test_stopping_serve_while_a_2025_caller_holds_its_event_stream_open_is_quick_and_quiet(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url)
    with http_agent(manifest) as served, get_stream_opened() as opened:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url, mode="legacy") as client:
                await client.list_tools()
                await anyio.to_thread.run_sync(opened.wait, LIMIT)
                served.process.send_signal(signal.SIGINT)
                code = await anyio.to_thread.run_sync(served.process.wait, LIMIT)
        stderr = _rest_of(served)
    assert code == 130
    # No "Exception in ASGI application", no traceback, and not uvicorn's "timeout graceful
    # shutdown exceeded" (logged as an error when the open stream holds the stop up).
    assert stderr == ["stopped by SIGINT"]


async def test_a_stateless_serve_refuses_a_get_with_405_instead_of_holding_it_open(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url)
    with http_agent(manifest, "--stateless") as served:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(10.0)) as http:  # held open: a ReadTimeout
            response = await http.get(served.url, headers={"Accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
