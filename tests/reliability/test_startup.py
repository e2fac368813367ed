"""Start-up failures: a command that is not there, a server that exits at once, one that starts too
slowly, HTTP servers that refuse connections or answer 500 or 401. Each gets one clear message,
one attempt (no retry storm), and the servers that do start are served."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import mcp_run
from mcp_servers import demo as demo_server
from mcp_servers.refusing import Rejecting, refused_url

from reliability.support import SERVERS, wire, write_manifest
from runner.agent.runtime import load_agent
from runner.errors import ServerStartError

pytestmark = pytest.mark.anyio

STARTUP_TIMEOUT = 1.0
MAX_REQUESTS = 3  # the 2026 probe, the 2025 handshake it falls back to, and one to spare

# The message each failing server must be reported with (the message is the product here).
EXPECTED = {
    "missing": "missing: command not found: 'mcp-run-no-such-command'",
    "quits": "the server exited with code 3 before finishing the handshake",
    "slow": f"did not finish starting within {STARTUP_TIMEOUT:g}s; last stderr lines:",
    "refused": "cannot reach http://127.0.0.1:",
    "broken": "answered HTTP 500 Internal Server Error",
    "locked": "answered HTTP 401 Unauthorized",
}
PERMANENT = {"missing", "locked"}


def failing_servers(
    folder: Path, serve_http: Callable[..., str]
) -> tuple[dict[str, Any], dict[str, Rejecting]]:
    rejecting = {"broken": Rejecting(500), "locked": Rejecting(401)}
    servers = {
        "good": wire("--name", "good"),
        "missing": {"command": "mcp-run-no-such-command"},
        "quits": {"command": "python", "args": [str(SERVERS / "exits.py"), "--count-file",
                                                str(folder / "launches")]},
        "slow": wire("--slow-start", "60", startup_timeout=f"{STARTUP_TIMEOUT}s"),
        "refused": {"url": refused_url()},
        **{key: {"url": serve_http(demo_server.build(), wrap=server.wrap)}
           for key, server in rejecting.items()},
    }
    return servers, rejecting


async def test_each_start_up_failure_is_one_clear_message_after_one_attempt(
    tmp_path: Path, serve_http: Callable[..., str]
) -> None:
    servers, rejecting = failing_servers(tmp_path, serve_http)
    path = write_manifest(tmp_path, servers)
    with anyio.fail_after(STARTUP_TIMEOUT + 60):  # a generous bound: the slow server is not waited for
        async with load_agent(path) as runtime:
            connections = runtime.fleet.connections
            assert connections["good"].status == "ready"
            assert (await runtime.caller.call("good__echo", {"text": "hi"})).content == "good: hi"
            for key, message in EXPECTED.items():
                connection = connections[key]
                assert connection.status == "failed", key
                assert connection.finished.is_set(), key  # its lifetime is over: nothing will retry
                assert (connection.restarts, connection.sessions) == (0, 0), key
                error = connection.error
                assert isinstance(error, ServerStartError) and error.server == key
                assert message in str(error), (key, str(error))
                assert key != "slow" or "slow start: sleeping" in str(error)
                assert error.permanent is (key in PERMANENT), key
                assert "Traceback" not in str(error)
                assert not any(name.startswith(f"{key}__") for name in runtime.catalog.entries)
    assert (tmp_path / "launches").read_text().count("launch") == 2  # the probe, then initialize
    for key, server in rejecting.items():
        assert 1 <= server.requests <= MAX_REQUESTS, (key, server.requests)


def test_the_cli_names_every_server_that_did_not_start_and_serves_the_rest(
    tmp_path: Path, serve_http: Callable[..., str]
) -> None:
    servers, rejecting = failing_servers(tmp_path, serve_http)
    write_manifest(tmp_path, servers)
    listed = mcp_run("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    for key, message in EXPECTED.items():
        assert listed.stderr.count(f"warning: optional server skipped: {key}: ") == 1, key
        assert message in listed.stderr, key
    assert "good__echo" in listed.stdout
    for key, server in rejecting.items():
        assert 1 <= server.requests <= MAX_REQUESTS, (key, server.requests)

    servers["locked"]["required"] = True
    write_manifest(tmp_path, servers)
    stopped = mcp_run("tools", "agent.yaml", cwd=tmp_path)
    assert stopped.returncode == 1
    assert stopped.stderr.startswith("error: locked: ") and EXPECTED["locked"] in stopped.stderr
    assert "Traceback" not in stopped.stderr
