"""Starting the fleet: concurrency, both protocol eras, every transport, failures at start-up."""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest
from mcp_servers import demo as demo_server
from mcp_servers import dynamic, specs
from starlette.types import ASGIApp, Receive, Scope, Send

from runner.errors import ServerStartError
from runner.servers import open_fleet

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_one_stdio_server_starts_and_answers(tmp_path: Path, state_dir: Path) -> None:
    async with open_fleet({"demo": specs.stdio("demo")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        demo = fleet.connections["demo"]
        assert demo.status == "ready"
        assert demo.era == MODERN
        assert demo.instructions == demo_server.INSTRUCTIONS
        assert demo.pid is not None and psutil.pid_exists(demo.pid)
        assert {"echo", "add", "hang", "fail"} <= {tool.name for tool in demo.tools}
        assert {prompt.name for prompt in demo.prompts} == {"greet", "review"}
        assert [str(resource.uri) for resource in demo.resources] == ["demo://readme"]
        assert [template.uri_template for template in demo.resource_templates] == ["demo://items/{item_id}"]
        result = await demo.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}
        pid = demo.pid
    assert demo.status == "stopped"
    assert _gone(pid)


async def test_eight_stdio_servers_start_concurrently(tmp_path: Path, state_dir: Path) -> None:
    servers = {f"demo-{index}": specs.stdio("demo") for index in range(8)}
    async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir) as fleet:
        assert {connection.status for connection in fleet.connections.values()} == {"ready"}
        pids = {connection.pid for connection in fleet.connections.values()}
        assert len(pids) == 8 and all(psutil.pid_exists(pid) for pid in pids if pid)
        async with anyio.create_task_group() as tg:
            for key, connection in fleet.connections.items():
                tg.start_soon(connection.call_tool, "echo", {"text": key})
    assert all(_gone(pid) for pid in pids if pid)


async def test_a_legacy_stdio_server_is_spoken_to_in_its_era(tmp_path: Path, state_dir: Path) -> None:
    async with open_fleet({"old": specs.stdio("legacy")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        old = fleet.connections["old"]
        assert old.era == LEGACY
        assert old.instructions == demo_server.INSTRUCTIONS
        result = await old.call_tool("echo", {"text": "still here"})
        assert result.structured_content == {"result": "still here"}


@pytest.mark.parametrize(
    ("transport", "legacy", "era"),
    [("http", False, MODERN), ("http", True, LEGACY), ("sse", False, MODERN)],
    ids=["streamable-http", "streamable-http-legacy", "sse"],
)
async def test_http_servers_start_in_the_era_they_speak(
    serve_http, tmp_path: Path, state_dir: Path, transport: str, legacy: bool, era: str
) -> None:
    url = serve_http(demo_server.build(), transport=transport, legacy=legacy)
    spec = specs.http(url, transport=transport)
    async with open_fleet({"web": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        web = fleet.connections["web"]
        assert (web.status, web.era, web.pid) == ("ready", era, None)
        result = await web.call_tool("echo", {"text": transport})
        assert result.structured_content == {"result": transport}


async def start_failure(servers: dict, tmp_path: Path, state_dir: Path) -> ServerStartError:
    """The ServerStartError that starting ``servers`` must raise."""
    with anyio.fail_after(20):
        with pytest.raises(ServerStartError) as raised:
            async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir):
                pytest.fail("start-up should have failed")
    return raised.value


def _reject_with(status: int):
    def wrap(app: ASGIApp) -> ASGIApp:
        async def rejecting(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b"go away"})

        return rejecting

    return wrap


def _require_header(name: bytes, value: bytes):
    def wrap(app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and dict(scope["headers"]).get(name) != value:
                await _reject_with(401)(app)(scope, receive, send)
                return
            await app(scope, receive, send)

        return guarded

    return wrap


async def test_configured_headers_are_sent_with_every_request(
    serve_http, tmp_path: Path, state_dir: Path
) -> None:
    url = serve_http(demo_server.build(), wrap=_require_header(b"authorization", b"Bearer letmein"))
    spec = specs.http(url, required=True, headers={"Authorization": "Bearer letmein"})
    async with open_fleet({"private": spec}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        result = await fleet.connections["private"].call_tool("echo", {"text": "in"})
    assert result.content[0].text == "in"


async def test_a_required_server_that_is_not_installed_stops_startup(
    serve_http, tmp_path: Path, state_dir: Path
) -> None:
    servers = {
        "good": specs.http(serve_http(demo_server.build())),
        "missing": specs.process("mcp-run-no-such-command", required=True),
    }
    error = await start_failure(servers, tmp_path, state_dir)
    assert error.server == "missing"
    assert error.permanent
    assert "command not found: 'mcp-run-no-such-command'" in str(error)


async def test_a_required_server_that_exits_stops_startup_and_the_others(
    serve_http, tmp_path: Path, state_dir: Path
) -> None:
    servers = {
        "good": specs.http(serve_http(demo_server.build())),
        "broken": specs.stdio("exits", "--code", "7", required=True),
    }
    error = await start_failure(servers, tmp_path, state_dir)
    assert error.server == "broken"
    message = str(error)
    assert message.startswith("broken: ")
    assert "exited with code 7" in message
    assert "fatal: cannot start (launch 1)" in message
    assert "launch 1" in (state_dir / "logs" / "broken.log").read_text()


async def test_a_required_server_that_never_answers_times_out(tmp_path: Path, state_dir: Path) -> None:
    servers = {"silent": specs.process("sleep", "600", required=True, startup_timeout=0.5)}
    error = await start_failure(servers, tmp_path, state_dir)
    assert error.server == "silent"
    assert "did not finish starting within 0.5s" in str(error)


async def test_a_required_http_server_answering_401_stops_startup(
    serve_http, tmp_path: Path, state_dir: Path
) -> None:
    url = serve_http(demo_server.build(), wrap=_reject_with(401))
    servers = {"private": specs.http(url + "?token=secret-value", required=True)}
    error = await start_failure(servers, tmp_path, state_dir)
    assert error.server == "private"
    assert error.permanent
    assert "HTTP 401" in str(error)
    assert "secret-value" not in str(error)


async def test_an_unreachable_required_http_server_stops_startup(tmp_path: Path, state_dir: Path) -> None:
    servers = {"nowhere": specs.http("http://127.0.0.1:9/mcp", required=True)}
    error = await start_failure(servers, tmp_path, state_dir)
    assert error.server == "nowhere"
    assert "cannot reach http://127.0.0.1:9/mcp" in str(error)


async def test_an_optional_server_that_fails_is_skipped(serve_http, tmp_path: Path, state_dir: Path) -> None:
    servers = {
        "good": specs.http(serve_http(dynamic.build())),
        "broken": specs.stdio("exits", "--code", "5"),
        "missing": specs.process("mcp-run-no-such-command"),
    }
    async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir) as fleet:
        assert fleet.connections["good"].status == "ready"
        for key in ("broken", "missing"):
            skipped = fleet.connections[key]
            assert skipped.status == "failed"
            assert isinstance(skipped.error, ServerStartError)
            assert skipped.tools == []
        assert "exited with code 5" in str(fleet.connections["broken"].error)
        result = await fleet.connections["good"].call_tool("static", {})
        assert result.structured_content == {"result": "static"}


async def test_a_handshake_era_server_is_probed_once_and_later_started_in_its_era(
    tmp_path: Path, state_dir: Path
) -> None:
    wire = specs.stdio("wire", env={"API_TOKEN": "s3cret-value"})
    for start in range(2):
        async with open_fleet({"old": wire}, base_dir=tmp_path, state_dir=state_dir) as fleet:
            assert fleet.connections["old"].era == LEGACY
        requests = (state_dir / "logs" / "old.log").read_text().split("--- mcp-run")
        probes = [part for part in requests if "started pid" in part and "received server/discover" in part]
        assert len(probes) == 1, f"start {start}: {len(probes)} probes"  # the first start only
    remembered = (state_dir / "eras.json").read_text()
    assert LEGACY in remembered and "s3cret" not in remembered and "API_TOKEN" not in remembered
    async with open_fleet({"modern": specs.stdio("demo")}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        assert fleet.connections["modern"].era == MODERN  # other launch settings: probed


async def test_a_server_that_no_longer_speaks_its_remembered_era_is_probed_again(
    tmp_path: Path, state_dir: Path
) -> None:
    from runner.servers.protocol_eras import EraMemory

    await anyio.Path(state_dir).mkdir(parents=True)
    modern_only = specs.stdio("modern")
    EraMemory(state_dir).remember(modern_only, LEGACY)  # it spoke 2025-11-25 before an upgrade
    async with open_fleet({"upgraded": modern_only}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        upgraded = fleet.connections["upgraded"]
        assert (upgraded.status, upgraded.era, upgraded.restarts) == ("ready", MODERN, 0)
        assert "initialize refused" in (state_dir / "logs" / "upgraded.log").read_text()
    assert EraMemory(state_dir).connect_mode(modern_only) == "auto"
