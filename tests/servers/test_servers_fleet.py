"""The fleet as a whole: adding, removing and replacing servers; secrets; the no-orphan guard."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil
import pytest
from builders import TESTS
from child_processes import ChildProcessGuard
from mcp_servers import demo, dynamic, specs

from runner.errors import ServerStartError
from runner.servers import open_fleet


async def test_servers_can_be_added_replaced_and_removed(serve_http, tmp_path: Path, state_dir: Path) -> None:
    demo_url = serve_http(demo.build())
    dynamic_url = serve_http(dynamic.build())
    async with open_fleet({}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        added = await fleet.add("extra", specs.http(demo_url))
        assert (added.status, fleet.connections) == ("ready", {"extra": added})
        assert "echo" in {tool.name for tool in added.tools}

        replaced = await fleet.replace("extra", specs.http(dynamic_url))
        assert added.status == "stopped"
        assert replaced.status == "ready" and fleet.connections["extra"] is replaced
        assert "add_tool" in {tool.name for tool in replaced.tools}

        await fleet.remove("extra")
        assert replaced.status == "stopped"
        assert fleet.connections == {}


async def test_the_fleet_updates_a_server_live_or_restarts_it_as_the_manifest_fields_say(
    serve_http, tmp_path: Path, state_dir: Path
) -> None:
    demo_url = serve_http(demo.build())
    async with open_fleet({"a": specs.http(demo_url)}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        first = fleet.connections["a"]
        assert await fleet.update("a", specs.http(demo_url)) == "unchanged"
        assert await fleet.update("a", specs.http(demo_url, timeout=3)) == "updated"
        assert fleet.connections["a"] is first and first.spec.timeout == 3
        assert await fleet.update("a", specs.http(demo_url, headers={"X-A": "1"})) == "restarted"
        assert fleet.connections["a"] is not first and fleet.connections["a"].status == "ready"
        with pytest.raises(ServerStartError, match="already running"):
            await fleet.add("a", specs.http(demo_url))


async def test_adding_a_required_server_that_cannot_start_raises(tmp_path: Path, state_dir: Path) -> None:
    async with open_fleet({}, base_dir=tmp_path, state_dir=state_dir) as fleet:
        with pytest.raises(ServerStartError) as raised:
            await fleet.add("missing", specs.process("mcp-run-no-such-command", required=True))
        assert raised.value.server == "missing"
        assert fleet.connections == {}
        optional = await fleet.add("optional", specs.process("mcp-run-no-such-command"))
        assert optional.status == "failed"
        assert fleet.connections == {"optional": optional}


async def test_secrets_stay_out_of_reprs_and_errors(serve_http, tmp_path: Path, state_dir: Path) -> None:
    url = serve_http(demo.build())
    servers = {
        "web": specs.http(url, headers={"Authorization": "Bearer top-secret-token"}),
        "local": specs.process("mcp-run-no-such-command", env={"API_KEY": "top-secret-key"}),
    }
    async with open_fleet(servers, base_dir=tmp_path, state_dir=state_dir) as fleet:
        connections = fleet.connections.values()
        shown = " ".join(f"{connection!r} {connection.error}" for connection in connections)
    assert "top-secret" not in shown


def test_the_orphan_guard_reports_and_kills_a_child_left_running() -> None:
    guard = ChildProcessGuard()
    child = subprocess.Popen(["sleep", "60"])
    assert guard.leftovers(grace=0.1) == [f"pid {child.pid}: sleep 60"]
    assert not psutil.pid_exists(child.pid)  # killed and reaped
    child.wait(timeout=5)


def test_the_orphan_guard_fails_a_test_that_leaves_a_child_behind(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(
        """
        import subprocess

        def test_forgets_its_child():
            subprocess.Popen(["sleep", "60"])

        def test_waits_for_its_child():
            subprocess.run(["true"], check=True)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:anyio")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the test left child processes running*", "*sleep 60*"])
