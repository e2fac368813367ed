"""Secrets: canary values given to servers through ``env`` and ``headers`` (by ``${VAR}``) reach
the servers, and never appear anywhere else - logs at DEBUG, error messages, the output of
``validate``, ``tools``, ``call`` and one-shot ``--json`` runs, the servers' log files, or the
text and repr of any exception raised on the way (with its causes)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from builders import mcp_run
from mcp_servers import demo as demo_server
from mcp_servers.refusing import Rejecting
from starlette.types import ASGIApp, Receive, Scope, Send

from reliability.support import SERVERS, manifest_document, wire, write_manifest
from runner.agent.checks import check_agent
from runner.agent.runtime import load_agent
from runner.errors import ManifestError, ServerStartError, ToolError
from runner.manifest import HttpServerSpec, StdioServerSpec

pytestmark = pytest.mark.anyio

CANARY_ENV = f"canary-env-{uuid.uuid4().hex}"
CANARY_HEADER = f"canary-header-{uuid.uuid4().hex}"
CANARIES = (CANARY_ENV, CANARY_HEADER)
VARIABLES = {"MCP_RUN_CANARY_ENV": CANARY_ENV, "MCP_RUN_CANARY_HEADER": CANARY_HEADER}
SCRIPT = [
    {"tool_calls": [
        {"name": "local__env_names"},
        {"name": "remote__echo", "args": {"text": "through the header"}},
        {"name": "local__junk", "args": {"kind": "bad_result"}},
        {"name": "local__hang"},
    ]},
    "done",
]
# The canary where it does not belong: each one a located problem that must not quote it.
INVALID_PLACES = {
    "url": {"url": "${MCP_RUN_CANARY_HEADER}"},
    "timeout": {"command": "x", "timeout": "${MCP_RUN_CANARY_ENV}"},
    "transport": {"command": "x", "transport": "${MCP_RUN_CANARY_ENV}"},
    "cwd-and-url": {"command": "x", "url": "http://x/${MCP_RUN_CANARY_ENV}"},
    "heartbeat": {"command": "x", "heartbeat": {"interval": "${MCP_RUN_CANARY_HEADER}"}},
}


def require_header(value: str) -> Callable[[ASGIApp], ASGIApp]:
    """Serve only requests that carry ``Authorization: Bearer <value>`` (else 401)."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != (
                f"Bearer {value}".encode()
            ):
                await Rejecting(401).wrap(app)(scope, receive, send)
                return
            await app(scope, receive, send)

        return guarded

    return wrap


def secret_servers(serve_http: Callable[..., str]) -> dict[str, Any]:
    return {
        "local": wire("--name", "local", env={"API_TOKEN": "${MCP_RUN_CANARY_ENV}"},
                      tools={"timeouts": {"hang": "300ms"}}),
        "remote": {"url": serve_http(demo_server.build(), wrap=require_header(CANARY_HEADER)),
                   "headers": {"Authorization": "Bearer ${MCP_RUN_CANARY_HEADER}"}},
        "locked": {"url": serve_http(demo_server.build(), wrap=Rejecting(401).wrap),
                   "headers": {"X-Api-Key": "${MCP_RUN_CANARY_HEADER}"}},
        "broken": {"command": "python", "args": [str(SERVERS / "exits.py")],
                   "env": {"TOKEN": "${MCP_RUN_CANARY_ENV}"}},
    }


@pytest.fixture
def agent(tmp_path: Path, serve_http: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in VARIABLES.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    write_manifest(tmp_path, secret_servers(serve_http), model={"id": "scripted", "script": "script.yaml"})
    invalid = manifest_document(INVALID_PLACES)
    (tmp_path / "invalid.yaml").write_text(yaml.safe_dump(invalid))
    return tmp_path


def leaks(text: str) -> list[str]:
    return [canary for canary in CANARIES if canary in text]


def exception_texts(error: BaseException) -> Iterator[str]:
    """str and repr of ``error`` and of every exception a traceback of it would show."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        pending += [current.__cause__, None if current.__suppress_context__ else current.__context__]
        pending += list(getattr(current, "exceptions", ()))


def state_files(folder: Path) -> dict[str, str]:
    return {str(path): path.read_text(errors="replace")
            for path in (folder / ".mcp-run").rglob("*") if path.is_file()}


def test_no_command_shows_a_secret_while_the_servers_get_them(agent: Path) -> None:
    runs = {
        "validate": mcp_run("validate", "agent.yaml", cwd=agent),
        "validate invalid": mcp_run("validate", "invalid.yaml", cwd=agent),
        "tools": mcp_run("--debug", "tools", "agent.yaml", "--json", cwd=agent),
        "call": mcp_run("--debug", "call", "agent.yaml", "local__junk", '{"kind": "bad_result"}', cwd=agent),
        "one-shot": mcp_run("--debug", "agent.yaml", "-p", "go", "--json", cwd=agent),
    }
    assert runs["validate"].returncode == 0, runs["validate"].stderr
    assert runs["validate invalid"].returncode == 2
    assert runs["validate invalid"].stderr.count("invalid.yaml:") >= len(INVALID_PLACES)
    assert runs["tools"].returncode == 0 and "remote__echo" in runs["tools"].stdout
    assert runs["call"].returncode == 1 and "not valid MCP" in runs["call"].stderr
    assert runs["one-shot"].returncode == 0, runs["one-shot"].stderr
    # The servers did get the secrets: the env variable is set, the header opened the door.
    events = [json.loads(line) for line in runs["one-shot"].stdout.splitlines()]
    results = {event["name"]: event for event in events if event["type"] == "tool_result"}
    assert "API_TOKEN" in results["local__env_names"]["text"]
    assert results["remote__echo"]["text"] == "through the header"
    assert results["local__junk"]["status"] == results["local__hang"]["status"] == "error"
    for name, run in runs.items():
        assert leaks(run.stdout) == [] and leaks(run.stderr) == [], name
        assert "Traceback" not in run.stderr, name
    logs = state_files(agent)
    assert any(path.endswith("local.log") for path in logs)
    assert {path: leaks(text) for path, text in logs.items() if leaks(text)} == {}


async def test_no_log_record_or_exception_shows_a_secret(
    agent: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    async with load_agent(agent / "agent.yaml") as runtime:
        assert "API_TOKEN" in str((await runtime.caller.call("local__env_names", {})).content)
        assert (await runtime.caller.call("remote__echo", {"text": "in"})).content == "in"
        for key in ("locked", "broken"):
            assert runtime.fleet.connections[key].status == "failed"
            errors.append(runtime.fleet.connections[key].error)  # type: ignore[arg-type]
        for tool, arguments in (("local__junk", {"kind": "bad_result"}), ("local__hang", {})):
            with pytest.raises(ToolError) as raised:
                await runtime.caller.call(tool, arguments)
            errors.append(raised.value)
        texts = [repr(connection) for connection in runtime.fleet.connections.values()]
    document = yaml.safe_load((agent / "agent.yaml").read_text())
    document["servers"]["locked"]["required"] = True
    (agent / "agent.yaml").write_text(yaml.safe_dump(document))
    with anyio.fail_after(30), pytest.raises(ServerStartError) as failed:
        async with load_agent(agent / "agent.yaml"):
            pass
    errors.append(failed.value)
    with pytest.raises(ManifestError) as invalid:
        check_agent(agent / "invalid.yaml")
    errors.append(invalid.value)

    texts += [text for error in errors for text in exception_texts(error)]
    texts += [record.getMessage() for record in caplog.records] + [caplog.text]
    texts += [repr(record.args) for record in caplog.records if record.args]
    assert [text[:200] for text in texts if leaks(text)] == []
    assert len(caplog.records) > 50  # DEBUG really was captured (SDK, transports, servers)


def test_the_repr_of_a_server_spec_hides_env_and_header_values() -> None:
    stdio = StdioServerSpec(command="x", env={"TOKEN": CANARY_ENV})
    http = HttpServerSpec(url="http://127.0.0.1/mcp", headers={"Authorization": CANARY_HEADER})
    assert leaks(repr(stdio) + str(stdio) + repr(http) + str(http)) == []


def test_debug_lines_echoing_a_servers_stderr_show_its_env_values_hidden(tmp_path: Path) -> None:
    talker = {"command": "sh", "args": ["-c", 'echo "stderr $SEC" >&2; exit 1'],
              "env": {"SEC": "${MCP_RUN_CANARY_ENV}"}}
    write_manifest(tmp_path, {"talker": talker})
    runs = {"tools": mcp_run("--debug", "tools", "agent.yaml", cwd=tmp_path, env=VARIABLES),
            "one-shot": mcp_run("--debug", "agent.yaml", "-p", "hi", "--json", cwd=tmp_path, env=VARIABLES)}
    for name, run in runs.items():
        assert "DEBUG runner.servers.stderr.talker: stderr ***" in run.stderr, name
        assert leaks(run.stdout) == [] and leaks(run.stderr) == [], name
    # The server's own log file keeps its stderr as written (the README says so).
    assert f"stderr {CANARY_ENV}" in (tmp_path / ".mcp-run" / "logs" / "talker.log").read_text()
